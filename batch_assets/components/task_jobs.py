"""A task's two jobs (submit, collect: the provider status sensor launches its runs under them) and
its daily schedule."""

from __future__ import annotations

from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

import dagster as dg

from batch_assets.components.asset_metadata import TAG_PARTITION, TAG_PROVIDER, TAG_TASK, task_partition_tag
from batch_assets.components.wiring import COLLECT_STAGES, REPORT_STAGE, SETTLED_STAGE, SUBMIT_STAGES, TaskWiring


def build_jobs(w: TaskWiring) -> tuple[dg.UnresolvedAssetJobDefinition, dg.UnresolvedAssetJobDefinition]:
    job_tags = {TAG_TASK: w.name, TAG_PROVIDER: w.task.spec.provider}
    submit_job = dg.define_asset_job(
        f"{w.name}__submit",
        selection=dg.AssetSelection.assets(*[w.key(s) for s in SUBMIT_STAGES]),
        description=f"Freeze, shard and submit one partition of {w.name}.",
        tags=job_tags,
    )
    collect_job = dg.define_asset_job(
        f"{w.name}__collect",
        selection=dg.AssetSelection.assets(*[w.key(s) for s in (*COLLECT_STAGES, REPORT_STAGE, SETTLED_STAGE)]),
        description=f"Download, parse and apply the results of {w.name}'s terminal provider jobs, report, and "
        "mark the partition settled when it is done.",
        tags=job_tags,
    )
    return submit_job, collect_job


def build_daily_schedule(w: TaskWiring, submit_job) -> dg.ScheduleDefinition:
    """The last complete partition (a UTC day) at each tick, ticking at the task's `schedule:` (its
    cron in its time zone, default 01:00 UTC), stopped until someone starts it. Not
    dg.build_schedule_from_partitioned_job: in Dagster 1.13 its ticks call the deprecated
    JobDefinition.run_request_for_partition (a DeprecationWarning on every tick)."""
    name, when = w.name, w.task.spec.schedule

    @dg.schedule(
        name=f"{name}__daily",
        cron_schedule=when.cron,
        target=submit_job,
        execution_timezone=when.timezone,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Freezes and submits the last complete day's partition of {name} at `{when.cron}` "
        f"({when.timezone}). Stopped by default: start it to run the task daily.",
    )
    def schedule(context: dg.ScheduleEvaluationContext):
        # Partitions are UTC days: the last one complete at the tick (a naive time is the zone's own).
        at = context.scheduled_execution_time
        at = at.replace(tzinfo=ZoneInfo(when.timezone)) if at.tzinfo is None else at
        day = (at.astimezone(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")
        return dg.RunRequest(
            run_key=f"{name}:{day}", partition_key=day, tags={TAG_PARTITION: day, **task_partition_tag(name, day)}
        )

    return schedule
