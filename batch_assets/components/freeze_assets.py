"""The `manifest` asset: a partition's source rows frozen into input items (pipeline.freeze)."""

import dagster as dg

from batch_assets.components.asset_metadata import (
    business_table_stats_event,
    source_table_keys,
    table_name_metadata,
    tag_run,
)
from batch_assets.components.summary_metadata import by_partition, money, totals
from batch_assets.components.wiring import TaskWiring
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.cost import partition_gates
from batch_assets.pipeline.report.table_stats import STAGE_TABLES, source_tables
from batch_assets.resources import WarehouseResource


class ManifestConfig(dg.Config):
    refreeze: bool = False
    """Re-query the source; unchanged items keep their custom_id, new or changed ones get new ones."""


def build_manifest(w: TaskWiring) -> dg.AssetsDefinition:
    task, name = w.task, w.name

    @dg.asset(
        key=w.key("manifest"),
        kinds={"duckdb", "parquet"},
        deps=source_table_keys(task),
        metadata=table_name_metadata(STAGE_TABLES["manifest"]),
        description=f"The partition's input items of {name}, frozen once: one per source row of the day "
        "(rows without a business id or seen twice are rejected), each with a custom_id and an "
        "input hash. Re-running reuses the frozen items unless `refreeze` is set; then unchanged "
        "items keep their custom_id and changed ones are superseded.",
        **w.common(),
    )
    def manifest(context: dg.AssetExecutionContext, config: ManifestConfig, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        out = [freeze_manifest(wh, task, pk, refreeze=config.refreeze) for pk in context.partition_keys]
        w.record_table(context, wh, "manifest")
        with wh.across([s.task_id for s in out]) as conn:  # what the manifest read: the source tables' columns and rows
            for table in source_tables(task.spec):
                context.log_event(business_table_stats_event(conn, table, wh.tables))
            gates = partition_gates(conn, [s.task_id for s in out])
        return dg.MaterializeResult(
            metadata={
                **by_partition(
                    out,
                    lambda s: {
                        "manifest_version": s.manifest_version,
                        "reused": s.reused,
                        **({"source_read": s.source_read} if s.source_read else {}),
                        **(s.pii.as_metadata() if s.pii else {}),
                        "cost_estimated": money(gates[s.task_id].cost_estimated, task.spec.provider, task.spec.model),
                        "currency": gates[s.task_id].currency or "unknown",
                    },
                ),
                "manifest_uri": dg.MetadataValue.path(out[-1].manifest_uri),
                **totals(out, "items", "new_items", "superseded_items", "rejected_business_ids"),
                "pii_redacted": sum(g.pii_redacted for g in gates.values()),
                "pii_blocked": sum(s.pii.blocked_items for s in out if s.pii),
            }
        )

    return manifest
