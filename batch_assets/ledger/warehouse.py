"""Short-lived DuckDB connections to the warehouse file, with lock-contention retry.

DuckDB lets one process at a time open a database file for writing, while Dagster runs steps,
sensors and the webserver in separate processes. So every unit of work opens the file, does its
set-based SQL and closes it again; a process that finds the file locked waits and retries.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

from batch_assets.ledger.control_db import ControlDB, DuckControl
from batch_assets.ledger.distributed import (
    bound_ledger,
    control_connection,
    ledger_url_from_env,
    prepare_item_store,
    refuse_item_store_without_ledger,
    refuse_local_ledger,
)
from batch_assets.ledger.schema import latest_version, migrate, refuse_newer, stored_version
from batch_assets.task_tables.postgres import PgTables

log = logging.getLogger(__name__)

# How long a writer waits for another process to release the file before giving up.
DEFAULT_LOCK_TIMEOUT_S = 300.0
# A bounded pool (DuckDB's own default is 80% of RAM) makes large stages spill instead of holding every
# prompt and response in memory; it bounds the buffer pool only, not the interpreter and libraries.
DEFAULT_MEMORY_LIMIT = "1000MB"
MEMORY_LIMIT_ENV = "BATCH_ASSETS_DUCKDB_MEMORY_LIMIT"
_MEMORY_LIMIT_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$", re.IGNORECASE)
_UNIT_BYTES = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
# Evicted blocks' memory returns to the OS at once only when one eviction frees more than DuckDB's
# allocator_bulk_deallocation_flush_threshold; a quarter of the pool lowers a large stage's peak.
_BULK_FLUSH_SHARE = 4
_BULK_FLUSH_MAX_BYTES = 512 * 2**20


def memory_limit(value: str | None = None) -> str:
    """The DuckDB memory limit (`value`, else the environment's, else the default), validated: it
    reaches SQL, so it is never pasted raw."""
    source = "memory_limit" if value is not None else MEMORY_LIMIT_ENV
    value = (value if value is not None else os.environ.get(MEMORY_LIMIT_ENV, DEFAULT_MEMORY_LIMIT)).strip()
    if not _MEMORY_LIMIT_RE.match(value):
        raise ValueError(f"{source}={value!r} is not a memory size. Fix: set it like 2GB, 1500MB or 4GiB")
    return value


def bulk_flush_threshold(limit: str) -> int:
    """The bytes one eviction must free for DuckDB to return freed memory to the OS at once: a
    quarter of the pool `limit` (a memory_limit() value), at most DuckDB's default."""
    number, unit = _MEMORY_LIMIT_RE.match(limit).groups()
    return max(1, min(_BULK_FLUSH_MAX_BYTES, int(float(number) * _UNIT_BYTES[unit.lower()]) // _BULK_FLUSH_SHARE))


def _is_lock_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return "lock" in text.lower() and ("Conflicting" in text or "Could not set lock" in text)


_lock_waits = 0
_lock_waits_guard = threading.Lock()


def lock_waits() -> int:
    """How many times this process found the warehouse file locked by another process and waited
    (counted once per `Warehouse.connect` that had to wait)."""
    return _lock_waits


def _record_lock_wait(database: Path, timeout_s: float) -> None:
    global _lock_waits
    with _lock_waits_guard:
        _lock_waits += 1
    log.info("warehouse %s is locked by another process; waiting up to %.0f s", database, timeout_s)


@dataclass(frozen=True)
class Warehouse:
    """Where the DuckDB file and the run-time files (manifests, shards, raw outputs) live, and the
    tasks' source and business tables: in the DuckDB file (`tables` None) or in PostgreSQL."""

    database: Path
    data_dir: Path
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
    # DuckDB's pool for this warehouse's connections; None: BATCH_ASSETS_DUCKDB_MEMORY_LIMIT or the default.
    memory_limit: str | None = None
    tables: PgTables | None = None
    # `distributed`: the control tables' PostgreSQL (postgresql://…); None: in the DuckDB file (`local`).
    ledger_url: str | None = None

    @classmethod
    def at(
        cls,
        database: str | Path,
        data_dir: str | Path | None = None,
        memory_limit: str | None = None,
        tables: PgTables | None | str = "env",
        ledger_url: str | None = "env",
    ) -> Warehouse:
        """`tables`: where the source and business tables are; "env" reads $BATCH_ASSETS_TABLES_URL.
        `ledger_url`: where the control tables are; "env" reads $BATCH_ASSETS_LEDGER_URL."""
        # Absolute: the ledger records file paths, which must not depend on the working directory
        # of the process that wrote them (a relative data dir under `dg launch` recorded `data/...`).
        database = Path(database).absolute()
        return cls(
            database=database,
            data_dir=Path(data_dir).absolute() if data_dir else database.parent,
            memory_limit=memory_limit,
            tables=PgTables.from_env() if tables == "env" else tables,
            ledger_url=ledger_url_from_env() if ledger_url == "env" else ledger_url,
        )

    def path(self, *parts: str) -> Path:
        """A run-time file path under data_dir; parent folders are created."""
        p = self.data_dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open the file (waiting out other writers), migrate the ledger, yield, close.

        A read-only connection cannot migrate, so a ledger older than this code is first upgraded
        through a short write connection (readers would otherwise meet missing columns), and one
        newer than this code is refused like it is for writers. A file without a ledger is not touched."""
        if not read_only:
            with self._open(read_only=False) as conn:
                migrate(conn)
                self._check_store(conn)
                with self._bound(conn, read_only=False):
                    yield conn
            return
        upgraded = False
        while True:
            with self._open(read_only=True) as conn:
                version = stored_version(conn)
                refuse_newer(version)
                # A file without a ledger (version 0) is left alone: readers say it holds no batch work yet.
                if upgraded or not 0 < version < latest_version():
                    if version:
                        self._check_store(conn, read_only=True)
                    with self._bound(conn, read_only=True):
                        yield conn
                    return
            with self._open(read_only=False) as conn:  # older than this code: upgrade it, then read
                migrate(conn)
                self._check_store(conn)
            upgraded = True

    @contextlib.contextmanager
    def control(self, read_only: bool = False) -> Iterator[ControlDB]:
        """The control tables alone. `distributed`: a pooled PostgreSQL connection, the warehouse file
        not opened, so a run's claims and provider records never wait for another process's lock on
        it; `local`: the file, as connect() opens it."""
        if self.ledger_url is None:
            with self.connect(read_only=read_only) as conn:
                yield DuckControl(conn)
            return
        with control_connection(self.ledger_url, read_only=read_only) as db:
            yield db

    def _check_store(self, conn: duckdb.DuckDBPyConnection, read_only: bool = False) -> None:
        """`distributed`: the file holds per-item tables only (made so once); `local`: it holds the
        control tables. The other way round is refused (ledger/distributed.py)."""
        if self.ledger_url is None:
            refuse_item_store_without_ledger(conn, self.database)
        elif read_only:
            refuse_local_ledger(conn, self.database)
        else:
            prepare_item_store(conn, self.database)

    @contextlib.contextmanager
    def _bound(self, conn: duckdb.DuckDBPyConnection, read_only: bool) -> Iterator[None]:
        if self.ledger_url is None:
            yield
            return
        with bound_ledger(conn, self.ledger_url, read_only=read_only):
            yield

    @contextlib.contextmanager
    def _open(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """The file opened (waiting out other writers) with the session settings; closed after."""
        self.database.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.05
        waited = False
        while True:
            try:
                conn = duckdb.connect(str(self.database), read_only=read_only)
                break
            except (duckdb.IOException, duckdb.ConnectionException) as exc:
                if not _is_lock_conflict(exc) or time.monotonic() > deadline:
                    raise
                if not waited:
                    waited = True
                    _record_lock_wait(self.database, self.lock_timeout_s)
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
        try:
            # Ledger times are UTC wall clock (now()::TIMESTAMP), whatever the machine's zone.
            conn.execute("SET TimeZone = 'UTC'")
            limit = memory_limit(self.memory_limit)
            conn.execute("SET memory_limit = ?", [limit])
            conn.execute("SET allocator_bulk_deallocation_flush_threshold = ?", [f"{bulk_flush_threshold(limit)}B"])
            yield conn
        finally:
            conn.close()


def fetch_dicts(conn: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None) -> list[dict]:
    """Run a query and return its rows as dicts (for small result sets only)."""
    cur = conn.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


def scalar(conn: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None):
    row = conn.execute(sql, params or []).fetchone()
    return row[0] if row else None
