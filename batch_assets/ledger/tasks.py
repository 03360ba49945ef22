"""`ledger.batch_task`: one row per task partition (task name + partition date), written and read.

Every function takes a DuckDB connection or a ControlDB (either engine) and returns plain values.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from batch_assets.ledger.control_db import ControlDB, as_control, day_sql
from batch_assets.ledger.states import TaskStatus

Conn = duckdb.DuckDBPyConnection | ControlDB


def task_ids(conn: Conn, *, provider: str | None = None) -> list[str]:
    """Every task partition's id (of one provider), in order."""
    return [
        r[0]
        for r in as_control(conn)
        .execute(
            "SELECT task_id FROM ledger.batch_task WHERE (CAST(? AS VARCHAR) IS NULL OR provider = ?) ORDER BY task_id",
            [provider, provider],
        )
        .rows
    ]


def task_row(conn: Conn, task_id: str, *, frozen: bool = False) -> dict | None:
    """The partition's row, with `day` its partition date as 'YYYY-MM-DD'; None when unknown (or,
    with `frozen`, when no manifest is frozen yet)."""
    rows = (
        as_control(conn)
        .execute(
            f"SELECT *, {day_sql('partition_date')} AS day FROM ledger.batch_task "
            "WHERE task_id = ? AND (NOT ? OR manifest_version > 0)",
            [task_id, frozen],
        )
        .dicts()
    )
    return rows[0] if rows else None


def task_rows(conn: Conn, ids: Sequence[str] | None = None) -> pa.Table:
    """Every partition's row (or these partitions'), as Arrow: what a query joining per-item tables
    with their partitions' names and settings registers (`control_db.registered`)."""
    if ids is None:
        return as_control(conn).arrow("SELECT * FROM ledger.batch_task")
    return as_control(conn).arrow("SELECT * FROM ledger.batch_task WHERE task_id = ANY(?)", [list(ids)])


def final_task_ids_before(conn: Conn, cutoff, task_name: str | None = None) -> list[str]:
    """The partitions that are final and finished (else last updated) at or before `cutoff`."""
    rows = as_control(conn).execute(
        """SELECT task_id FROM ledger.batch_task
        WHERE final_status IS NOT NULL AND coalesce(finished_at, updated_at) <= ?
          AND (CAST(? AS VARCHAR) IS NULL OR task_name = ?) ORDER BY task_id""",
        [cutoff, task_name, task_name],
    )
    return [r[0] for r in rows.rows]


def unsettled_without_jobs(conn: Conn) -> pa.Table:
    """Partitions with no final status and no provider job (not even an intent): task_id, task_name,
    day, manifest_version, total_items; the candidates of settling partitions with nothing to send."""
    return as_control(conn).arrow(
        f"""SELECT t.task_id, t.task_name, {day_sql("t.partition_date")} AS day, t.manifest_version, t.total_items
        FROM ledger.batch_task t
        WHERE t.final_status IS NULL
          AND NOT EXISTS (SELECT 1 FROM ledger.provider_job j WHERE j.task_id = t.task_id)"""
    )


def manifest_uri(conn: Conn, task_id: str) -> str | None:
    """Where the partition's frozen manifest is (None: unknown partition, or not frozen)."""
    row = task_row(conn, task_id)
    return row["manifest_uri"] if row else None


def task_names(conn: Conn) -> dict[str, str]:
    """task_id -> task name, for every partition."""
    return dict(as_control(conn).execute("SELECT task_id, task_name FROM ledger.batch_task").rows)


def final_statuses(conn: Conn, ids: Sequence[str]) -> dict[str, str | None]:
    """task_id -> its final status (None: not final yet), for the partitions of `ids` the ledger has."""
    sql = "SELECT task_id, final_status FROM ledger.batch_task WHERE task_id = ANY(?)"
    return dict(as_control(conn).execute(sql, [list(ids)]).rows)


def providers_of(conn: Conn, ids: Sequence[str]) -> set[str]:
    """The providers of these partitions."""
    sql = "SELECT DISTINCT provider FROM ledger.batch_task WHERE task_id = ANY(?)"
    return {r[0] for r in as_control(conn).execute(sql, [list(ids)]).rows}


