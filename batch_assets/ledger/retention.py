"""Writes for retention: `ledger.remote_file_deletion`, the provider_job deletion marks, and the
purge marks on `ledger.shard` / `ledger.raw_file` (the rows and their hashes always stay)."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from batch_assets.ledger.control_db import as_control
from batch_assets.ledger.statements import NOW, insert_values


def record_remote_deletion(
    conn: duckdb.DuckDBPyConnection, *, job_key: str, task_id: str, provider: str, deleted: Sequence[str]
) -> None:
    """The job's provider-side files are gone: one row per file deleted (or one `nothing_to_delete`
    row when the provider keeps none), and the job marked done."""
    for file_id in deleted or [None]:
        insert_values(
            conn,
            "remote_file_deletion",
            {
                "job_key": job_key,
                "task_id": task_id,
                "provider": provider,
                "file_id": file_id,
                "outcome": "deleted" if file_id else "nothing_to_delete",
                "error": None,
            },
            fixed={"recorded_at": NOW},
        )
    as_control(conn).execute(
        """UPDATE ledger.provider_job SET remote_deleted_at = now()::TIMESTAMP, remote_delete_error = NULL,
                        remote_delete_attempts = coalesce(remote_delete_attempts, 0) + 1 WHERE job_key = ?""",
        [job_key],
    )


def record_remote_deletion_failure(
    conn: duckdb.DuckDBPyConnection, *, job_key: str, task_id: str, provider: str, error: str
) -> None:
    """A deletion try failed: kept with the error; the job stays pending (tried again later)."""
    insert_values(
        conn,
        "remote_file_deletion",
        {
            "job_key": job_key,
            "task_id": task_id,
            "provider": provider,
            "file_id": None,
            "outcome": "failed",
            "error": error[:2000],
        },
        fixed={"recorded_at": NOW},
    )
    as_control(conn).execute(
        """UPDATE ledger.provider_job SET remote_delete_error = ?,
                        remote_delete_attempts = coalesce(remote_delete_attempts, 0) + 1 WHERE job_key = ?""",
        [error[:2000], job_key],
    )


def mark_shard_purged(conn, shard_id: str) -> None:
    as_control(conn).execute(
        "UPDATE ledger.shard SET purged_at = now()::TIMESTAMP WHERE shard_id = ? AND purged_at IS NULL", [shard_id]
    )


def mark_raw_file_purged(conn: duckdb.DuckDBPyConnection, file_key: str, archived_path: str | None) -> None:
    """The raw file left its place; `archived_path` is its compressed copy (None: nothing was there)."""
    conn.execute(
        """UPDATE ledger.raw_file SET purged_at = now()::TIMESTAMP, archived_path = ?
                    WHERE file_key = ? AND purged_at IS NULL""",
        [archived_path, file_key],
    )


def recorded_control_files(conn) -> list[str]:
    """Every file location the control tables name and still need: each partition's current
    manifest and every shard file not purged (what file garbage collection keeps)."""
    db = as_control(conn)
    manifests = db.execute("SELECT manifest_uri FROM ledger.batch_task WHERE manifest_uri IS NOT NULL").rows
    shards = db.execute("SELECT path FROM ledger.shard WHERE purged_at IS NULL AND path IS NOT NULL").rows
    return [r[0] for r in manifests + shards]


def recorded_item_files(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Every raw file location the per-item tables name and still need: the files not purged and
    the compressed copies purges made."""
    rows = conn.execute(
        "SELECT path FROM ledger.raw_file WHERE purged_at IS NULL "
        "UNION ALL SELECT archived_path FROM ledger.raw_file WHERE archived_path IS NOT NULL"
    ).fetchall()
    return [r[0] for r in rows if r[0]]
