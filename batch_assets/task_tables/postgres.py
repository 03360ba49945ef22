"""Source and business tables in a PostgreSQL schema, moved to and from DuckDB by COPY.

Rows travel as CSV over COPY, streamed: out of PostgreSQL through pyarrow's CSV reader into a DuckDB
temp table, and out of DuckDB in Arrow batches through pyarrow's CSV writer into a PostgreSQL temp
table. Nothing is written to disk on the way (source rows may hold what the sensitive-data policy
redacts), no row passes through a Python loop, and memory holds one block at a time. Every value
crosses as text, NULL kept apart from '' (CSV quotes an empty string, never a NULL), and is cast on
arrival to the type its column had where it came from.

The connection URL is a secret (it may carry a password): it is kept out of repr, and errors name
the host, port, database and schema only.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import duckdb
import pyarrow as pa
import pyarrow.csv as pa_csv

from batch_assets.spec.errors import SettingError
from batch_assets.sqltext import quote_ident

TABLES_URL_VAR = "BATCH_ASSETS_TABLES_URL"
TABLES_SCHEMA_VAR = "BATCH_ASSETS_TABLES_SCHEMA"
DEFAULT_SCHEMA = "public"
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_NAMED_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
BATCH_ROWS = 50_000  # rows per Arrow batch on the way into PostgreSQL
_BLOCK_BYTES = 1 << 20  # bytes per CSV block pyarrow parses on the way out of PostgreSQL

# PostgreSQL type OIDs (pg_type.oid, fixed for built-in types) -> the DuckDB type a column becomes.
_DUCK_TYPES = {
    16: "BOOLEAN",
    20: "BIGINT",
    21: "SMALLINT",
    23: "INTEGER",
    26: "BIGINT",  # oid
    700: "FLOAT",
    701: "DOUBLE",
    1082: "DATE",
    1083: "TIME",
    1114: "TIMESTAMP",
    1184: "TIMESTAMPTZ",
    114: "JSON",
    3802: "JSON",
    2950: "UUID",
}
_NUMERIC_OID = 1700
# DuckDB types of business columns -> PostgreSQL's (a fixed-size FLOAT[n] array becomes real[]).
_PG_TYPES = {
    "VARCHAR": "text",
    "BIGINT": "bigint",
    "INTEGER": "integer",
    "DOUBLE": "double precision",
    "FLOAT": "real",
    "BOOLEAN": "boolean",
    "JSON": "jsonb",
    "TIMESTAMP": "timestamp",
    "TIMESTAMPTZ": "timestamptz",
    "DATE": "date",
}


class TablesError(RuntimeError):
    """PostgreSQL refused a read or write of a task table (the message names where, never the URL)."""


def duck_type(oid: int, precision: int | None = None, scale: int | None = None) -> str:
    """The DuckDB type for a PostgreSQL column of type `oid` (text for anything not mapped)."""
    if oid == _NUMERIC_OID:
        # An unconstrained numeric holds more digits than a DECIMAL: a double keeps its magnitude.
        return f"DECIMAL({precision},{scale or 0})" if precision and precision <= 38 else "DOUBLE"
    return _DUCK_TYPES.get(oid, "VARCHAR")


def pg_type(duck: str) -> str:
    """The PostgreSQL type for a DuckDB column type (fixed-size and variable lists as arrays)."""
    duck = duck.upper()
    m = re.fullmatch(r"(.+?)\[\d*\]", duck)
    if m:
        return f"{pg_type(m.group(1))}[]"
    if duck.startswith("DECIMAL"):
        return duck.lower().replace("decimal", "numeric")
    return _PG_TYPES.get(duck, "text")


def to_psycopg(sql: str, params: Mapping[str, Any] | None) -> str:
    """DuckDB's `$name` parameters as psycopg's `%(name)s` (a literal % doubled; psycopg reads
    placeholders only when it is given parameters)."""
    if params is None:
        return sql
    return _NAMED_PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


@dataclass(frozen=True)
class PgTables:
    """A PostgreSQL database and schema holding the tasks' source and business tables."""

    url: str = field(repr=False)
    schema: str = DEFAULT_SCHEMA

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PgTables | None:
        """$BATCH_ASSETS_TABLES_URL (postgresql://…) and $BATCH_ASSETS_TABLES_SCHEMA, or None when
        the URL is unset (the tables are in the warehouse DuckDB file). A bad value raises SettingError."""
        env = os.environ if environ is None else environ
        url = env.get(TABLES_URL_VAR, "").strip()
        if not url:
            return None
        if urlsplit(url).scheme not in ("postgresql", "postgres"):
            raise SettingError(
                f"{TABLES_URL_VAR} is not a PostgreSQL URL: expected postgresql://user@host:port/database; "
                "unset it to keep the source and business tables in the warehouse DuckDB file"
            )
        schema = env.get(TABLES_SCHEMA_VAR, "").strip() or DEFAULT_SCHEMA
        if not _SCHEMA_NAME.match(schema):
            raise SettingError(
                f"{TABLES_SCHEMA_VAR}={schema!r} is not a schema name: use letters, digits and _ "
                f"(starting with a letter), or unset it for {DEFAULT_SCHEMA!r}"
            )
        return cls(url=url, schema=schema)

    @property
    def where(self) -> str:
        """host:port/database, schema: where the tables are, without user or password."""
        parts = urlsplit(self.url)
        return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'} (schema {self.schema})"

    def table(self, name: str) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(name)}"

    @contextlib.contextmanager
    def session(self, *, read_only: bool) -> Iterator[Any]:
        """One transaction on the tables' database (committed on exit, rolled back on an error), in
        UTC, with the schema first on the search path (a source query names its tables unqualified).
        `read_only`: the transaction cannot write (a source query runs in one)."""
        import psycopg

        try:
            conn = psycopg.connect(self.url, connect_timeout=10)
        except psycopg.OperationalError as exc:
            raise TablesError(
                f"cannot reach the PostgreSQL tables at {self.where}: {str(exc).splitlines()[0]}"
            ) from None
        try:
            with conn.transaction():
                if read_only:
                    conn.execute("SET TRANSACTION READ ONLY")
                conn.execute("SET LOCAL TIME ZONE 'UTC'")
                conn.execute(f"SET LOCAL search_path TO {quote_ident(self.schema)}, public")
                yield conn
        finally:
            conn.close()

    def publish(self, duck: duckdb.DuckDBPyConnection, name: str, select_sql: str) -> None:
        """The rows of DuckDB query `select_sql` as table `name` of the schema (replacing it): how the
        demo puts its source tables where a deployment keeps them."""
        with self.session(read_only=False) as pg:
            create_if_missing(pg, f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}")
            copy_rows_into(pg, duck, select_sql, name, table=self.table(name))

    def read_query(
        self, duck: duckdb.DuckDBPyConnection, into: str, sql: str, params: Mapping[str, Any] | None = None
    ) -> None:
        """Run one SELECT on PostgreSQL in a read-only transaction; its rows become DuckDB temp table `into`."""
        with self.session(read_only=True) as pg:
            copy_query_into(pg, duck, into, sql, params)


