"""The business table a task writes: its columns, typed from the output schema, and its creation."""

from __future__ import annotations

import duckdb

from batch_assets.spec.output_schema import field_sql_type
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import quote_ident, sql_literal


def column_type(task: ResolvedTask, field: str) -> str:
    if task.spec.output.kind == "embedding" and field == "embedding":
        return f"FLOAT[{int(task.spec.output.dimensions)}]"  # a fixed-size array: array_cosine_similarity works on it
    return field_sql_type(task.output_schema, field)


def value_sql(task: ResolvedTask, field: str, json_sql: str, key: str) -> str:
    """The typed value of `key` in the JSON `json_sql`, as the business column of output `field` holds it."""
    sql_type = column_type(task, field)
    path = sql_literal("$." + key)
    if sql_type == "JSON":
        return f"{json_sql} -> {path}"
    if "[" in sql_type:
        return f"CAST({json_sql} -> {path} AS {sql_type})"
    return f"CAST({json_sql} ->> {path} AS {sql_type})"


def ensure_target_table(conn: duckdb.DuckDBPyConnection, task: ResolvedTask) -> None:
    apply = task.spec.apply
    cols = ", ".join(f"{quote_ident(c)} {column_type(task, f)}" for c, f in apply.columns.items())
    conn.execute(f"""
        CREATE TABLE IF NOT EXISTS main.{quote_ident(apply.table)} (
            {quote_ident(apply.key)} VARCHAR NOT NULL,
            {cols},
            output_version VARCHAR NOT NULL,
            custom_id VARCHAR NOT NULL,
            input_hash VARCHAR NOT NULL,
            task_id VARCHAR NOT NULL,
            applied_at TIMESTAMP NOT NULL,
            PRIMARY KEY ({quote_ident(apply.key)}, output_version)
        )
    """)
