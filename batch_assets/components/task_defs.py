"""A task's definitions: its eight assets (one builder each), the stuck-jobs check, two jobs and a
schedule. Thin Dagster wiring over batch_assets.pipeline; every asset handles all partition keys of
its run, so a single-run date-range backfill works."""

from __future__ import annotations

import dagster as dg

from batch_assets.components.collect_assets import build_parsed_results, build_raw_results, build_stuck_check
from batch_assets.components.freeze_assets import build_manifest
from batch_assets.components.report_assets import build_report_asset
from batch_assets.components.send_assets import build_shards, build_submissions
from batch_assets.components.settle_assets import build_applied
from batch_assets.components.settled_asset import build_settled
from batch_assets.components.task_jobs import build_daily_schedule, build_jobs
from batch_assets.components.wiring import TaskWiring
from batch_assets.spec.resolve import ResolvedTask

ASSET_BUILDERS = (
    build_manifest,
    build_shards,
    build_submissions,
    build_raw_results,
    build_parsed_results,
    build_applied,
    build_report_asset,
    build_settled,
)


def build_task_defs(task: ResolvedTask) -> dg.Definitions:
    wiring = TaskWiring(task)
    submit_job, collect_job = build_jobs(wiring)
    return dg.Definitions(
        assets=[build(wiring) for build in ASSET_BUILDERS],
        asset_checks=[build_stuck_check(wiring)],
        jobs=[submit_job, collect_job],
        schedules=[build_daily_schedule(wiring, submit_job)],
    )
