"""Whether a partition is done, as the `settled` asset shows it: done (green), failed (red) or still
under way (no materialization, so the partition bar stays empty while work is in flight).

Done means every item is final and the reconciliation passed with a final status other than
CANCELED; failed means nothing is pending any more and the verdict failed, or the operator canceled
the partition's work before anything was applied. A partition whose batches all ended but whose
results are not collected yet (the verdict `collecting`) is under way, never failed. The reasons
are the verdict's, with the provider's own reason for every batch it failed whole. An empty
partition (its source had no rows for the day) is done with the verdict `empty_source` under the
task's `empty_source: ok` or `warn`, failed under `fail`; a partition not frozen yet is not under
way nor done: nothing is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from batch_assets.ledger.control_db import registered
from batch_assets.ledger.tasks import task_rows, unsettled_without_jobs
from batch_assets.pipeline.settle.reconcile import COLLECTING, FAILED, Reconciliation, Verdict

DONE, NOT_DONE, UNDER_WAY = "done", "not_done", "under_way"


@dataclass(frozen=True)
class PartitionStatus:
    task_id: str
    state: str  # done | not_done | under_way
    final_status: str | None
    reasons: tuple[str, ...]
    collecting: bool = False  # under way, and only the results of ended batches are left to collect

    def line(self) -> str:
        pending = COLLECTING if self.collecting else "pending"
        return f"{self.task_id}: {self.final_status or pending}: {'; '.join(self.reasons)}"


def partition_status(rec: Reconciliation, verdict: Verdict) -> PartitionStatus:
    if rec.pending or not rec.frozen:
        return PartitionStatus(rec.task_id, UNDER_WAY, None, verdict.reasons, verdict.status == COLLECTING)
    if verdict.status == FAILED or verdict.final_status is None:
        reasons = tuple(dict.fromkeys([*verdict.reasons, *(f"provider failed batch {f}" for f in rec.batch_failures)]))
        return PartitionStatus(rec.task_id, NOT_DONE, verdict.final_status or "FAILED", reasons)
    if verdict.final_status == "CANCELED":
        return PartitionStatus(rec.task_id, NOT_DONE, "CANCELED", verdict.reasons)
    return PartitionStatus(rec.task_id, DONE, verdict.final_status, verdict.reasons)


@dataclass(frozen=True)
class SettleDue:
    """A frozen partition with nothing to send and no provider job, whose final status is not recorded:
    only a collect run settles it (the sensor requests collect runs for terminal provider jobs, and
    it has none)."""

    task_name: str
    partition_date: str
    task_id: str
    manifest_version: int
    reason: str

    @property
    def run_key(self) -> str:
        """One collect run per frozen manifest: a refreeze (new version) is settled again."""
        return f"settle:{self.task_name}:{self.partition_date}:m{self.manifest_version}"


# Candidates, cheap on a big ledger: not final, no provider job (not even an intent), and by the
# frozen item count nothing left to send (0 items, or at most as many quarantined). Only those are
# counted exactly from the manifest (a few rows each: they are empty or all quarantined).
_DUE_SQL = """
    WITH candidates AS (  -- _unsettled: ledger.tasks.unsettled_without_jobs
        SELECT t.task_id, t.task_name, t.day, t.manifest_version, t.total_items
        FROM _unsettled t
        WHERE t.total_items <= (SELECT count(*) FROM ledger.quarantine q WHERE q.task_id = t.task_id)
    )
    SELECT c.task_name, c.day, c.task_id, c.manifest_version,
           (SELECT count(*) FROM ledger.manifest_item m
            WHERE m.task_id = c.task_id AND m.superseded_at IS NULL) AS items,
           (SELECT count(*) FROM ledger.manifest_item m
            WHERE m.task_id = c.task_id AND m.superseded_at IS NULL
              AND m.custom_id NOT IN (SELECT custom_id FROM ledger.quarantine q WHERE q.task_id = c.task_id))
               AS sendable,
           (SELECT coalesce(sum(row_count), 0) FROM ledger.source_reject r WHERE r.task_id = c.task_id) AS rejected
    FROM candidates c
    ORDER BY c.task_name, c.day
"""


def partitions_to_settle(conn) -> list[SettleDue]:
    """Frozen partitions that no provider job will ever settle: no job, nothing to send (0 items, every
    source row rejected, or every item quarantined before sending) and no final status recorded yet."""
    due = []
    with registered(conn, "_unsettled", unsettled_without_jobs(conn)):
        rows = conn.execute(_DUE_SQL).fetchall()
    for task_name, day, task_id, version, items, sendable, rejected in rows:
        if sendable:
            continue
        if items:
            reason = f"every item quarantined before sending ({items} quarantined)"
        elif rejected:
            reason = f"every source row rejected before freezing ({rejected} rejected), 0 items"
        else:
            reason = "the source had no rows for the day, 0 items (empty_source)"
        due.append(SettleDue(task_name, day, task_id, int(version), reason))
    return due


@dataclass(frozen=True)
class RevokeRefresh:
    """A partition whose answers were revoked (CLI revoke, review reject) after its stages last ran: a
    collect run refreshes its metadata and its business table's row count (nothing is re-applied)."""

    task_name: str
    partition_date: str
    task_id: str
    revoked: int
    last_revoked_at: datetime

    @property
    def run_key(self) -> str:
        """One refresh per wave of revocations: a later revoke gives a new key."""
        return f"revoked:{self.task_name}:{self.partition_date}:{self.last_revoked_at.isoformat()}"


def partitions_revoked_since(conn, since: datetime | None) -> list[RevokeRefresh]:
    """Partitions with a revocation after `since` (the sensor's cursor); with no cursor yet, those
    revoked after they were last settled."""
    with registered(conn, "_revoked_task", task_rows(conn)):
        rows = conn.execute(
            """
            SELECT t.task_name, strftime(t.partition_date, '%Y-%m-%d'), t.task_id, count(*), max(r.revoked_at)
            FROM ledger.revocation r JOIN _revoked_task t USING (task_id)
            WHERE r.revoked_at > coalesce(CAST($since AS TIMESTAMP), t.finished_at, TIMESTAMP '-infinity')
            GROUP BY ALL ORDER BY 5
            """,
            {"since": since},
        ).fetchall()
    return [RevokeRefresh(name, day, task_id, int(n), last) for name, day, task_id, n, last in rows]
