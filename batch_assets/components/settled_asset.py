"""The `settled` asset: a partition's bar is green only when the partition is done, red when it
ended failed or canceled, and empty while work is under way (pipeline.settle.partition_status)."""

import dagster as dg

from batch_assets.components.asset_metadata import per_partition, tag_run
from batch_assets.components.summary_metadata import health
from batch_assets.components.wiring import REPORT_STAGE, SETTLED_STAGE, TaskWiring
from batch_assets.pipeline.settle.partition_status import DONE, UNDER_WAY, partition_status
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.resources import WarehouseResource


def build_settled(w: TaskWiring) -> dg.AssetsDefinition:
    task, name, spec = w.task, w.name, w.task.spec

    @dg.asset(
        key=w.key(SETTLED_STAGE),
        deps=[w.key(REPORT_STAGE)],
        kinds={"duckdb"},
        output_required=False,  # under way: no materialization, the partition stays empty
        description=f"Whether a partition of {name} is done. Materialized (green) only when every item is "
        "final and the reconciliation passed; the run fails (red), naming the verdict and the provider's "
        "reason, when the partition ended failed or canceled; nothing is materialized while work is under "
        "way. The collect job evaluates it after every report.",
        **w.common(),
    )
    def settled(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        statuses = {}
        for pk in context.partition_keys:
            rec = reconcile(wh, task.task_id(pk), spec.retry.max_failed_fraction, spec.empty_source)
            statuses[pk] = (rec, partition_status(rec, rec.verdict()))
        not_done = [s for _, s in statuses.values() if s.state not in (DONE, UNDER_WAY)]
        if not_done:
            raise dg.Failure(
                description="; ".join(s.line() for s in not_done)[:2000],
                metadata={"verdict": "\n".join(s.line() for s in not_done)},
            )
        under_way = [s for _, s in statuses.values() if s.state == UNDER_WAY]
        if under_way:
            for s in under_way:
                context.log.info(f"not settled yet, nothing materialized: {s.line()}")
            return
        per_partition(
            context,
            {pk: {**health(rec), "verdict": status.line()} for pk, (rec, status) in statuses.items()},
        )
        yield dg.MaterializeResult(
            metadata={"final_status": ", ".join(f"{s.task_id}={s.final_status}" for _, s in statuses.values())}
        )

    return settled
