"""`batch-assets sql`: one read-only query over the warehouse (business tables and ledger.*)."""

from __future__ import annotations

import sys

from batch_assets.cli import context
from batch_assets.cli.errors import CliError, UsageError, first_paragraph
from batch_assets.cli.output import Field, render


def cmd_sql(args) -> int:
    import duckdb

    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    with context.connect(context.warehouse(args), read_only=True) as conn:
        try:
            cur = conn.execute(args.query)
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
            elif isinstance(exc, duckdb.CatalogException):
                hint = ' (list the tables with `batch-assets sql "SHOW ALL TABLES"`)'
            raise CliError(f"SQL error: {first_paragraph(exc)}{hint}") from exc
    # Columns may repeat a name (SELECT 1 AS a, 2 AS a): key the records by position.
    fields = [
        Field(str(i), header=name, cell=lambda v: "NULL" if v is None else str(v)) for i, name in enumerate(names)
    ]
    render([{str(i): v for i, v in enumerate(row)} for row in rows[: args.limit]], fields, "table")
    if len(rows) > args.limit:
        print(f"(first {args.limit} rows shown; --limit N shows more)", file=sys.stderr)
    return 0
