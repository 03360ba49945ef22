"""The `report` asset: each partition's report as metadata and an HTML page (pipeline.report)."""

import dagster as dg

from batch_assets.components.asset_metadata import per_partition, tag_run
from batch_assets.components.wiring import REPORT_STAGE, TaskWiring
from batch_assets.ledger.tasks import task_ids
from batch_assets.pipeline.report.partition_report import (
    build_report,
    publish_report,
    report_markdown,
    report_numbers,
    summary_line,
)
from batch_assets.pipeline.settle.reconcile import COLLECTING
from batch_assets.resources import WarehouseResource


def build_report_asset(w: TaskWiring) -> dg.AssetsDefinition:
    task, name, spec = w.task, w.name, w.task.spec

    @dg.asset(
        key=w.key(REPORT_STAGE),
        deps=[w.key("applied")],
        kinds={"html"},
        description=f"A report per partition of {name}: items by final outcome (final failures by class), "
        "open items, retries, tokens in and out, estimated and actual cost, queue, run and total "
        "time, time in each provider state, completion rate and, while work is under way, an "
        "ETA. Shown as tables and plottable numbers on each partition's materialization and "
        "written as an HTML page with charts to <data dir>/reports/<task_id>.html.",
        **w.common(),
    )
    def report(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        with wh.across([task.task_id(pk) for pk in context.partition_keys]) as conn:
            known = set(task_ids(conn))
            reports = {
                pk: build_report(conn, task.task_id(pk), spec.retry.max_failed_fraction, empty_source=spec.empty_source)
                for pk in context.partition_keys
                if task.task_id(pk) in known
            }
        per_partition(
            context,
            {
                pk: {"task_id": task.task_id(pk), "status": "no manifest frozen yet"}
                for pk in context.partition_keys
                if pk not in reports
            },
        )
        paths = {pk: publish_report(r, wh.files) for pk, r in reports.items()}
        per_partition(
            context,
            {
                pk: {
                    "task_id": r.task_id,
                    "status": r.verdict.final_status
                    or ("collecting" if r.verdict.status == COLLECTING else "in progress"),
                    "summary": summary_line(r),
                    **report_numbers(r),
                    "report": dg.MetadataValue.md(report_markdown(r)),
                    "report_path": dg.MetadataValue.path(paths[pk]),
                }
                for pk, r in reports.items()
            },
        )
        return dg.MaterializeResult(metadata={"task_ids": ", ".join(task.task_id(pk) for pk in context.partition_keys)})

    return report
