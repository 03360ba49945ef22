"""`distributed`: the control tables in PostgreSQL, bound to every Warehouse connection.

With $BATCH_ASSETS_LEDGER_URL set (postgresql://…), a Warehouse connection is still the DuckDB file
of the per-item tables, and it carries a PostgreSQL connection for the control tables
(`control_db.CONTROL_TABLES`): `as_control(conn)` returns it, so every ledger function reads and
writes the control rows there without a change in the stages. Connections come from one pool per
URL and process (psycopg-pool), opened lazily; a forked process opens its own.

The DuckDB file then holds no control tables: they are dropped once it is migrated, so a statement
that still read them there would fail loudly instead of reading nothing. A file whose control
tables hold rows (a `local` ledger) is never turned into one, and a file without them is refused
when the URL is unset: either mistake would lose what the ledger records.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import duckdb

from batch_assets.ledger.binding import bind, unbind
from batch_assets.ledger.control_db import CONTROL_TABLES, PgControl
from batch_assets.spec.errors import SettingError

LEDGER_URL_VAR = "BATCH_ASSETS_LEDGER_URL"
POOL_MAX = 8  # connections per process: a run's stage, a sensor's threads


class LedgerStoreError(RuntimeError):
    """The warehouse file and the configured ledger do not belong together (the message says why and the fix)."""


def ledger_url_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """$BATCH_ASSETS_LEDGER_URL, or None (the control tables are in the warehouse file: `local`)."""
    env = os.environ if environ is None else environ
    url = env.get(LEDGER_URL_VAR, "").strip()
    if not url:
        return None
    if urlsplit(url).scheme not in ("postgresql", "postgres"):
        raise SettingError(
            f"{LEDGER_URL_VAR} is not a PostgreSQL URL: expected postgresql://user@host:port/database; "
            "unset it to keep the control ledger in the warehouse DuckDB file"
        )
    return url


def where(url: str) -> str:
    """host:port/database of a ledger URL, without user or password."""
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"


_pools: dict[tuple[str, int], object] = {}
_checked: set[tuple[str, int]] = set()
_guard = threading.Lock()


def _configure(conn) -> None:
    PgControl(conn)  # autocommit, UTC, ISO dates: set once per pooled connection


def _pool(url: str):
    key = (url, os.getpid())
    with _guard:
        pool = _pools.get(key)
        if pool is None:
            import psycopg
            from psycopg_pool import ConnectionPool

            # One direct connection first: an unreachable server fails now, not after the pool's retries.
            psycopg.connect(url, connect_timeout=10).close()

            pool = ConnectionPool(
                url,
                min_size=0,
                max_size=POOL_MAX,
                kwargs={"connect_timeout": 10},
                configure=_configure,
                open=True,
                name="batch_assets_ledger",
            )
            _pools[key] = pool
        return pool


def _ensure_schema(url: str, db: PgControl) -> None:
    """The control schema created or checked once per process and URL."""
    from batch_assets.ledger.control_schema import ensure_control_schema

    key = (url, os.getpid())
    if key in _checked:
        return
    ensure_control_schema(db)
    with _guard:
        _checked.add(key)


@contextlib.contextmanager
def control_connection(url: str, *, read_only: bool) -> Iterator[PgControl]:
    """A pooled PostgreSQL ledger connection, checked against this code's schema; a read-only one
    cannot write (every transaction on it is READ ONLY). The error names the host, never the password."""
    import psycopg
    import psycopg_pool

    try:
        pool = _pool(url)
        conn = pool.getconn(timeout=30)
    except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConnectionError(f"cannot reach the PostgreSQL ledger at {where(url)}: {first}") from None
    try:
        db = PgControl(conn, configure=False)
        _ensure_schema(url, db)
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
        yield db
    finally:
        if read_only and not conn.closed and not conn.info.transaction_status:
            conn.execute("RESET default_transaction_read_only")
        pool.putconn(conn)  # a connection left in a transaction is rolled back there


def _control_tables_present(conn: duckdb.DuckDBPyConnection) -> list[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'ledger' AND table_name = ANY(?)",
        [list(CONTROL_TABLES)],
    ).fetchall()
    return [r[0] for r in rows]


def refuse_local_ledger(conn: duckdb.DuckDBPyConnection, database: Path) -> list[str]:
    """The control tables still in the file (none once it is a per-item store); refused when they
    hold rows: that file is a `local` ledger, whose work the PostgreSQL one would hide, not move."""
    present = _control_tables_present(conn)
    held = [t for t in present if conn.execute(f"SELECT count(*) FROM ledger.{t}").fetchone()[0]]
    if held:
        raise LedgerStoreError(
            f"{database} holds a local control ledger ({', '.join(held)} have rows) and {LEDGER_URL_VAR} is "
            "set: use a new data directory for the distributed ledger, or unset the variable to keep using this file"
        )
    return present


def prepare_item_store(conn: duckdb.DuckDBPyConnection, database: Path) -> None:
    """A migrated warehouse file made a per-item store: its (empty) control tables dropped, once."""
    for table in refuse_local_ledger(conn, database):
        conn.execute(f"DROP TABLE ledger.{table}")


def refuse_item_store_without_ledger(conn: duckdb.DuckDBPyConnection, database: Path) -> None:
    """A per-item store (its control tables dropped) opened with no ledger URL is refused."""
    if not _control_tables_present(conn):
        raise LedgerStoreError(
            f"{database} keeps its control ledger in PostgreSQL: set {LEDGER_URL_VAR} to that ledger's URL "
            "(as when it was created) to use it"
        )


@contextlib.contextmanager
def bound_ledger(conn: duckdb.DuckDBPyConnection, url: str, *, read_only: bool) -> Iterator[PgControl]:
    """`conn` carries a PostgreSQL ledger connection for the block: as_control(conn) returns it."""
    with control_connection(url, read_only=read_only) as db:
        bind(conn, db)
        try:
            yield db
        finally:
            unbind(conn)
