"""Copies of a partition's ledger rows under other days: the ledger history that
`batch-assets bench --history N` measures the per-partition and per-tick checks against.

Every ledger table with a task_id gets, per day, the partition's rows again with every VARCHAR that
holds the partition's `YYYYMMDD` rewritten (task_id, custom_id, shard id, job key, file key, ...),
so keys stay unique; the partition date moves to that day, and its provider jobs are created on
that day and long collected, as in a ledger that has been running. Set-based: one INSERT per table.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from batch_assets.ledger.transaction import transaction
from batch_assets.sqltext import quote_ident


def copy_partition_rows(conn: duckdb.DuckDBPyConnection, day: str, days: Sequence[str],
                        source: str | None = None) -> dict[str, int]:
    """Copy the rows of the partition of `day` (YYYY-MM-DD) under each of `days` (YYYY-MM-DD, earlier
    ones). `source`: the catalog to copy from (an attached database with the same ledger schema, e.g.
    the partition finished while this one is not); default the connection's own. Returns each ledger
    table's row count afterwards."""
    ymd = day.replace("-", "")
    catalog = source or conn.execute("SELECT current_database()").fetchone()[0]
    tables = [r[0] for r in conn.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'ledger' "
        "AND table_name <> 'schema_version' ORDER BY 1", [catalog]).fetchall()]
    # One transaction per table and day: a copy is a benchmark's set-up, and one transaction of
    # every table's rows for nine 1M partitions ran out of memory at its commit.
    for table in tables:
        cols = conn.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ? "
                            "AND schema_name = 'ledger' AND table_name = ? ORDER BY column_index",
                            [catalog, table]).fetchall()
        if "task_id" not in {c for c, _ in cols}:
            continue

        def value(col: str, sql_type: str) -> str:
            if table == "batch_task" and col == "partition_date":
                return "CAST(d.day AS DATE)"
            if table == "provider_job" and col == "created_at":
                return f"x.created_at - (DATE '{day}' - CAST(d.day AS DATE)) * INTERVAL 1 DAY"
            if table == "provider_job" and col == "collected_at":
                return "coalesce(x.collected_at, now()::TIMESTAMP)"
            if sql_type == "VARCHAR":
                return f"replace(x.{col}, '{ymd}', strftime(CAST(d.day AS DATE), '%Y%m%d'))"
            return f"x.{col}"

        names = ", ".join(c for c, _ in cols)
        for other in days:
            with transaction(conn):
                conn.execute(f"""
                    INSERT INTO ledger.{table} ({names})
                    SELECT {", ".join(value(c, t) for c, t in cols)}
                    FROM {quote_ident(catalog)}.ledger.{table} x, (SELECT ?::VARCHAR AS day) d
                    WHERE x.task_id LIKE '%{ymd}'
                """, [other])
    return {t: conn.execute(f"SELECT count(*) FROM ledger.{t}").fetchone()[0] for t in tables}
