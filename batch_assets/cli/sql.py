"""`batch-assets sql`: one read-only query over the warehouse (business tables and ledger.*).

Read-only means more than DuckDB's `read_only=True`, which still lets `COPY … TO` write any file (a
raw result file, the only verbatim copy of a provider's answers, was overwritten that way). So:

1. Only ONE statement of DuckDB's SELECT type is run: `SELECT`, `WITH … SELECT`, `FROM t`, `VALUES`,
   `SHOW`, `DESCRIBE`, `SUMMARIZE`. COPY, EXPORT, ATTACH, INSTALL/LOAD, SET, PRAGMA, CALL, EXPLAIN,
   writes and several statements are refused before the warehouse is opened (`check_query`).
2. The connection runs with `enable_external_access = false` and `lock_configuration = true`: no
   file outside the warehouse is read or written even from inside a SELECT (`read_csv`,
   `read_parquet`, `glob`, …), and no statement can switch that back.
"""

from __future__ import annotations

import sys

from batch_assets.cli import context
from batch_assets.cli.errors import CliError, UsageError, first_paragraph
from batch_assets.cli.output import Field, render

SHOW_TABLES = 'batch-assets sql "SHOW ALL TABLES"'

# Why a statement type is refused, and what to do instead (by DuckDB StatementType name).
_REFUSED = {
    "COPY": "COPY writes or reads files; print the rows with a SELECT, or write a partition's CSV with "
    "`batch-assets export <task_id> --out FILE`",
    "EXPORT": "EXPORT writes files; back the warehouse up by copying its file while nothing runs",
    "ATTACH": "ATTACH opens other database files; query this warehouse's tables",
    "DETACH": "DETACH changes the open databases; query this warehouse's tables",
    "LOAD": "INSTALL and LOAD change DuckDB's extensions; use the built-in functions",
    "SET": "SET, RESET and USE change the connection's settings; write the query without them",
    "PRAGMA": f"PRAGMA runs commands; list the tables with `{SHOW_TABLES}` or describe one with DESCRIBE",
    "CALL": f"CALL runs commands; select from a table function instead (`SELECT * FROM fn(...)`) or `{SHOW_TABLES}`",
    "EXPLAIN": "EXPLAIN (ANALYZE) is not a query; run the SELECT itself",
    "MULTI": "a PIVOT without an IN list first creates a type; name the values: `PIVOT t ON col IN (a, b)`",
}


def check_query(query: str) -> str:
    """The query if it is exactly one statement of DuckDB's SELECT type; else a CliError saying why
    and what to run instead. A syntax error is a CliError quoting DuckDB's parser."""
    import duckdb

    with duckdb.connect(":memory:") as parser:
        try:
            statements = parser.extract_statements(query)
        except duckdb.Error as exc:
            raise CliError(f"SQL error: {first_paragraph(exc)}") from exc
    if not statements:
        raise CliError('no SQL statement given; write one query, e.g. "SELECT * FROM ticket_labels LIMIT 5"')
    if len(statements) > 1:
        raise CliError(f"`sql` runs one statement, got {len(statements)}; run each query in its own `batch-assets sql`")
    kind = statements[0].type.name
    if kind != "SELECT":
        why = _REFUSED.get(kind, f"{kind} statements change the warehouse; `sql` runs queries only")
        raise CliError(f"`sql` is read-only and runs one SELECT (or WITH … SELECT) query: {why}")
    return query


def cmd_sql(args) -> int:
    import duckdb

    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    from batch_assets.ledger.distributed import LEDGER_URL_VAR

    query = check_query(args.query)
    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        # No file outside the warehouse from here on, and no statement can change that back.
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")
        try:
            cur = conn.execute(query)
            if cur.description is None:
                raise CliError(
                    "the statement returned no rows to show; `sql` runs queries (SELECT, SHOW, "
                    "DESCRIBE, ...) on a read-only connection"
                )
            names = [d[0] for d in cur.description]
            rows = cur.fetchmany(args.limit + 1)
        except duckdb.Error as exc:
            hint = ""
            if "read-only" in str(exc):
                hint = " (`sql` opens the warehouse read-only: queries only)"
            elif isinstance(exc, duckdb.PermissionException):
                hint = " (`sql` reads the warehouse's tables only: no file is read or written)"
            elif isinstance(exc, duckdb.CatalogException) and wh.ledger_url is not None:
                hint = f" (the control tables are in the PostgreSQL ledger, {LEDGER_URL_VAR}: query them with psql)"
            elif isinstance(exc, duckdb.CatalogException):
                hint = f" (list the tables with `{SHOW_TABLES}`)"
            raise CliError(f"SQL error: {first_paragraph(exc)}{hint}") from exc
    # Columns may repeat a name (SELECT 1 AS a, 2 AS a): key the records by position.
    fields = [
        Field(str(i), header=name, cell=lambda v: "NULL" if v is None else str(v)) for i, name in enumerate(names)
    ]
    render([{str(i): v for i, v in enumerate(row)} for row in rows[: args.limit]], fields, "table")
    if len(rows) > args.limit:
        print(f"(first {args.limit} rows shown; --limit N shows more)", file=sys.stderr)
    return 0
