"""The tables a task reads and writes, and what they hold: names, columns and row counts.

Dagster-free. The asset layer turns these into table metadata (table name, column schema, row
count) so every asset that writes a table says which one, with what columns and how many rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from batch_assets.spec.model import TaskSpec

# The ledger table each pipeline stage writes its rows to (one row per item, line or outcome).
STAGE_TABLES = {
    "manifest": "ledger.manifest_item",
    "shards": "ledger.shard_line",
    "raw_results": "ledger.raw_result",
    "parsed_results": "ledger.parsed_result",
    "applied": "ledger.applied_result",
}
BUSINESS_SCHEMA = "main"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class TableStats:
    table: str  # schema.table
    columns: tuple[Column, ...]  # empty when the table does not exist (yet)
    rows: int  # ledger table: the task's rows (every partition); else all rows
    partition_rows: int | None = None  # the rows of the partitions asked about (None: not countable)


def source_tables(spec: TaskSpec) -> list[str]:
    """The tables the task's source query reads: `source.tables` if given, else the tables DuckDB's
    parser finds in the query (common table expressions and table functions are not tables);
    sorted, schema-qualified only outside the `main` schema."""
    if spec.source.tables:
        return sorted(dict.fromkeys(spec.source.tables))
    with duckdb.connect(":memory:") as conn:  # parsed, not bound: the tables need not exist here
        tree = json.loads(conn.execute("SELECT json_serialize_sql(?)", [spec.source.sql]).fetchone()[0])
    if tree.get("error"):
        return []
    tables: set[str] = set()
    ctes: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE" and node.get("table_name"):
                schema = node.get("schema_name") or ""
                tables.add(node["table_name"] if schema in ("", BUSINESS_SCHEMA) else f"{schema}.{node['table_name']}")
            for entry in (node.get("cte_map") or {}).get("map", []):
                ctes.add(entry.get("key", ""))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tree.get("statements", []))
    return sorted(tables - ctes)


def qualified(table: str) -> str:
    return table if "." in table else f"{BUSINESS_SCHEMA}.{table}"


def table_columns(conn: duckdb.DuckDBPyConnection, table: str) -> tuple[Column, ...]:
    schema, name = qualified(table).split(".", 1)
    rows = conn.execute(
        """
        SELECT column_name, data_type, is_nullable = 'YES' FROM information_schema.columns
        WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position""",
        [schema, name],
    ).fetchall()
    return tuple(Column(n, t, bool(null)) for n, t, null in rows)


def existing_columns(database: Path, tables: Iterable[str]) -> dict[str, tuple[Column, ...]]:
    """The columns of `tables` (qualified names) in the warehouse file as it is now; {} when the file
    does not exist yet or another process holds it (the next observation then brings them)."""
    if not database.is_file():
        return {}
    try:
        with duckdb.connect(str(database), read_only=True) as conn:
            return {t: cols for t in tables if (cols := table_columns(conn, t))}
    except duckdb.Error:
        return {}


def ledger_table_stats(conn: duckdb.DuckDBPyConnection, table: str, task_name: str, task_ids: list[str]) -> TableStats:
    """A ledger table's columns, its rows of every partition of the task (task_id `<name>_YYYYMMDD`;
    task names are lower-case letters, digits and '_') and its rows of `task_ids`."""
    columns = table_columns(conn, table)
    if not columns:
        return TableStats(table, columns, 0, 0)
    rows, partition_rows = conn.execute(
        f"SELECT count(*), count(*) FILTER (task_id IN (SELECT unnest($ids))) FROM {table} "
        "WHERE regexp_full_match(task_id, $pattern)",
        {"ids": task_ids, "pattern": task_name + r"_\d{8}"},
    ).fetchone()
    return TableStats(table, columns, int(rows), int(partition_rows))


def business_table_stats(conn: duckdb.DuckDBPyConnection, table: str, task_ids: list[str] | None = None) -> TableStats:
    """A business (or source) table's columns and rows; with task_ids, also the rows those
    partitions wrote (the table's task_id column, which the apply step fills)."""
    name = qualified(table)
    columns = table_columns(conn, name)
    if not columns:
        return TableStats(name, columns, 0)
    rows = int(conn.execute(f"SELECT count(*) FROM {_quoted(name)}").fetchone()[0])
    partition_rows = None
    if task_ids is not None and any(c.name == "task_id" for c in columns):
        partition_rows = int(
            conn.execute(
                f"SELECT count(*) FROM {_quoted(name)} WHERE task_id IN (SELECT unnest(?))", [task_ids]
            ).fetchone()[0]
        )
    return TableStats(name, columns, rows, partition_rows)


def pg_table_stats(tables, table: str, task_ids: list[str] | None = None) -> TableStats:
    """business_table_stats for a table of the PostgreSQL tables' schema (`tables`: a PgTables)."""
    from batch_assets.task_tables.postgres import run

    name = table.split(".")[-1]
    qualified_name = f"{tables.schema}.{name}"
    with tables.session(read_only=True) as pg:
        rows = run(
            pg,
            "SELECT column_name, data_type, is_nullable = 'YES' FROM information_schema.columns "
            "WHERE table_schema = $schema AND table_name = $name ORDER BY ordinal_position",
            {"schema": tables.schema, "name": name},
        )
        columns = tuple(Column(n, t, bool(null)) for n, t, null in rows)
        if not columns:
            return TableStats(qualified_name, columns, 0)
        count = int(run(pg, f"SELECT count(*) FROM {tables.table(name)}")[0][0])
        partition_rows = None
        if task_ids is not None and any(c.name == "task_id" for c in columns):
            partition_rows = int(
                run(pg, f"SELECT count(*) FROM {tables.table(name)} WHERE task_id = ANY($ids)", {"ids": task_ids})[0][0]
            )
    return TableStats(qualified_name, columns, count, partition_rows)


def task_table_stats(
    conn: duckdb.DuckDBPyConnection, table: str, task_ids: list[str] | None = None, tables=None
) -> TableStats:
    """A task's source or business table's stats, wherever the tables live (`tables`: PgTables or None)."""
    if tables is not None:
        return pg_table_stats(tables, table, task_ids)
    return business_table_stats(conn, table, task_ids)


def _quoted(table: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in table.split("."))


def business_table_columns(task) -> tuple[Column, ...]:
    """The columns the apply step gives the task's business table (its DDL, run in memory)."""
    from batch_assets.pipeline.settle.business_table import ensure_target_table

    with duckdb.connect(":memory:") as conn:
        ensure_target_table(conn, task)
        return table_columns(conn, task.spec.apply.table)
