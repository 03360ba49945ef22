"""Copies of a partition's rows under other days: the ledger history that `batch-assets bench
--history N` measures the per-partition and per-tick checks and the apply stage against.

Every ledger table with a task_id gets, per day, the partition's rows again with every VARCHAR that
holds the partition's `YYYYMMDD` rewritten (task_id, custom_id, shard id, job key, file key, ...),
so keys stay unique; the partition date moves to that day, and its provider jobs are created on
that day and long collected, as in a ledger that has been running. Set-based: one INSERT per table
and day (`shifted_copy_sql`, which the benchmark also uses for its business and source tables).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb

from batch_assets.ledger.transaction import transaction
from batch_assets.sqltext import quote_ident


def shifted_sql(col: str, day: str) -> str:
    """Column `col` of the copied row (alias x), a date or time, moved from `day` to the copy's day."""
    return f"x.{quote_ident(col)} - (DATE '{day}' - CAST(d.day AS DATE)) * INTERVAL 1 DAY"


def shifted_copy_sql(
    target: str,
    source: str,
    cols: Sequence[tuple[str, str]],
    day: str,
    special: Mapping[str, str] | None = None,
    where: str = "TRUE",
) -> str:
    """INSERT INTO `target` the rows of `source` (alias x; `where` filters them) again under another
    day, the statement's one parameter (YYYY-MM-DD, alias d.day): each VARCHAR column holding `day`'s
    YYYYMMDD gets that day's instead. `cols`: (name, type) of the columns; `special`: a column's own
    expression instead."""
    ymd = day.replace("-", "")
    special = special or {}

    def value(col: str, sql_type: str) -> str:
        if col in special:
            return special[col]
        if sql_type == "VARCHAR":
            return f"replace(x.{quote_ident(col)}, '{ymd}', strftime(CAST(d.day AS DATE), '%Y%m%d'))"
        return f"x.{quote_ident(col)}"

    return f"""
        INSERT INTO {target} ({", ".join(quote_ident(c) for c, _ in cols)})
        SELECT {", ".join(value(c, t) for c, t in cols)}
        FROM {source} x, (SELECT ?::VARCHAR AS day) d
        WHERE {where}
    """


def copy_partition_rows(
    conn: duckdb.DuckDBPyConnection, day: str, days: Sequence[str], source: str | None = None
) -> dict[str, int]:
    """Copy the rows of the partition of `day` (YYYY-MM-DD) under each of `days` (YYYY-MM-DD, earlier
    ones). `source`: the catalog to copy from (an attached database with the same ledger schema, e.g.
    the partition finished while this one is not); default the connection's own. Returns each ledger
    table's row count afterwards."""
    ymd = day.replace("-", "")
    catalog = source or conn.execute("SELECT current_database()").fetchone()[0]
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'ledger' "
            "AND table_name <> 'schema_version' ORDER BY 1",
            [catalog],
        ).fetchall()
    ]
    special = {
        "batch_task": {"partition_date": "CAST(d.day AS DATE)"},
        "provider_job": {
            "created_at": shifted_sql("created_at", day),
            "collected_at": "coalesce(x.collected_at, now()::TIMESTAMP)",
        },
    }
    # One transaction per table and day: a copy is a benchmark's set-up, and one transaction of
    # every table's rows for many large partitions runs out of memory at its commit.
    for table in tables:
        cols = conn.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ? "
            "AND schema_name = 'ledger' AND table_name = ? ORDER BY column_index",
            [catalog, table],
        ).fetchall()
        if "task_id" not in {c for c, _ in cols}:
            continue
        sql = shifted_copy_sql(
            f"ledger.{table}",
            f"{quote_ident(catalog)}.ledger.{table}",
            cols,
            day,
            special.get(table),
            where=f"x.task_id LIKE '%{ymd}'",
        )
        for other in days:
            with transaction(conn):
                conn.execute(sql, [other])
    return {t: conn.execute(f"SELECT count(*) FROM ledger.{t}").fetchone()[0] for t in tables}
