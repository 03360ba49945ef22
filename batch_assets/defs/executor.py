"""The runs' executor, chosen by $BATCH_ASSETS_EXECUTOR (spec/settings.py): in process by default,
since DuckDB admits one writing process per file."""

import dagster as dg

from batch_assets.spec.settings import executor_name

EXECUTORS = {"in_process": dg.in_process_executor, "multiprocess": dg.multiprocess_executor}


@dg.definitions
def executor() -> dg.Definitions:
    return dg.Definitions(executor=EXECUTORS[executor_name()])
