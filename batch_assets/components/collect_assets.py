"""The `raw_results` and `parsed_results` assets and the stuck-jobs check (pipeline.collect)."""

import dagster as dg

from batch_assets.components.asset_metadata import table_name_metadata, tag_run
from batch_assets.components.summary_metadata import summed_dicts, totals
from batch_assets.components.wiring import STUCK_CHECK, TaskWiring
from batch_assets.formatting import format_duration
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.stuck import stuck_jobs
from batch_assets.pipeline.report.table_stats import STAGE_TABLES
from batch_assets.pipeline.settle.retry_ledger import plan_retries
from batch_assets.resources import ProvidersResource, WarehouseResource


def build_raw_results(w: TaskWiring) -> dg.AssetsDefinition:
    task, name, spec = w.task, w.name, w.task.spec

    @dg.asset(
        key=w.key("raw_results"),
        deps=[w.key("submissions")],
        kinds={spec.provider, "duckdb"},
        metadata=table_name_metadata(STAGE_TABLES["raw_results"]),
        description="The output and error files of every provider batch that has ended, downloaded once, "
        "kept on disk verbatim and loaded line by line; each line is matched to its item through "
        "the request id that was sent, never by position (orphan, duplicate and malformed lines "
        "are kept and counted).",
        **w.common(),
    )
    def raw_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource, providers: ProvidersResource):
        tag_run(context, name)
        adapter = providers.adapter(spec.provider)
        out = [collect_raw_results(warehouse.warehouse(), task, pk, adapter) for pk in context.partition_keys]
        w.record_table(context, warehouse.warehouse(), "raw_results")
        return dg.MaterializeResult(
            metadata={
                "task_ids": ", ".join(s.task_id for s in out),
                **totals(
                    out,
                    "downloaded_files",
                    "ingested_files",
                    "lines",
                    "remote_files_deleted",
                    "remote_deletions_failed",
                ),
                **summed_dicts((s.by_status for s in out), "lines_"),
            }
        )

    return raw_results


def build_parsed_results(w: TaskWiring) -> dg.AssetsDefinition:
    task, name = w.task, w.name

    @dg.asset(
        key=w.key("parsed_results"),
        deps=[w.key("raw_results")],
        kinds={"duckdb"},
        metadata=table_name_metadata(STAGE_TABLES["parsed_results"]),
        description="One outcome per item and attempt: an answer checked against the output schema, or a "
        "failure classified as validation, rate/capacity, content policy, internal, parse, expired "
        "or canceled. Every failed attempt then gets its class's action in the retry ledger "
        "(retry with backoff, re-queue, re-ask, hold for an operator or for compliance, final).",
        **w.common(),
    )
    def parsed_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        out = [parse_results(wh, task, pk) for pk in context.partition_keys]
        # The retry ledger: every failed attempt gets its class's action (retry, re-queue, final, hold).
        plans = [plan_retries(wh, task, pk) for pk in context.partition_keys]
        w.record_table(context, wh, "parsed_results")
        return dg.MaterializeResult(
            metadata={
                "task_ids": ", ".join(s.task_id for s in out),
                "new_parsed": sum(s.parsed for s in out),
                "job_outcomes_applied_to_items": sum(s.synthesized for s in out),
                # results of items frozen under another output version than the task's now (restore or refreeze)
                "refused_output_version": sum(s.refused_version for s in out),
                **summed_dicts((s.by_class for s in out), "outcome_"),
                **summed_dicts((p.by_action for p in plans), "retry_decision_"),
            }
        )

    return parsed_results


def build_stuck_check(w: TaskWiring) -> dg.AssetChecksDefinition:
    name = w.name

    @dg.asset_check(
        asset=w.key("submissions"),
        name=STUCK_CHECK,
        description="No provider job of the task stayed in one state past its SLA (warns with the "
        "stuck jobs, their state and time in it; the provider status sensor marks them).",
    )
    def no_stuck_jobs(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        stuck = stuck_jobs(warehouse.warehouse(), name)
        lines = [
            f"{j['job_key']}: {j['state']} for {format_duration(j['seconds_in_state'])}"
            + (f" ({j['stuck_action']})" if j["stuck_action"] else "")
            for j in stuck
        ]
        return dg.AssetCheckResult(
            passed=not stuck,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "stuck_jobs": "\n".join(lines) or "none",
                "stuck_count": len(stuck),
                "job_keys": ", ".join(j["job_key"] for j in stuck) or "none",
            },
        )

    return no_stuck_jobs
