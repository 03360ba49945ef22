"""Stage summaries turned into asset metadata and check results (sums over a run's partitions)."""

from __future__ import annotations

import dagster as dg

from batch_assets.pipeline.govern.send_gate import Verdict
from batch_assets.pipeline.settle.reconcile import Reconciliation


def totals(summaries: list, *fields: str) -> dict:
    return {f: sum(getattr(s, f) for s in summaries) for f in fields}


def summed_dicts(dicts, prefix: str) -> dict:
    total: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            total[prefix + k] = total.get(prefix + k, 0) + v
    return total


def by_partition(summaries: list, fields) -> dict:
    """One partition's fields as they are; several partitions' as one JSON entry each."""
    if len(summaries) == 1:
        return {"task_id": summaries[0].task_id, **fields(summaries[0])}
    return {s.task_id: dg.MetadataValue.json(fields(s)) for s in summaries}


def money(v: float | None, provider: str, model: str) -> float | str:
    """A cost, or why it is unknown: the model has no price in its provider's table (0 items cost 0)."""
    if v is not None:
        return round(v, 6)
    return f"unknown (model {model!r} has no price in batch_assets/providers/{provider}/prices.yaml)"


def health(rec: Reconciliation) -> dict:
    """A partition's health as plain numbers (they feed the asset's plots) plus its final status."""
    items = rec.manifest_items
    rates = {"applied_rate": rec.applied / items, "failure_rate": rec.final_failed_total / items} if items else {}
    return {
        "task_id": rec.task_id,
        "items": items,
        "applied": rec.applied,
        "revoked": rec.revoked,
        **rates,
        "final_failed": rec.final_failed_total,
        "in_flight": rec.in_flight,
        "collecting": rec.collecting,
        "retry_pending": rec.retry_pending,
        "unresolved": rec.unresolved,
        "final_status": rec.final_status or ("collecting" if rec.only_collecting else "pending"),
    }


def verdicts_result(check: str, verdicts: list[Verdict]) -> dg.AssetCheckResult:
    """One check result over a run's partitions: passed when every partition passed."""
    failed = [v for v in verdicts if not v.passed]
    return dg.AssetCheckResult(
        check_name=check,
        passed=not failed,
        description="; ".join(v.reason for v in failed)[:1000] or None,
        metadata=verdicts[0].as_metadata()
        if len(verdicts) == 1
        else {
            "reason": "\n".join(f"{v.task_id}: {v.reason}" for v in verdicts),
            **{v.task_id: dg.MetadataValue.json(v.as_metadata()) for v in verdicts},
        },
    )
