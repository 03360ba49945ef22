"""What every builder of a task's assets shares: the task, its asset keys, the arguments every asset
takes (group, daily partitions, single-run backfills, owners, tags) and the stage and check names."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from batch_assets.components.asset_metadata import per_partition, table_metadata, task_owners, task_tags
from batch_assets.components.partitions import daily_partitions
from batch_assets.pipeline.report.table_stats import STAGE_TABLES, ledger_table_stats
from batch_assets.spec.resolve import ResolvedTask

SUBMIT_STAGES = ("manifest", "shards", "submissions")
COLLECT_STAGES = ("raw_results", "parsed_results", "applied")
REPORT_STAGE = "report"  # run by the collect job after `applied`
SETTLED_STAGE = "settled"  # run by the collect job last: green only when the partition is done
SHARDS_CHECK = "shards_within_limits"
RECONCILIATION_CHECK = "reconciliation"
STUCK_CHECK = "no_stuck_jobs"


@dataclass(frozen=True)
class TaskWiring:
    task: ResolvedTask

    @property
    def name(self) -> str:
        return self.task.spec.name

    def key(self, stage: str) -> dg.AssetKey:
        return dg.AssetKey([self.name, stage])

    def common(self) -> dict:
        """Keyword arguments of every asset of the task. single_run: a date range (UI backfill or
        `dg launch --partition-range`) runs as one run; every asset loops over context.partition_keys."""
        return dict(
            group_name=self.name,
            partitions_def=daily_partitions,
            backfill_policy=dg.BackfillPolicy.single_run(),
            owners=task_owners(self.task),
            tags=task_tags(self.task),
        )

    def record_table(self, context: dg.AssetExecutionContext, wh, stage: str) -> None:
        """Table name, columns and rows (the task's, and each partition's) of the stage's ledger table."""
        with wh.across([self.task.task_id(pk) for pk in context.partition_keys]) as conn:
            per_partition(
                context,
                {
                    pk: table_metadata(
                        ledger_table_stats(conn, STAGE_TABLES[stage], self.name, [self.task.task_id(pk)])
                    )
                    for pk in context.partition_keys
                },
            )


def collect_asset_keys(task_name: str) -> list[dg.AssetKey]:
    """The assets of a task's collect job: collection stages, the report, then whether it is settled."""
    return [dg.AssetKey([task_name, stage]) for stage in (*COLLECT_STAGES, REPORT_STAGE, SETTLED_STAGE)]
