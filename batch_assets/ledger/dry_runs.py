"""Writes to `ledger.dry_run`: one row per `batch-assets dry-run` (N lines rendered, shown, never sent)."""

from __future__ import annotations

import duckdb

from batch_assets.ledger.statements import NOW, insert_values


def record_dry_run(
    conn: duckdb.DuckDBPyConnection,
    *,
    task_name: str,
    prompt_version: str,
    prompt_hash: str | None,
    task_id: str,
    n: int,
    sample_hash: str,
    items: int,
    cost_estimated: float | None,
    currency: str | None,
) -> int:
    """Record a dry run of `task_id` (its task and prompt version) that showed `n` lines hashing to
    `sample_hash`, with the partition's item count and estimate at the time."""
    return insert_values(
        conn,
        "dry_run",
        {
            "task_name": task_name,
            "prompt_version": prompt_version,
            "prompt_hash": prompt_hash,
            "task_id": task_id,
            "n": int(n),
            "sample_hash": sample_hash,
            "items": int(items),
            "cost_estimated": cost_estimated,
            "currency": currency,
        },
        fixed={"dry_run_at": NOW},
    )


def latest_dry_run(conn, task_name: str, prompt_version: str) -> dict | None:
    """The task's latest dry run at this prompt version (task_id, n, sample_hash, dry_run_at), or None."""
    from batch_assets.ledger.control_db import as_control

    rows = as_control(conn).execute(
        "SELECT task_id, n, sample_hash, dry_run_at FROM ledger.dry_run WHERE task_name = ? "
        "AND prompt_version = ? ORDER BY dry_run_at DESC LIMIT 1",
        [task_name, prompt_version],
    )
    return rows.dicts()[0] if rows.rows else None
