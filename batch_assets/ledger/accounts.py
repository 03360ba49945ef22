"""Writes and reads of `ledger.account_pause`: provider accounts stopped after an account-level error.

A result classed `account_error` (the provider says the account itself cannot be used: billing,
access, key) pauses that provider: the send gate (`pipeline.govern.send_gate`) refuses every send to
it while a pause is active (no `resumed_at`), and `batch-assets resume <provider>` lifts it. One
active pause per provider at a time; later account errors while it is paused add nothing.
"""

from __future__ import annotations

import duckdb

from batch_assets.ledger.control_db import ControlDB, as_control
from batch_assets.ledger.retries import record_operator_action
from batch_assets.ledger.statements import NOW

Conn = duckdb.DuckDBPyConnection | ControlDB

_COLUMNS = "provider, paused_at, error_code, error_message, task_id, job_key, items, fix, resumed_at, resumed_by"


def pause_account(
    conn: Conn,
    provider: str,
    *,
    task_id: str,
    error_code: str,
    error_message: str | None,
    job_key: str | None,
    items: int,
    fix: str,
) -> bool:
    """Pause `provider` after an account-level error, unless a pause is active already (the first
    stays). Returns whether a pause was recorded."""
    cur = as_control(conn).execute(
        f"""
        INSERT INTO ledger.account_pause (provider, paused_at, error_code, error_message, task_id, job_key, items, fix)
        SELECT CAST($provider AS VARCHAR), {NOW}, CAST($code AS VARCHAR), CAST($message AS VARCHAR),
               CAST($task_id AS VARCHAR), CAST($job_key AS VARCHAR), CAST($items AS BIGINT), CAST($fix AS VARCHAR)
        WHERE NOT EXISTS (SELECT 1 FROM ledger.account_pause
                          WHERE provider = CAST($provider AS VARCHAR) AND resumed_at IS NULL)
        """,
        {
            "provider": provider,
            "code": error_code,
            "message": error_message,
            "task_id": task_id,
            "job_key": job_key,
            "items": items,
            "fix": fix,
        },
    )
    return cur.rowcount > 0


def active_pause(conn: Conn, provider: str) -> dict | None:
    """The provider's active pause (a row of ledger.account_pause), or None."""
    rows = as_control(conn).execute(
        f"SELECT {_COLUMNS} FROM ledger.account_pause WHERE provider = ? AND resumed_at IS NULL", [provider]
    )
    return rows.dicts()[0] if rows.rows else None


def active_pauses(conn: Conn) -> list[dict]:
    """Every active pause, by provider."""
    sql = f"SELECT {_COLUMNS} FROM ledger.account_pause WHERE resumed_at IS NULL ORDER BY provider"
    return as_control(conn).execute(sql).dicts()


def resume_account(conn: Conn, provider: str, who: str, reason: str | None) -> dict | None:
    """Lift the provider's active pause and record the operator's action; returns the pause lifted
    (None when the provider was not paused: nothing is written)."""
    pause = active_pause(conn, provider)
    if pause is None:
        return None
    as_control(conn).execute(
        f"UPDATE ledger.account_pause SET resumed_at = {NOW}, resumed_by = ? WHERE provider = ? AND resumed_at IS NULL",
        [who, provider],
    )
    detail = f"{provider}: paused since {pause['paused_at']:%Y-%m-%d %H:%M:%S} UTC by {pause['error_code']}"
    record_operator_action(conn, "resume", task_id=pause["task_id"], detail=detail + (f"; {reason}" if reason else ""))
    return pause
