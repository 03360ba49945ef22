"""Writes to the retry ledger: `ledger.retry_decision`, `ledger.compliance_hold`,
`ledger.operator_action`, and a partition's final status on `ledger.batch_task`.

Set-based like the other writers: decisions come from a query the retry planner hands over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from batch_assets.ledger.control_db import as_control
from batch_assets.ledger.statements import NOW, insert_select, insert_values
from batch_assets.sqltext import sql_literal

Params = Sequence[Any] | Mapping[str, Any] | None

RETRY_DECISION_COLUMNS = (
    "custom_id",
    "item_no",
    "attempt",
    "error_class",
    "action",
    "charged",
    "next_attempt",
    "not_before",
    "reason",
)
COMPLIANCE_HOLD_COLUMNS = ("custom_id", "business_id", "attempt", "provider_code", "provider_reason")
FINAL_STATUSES = ("COMPLETED", "COMPLETED_WITH_FAILURES", "FAILED", "CANCELED", "EMPTY")


def insert_retry_decisions(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Record what was decided for failed attempts (columns of RETRY_DECISION_COLUMNS), decided now.
    An attempt already decided keeps its decision. Returns the number recorded."""
    return insert_select(
        conn,
        "retry_decision",
        RETRY_DECISION_COLUMNS,
        query,
        params,
        fixed={"task_id": sql_literal(task_id), "decided_at": NOW},
        on_conflict="ON CONFLICT (custom_id, attempt) DO NOTHING",
    )


def reopen_decisions(conn: duckdb.DuckDBPyConnection, keys_query: str, params: Params = None, *, reason: str) -> int:
    """Turn final decisions of the attempts `keys_query` gives (custom_id, attempt) into retries of
    the next attempt, due now (an operator's explicit retry). Returns the number reopened."""
    cur = conn.execute(
        f"""
        UPDATE ledger.retry_decision AS d
        SET action = 'retry', next_attempt = d.attempt + 1, not_before = now()::TIMESTAMP,
            reason = d.reason || ' | ' || {sql_literal(reason)}, decided_at = now()::TIMESTAMP
        FROM ({keys_query}) AS k
        WHERE d.custom_id = k.custom_id AND d.attempt = k.attempt AND d.action NOT IN ('retry', 'requeue')
    """,
        params if params is not None else [],
    )
    return int(cur.fetchone()[0])


def insert_compliance_holds(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Put items the provider refused on content-policy grounds in the compliance queue
    (columns of COMPLIANCE_HOLD_COLUMNS). An item already held stays as it is."""
    return insert_select(
        conn,
        "compliance_hold",
        COMPLIANCE_HOLD_COLUMNS,
        query,
        params,
        fixed={"task_id": sql_literal(task_id), "review_state": "'pending'", "recorded_at": NOW},
        on_conflict="ON CONFLICT (custom_id) DO NOTHING",
    )


def record_operator_action(
    conn: duckdb.DuckDBPyConnection,
    action: str,
    *,
    task_id: str | None = None,
    job_key: str | None = None,
    custom_id: str | None = None,
    detail: str | None = None,
) -> None:
    """What a person did (cancel, retry, adopt, abandon …), with the reason or the figures."""
    insert_values(
        conn,
        "operator_action",
        {"action": action, "task_id": task_id, "job_key": job_key, "custom_id": custom_id, "detail": detail},
        fixed={"acted_at": NOW},
    )


def set_final_status(conn: duckdb.DuckDBPyConnection, task_id: str, status: str | None) -> bool:
    """Record the partition's final status (and when it became final), or clear it (None) when work
    is pending again. Returns whether the row changed."""
    if status is not None and status not in FINAL_STATUSES:
        raise ValueError(f"final status {status!r} is not one of {', '.join(FINAL_STATUSES)}")
    cur = as_control(conn).execute(
        """
        UPDATE ledger.batch_task
        SET final_status = ?, finished_at = CASE WHEN CAST(? AS VARCHAR) IS NULL THEN NULL ELSE now()::TIMESTAMP END,
            updated_at = now()::TIMESTAMP
        WHERE task_id = ? AND final_status IS DISTINCT FROM CAST(? AS VARCHAR)
    """,
        [status, status, task_id, status],
    )
    return cur.rowcount > 0


def latest_operator_detail(conn, action: str, task_id: str) -> str | None:
    """The detail of the partition's latest `action` (e.g. a budget override's figures), None if none."""
    return (
        as_control(conn)
        .execute(
            "SELECT detail FROM ledger.operator_action WHERE action = ? AND task_id = ? ORDER BY acted_at DESC LIMIT 1",
            [action, task_id],
        )
        .scalar()
    )
