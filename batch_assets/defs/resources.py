"""The resources every task shares (paths and provider endpoints from the environment)."""

import dagster as dg

from batch_assets.resources import default_resources


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=default_resources())
