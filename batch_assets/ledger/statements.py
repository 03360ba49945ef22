"""The two INSERT shapes the ledger writers use; both always name their target columns.

* `insert_select` — set-based: the rows come from a query (SELECT text, or `FROM <table/view>`),
  read by column NAME, never by position: `INSERT INTO ledger.t (a, b, c) SELECT a, b, <expr>
  FROM (<query>)`. One statement however many rows; nothing passes through Python.
* `insert_values` — one row from Python values (bound parameters).

`fixed` maps further columns to SQL expressions the writer supplies itself (a timestamp, a quoted
constant), the same for every row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

NOW = "now()::TIMESTAMP"  # ledger times are UTC wall clock (the Warehouse sets TimeZone = 'UTC')


def _count(cur: duckdb.DuckDBPyConnection) -> int:
    row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def insert_select(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[str],
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
    *,
    fixed: Mapping[str, str] | None = None,
    on_conflict: str = "",
) -> int:
    """INSERT INTO ledger.<table> (<columns>, <fixed>) SELECT <columns>, <fixed exprs> FROM (<query>).

    `query` must return (at least) every name in `columns`; `params` are its bound parameters.
    Returns the number of rows inserted."""
    fixed = dict(fixed or {})
    targets = [*columns, *fixed]
    exprs = [*(f"_rows.{c}" for c in columns), *fixed.values()]
    sql = (
        f"INSERT INTO ledger.{table} ({', '.join(targets)})\n"
        f"SELECT {', '.join(exprs)}\nFROM ({query}) AS _rows\n{on_conflict}"
    )
    return _count(conn.execute(sql, params if params is not None else []))


def insert_values(
    conn,
    table: str,
    values: Mapping[str, Any],
    *,
    fixed: Mapping[str, str] | None = None,
    on_conflict: str = "",
) -> int:
    """INSERT INTO ledger.<table> (<names>) VALUES (?, …, <fixed exprs>) for one row; returns rows inserted.
    `conn` is a DuckDB connection or a ControlDB (the control tables on either engine)."""
    from batch_assets.ledger.control_db import as_control

    fixed = dict(fixed or {})
    targets = [*values, *fixed]
    exprs = ["?"] * len(values) + list(fixed.values())
    sql = f"INSERT INTO ledger.{table} ({', '.join(targets)}) VALUES ({', '.join(exprs)})\n{on_conflict}"
    return as_control(conn).execute(sql, list(values.values())).rowcount
