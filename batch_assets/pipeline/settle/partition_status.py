"""Whether a partition is done, as the `settled` asset shows it: done (green), failed (red) or still
under way (no materialization, so the partition bar stays empty while work is in flight).

Done means every item is final and the reconciliation passed with a final status other than
CANCELED; failed means nothing is pending any more and the verdict failed, or the operator canceled
the partition's work before anything was applied. The reasons are the verdict's, with the
provider's own reason for every batch it failed whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from batch_assets.pipeline.settle.reconcile import FAILED, Reconciliation, Verdict

DONE, NOT_DONE, UNDER_WAY = "done", "not_done", "under_way"


@dataclass(frozen=True)
class PartitionStatus:
    task_id: str
    state: str  # done | not_done | under_way
    final_status: str | None
    reasons: tuple[str, ...]

    def line(self) -> str:
        return f"{self.task_id}: {self.final_status or 'pending'}: {'; '.join(self.reasons)}"


def partition_status(rec: Reconciliation, verdict: Verdict) -> PartitionStatus:
    if rec.pending:
        return PartitionStatus(rec.task_id, UNDER_WAY, None, verdict.reasons)
    if verdict.status == FAILED or verdict.final_status is None:
        reasons = tuple(dict.fromkeys([*verdict.reasons, *(f"provider failed batch {f}" for f in rec.batch_failures)]))
        return PartitionStatus(rec.task_id, NOT_DONE, verdict.final_status or "FAILED", reasons)
    if verdict.final_status == "CANCELED":
        reason = (
            f"canceled by an operator: {rec.operator_canceled} item(s) not sent or not answered, none applied "
            "(`batch-assets retry <task_id> --class canceled` sends them again)"
        )
        return PartitionStatus(rec.task_id, NOT_DONE, "CANCELED", (reason,))
    return PartitionStatus(rec.task_id, DONE, verdict.final_status, verdict.reasons)