class _CopyStream(io.RawIOBase):
    """The bytes of a `COPY … TO STDOUT` as a readable file (pyarrow's CSV reader reads from it)."""

    def __init__(self, copy, first: bytes):
        self._copy, self._pending = copy, first

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = self._copy.read()
            if not chunk:
                return 0
            self._pending = bytes(chunk)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def copy_query_into(
    pg, duck: duckdb.DuckDBPyConnection, into: str, sql: str, params: Mapping[str, Any] | None = None
) -> int:
    """The rows of PostgreSQL query `sql` (DuckDB-style `$name` parameters) as DuckDB temp table
    `into`, each column cast to the DuckDB type of its PostgreSQL type; returns the row count."""
    query = to_psycopg(re.sub(r";\s*(--[^\n]*\s*)*$", "", sql.strip()), params)
    cur = pg.cursor()
    # The columns and their types: the query planned, no row read.
    cur.execute(f"SELECT * FROM ({query}\n) AS _q LIMIT 0", params)
    columns = [(d.name, duck_type(d.type_code, d.precision, d.scale)) for d in cur.description]
    if len({name for name, _ in columns}) != len(columns):
        raise TablesError(f"the query returns two columns of one name: {[name for name, _ in columns]}")
    typed = ", ".join(f"CAST({quote_ident(n)} AS {t}) AS {quote_ident(n)}" for n, t in columns)
    with cur.copy(f"COPY ({query}\n) TO STDOUT (FORMAT csv)", params) as copy:
        first = b""
        while not first:
            chunk = copy.read()
            if not chunk:
                break
            first = bytes(chunk)
        if not first:
            cols = ", ".join(f"{quote_ident(n)} {t}" for n, t in columns)
            duck.execute(f"CREATE OR REPLACE TEMP TABLE {quote_ident(into)} ({cols})")
            return 0
        reader = pa_csv.open_csv(
            io.BufferedReader(_CopyStream(copy, first), buffer_size=_BLOCK_BYTES),
            read_options=pa_csv.ReadOptions(
                column_names=[n for n, _ in columns], use_threads=False, block_size=_BLOCK_BYTES
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types={n: pa.string() for n, _ in columns},
                strings_can_be_null=True,  # an unquoted empty field is NULL
                quoted_strings_can_be_null=False,  # "" is the empty string
            ),
        )
        duck.register("_pg_copy_stream", reader)
        try:
            duck.execute(f"CREATE OR REPLACE TEMP TABLE {quote_ident(into)} AS SELECT {typed} FROM _pg_copy_stream")
        finally:
            duck.unregister("_pg_copy_stream")
    return duck.execute(f"SELECT count(*) FROM {quote_ident(into)}").fetchall()[0][0]


