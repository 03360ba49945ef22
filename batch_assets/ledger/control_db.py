"""One connection type for the control tables, on DuckDB (`local`) or PostgreSQL (`distributed`).

The control protocols (claims, leases, quota admission) are written once, in the SQL both engines
speak: `?` positional or `$name` named parameters, `now()::TIMESTAMP`, `INTERVAL '…'`,
`FILTER (WHERE …)`, `= ANY(?)`, `ON CONFLICT (…) DO …`. `ControlDB.execute` returns the rows and,
for INSERT / UPDATE / DELETE, the number of rows they touched, the same way on both engines.

`as_control(conn)` wraps a DuckDB connection (the Warehouse's ledger, unchanged) or passes a
ControlDB through, so every ledger function takes either.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from batch_assets.ledger.transaction import transaction

Params = Sequence[Any] | Mapping[str, Any] | None

_DML = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)
_NAMED = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Result:
    rows: list[tuple]
    rowcount: int
    columns: tuple[str, ...] = ()

    def one(self) -> tuple | None:
        return self.rows[0] if self.rows else None

    def scalar(self) -> Any:
        row = self.one()
        return row[0] if row else None

    def dicts(self) -> list[dict]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


def _returns_rows(sql: str) -> bool:
    return not _DML.match(sql) or re.search(r"\bRETURNING\b", sql, re.IGNORECASE) is not None


class DuckControl:
    """The control tables in the Warehouse's DuckDB file (schema `ledger`)."""

    dialect = "duckdb"
    ConflictError: type[Exception] | tuple = duckdb.TransactionException  # another writer committed first

    def __init__(self, conn: duckdb.DuckDBPyConnection):
        self.conn = conn

    def execute(self, sql: str, params: Params = None) -> Result:
        cur = self.conn.execute(sql, params if params is not None else [])
        columns = tuple(d[0] for d in cur.description or ())
        rows = cur.fetchall() if cur.description else []
        if _returns_rows(sql):
            return Result(rows, len(rows), columns)
        # DuckDB answers INSERT / UPDATE / DELETE with one row: the count.
        return Result([], int(rows[0][0]) if rows and rows[0][0] is not None else 0)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[DuckControl]:
        with transaction(self.conn):
            yield self


class PgControl:
    """The control tables in PostgreSQL (schema `ledger`), over one psycopg 3 connection.

    Sessions run in UTC, so `now()::TIMESTAMP` is the same wall clock as the Warehouse's. Outside
    `transaction()` each statement commits on its own (autocommit), as on DuckDB."""

    dialect = "postgres"

    def __init__(self, conn):
        import psycopg

        self.conn = conn
        # Under READ COMMITTED a guarded UPDATE waits for the row and re-checks its WHERE: only a
        # deadlock or a serialization failure asks the caller to decide again.
        self.ConflictError = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)
        conn.autocommit = True
        conn.execute("SET TIME ZONE 'UTC'")

    @staticmethod
    def translate(sql: str, params: Params) -> str:
        """`?` and `$name` to psycopg's `%s` / `%(name)s` (a literal % doubled)."""
        sql = sql.replace("%", "%%")
        if isinstance(params, Mapping):
            return _NAMED.sub(r"%(\1)s", sql)
        return sql.replace("?", "%s")

    def execute(self, sql: str, params: Params = None) -> Result:
        cur = self.conn.execute(self.translate(sql, params), params if params is not None else None)
        columns = tuple(d.name for d in cur.description or ())
        rows = cur.fetchall() if cur.description else []
        return Result(rows, len(rows) if _returns_rows(sql) else max(cur.rowcount, 0), columns)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgControl]:
        with self.conn.transaction():
            yield self


ControlDB = DuckControl | PgControl


def as_control(conn: duckdb.DuckDBPyConnection | ControlDB) -> ControlDB:
    """A ControlDB for `conn`: a DuckDB connection is wrapped, a ControlDB passes through."""
    if isinstance(conn, DuckControl | PgControl):
        return conn
    return DuckControl(conn)


def lease_sql(lease_s: float) -> str:
    """SQL for now + `lease_s` seconds (a number, never text from outside), on both engines."""
    return f"now()::TIMESTAMP + CAST({float(lease_s)!r} AS DOUBLE PRECISION) * INTERVAL '1 second'"


def seconds_ago_sql(seconds: float) -> str:
    return f"now()::TIMESTAMP - CAST({float(seconds)!r} AS DOUBLE PRECISION) * INTERVAL '1 second'"


def connect_postgres(url: str) -> PgControl:
    """A ControlDB on the PostgreSQL at `url` (postgresql://…); the error names the host, never the password."""
    import psycopg

    try:
        return PgControl(psycopg.connect(url, connect_timeout=10))
    except psycopg.OperationalError as exc:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        where = f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path}"
        raise ConnectionError(f"cannot reach the PostgreSQL ledger at {where}: {str(exc).splitlines()[0]}") from None
