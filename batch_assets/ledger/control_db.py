"""One connection type for the control tables, on DuckDB (`local`) or PostgreSQL (`distributed`).

The control protocols (claims, leases, quota admission) are written once, in the SQL both engines
speak: `?` positional or `$name` named parameters, `now()::TIMESTAMP`, `INTERVAL '…'`,
`FILTER (WHERE …)`, `= ANY(?)`, `ON CONFLICT (…) DO …`. `ControlDB.execute` returns the rows and,
for INSERT / UPDATE / DELETE, the number of rows they touched, the same way on both engines.

`as_control(conn)` wraps a DuckDB connection (the Warehouse's ledger, unchanged) or passes a
ControlDB through, so every ledger function takes either. `ControlDB.arrow` returns a query's rows
as an Arrow table with the same column types on both engines: what a stage joins with its
partition's per-item tables in DuckDB (`registered`), never SQL across the two.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from batch_assets.ledger.binding import bound_control
from batch_assets.ledger.transaction import transaction

Params = Sequence[Any] | Mapping[str, Any] | None

# The tables the control protocols read and write (tasks, shards, provider jobs and their events,
# claims and leases, quota admission, operator actions, partition store leases): in PostgreSQL in
# `distributed`.
CONTROL_TABLES = (
    "batch_task",
    "shard",
    "provider_job",
    "status_event",
    "quota_account",
    "operator_action",
    "account_pause",
    "dry_run",
    "remote_file_deletion",
    "partition_lease",
    "partition_store",
    "partition_summary",
    "run_request",
)

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

    def arrow(self, sql: str, params: Params = None) -> pa.Table:
        self.conn.complete()  # a result of execute() left unread blocks sql(); reading it to its end is harmless
        return self.conn.sql(sql, params=params if params is not None else None).to_arrow_table()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[DuckControl]:
        with transaction(self.conn):
            yield self


class PgControl:
    """The control tables in PostgreSQL (schema `ledger`), over one psycopg 3 connection.

    Sessions run in UTC, so `now()::TIMESTAMP` is the same wall clock as the Warehouse's. Outside
    `transaction()` each statement commits on its own (autocommit), as on DuckDB."""

    dialect = "postgres"

    def __init__(self, conn, *, configure: bool = True):
        """`configure`: set the session up (a pooled connection was set up once, when opened)."""
        import psycopg

        self.conn = conn
        # Under READ COMMITTED a guarded UPDATE waits for the row and re-checks its WHERE: only a
        # deadlock or a serialization failure asks the caller to decide again.
        self.ConflictError = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)
        if not configure:
            return
        conn.autocommit = True
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("SET DateStyle = 'ISO, YMD'")  # CAST(date AS VARCHAR) is 'YYYY-MM-DD', as on DuckDB

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

    def arrow(self, sql: str, params: Params = None) -> pa.Table:
        """The rows as Arrow, typed from PostgreSQL's column types (not guessed from the values)."""
        cur = self.conn.execute(self.translate(sql, params), params if params is not None else None)
        names = [d.name for d in cur.description or ()]
        types = [_PG_ARROW.get(d.type_code, pa.string()) for d in cur.description or ()]
        rows = cur.fetchall()
        columns = [pa.array([r[i] for r in rows], type=types[i]) for i in range(len(names))]
        return pa.Table.from_arrays(columns, schema=pa.schema(list(zip(names, types, strict=True))))

    def copy_into_temp(self, name: str, like: str, rows: pa.Table) -> None:
        """A temp table `name` with `rows` (Arrow), its columns typed as those of table `like`, filled
        by COPY FROM STDIN. `name` and `like` are the ledger's own names, never text from outside."""
        columns = ", ".join(rows.column_names)
        self.execute(f"CREATE TEMP TABLE {name} AS SELECT {columns} FROM {like} WITH NO DATA")
        with self.conn.cursor().copy(f"COPY {name} ({columns}) FROM STDIN") as copy:
            for batch in rows.to_batches():
                for row in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                    copy.write_row(row)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgControl]:
        with self.conn.transaction():
            yield self


# PostgreSQL type OIDs of the types the control tables and their queries use -> the Arrow type DuckDB gives.
_PG_ARROW = {
    16: pa.bool_(),
    20: pa.int64(),
    21: pa.int16(),
    23: pa.int32(),
    25: pa.string(),
    1043: pa.string(),
    700: pa.float32(),
    701: pa.float64(),
    1700: pa.float64(),
    1082: pa.date32(),
    1114: pa.timestamp("us"),
}


ControlDB = DuckControl | PgControl


def as_control(conn: duckdb.DuckDBPyConnection | ControlDB) -> ControlDB:
    """A ControlDB for `conn`: a ControlDB passes through; a DuckDB connection gives the PostgreSQL
    ledger bound to it (`distributed`), else the control tables in its own file (`local`)."""
    if isinstance(conn, DuckControl | PgControl):
        return conn
    return bound_control(conn) or DuckControl(conn)


def local_control(conn: duckdb.DuckDBPyConnection | ControlDB) -> ControlDB:
    """The DuckDB file's own tables, whatever ledger is bound: where the per-item tables are."""
    if isinstance(conn, DuckControl | PgControl):
        return conn
    return DuckControl(conn)


def lease_sql(lease_s: float) -> str:
    """SQL for now + `lease_s` seconds (a number, never text from outside), on both engines."""
    return f"now()::TIMESTAMP + CAST({float(lease_s)!r} AS DOUBLE PRECISION) * INTERVAL '1 second'"


def epoch_sql(expr: str) -> str:
    """Seconds since 1970 of a TIMESTAMP expression, as DOUBLE on both engines."""
    return f"CAST(extract(epoch FROM {expr}) AS DOUBLE PRECISION)"


def day_sql(expr: str) -> str:
    """A DATE expression as 'YYYY-MM-DD' text on both engines."""
    return f"CAST({expr} AS VARCHAR)"


# Arrow type -> DuckDB type of the temp table `registered` creates (control rows use only these).
_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.large_string(): "VARCHAR",
    pa.null(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.date32(): "DATE",
    pa.timestamp("us"): "TIMESTAMP",
}


@contextlib.contextmanager
def registered(conn: duckdb.DuckDBPyConnection, name: str, rows: pa.Table) -> Iterator[str]:
    """Control rows (from `ControlDB.arrow`) as a DuckDB temp table `name` for the block, to join
    with the partition's per-item tables. The rows go in as one list parameter per column, not as a
    registered Arrow table: DuckDB's Arrow scan fails on a connection of a sensor tick's thread
    while a run's connection is open in another (python_arrow_scan not found)."""
    kinds = [_DUCK_TYPES.get(f.type, "VARCHAR") for f in rows.schema]
    columns = ", ".join(f"unnest(?::{k}[]) AS {n}" for n, k in zip(rows.column_names, kinds, strict=True))
    conn.complete()  # a result of execute() left unread blocks the next statement's parameters
    conn.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {columns}", [c.to_pylist() for c in rows.columns])
    try:
        yield name
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {name}")


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
