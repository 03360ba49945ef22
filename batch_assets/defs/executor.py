"""Steps of a run execute in one process: DuckDB admits one writing process per file."""

import dagster as dg


@dg.definitions
def executor() -> dg.Definitions:
    return dg.Definitions(executor=dg.in_process_executor)
