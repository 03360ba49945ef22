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


def _target(conn, table: str):
    """Where ledger.<table> is: a control table in the bound ledger (PostgreSQL in `distributed`),
    a per-item table in the DuckDB file."""
    from batch_assets.ledger.control_db import CONTROL_TABLES, as_control, local_control

    return as_control(conn) if table in CONTROL_TABLES else local_control(conn)


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
    Returns the number of rows inserted. `conn` is a DuckDB connection or a ControlDB; the query runs
    where the rows go, so on PostgreSQL it may only read tables there."""
    fixed = dict(fixed or {})
    targets = [*columns, *fixed]
    exprs = [*(f"_rows.{c}" for c in columns), *fixed.values()]
    sql = (
        f"INSERT INTO ledger.{table} ({', '.join(targets)})\n"
        f"SELECT {', '.join(exprs)}\nFROM ({query}) AS _rows\n{on_conflict}"
    )
    return _target(conn, table).execute(sql, params).rowcount


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
    fixed = dict(fixed or {})
    targets = [*values, *fixed]
    exprs = ["?"] * len(values) + list(fixed.values())
    sql = f"INSERT INTO ledger.{table} ({', '.join(targets)}) VALUES ({', '.join(exprs)})\n{on_conflict}"
    return _target(conn, table).execute(sql, list(values.values())).rowcount


def insert_rows(conn, table: str, rows, *, fixed: Mapping[str, str] | None = None, on_conflict: str = "") -> int:
    """INSERT rows handed over as an Arrow table (its column names are the target columns) into
    ledger.<table>, plus the `fixed` columns; returns rows inserted. On DuckDB the table is read in
    place; on PostgreSQL it is copied in (COPY FROM STDIN) and inserted in one statement."""
    from batch_assets.ledger.control_db import registered

    db = _target(conn, table)
    if db.dialect == "duckdb":
        with registered(db.conn, "_insert_rows", rows):
            return insert_select(db, table, rows.column_names, "SELECT * FROM _insert_rows", fixed=fixed,
                                 on_conflict=on_conflict)  # fmt: skip
    with db.transaction():
        db.copy_into_temp("_insert_rows", f"ledger.{table}", rows)
        try:
            return insert_select(db, table, rows.column_names, "SELECT * FROM _insert_rows", fixed=fixed,
                                 on_conflict=on_conflict)  # fmt: skip
        finally:
            db.execute("DROP TABLE _insert_rows")
