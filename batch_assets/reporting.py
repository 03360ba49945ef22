"""Plain-text tables for operators: per-partition reconciliation and provider jobs."""

from __future__ import annotations

from batch_assets.pipeline.reconcile import FAILURE_CLASSES, Reconciliation

SHORT_CLASS = {"validation_error": "valid", "rate_or_capacity_error": "rate", "content_policy_error": "policy",
               "internal_error": "internal"}


def format_table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    def line(values):
        return "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def reconciliation_table(recs: list[Reconciliation]) -> str:
    headers = ["task_id", "items", "rejected", "quarant", "lines", "submitted", "succeeded",
               *(f"fail:{SHORT_CLASS[c]}" for c in FAILURE_CLASSES), "expired", "canceled", "missing",
               "applied", "stale", "unparsed", "balanced"]
    rows = []
    for r in recs:
        rows.append([r.task_id, r.manifest_items, r.source_rejects, r.quarantined, r.shard_lines, r.submitted_lines,
                     r.succeeded, *(r.failed.get(c, 0) for c in FAILURE_CLASSES), r.expired, r.canceled, r.missing,
                     r.applied, r.stale, r.failed_to_parse, "yes" if not r.problems() else "NO"])
    return format_table(headers, rows)
