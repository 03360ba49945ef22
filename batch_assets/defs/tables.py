"""The warehouse tables the tasks read and write, as assets: source tables upstream of each task's
manifest, business tables downstream of each task's `applied` step (one asset per table, however
many tasks use it)."""

from pathlib import Path

import dagster as dg

from batch_assets.components.asset_metadata import table_asset_specs
from batch_assets.pipeline.report.table_stats import existing_columns, qualified, source_tables
from batch_assets.resources import database_from_env
from batch_assets.spec.resolve import load_tasks


@dg.definitions
def tables() -> dg.Definitions:
    # The tasks that load: a broken one shows as its own error definition (components/broken_task.py).
    tasks = list(load_tasks().tasks.values())
    # Source tables' columns as the warehouse holds them now, for the overview (observations follow).
    sources = {qualified(t) for task in tasks for t in source_tables(task.spec)}
    return dg.Definitions(assets=table_asset_specs(tasks, existing_columns(Path(database_from_env()), sources)))