def _as_text_sql(name: str, duck_type_: str) -> str:
    """A DuckDB column as the text PostgreSQL's COPY reads for its type (arrays as {…})."""
    col = quote_ident(name)
    if duck_type_.endswith("]"):
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE '{{' || array_to_string({col}, ',') || '}}' END"
    return f"CAST({col} AS VARCHAR)"


def create_if_missing(pg, *statements: str) -> None:
    """Run `CREATE … IF NOT EXISTS` statements in a savepoint of `pg`'s transaction. Two sessions
    creating one object at the same moment both pass IF NOT EXISTS, and the later commit fails on
    PostgreSQL's catalog; that one finds the object made instead of failing."""
    import psycopg

    try:
        with pg.transaction():
            for statement in statements:
                pg.execute(statement)
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable, psycopg.errors.DuplicateSchema):
        pass  # made by the other session, committed before this one could see it


def copy_rows_into(
    pg, duck: duckdb.DuckDBPyConnection, select_sql: str, into: str, *, table: str | None = None
) -> dict[str, str]:
    """The rows of DuckDB query `select_sql` as PostgreSQL temp table `into` (dropped at commit), its
    columns typed like DuckDB's; `table`: into that table instead (qualified, created, replacing one
    of that name). Returns {column: PostgreSQL type}."""
    described = duck.execute(f"DESCRIBE SELECT * FROM ({select_sql}) AS _r").fetchall()
    columns = {row[0]: row[1] for row in described}
    pg_types = {name: pg_type(t) for name, t in columns.items()}
    cols = ", ".join(f"{quote_ident(n)} {t}" for n, t in pg_types.items())
    if table is None:
        target = quote_ident(into)
        pg.execute(f"CREATE TEMP TABLE {target} ({cols}) ON COMMIT DROP")
    else:
        target = table
        pg.execute(f"DROP TABLE IF EXISTS {target}")
        pg.execute(f"CREATE TABLE {target} ({cols})")
    text = ", ".join(f"{_as_text_sql(n, t)} AS {quote_ident(n)}" for n, t in columns.items())
    batches = duck.sql(f"SELECT {text} FROM ({select_sql}) AS _r").to_arrow_reader(BATCH_ROWS)
    options = pa_csv.WriteOptions(include_header=False)  # strings quoted, NULL left empty
    with pg.cursor().copy(f"COPY {target} FROM STDIN (FORMAT csv)") as copy:
        for batch in batches:
            sink = io.BytesIO()
            pa_csv.write_csv(batch, sink, options)
            copy.write(sink.getbuffer())
    return pg_types


def run(pg, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple]:
    """One statement on PostgreSQL (DuckDB-style `$name` parameters); its rows, if any."""
    cur = pg.execute(to_psycopg(sql, params), params)
    return cur.fetchall() if cur.description else []
