"""The warehouse tables the tasks read and write, as assets: source tables upstream of each task's
manifest, business tables downstream of each task's `applied` step (one asset per table, however
many tasks use it)."""

import dagster as dg

from batch_assets.components.asset_metadata import table_asset_specs
from batch_assets.spec.resolve import load_all_tasks


@dg.definitions
def tables() -> dg.Definitions:
    return dg.Definitions(assets=table_asset_specs(load_all_tasks().values()))
