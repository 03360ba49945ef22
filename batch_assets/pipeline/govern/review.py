"""Human review of applied answers: the items sampled at apply (`review:` in the task YAML; see
`apply.review_sample_sql`) wait in `ledger.review_item` as pending. A reviewer approves or rejects
them; a rejected answer is revoked (see `revoke.py`), with the reviewer's reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from batch_assets.ledger.control_db import registered
from batch_assets.ledger.review import decide_review
from batch_assets.ledger.tasks import task_rows
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.govern.revoke import RevokeSummary, revoke


class ReviewError(ValueError):
    """Custom ids that are not review items."""


_ITEMS = """
    SELECT r.task_id, r.custom_id, m.business_id, r.attempt, r.state, r.sampled_by, p.output_json AS answer,
           r.reason, r.created_at, r.decided_at
    FROM (SELECT r.* REPLACE (CASE WHEN v.custom_id IS NOT NULL AND r.state = 'pending' THEN 'revoked'
                                   ELSE r.state END AS state)
          FROM ledger.review_item r LEFT JOIN ledger.revocation v USING (custom_id)) r
    JOIN review_task t USING (task_id)
    LEFT JOIN ledger.manifest_item m USING (custom_id)
    LEFT JOIN ledger.parsed_result p ON p.custom_id = r.custom_id AND p.attempt = r.attempt
    WHERE ($task IS NULL OR t.task_name = $task OR starts_with(r.task_id, $task))
      AND ($state IS NULL OR r.state = $state)
"""


def list_review_items(
    wh: Warehouse, task: str | None = None, state: str | None = None, limit: int | None = None
) -> list[dict]:
    """Review items with their answer and business id: of a task name or task_id prefix (or all),
    optionally in one state; pending first, then by task_id and custom_id; at most `limit`. An
    item whose answer was revoked reads `revoked` (it left the queue)."""
    with wh.connect() as conn, registered(conn, "review_task", task_rows(conn)):
        return fetch_dicts(
            conn,
            f"{_ITEMS} ORDER BY r.state <> 'pending', r.task_id, r.custom_id LIMIT $limit",
            {"task": task, "state": state, "limit": limit},
        )


def count_review_items(wh: Warehouse, task: str | None = None, state: str | None = None) -> int:
    """How many items `list_review_items` would list without a limit."""
    with wh.connect() as conn, registered(conn, "review_task", task_rows(conn)):
        return conn.execute(f"SELECT count(*) FROM ({_ITEMS})", {"task": task, "state": state}).fetchall()[0][0]


@dataclass
class ReviewDecision:
    decided: int = 0
    already_decided: list[str] = field(default_factory=list)
    revoked: RevokeSummary | None = None


def _by_partition(custom_ids: Sequence[str]) -> dict[str, list[str]]:
    """custom_ids by their partition: a custom_id starts with its task_id (`<task_id>:<source>:…`)."""
    out: dict[str, list[str]] = {}
    for custom_id in custom_ids:
        out.setdefault(custom_id.split(":", 1)[0], []).append(custom_id)
    return out


def decide(wh: Warehouse, custom_ids: Sequence[str], state: str, reason: str | None = None) -> ReviewDecision:
    """Approve or reject pending review items; a rejected answer is revoked. Unknown ids, and
    approving a revoked answer, raise ReviewError (nothing decided); items decided earlier keep
    their decision (listed)."""
    ids = list(dict.fromkeys(custom_ids))
    with wh.connect() as conn:
        # An answer revoked by `batch-assets revoke` left the queue (state `revoked`); one revoked
        # before review items were closed on revoke still reads pending, so the revocation decides.
        rows = conn.execute(
            """
            SELECT r.custom_id, CASE WHEN v.custom_id IS NOT NULL AND r.state = 'pending' THEN 'revoked'
                                     ELSE r.state END
            FROM ledger.review_item r LEFT JOIN ledger.revocation v USING (custom_id)
            WHERE r.custom_id IN (SELECT unnest(?::VARCHAR[]))
            """,
            [ids],
        ).fetchall()
    known = dict(rows)
    unknown = [c for c in ids if c not in known]
    if unknown:
        raise ReviewError(f"not review items: {', '.join(unknown)}; list them with `batch-assets review list`")
    revoked = [c for c in ids if known[c] == "revoked"]
    if revoked and state == "approved":
        raise ReviewError(
            f"answer revoked, cannot be approved: {', '.join(revoked)}; nothing decided "
            "(see `batch-assets review list --state revoked`)"
        )
    out = ReviewDecision(already_decided=[c for c in ids if known[c] != "pending"])
    pending = [c for c in ids if known[c] == "pending"]
    if pending:
        out.decided = 0
        for task_id, ids in _by_partition(pending).items():  # each in its partition's store
            with wh.of(task_id).connect() as conn:
                out.decided += decide_review(conn, ids, state, reason)
        if state == "rejected":
            out.revoked = revoke(
                wh, custom_ids=pending, reason=f"review rejected: {reason}" if reason else "review rejected"
            )
    return out
