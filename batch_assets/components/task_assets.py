"""A task's assets, checks, jobs and schedule (SPEC §3): thin Dagster wiring over batch_assets.pipeline."""


import dagster as dg

from batch_assets.components.partitions import daily_partitions
from batch_assets.pipeline.apply import apply_results
from batch_assets.pipeline.ingest import collect_raw_results
from batch_assets.pipeline.manifest import freeze_manifest
from batch_assets.pipeline.parse import parse_results
from batch_assets.pipeline.reconcile import reconcile
from batch_assets.pipeline.shards import cut_shards, verify_shards
from batch_assets.pipeline.submit import submit_pending
from batch_assets.resources import ProvidersResource, WarehouseResource
from batch_assets.spec.resolve import ResolvedTask

SUBMIT_STAGES = ("manifest", "shards", "submissions")
COLLECT_STAGES = ("raw_results", "parsed_results", "applied")
SHARDS_CHECK = "shards_within_limits"
RECONCILIATION_CHECK = "reconciliation"


class ManifestConfig(dg.Config):
    refreeze: bool = False
    """Re-query the source; unchanged items keep their custom_id, new or changed ones get new ones."""


def collect_asset_keys(task_name: str) -> list[dg.AssetKey]:
    return [dg.AssetKey([task_name, stage]) for stage in COLLECT_STAGES]


def build_task_defs(task: ResolvedTask) -> dg.Definitions:
    spec = task.spec
    name = spec.name
    key = lambda stage: dg.AssetKey([name, stage])  # noqa: E731
    common = dict(group_name=name, partitions_def=daily_partitions)

    @dg.asset(key=key("manifest"), kinds={"duckdb", "parquet"},
              description=f"Frozen input manifest of {name} for the partition (reused unless refreeze).", **common)
    def manifest(context: dg.AssetExecutionContext, config: ManifestConfig, warehouse: WarehouseResource):
        s = freeze_manifest(warehouse.warehouse(), task, context.partition_key, refreeze=config.refreeze)
        return dg.MaterializeResult(metadata={
            "task_id": s.task_id, "manifest_uri": dg.MetadataValue.path(s.manifest_uri),
            "manifest_version": s.manifest_version, "items": s.items, "new_items": s.new_items,
            "superseded_items": s.superseded_items, "rejected_business_ids": s.rejected_business_ids,
            "reused": s.reused, "dagster/row_count": s.items,
        })

    @dg.asset(key=key("shards"), deps=[key("manifest")], kinds={"duckdb", "json"},
              description=f"Provider-ready JSONL shards of {name}, cut by {spec.provider} limits; bad lines quarantined.",
              check_specs=[dg.AssetCheckSpec(SHARDS_CHECK, asset=key("shards"), blocking=True,
                                             description="Every shard file within limits and intact; lines + quarantined = items.")],
              **common)
    def shards(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        wh = warehouse.warehouse()
        s = cut_shards(wh, task, context.partition_key)
        problems, counts = verify_shards(wh, task, context.partition_key)
        return dg.MaterializeResult(
            metadata={"task_id": s.task_id, "new_shards": len(s.new_shards), "new_lines": s.lines,
                      "newly_quarantined": s.quarantined, "total_shards": s.total_shards, **counts},
            check_results=[dg.AssetCheckResult(check_name=SHARDS_CHECK, passed=not problems,
                                               metadata={"problems": "\n".join(problems) or "none", **counts})],
        )

    @dg.asset(key=key("submissions"), deps=[key("shards")], kinds={spec.provider},
              description=f"One {spec.provider} batch per shard; intent recorded before every create call.", **common)
    def submissions(context: dg.AssetExecutionContext, warehouse: WarehouseResource, providers: ProvidersResource):
        s = submit_pending(warehouse.warehouse(), task, context.partition_key, providers.adapter(spec.provider))
        return dg.MaterializeResult(metadata={
            "task_id": s.task_id, "submitted": len(s.submitted), "recovered_after_crash": len(s.recovered),
            "waiting_for_capacity": s.waiting_for_capacity, "already_submitted": s.already_submitted,
        })

    @dg.asset(key=key("raw_results"), deps=[key("submissions")], kinds={spec.provider, "duckdb"},
              description="Output and error files of terminal jobs, downloaded, kept and loaded by custom_id.", **common)
    def raw_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource, providers: ProvidersResource):
        s = collect_raw_results(warehouse.warehouse(), task, context.partition_key, providers.adapter(spec.provider))
        return dg.MaterializeResult(metadata={
            "task_id": s.task_id, "downloaded_files": s.downloaded_files, "ingested_files": s.ingested_files,
            "new_lines": s.lines, **{f"lines_{k}": v for k, v in s.by_status.items()},
        })

    @dg.asset(key=key("parsed_results"), deps=[key("raw_results")], kinds={"duckdb"},
              description="Answers checked against the output schema; failures classified (SPEC §6).", **common)
    def parsed_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        s = parse_results(warehouse.warehouse(), task, context.partition_key)
        return dg.MaterializeResult(metadata={
            "task_id": s.task_id, "new_parsed": s.parsed, "job_outcomes_applied_to_items": s.synthesized,
            **{f"outcome_{k}": v for k, v in s.by_class.items()},
        })

    @dg.asset(key=key("applied"), deps=[key("parsed_results")], kinds={"duckdb", "table"},
              description=f"Usable answers written once into {spec.apply.table}; stale inputs held back.",
              check_specs=[dg.AssetCheckSpec(RECONCILIATION_CHECK, asset=key("applied"),
                                             description="The SPEC §3 reconciliation equation over the ledger.")],
              **common)
    def applied(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        wh = warehouse.warehouse()
        s = apply_results(wh, task, context.partition_key)
        r = reconcile(wh, s.task_id)
        problems = r.problems()
        return dg.MaterializeResult(
            metadata={"task_id": s.task_id, "target_table": s.target_table, "newly_applied": s.applied,
                      "newly_stale": s.stale},
            check_results=[dg.AssetCheckResult(
                check_name=RECONCILIATION_CHECK, passed=not problems,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={"problems": "\n".join(problems) or "balanced", **r.as_metadata()},
            )],
        )

    submit_job = dg.define_asset_job(
        f"{name}__submit", selection=dg.AssetSelection.assets(*[key(s) for s in SUBMIT_STAGES]),
        description=f"Freeze, shard and submit one partition of {name}.",
    )
    collect_job = dg.define_asset_job(
        f"{name}__collect", selection=dg.AssetSelection.assets(*[key(s) for s in COLLECT_STAGES]),
        description=f"Download, parse and apply the results of {name}'s terminal provider jobs.",
    )
    schedule = dg.build_schedule_from_partitioned_job(
        submit_job, hour_of_day=1, name=f"{name}__daily",
        description=f"Freezes and submits yesterday's partition of {name} every day at 01:00.",
    )
    return dg.Definitions(
        assets=[manifest, shards, submissions, raw_results, parsed_results, applied],
        jobs=[submit_job, collect_job], schedules=[schedule],
    )
