"""Writes for human review and revoke: `ledger.review_item`, `ledger.applied_previous`,
`ledger.revocation`. A review item is pending, approved or rejected (a reviewer's decision), or
revoked (its answer was revoked while it waited: it left the queue). Set-based: rows come from a
query the stage hands over (read by name)."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from batch_assets.ledger.statements import NOW, insert_select
from batch_assets.sqltext import sql_literal


def insert_review_items(
    conn: duckdb.DuckDBPyConnection, task_id: str, query: str, *, none_picked_before: bool = False
) -> int:
    """Items picked for review (`query`: custom_id, attempt, sampled_by), pending; an item already
    picked keeps its row. Returns the number added.

    `none_picked_before`: the caller knows no item of `query` can hold a row yet (see
    pipeline.settle.apply: the task has none). Then a plain INSERT, which the primary key still guards (a
    row that does exist fails the statement, it is never overwritten): ON CONFLICT checks every row
    against the table's index, which grows with the table, so each chunk's picks cost more."""
    return insert_select(
        conn,
        "review_item",
        ("custom_id", "attempt", "sampled_by"),
        query,
        fixed={
            "task_id": sql_literal(task_id),
            "state": "'pending'",
            "reason": "NULL",
            "created_at": NOW,
            "decided_at": "NULL",
        },
        on_conflict="" if none_picked_before else "ON CONFLICT (custom_id) DO NOTHING",
    )


def close_revoked_reviews(conn: duckdb.DuckDBPyConnection, query: str, reason: str | None) -> int:
    """Pending review items whose answers `query` (custom_id) revokes leave the queue: state
    `revoked`, with the revocation's reason; decided items keep their decision. Run it in the
    revoke's transaction. Returns the number closed."""
    row = conn.execute(
        f"""
        UPDATE ledger.review_item SET state = 'revoked', reason = ?, decided_at = {NOW}
        WHERE state = 'pending' AND custom_id IN (SELECT custom_id FROM ({query}))
    """,
        [reason or "answer revoked"],
    ).fetchone()
    return int(row[0]) if row else 0


def decide_review(conn: duckdb.DuckDBPyConnection, custom_ids: Sequence[str], state: str, reason: str | None) -> int:
    """Record a reviewer's decision on pending items; an item already decided keeps its decision.
    Returns the number decided now."""
    if state not in ("approved", "rejected"):
        raise ValueError(f"review state {state!r}: use approved or rejected")
    row = conn.execute(
        """
        UPDATE ledger.review_item SET state = ?, reason = ?, decided_at = now()::TIMESTAMP
        WHERE state = 'pending' AND custom_id IN (SELECT unnest(?::VARCHAR[]))
    """,
        [state, reason, list(custom_ids)],
    ).fetchone()
    return int(row[0]) if row else 0


def insert_applied_previous(
    conn: duckdb.DuckDBPyConnection, task_id: str, query: str, *, target_table: str, output_version: str
) -> int:
    """The rows an apply is about to overwrite (`query`: custom_id, business_id, previous_custom_id,
    previous_row JSON). Returns the number kept."""
    return insert_select(
        conn,
        "applied_previous",
        ("custom_id", "business_id", "previous_custom_id", "previous_row"),
        query,
        fixed={
            "task_id": sql_literal(task_id),
            "target_table": sql_literal(target_table),
            "output_version": sql_literal(output_version),
            "recorded_at": NOW,
        },
        on_conflict="ON CONFLICT (custom_id) DO NOTHING",
    )


REVOCATION_COLUMNS = (
    "custom_id",
    "task_id",
    "business_id",
    "target_table",
    "output_version",
    "action",
    "restored_custom_id",
)


def insert_revocations(conn: duckdb.DuckDBPyConnection, query: str, reason: str | None) -> int:
    """Record revoked answers (`query`: REVOCATION_COLUMNS); one already revoked keeps its row."""
    return insert_select(
        conn,
        "revocation",
        REVOCATION_COLUMNS,
        query,
        fixed={"reason": sql_literal(reason) if reason else "NULL", "revoked_at": NOW},
        on_conflict="ON CONFLICT (custom_id) DO NOTHING",
    )
