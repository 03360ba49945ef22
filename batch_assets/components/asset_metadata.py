"""Dagster conventions shared by every task's assets: owners and tags from the task spec, table
metadata (table name, column schema, row counts), run tags, and the warehouse tables a task reads
and writes as assets of their own (source tables upstream of the manifest, business tables
downstream of `applied`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import dagster as dg

from batch_assets.pipeline.report.table_stats import (
    BUSINESS_SCHEMA,
    Column,
    TableStats,
    business_table_columns,
    qualified,
    source_tables,
    task_table_stats,
)
from batch_assets.spec.resolve import ResolvedTask

TAG_TASK, TAG_PARTITION = "batch_assets/task", "batch_assets/partition"
TAG_PROVIDER = "batch_assets/provider"  # on every run of a task's jobs: the run queue's cap per provider
# `<task>:<day>`, set at launch by the status sensors and the schedules: the run queue's limit of one
# run per task partition (deploy/dagster.yaml); the partition lease in the ledger guards any launch.
TAG_TASK_PARTITION = "batch_assets/task_partition"
TAG_PRIORITY = "batch_assets/priority"  # low | normal | high | urgent: overrides the task's priority for one run
TABLES_GROUP = "warehouse"


# --- owners and tags ---------------------------------------------------------------------------


def task_owners(task: ResolvedTask) -> list[str]:
    return list(task.spec.owners)


def task_tags(task: ResolvedTask) -> dict[str, str]:
    """The spec's `tags:` plus the task and its provider (the spec cannot rename those two)."""
    return {**task.spec.tags, TAG_TASK: task.name, TAG_PROVIDER: task.spec.provider}


def task_partition_tag(task_name: str, day: str) -> dict[str, str]:
    return {TAG_TASK_PARTITION: f"{task_name}:{day}"}


# --- run tags ----------------------------------------------------------------------------------


def partition_tag_value(partition_keys: list[str]) -> str:
    """One day, or `first...last` for a run over a range of days."""
    return partition_keys[0] if len(partition_keys) == 1 else f"{partition_keys[0]}...{partition_keys[-1]}"


def tag_run(context: dg.AssetExecutionContext, task_name: str) -> None:
    """Give a run the tags the provider status sensor gives its runs (task, partition), whoever
    launched it (UI, CLI, schedule), so runs of a partition can be found by the same tags."""
    tags = {TAG_TASK: task_name, TAG_PARTITION: partition_tag_value(context.partition_keys)}
    missing = {k: v for k, v in tags.items() if context.run.tags.get(k) is None}
    if missing:
        context.instance.add_run_tags(context.run.run_id, missing)


# --- table metadata ----------------------------------------------------------------------------


def column_schema(columns: Iterable[Column]) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[
            dg.TableColumn(c.name, c.type, constraints=dg.TableColumnConstraints(nullable=c.nullable)) for c in columns
        ]
    )


def table_metadata(stats: TableStats) -> dict:
    """`dagster/table_name`, `dagster/column_schema`, `dagster/row_count` (and the partition's rows)."""
    out = {"dagster/table_name": stats.table, "dagster/row_count": stats.rows}
    if stats.columns:
        out["dagster/column_schema"] = dg.MetadataValue.table_schema(column_schema(stats.columns))
    if stats.partition_rows is not None:
        out["dagster/partition_row_count"] = stats.partition_rows
    return out


def business_table_stats_event(conn, table: str, tables=None) -> dg.AssetObservation:
    """An observation of a task's source table (in the warehouse or, `tables`, PostgreSQL): its columns and rows now."""
    return dg.AssetObservation(
        asset_key=table_key(table), metadata=table_metadata(task_table_stats(conn, table, tables=tables))
    )


def table_name_metadata(table: str) -> dict:
    return {"dagster/table_name": qualified(table)}


def per_partition(context: dg.AssetExecutionContext, metadata_by_partition: Mapping[str, Mapping]) -> None:
    """Metadata on each partition's own materialization (a run over a range of days records one
    materialization per day; each gets its own numbers instead of the run's totals)."""
    for partition_key, metadata in metadata_by_partition.items():
        context.add_asset_metadata(dict(metadata), partition_key=partition_key)


# --- warehouse tables as assets ------------------------------------------------------------------


def table_key(table: str) -> dg.AssetKey:
    """`warehouse/<table>` for a table of the main schema, `warehouse/<schema>/<table>` otherwise."""
    schema, name = qualified(table).split(".", 1)
    return dg.AssetKey(["warehouse", name] if schema == BUSINESS_SCHEMA else ["warehouse", schema, name])


def source_table_keys(task: ResolvedTask) -> list[dg.AssetKey]:
    return [table_key(t) for t in source_tables(task.spec)]


def business_table_key(task: ResolvedTask) -> dg.AssetKey:
    return table_key(task.spec.apply.table)


def _common_tags(tasks: list[ResolvedTask]) -> dict[str, str]:
    """The spec tags every one of `tasks` gives with the same value."""
    first, *rest = [t.spec.tags for t in tasks]
    return {k: v for k, v in first.items() if all(other.get(k) == v for other in rest)}


def _owners(tasks: list[ResolvedTask]) -> list[str]:
    return list(dict.fromkeys(o for t in tasks for o in t.spec.owners))


def table_asset_specs(
    tasks: Iterable[ResolvedTask], source_columns: dict[str, tuple[Column, ...]] | None = None
) -> list[dg.AssetSpec]:
    """One external asset per warehouse table the tasks read or write: a table read by several
    tasks (or read by one and written by another) is one asset with all of them as neighbours.
    A business table's columns come from its task's output schema; a source table's from
    `source_columns` (the warehouse as it was at load), so the overview shows them."""
    readers: dict[str, list[ResolvedTask]] = {}
    writers: dict[str, list[ResolvedTask]] = {}
    for task in tasks:
        for table in source_tables(task.spec):
            readers.setdefault(qualified(table), []).append(task)
        writers.setdefault(qualified(task.spec.apply.table), []).append(task)
    specs = []
    for table in sorted(readers.keys() | writers.keys()):
        read_by, written_by = readers.get(table, []), writers.get(table, [])
        related = written_by + [t for t in read_by if t not in written_by]
        lines = []
        if written_by:
            lines.append(
                f"Business table written by {', '.join(t.name for t in written_by)} (its `applied` step): one "
                "row per business key and output version, holding usable answers only, each written "
                "once; an answer whose source row changed since the manifest froze it is not written."
            )
        if read_by:
            lines.append(
                f"Source table read by the manifest of {', '.join(t.name for t in read_by)}: each "
                "partition takes the rows of its day, as the task's source query selects them."
            )
        lines.append("Not materialized by Dagster: rows and columns are observed when a task reads or writes it.")
        metadata = dict(table_name_metadata(table))
        if len(written_by) == 1:
            metadata["dagster/column_schema"] = dg.MetadataValue.table_schema(
                column_schema(business_table_columns(written_by[0]))
            )
        elif not written_by and (source_columns or {}).get(table):
            metadata["dagster/column_schema"] = dg.MetadataValue.table_schema(column_schema(source_columns[table]))
        specs.append(
            dg.AssetSpec(
                key=table_key(table),
                description="\n\n".join(lines),
                kinds={"duckdb", "table"},
                group_name=written_by[0].name if len(written_by) == 1 else TABLES_GROUP,
                deps=[dg.AssetKey([t.name, "applied"]) for t in written_by],
                owners=_owners(related),
                tags=_common_tags(related),
                metadata=metadata,
            )
        )
    return specs
