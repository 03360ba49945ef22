"""Plain-text tables for operators (the CLI and the demo): per-partition reconciliation and gate figures."""

from __future__ import annotations

from batch_assets.formatting import format_duration, format_money, format_table
from batch_assets.pipeline.settle.reconcile import Reconciliation
from batch_assets.spec.failure_classes import FAILURE_CLASSES, SHORT_CLASS


def reconciliation_table(recs: list[Reconciliation]) -> str:
    """Per partition: what happened to every item (final outcomes, retries, what is still open)."""
    return format_table(*reconciliation_cells(recs))


def reconciliation_cells(recs: list[Reconciliation]) -> tuple[list[str], list[list]]:
    """(headers, rows) of `reconciliation_table`, for front ends that draw their own tables."""
    headers = [
        "task_id",
        "items",
        "rejected",
        "quarant",
        "sent",
        "retried",
        "attempts",
        "applied",
        "revoked",
        "stale",
        *(f"ff:{SHORT_CLASS[c]}" for c in FAILURE_CLASSES),
        "held",
        "canceled",
        "in_flight",
        "collecting",
        "retry_pend",
        "unresolved",
        "balanced",
        "check",
        "status",
    ]
    rows = []
    for r in recs:
        verdict = r.verdict()
        rows.append(
            [
                r.task_id,
                r.manifest_items,
                r.source_rejects,
                r.quarantined,
                r.submitted_lines,
                r.retried,
                r.max_attempt,
                r.applied,
                r.revoked,
                r.stale,
                *(r.final_failed.get(c, 0) for c in FAILURE_CLASSES),
                r.compliance_held,
                r.operator_canceled,
                r.in_flight,
                r.collecting,
                r.retry_pending,
                r.unresolved,
                "yes" if not r.problems() else "NO",
                verdict.status,
                r.final_status or "-",
            ]
        )
    return headers, rows


def _count(v: int | None) -> str:
    return "-" if v is None else str(v)


def gate_cells(gates) -> tuple[list[str], list[list]]:
    """(headers, rows): per partition, items sent redacted / blocked for sensitive data, estimated and actual
    cost, thinking tokens (part of the output) and cached input tokens (part of the input); `-`: not reported."""
    headers = [
        "task_id",
        "pii_redacted",
        "pii_blocked",
        "cost_est",
        "cost_actual",
        "currency",
        "thinking_tokens",
        "cached_input_tokens",
    ]
    rows = [
        [
            g.task_id,
            g.pii_redacted,
            g.pii_blocked,
            format_money(g.cost_estimated, unknown="?"),
            format_money(g.cost_actual, unknown="?"),
            g.currency or "?",
            _count(g.thinking_tokens),
            _count(g.cached_input_tokens),
        ]
        for g in gates
    ]
    return headers, rows


def time_cells(times) -> tuple[list[str], list[list]]:
    """(headers, rows): per partition (task_id, `partition_report.Durations`), its queue, run and total
    time as its report shows them; `-`: none yet (nothing sent, nothing run)."""
    headers = ["task_id", "queue", "run", "total"]
    return headers, [[task_id, *(format_duration(v) for v in (t.queue_s, t.run_s, t.total_s))] for task_id, t in times]