def upsert_frozen_task(
    conn: Conn,
    *,
    task_id: str,
    task_name: str,
    partition_date: str,
    item_type: str,
    provider: str,
    model: str,
    endpoint: str,
    prompt_version: str,
    output_schema_version: str,
    manifest_uri: str,
    manifest_version: int,
    total_items: int,
    est_input_tokens: int,
    est_output_tokens: int,
    prompt_hash: str | None = None,
    output_schema_hash: str | None = None,
) -> None:
    """Record a (re)frozen manifest for the task partition.

    A new partition starts in status FROZEN. A refreeze of a known partition replaces the manifest
    (uri, version, item count, token estimates, prompt and output-schema versions and hashes, model)
    and keeps its status."""
    as_control(conn).execute(
        """
        INSERT INTO ledger.batch_task (task_id, task_name, partition_date, item_type, provider, model, endpoint,
                                       prompt_version, output_schema_version, manifest_uri, manifest_version, status,
                                       total_items, est_input_tokens, est_output_tokens, prompt_hash,
                                       output_schema_hash, created_at, updated_at)
        VALUES (?, ?, CAST(? AS DATE), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP, now()::TIMESTAMP)
        ON CONFLICT (task_id) DO UPDATE SET
            manifest_uri = excluded.manifest_uri, manifest_version = excluded.manifest_version,
            total_items = excluded.total_items, est_input_tokens = excluded.est_input_tokens,
            est_output_tokens = excluded.est_output_tokens, prompt_version = excluded.prompt_version,
            model = excluded.model, output_schema_version = excluded.output_schema_version,
            prompt_hash = excluded.prompt_hash, output_schema_hash = excluded.output_schema_hash,
            updated_at = excluded.updated_at
    """,
        [
            task_id,
            task_name,
            partition_date,
            item_type,
            provider,
            model,
            endpoint,
            prompt_version,
            output_schema_version,
            manifest_uri,
            manifest_version,
            TaskStatus.FROZEN.value,
            total_items,
            est_input_tokens,
            est_output_tokens,
            prompt_hash,
            output_schema_hash,
        ],
    )


def set_task_status(
    conn: Conn,
    task_id: str,
    status: TaskStatus | str,
    *,
    only_from: TaskStatus | str | None = None,
) -> bool:
    """Set the partition's status (and updated_at). With `only_from`, only a partition currently in
    that status moves (so a status never goes backwards). Returns whether a row changed."""
    status = TaskStatus(status).value
    db = as_control(conn)
    if only_from is None:
        cur = db.execute(
            "UPDATE ledger.batch_task SET status = ?, updated_at = now()::TIMESTAMP WHERE task_id = ?",
            [status, task_id],
        )
    else:
        cur = db.execute(
            "UPDATE ledger.batch_task SET status = ?, updated_at = now()::TIMESTAMP WHERE task_id = ? AND status = ?",
            [status, task_id, TaskStatus(only_from).value],
        )
    return cur.rowcount > 0


def set_task_currency(conn: Conn, task_id: str, currency: str | None) -> None:
    """Record the currency of the partition's costs (from the provider's price table; NULL: not priced)."""
    as_control(conn).execute("UPDATE ledger.batch_task SET currency = ? WHERE task_id = ?", [currency, task_id])


def forget_tasks(conn: Conn, task_ids: list[str]) -> int:
    """Delete the partitions' control rows (tasks, shards, jobs and their events, operator actions,
    dry runs, remote deletions, store leases and versions, report summaries, sensors' run requests),
    in one transaction; returns the tasks deleted. For `demo --fresh` on a PostgreSQL ledger, whose
    per-item tables went with the deleted warehouse file or partition stores (a store version left
    named would be downloaded again)."""
    db = as_control(conn)
    with db.transaction():
        db.execute(
            "DELETE FROM ledger.status_event WHERE job_key IN "
            "(SELECT job_key FROM ledger.provider_job WHERE task_id = ANY(?))",
            [task_ids],
        )
        for table in (
            "provider_job",
            "shard",
            "operator_action",
            "dry_run",
            "remote_file_deletion",
            "partition_lease",
            "partition_store",
            "partition_summary",
            "run_request",
        ):
            db.execute(f"DELETE FROM ledger.{table} WHERE task_id = ANY(?)", [task_ids])
        return db.execute("DELETE FROM ledger.batch_task WHERE task_id = ANY(?)", [task_ids]).rowcount
