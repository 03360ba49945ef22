"""Writes to `ledger.quarantine`, `ledger.shard` and `ledger.shard_line`; reads of `ledger.shard`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from batch_assets.ledger.control_db import as_control, local_control
from batch_assets.ledger.statements import NOW, insert_rows, insert_select
from batch_assets.sqltext import sql_literal

Params = Sequence[Any] | Mapping[str, Any] | None

QUARANTINE_COLUMNS = ("custom_id", "item_no", "reason_code", "reason")
SHARD_LINE_COLUMNS = ("shard_id", "line_no", "custom_id", "item_no", "request_id", "line_bytes", "est_tokens")


def insert_quarantine(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Quarantine the lines of `query` (columns: custom_id, item_no, reason_code, reason), recorded now.
    Returns the number quarantined."""
    return insert_select(
        conn,
        "quarantine",
        QUARANTINE_COLUMNS,
        query,
        params,
        fixed={"task_id": sql_literal(task_id), "recorded_at": NOW},
    )


SHARD_COLUMNS = (
    "shard_id",
    "attempt",
    "shard_no",
    "path",
    "line_count",
    "byte_count",
    "est_tokens",
    "sha256",
    "est_cost",
)
SHARD_SCHEMA = pa.schema(
    [
        ("shard_id", pa.string()),
        ("attempt", pa.int32()),
        ("shard_no", pa.int32()),
        ("path", pa.string()),
        ("line_count", pa.int64()),
        ("byte_count", pa.int64()),
        ("est_tokens", pa.int64()),
        ("sha256", pa.string()),
        ("est_cost", pa.float64()),
    ]
)


def insert_shards(conn, *, task_id: str, provider: str, endpoint: str, model: str, rows: pa.Table) -> int:
    """Record the cut shard files (`rows`, the SHARD_COLUMNS: shard_id, attempt, shard_no, path,
    line_count, byte_count, est_tokens, sha256, est_cost), created now and not deferred, on either engine.
    Returns the number recorded."""
    if "est_cost" not in rows.column_names:  # unpriced: the budget counts the shard as 0
        rows = rows.append_column("est_cost", pa.nulls(rows.num_rows, pa.float64()))
    return insert_rows(
        conn,
        "shard",
        rows.select(list(SHARD_COLUMNS)),
        fixed={
            "task_id": sql_literal(task_id),
            "provider": sql_literal(provider),
            "endpoint": sql_literal(endpoint),
            "model": sql_literal(model),
            "created_at": NOW,
            "deferred_at": "NULL",
        },
    )


def insert_shard_lines(
    conn: duckdb.DuckDBPyConnection, task_id: str, attempt: int, query: str, params: Params = None
) -> int:
    """Record the request lines of `query` (columns: shard_id, line_no, custom_id, item_no, request_id,
    line_bytes, est_tokens) for the partition's submission `attempt`. Returns the number recorded."""
    return insert_select(
        conn,
        "shard_line",
        SHARD_LINE_COLUMNS,
        query,
        params,
        fixed={"task_id": sql_literal(task_id), "attempt": str(int(attempt))},
    )


def drop_unregistered_lines(conn: duckdb.DuckDBPyConnection, task_id: str) -> int:
    """Delete the partition's shard lines whose shard the control ledger does not hold; returns how
    many. Only `distributed` can leave such lines: a cut killed after the file's commit and before
    PostgreSQL's. Their items are then cut again, as if that cut had never run."""
    db = as_control(conn)
    if db.dialect == "duckdb":  # `local`: lines and shards commit in one transaction
        return 0
    registered = [r[0] for r in db.execute("SELECT shard_id FROM ledger.shard WHERE task_id = ?", [task_id]).rows]
    return int(
        local_control(conn)
        .execute(
            "DELETE FROM ledger.shard_line WHERE task_id = ? AND shard_id NOT IN (SELECT unnest(?::VARCHAR[]))",
            [task_id, registered],
        )
        .rowcount
    )


def mark_shards_deferred(conn: duckdb.DuckDBPyConnection, shard_ids: Sequence[str]) -> None:
    """Record that submission held these shards back for the provider's concurrent-job cap (the
    first time only: an already deferred shard keeps its deferred_at)."""
    if not shard_ids:
        return
    as_control(conn).execute(
        "UPDATE ledger.shard SET deferred_at = coalesce(deferred_at, now()::TIMESTAMP) WHERE shard_id = ANY(?)",
        [list(shard_ids)],
    )


def resends_unmatched(conn: duckdb.DuckDBPyConnection, shard_id: str) -> bool:
    """Whether the shard re-sends items whose previous attempt was answered without its request key
    (`unmatched_result`): such a shard is sent as a file, never inline again."""
    return conn.execute(
        """
        SELECT EXISTS (SELECT 1 FROM ledger.shard_line sl JOIN ledger.parsed_result p
                       ON p.custom_id = sl.custom_id AND p.attempt = sl.attempt - 1
                       WHERE sl.shard_id = ? AND p.error_class = 'unmatched_result')
        """,
        [shard_id],
    ).fetchone()[0]


# --- Reads of ledger.shard (a DuckDB connection or a ControlDB, either engine) ---------------------


def partition_shards(conn, task_id: str) -> list[dict]:
    """The partition's shards, in shard order."""
    return as_control(conn).execute("SELECT * FROM ledger.shard WHERE task_id = ? ORDER BY shard_no", [task_id]).dicts()


def shard_count(conn, task_id: str) -> int:
    return int(as_control(conn).execute("SELECT count(*) FROM ledger.shard WHERE task_id = ?", [task_id]).scalar())


def next_shard_no(conn, task_id: str, attempt: int) -> int:
    """The number the partition's next shard of `attempt` gets (0 for its first)."""
    return int(
        as_control(conn)
        .execute(
            "SELECT coalesce(max(shard_no) + 1, 0) FROM ledger.shard WHERE task_id = ? AND attempt = ?",
            [task_id, attempt],
        )
        .scalar()
    )


def unpurged_shards(conn, task_ids) -> list[dict]:
    """shard_id, path and byte_count of the shards of these partitions whose file is not purged, by shard_id."""
    return (
        as_control(conn)
        .execute(
            "SELECT shard_id, path, byte_count FROM ledger.shard WHERE purged_at IS NULL AND task_id = ANY(?) "
            "ORDER BY shard_id",
            [list(task_ids)],
        )
        .dicts()
    )
