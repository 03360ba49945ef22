"""The `retention` asset and job: provider-side deletions that failed are tried again, and local
shard / raw files of final partitions past each task's `retention.local_days` are purged (raw files
kept gzip-compressed). Logic in pipeline/retention.py; a daily schedule, stopped by default."""

import dagster as dg

from batch_assets.pipeline.govern.retention import run_retention
from batch_assets.resources import ProvidersResource, WarehouseResource
from batch_assets.spec.resolve import load_tasks


@dg.asset(
    name="retention",
    group_name="governance",
    kinds={"duckdb"},
    description="Retention across every task: provider-side input/output/error files still pending deletion "
    "are deleted through each provider's SDK (every try recorded in ledger.remote_file_deletion), "
    "and the local shard files of final partitions older than the task's retention.local_days are "
    "deleted, their raw result files gzip-compressed (the only verbatim copy of the answers). "
    "Ledger rows and hashes stay.",
)
def retention(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, providers: ProvidersResource
) -> dg.MaterializeResult:
    # The tasks that load (a broken task's files wait until it loads again: its retention is unknown).
    run = run_retention(warehouse.warehouse(), load_tasks().tasks, providers.adapter)
    for job_key, error in run.remote.failed.items():
        context.log.warning(f"{job_key}: provider files not deleted (tried again next run): {error}")
    return dg.MaterializeResult(metadata=run.metadata())


retention_job = dg.define_asset_job(
    "retention_job",
    selection=dg.AssetSelection.assets(retention),
    description="Delete pending provider-side files and purge old local files.",
)


@dg.schedule(
    name="retention_daily",
    cron_schedule="30 3 * * *",
    target=retention_job,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Runs the retention job every day at 03:30 UTC. Stopped by default: start it to purge daily.",
)
def retention_daily(context: dg.ScheduleEvaluationContext):
    return dg.RunRequest(run_key=f"retention:{context.scheduled_execution_time:%Y-%m-%d}")
