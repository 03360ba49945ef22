"""ledger.partition_summary: each final partition's report figures, kept with the control rows so a
report across partitions reads them instead of opening every partition's store."""

from __future__ import annotations

from collections.abc import Sequence

from batch_assets.ledger.control_db import as_control


def store_shas(conn, task_ids: Sequence[str]) -> dict[str, str]:
    """task_id -> the sha256 of its store's current version (object storage; none elsewhere)."""
    rows = as_control(conn).execute(
        "SELECT task_id, sha256 FROM ledger.partition_store WHERE task_id = ANY(?)", [list(task_ids)]
    )
    return dict(rows.rows)


def record_summaries(conn, summaries: Sequence[tuple[str, str | None, str, str]]) -> None:
    """(task_id, store sha256 the figures were read from, final status, JSON) per final partition,
    replacing the partition's last."""
    db = as_control(conn)
    with db.transaction():
        for task_id, sha, final_status, summary in summaries:
            db.execute(
                """INSERT INTO ledger.partition_summary (task_id, store_sha256, final_status, summary, computed_at)
                   VALUES (?, ?, ?, ?, now()::TIMESTAMP)
                   ON CONFLICT (task_id) DO UPDATE SET store_sha256 = excluded.store_sha256,
                       final_status = excluded.final_status, summary = excluded.summary,
                       computed_at = excluded.computed_at""",
                [task_id, sha, final_status, summary],
            )


def current_summaries(conn, task_ids: Sequence[str]) -> dict[str, str]:
    """task_id -> JSON of the partitions whose summary still holds: the partition is final with the
    status the summary saw, and its store is still at the version the summary was read from."""
    rows = as_control(conn).execute(
        """SELECT s.task_id, s.summary FROM ledger.partition_summary s
           JOIN ledger.batch_task t ON t.task_id = s.task_id
           JOIN ledger.partition_store p ON p.task_id = s.task_id AND p.sha256 = s.store_sha256
           WHERE s.task_id = ANY(?) AND t.final_status = s.final_status""",
        [list(task_ids)],
    )
    return dict(rows.rows)
