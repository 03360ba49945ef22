"""The `applied` asset with the partitioned reconciliation check (pipeline.settle)."""

from dataclasses import replace
from datetime import timedelta

import dagster as dg

from batch_assets.components.asset_metadata import (
    business_table_key,
    partition_tag_value,
    per_partition,
    table_metadata,
    table_name_metadata,
    tag_run,
)
from batch_assets.components.partitions import partitioned_check_spec
from batch_assets.components.summary_metadata import health, money
from batch_assets.components.wiring import RECONCILIATION_CHECK, TaskWiring
from batch_assets.formatting import parse_duration
from batch_assets.pipeline.govern.cost import partition_gates
from batch_assets.pipeline.report.summaries import record_final_figures
from batch_assets.pipeline.report.table_stats import STAGE_TABLES, task_table_stats
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import settle
from batch_assets.resources import WarehouseResource
from batch_assets.spec.resolve import ResolvedTask


def applied_freshness(task: ResolvedTask) -> dg.FreshnessPolicy:
    """A new partition applied at least every day: warn after 26 h without one; fail after a day
    plus the provider's completion window plus 6 h (54 h for a 24-hour window)."""
    fail = 24 + parse_duration(task.limits.completion_window) / 3600 + 6
    return dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=fail), warn_window=timedelta(hours=26))


def _reconciliation_spec(w: TaskWiring) -> dg.AssetCheckSpec:
    return partitioned_check_spec(
        RECONCILIATION_CHECK,
        w.key("applied"),
        description="Passes only when every item of the partition is final (applied, stale, quarantined, "
        "final-failed within the task's tolerance, held for compliance) and the reconciliation "
        "equations hold; warns while work is pending (in flight, retries) and when an operator "
        "canceled the partition's work (`canceled`); fails when nothing is pending and an item is "
        "unresolved or final failures exceed the tolerance. "
        "A run for one day records its result against that day. A run over a range of days "
        "records one result for the range: `partition` in its metadata names the days and "
        "every day's reconciliation is listed by task_id (collect runs are one day each).",
    )


def _reconciliation_result(context: dg.AssetExecutionContext, settled: list) -> dg.AssetCheckResult:
    """Passed only when every item of every partition is final; WARN while work is pending (in
    flight, retries); ERROR when nothing is pending and anything is unresolved or unbalanced."""
    verdicts = [v for _, v in settled]
    passed = all(v.passed for v in verdicts)
    severity = (
        dg.AssetCheckSeverity.WARN
        if not passed and all(v.status != "failed" for v in verdicts)
        else dg.AssetCheckSeverity.ERROR
    )
    reasons = [f"{r.task_id}: {v.status}: {reason}" for r, v in settled for reason in v.reasons]
    recon_meta = (
        settled[0][0].as_metadata()
        if len(settled) == 1
        else {r.task_id: dg.MetadataValue.json(r.as_metadata()) for r, _ in settled}
    )
    return dg.AssetCheckResult(
        check_name=RECONCILIATION_CHECK,
        passed=passed,
        severity=severity,
        description="; ".join(reasons)[:1000] or None,
        metadata={
            "verdict": "\n".join(reasons),
            "partitions": ", ".join(r.task_id for r, _ in settled),
            "partition": partition_tag_value(context.partition_keys),
            "task_id": ", ".join(r.task_id for r, _ in settled),
            **recon_meta,
        },
    )


def _total(costs) -> float | None:
    """The sum of the partitions' costs; None (unknown) when any is unknown, not 0."""
    costs = list(costs)
    return None if any(c is None for c in costs) else sum(costs)


def build_applied(w: TaskWiring) -> dg.AssetsDefinition:
    task, name, spec = w.task, w.name, w.task.spec

    @dg.asset(
        key=w.key("applied"),
        deps=[w.key("parsed_results")],
        kinds={"duckdb", "table"},
        metadata=table_name_metadata(STAGE_TABLES["applied"]),
        description=f"Usable answers written into the business table {spec.apply.table}, each exactly once "
        "(keyed by business key and output version); an answer whose source row changed since "
        "the manifest froze it is marked stale and not written. Every decision is recorded in the "
        "ledger in the same transaction as the write. Each partition's materialization carries "
        "its health: items, applied, applied and failure rates, in flight, unresolved, final status.",
        check_specs=[_reconciliation_spec(w)],
        freshness_policy=applied_freshness(task),
        **w.common(),
    )
    def applied(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        out = [apply_results(wh, task, pk) for pk in context.partition_keys]
        settled = [settle(wh, s.task_id, spec.retry.max_failed_fraction, spec.empty_source) for s in out]
        # With object storage, the final ones' figures kept with the control rows for reports across partitions.
        final = [r.task_id for r, verdict in settled if verdict.final_status is not None]
        record_final_figures(wh, final, lambda _: (spec.retry.max_failed_fraction, spec.empty_source))
        w.record_table(context, wh, "applied")
        per_partition(context, {pk: health(r) for pk, (r, _) in zip(context.partition_keys, settled)})
        with wh.across([s.task_id for s in out]) as conn:  # the business table as the write left it
            stats = task_table_stats(conn, spec.apply.table, [s.task_id for s in out], wh.tables)
            gates = partition_gates(conn, [s.task_id for s in out])
        context.log_event(
            dg.AssetObservation(
                asset_key=business_table_key(task),
                metadata={
                    **table_metadata(replace(stats, partition_rows=None)),
                    "written_by": ", ".join(s.task_id for s in out),
                    "rows_of_these_partitions": stats.partition_rows or 0,
                },
            )
        )
        return dg.MaterializeResult(
            metadata={
                "task_ids": ", ".join(s.task_id for s in out),
                "target_table": spec.apply.table,
                "newly_applied": sum(s.applied for s in out),
                "newly_stale": sum(s.stale for s in out),
                "refused_output_version": sum(s.refused_version for s in out),
                "unresolved": sum(r.unresolved for r, _ in settled),
                "final_status": ", ".join(f"{r.task_id}={r.final_status or 'pending'}" for r, _ in settled),
                "cost_estimated": money(_total(g.cost_estimated for g in gates.values()), spec.provider, spec.model),
                "cost_actual": money(_total(g.cost_actual for g in gates.values()), spec.provider, spec.model),
                "currency": ", ".join(sorted({g.currency or "unknown" for g in gates.values()})),
                "pii_redacted": sum(g.pii_redacted for g in gates.values()),
                "pii_blocked": sum(g.pii_blocked for g in gates.values()),
            },
            check_results=[_reconciliation_result(context, settled)],
        )

    return applied
