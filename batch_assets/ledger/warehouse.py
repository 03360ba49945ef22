"""Short-lived DuckDB connections to the warehouse file, with lock-contention retry.

DuckDB lets one process at a time open a database file for writing, while Dagster runs steps,
sensors and the webserver in separate processes. So every unit of work opens the file, does its
set-based SQL and closes it again; a process that finds the file locked waits and retries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

from batch_assets.ledger import partition_lease
from batch_assets.ledger.binding import bind_publisher, unbind_publisher
from batch_assets.ledger.control_db import ControlDB, DuckControl
from batch_assets.ledger.distributed import (
    bound_ledger,
    control_connection,
    ledger_url_from_env,
    prepare_item_store,
    refuse_item_store_without_ledger,
    refuse_local_ledger,
)
from batch_assets.ledger.file_locks import retry_while_locked
from batch_assets.ledger.partition_stores import STORES_DIR, attach_read_only, blank_ledger, store_path, store_paths
from batch_assets.ledger.schema import latest_version, migrate, refuse_newer, stored_version
from batch_assets.ledger.store_versions import SyncedStore, read_copies
from batch_assets.ledger.transaction import transaction
from batch_assets.storage.objects import ObjectStorage
from batch_assets.storage.run_files import CACHE_DIR, RunFiles
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
    # The task partition whose per-item store connect() opens (with partition stores; see of()).
    partition: str | None = None
    # With partition stores: where their versions are kept (S3); None: on this machine's disk only.
    storage: ObjectStorage | None = None

    @classmethod
    def at(
        cls,
        database: str | Path,
        data_dir: str | Path | None = None,
        memory_limit: str | None = None,
        tables: PgTables | None | str = "env",
        ledger_url: str | None = "env",
        storage: ObjectStorage | None | str = "env",
    ) -> Warehouse:
        """`tables`: where the source and business tables are; "env" reads $BATCH_ASSETS_TABLES_URL.
        `ledger_url`: where the control tables are; "env" reads $BATCH_ASSETS_LEDGER_URL.
        `storage`: the object storage of the partition stores; "env" reads $BATCH_ASSETS_STORAGE_URL."""
        # Absolute: the ledger records file paths, which must not depend on the working directory
        # of the process that wrote them (a relative data dir under `dg launch` recorded `data/...`).
        database = Path(database).absolute()
        return cls(
            database=database,
            data_dir=Path(data_dir).absolute() if data_dir else database.parent,
            memory_limit=memory_limit,
            tables=PgTables.from_env() if tables == "env" else tables,
            ledger_url=ledger_url_from_env() if ledger_url == "env" else ledger_url,
            storage=ObjectStorage.from_env() if storage == "env" else storage,
        )

    @property
    def partition_stores(self) -> bool:
        """Whether each partition's per-item tables are in a store of their own: with the control
        ledger and the tasks' tables both in PostgreSQL (ledger/partition_stores.py). Else one file
        holds them, beside the control tables (`local`) or the tables."""
        return self.ledger_url is not None and self.tables is not None

    def of(self, task_id: str) -> Warehouse:
        """This warehouse for one partition's work: connect() opens its store, writes under its lease."""
        return dataclasses.replace(self, partition=task_id)

    @property
    def store(self) -> Path:
        """The DuckDB file connect() opens: the partition's store, or the warehouse file."""
        if self.partition_stores and self.partition is not None:
            return store_path(self.stores_dir, self.partition)
        return self.database

    @property
    def stores_dir(self) -> Path:
        """The partition stores' folder; with object storage this machine's copies, in the cache."""
        return (self.data_dir / CACHE_DIR if self.storage is not None else self.data_dir) / STORES_DIR

    @property
    def files(self) -> RunFiles:
        """Where manifests, shard and raw result files are kept and found (storage/run_files.py)."""
        return RunFiles(self.data_dir, self.storage)

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
        newer than this code is refused like it is for writers. A file without a ledger is not touched.

        With partition stores: of() a partition, its store (a writer holds the partition's lease);
        else, or a partition without a store yet, the stores' per-item tables read across them."""
        if self.partition_stores and (
            self.partition is None or (read_only and (self.storage is not None or not self.store.exists()))
        ):
            with self._across(read_only=read_only) as conn:
                yield conn
            return
        if not read_only:
            with self._lease(), self._pulled() as synced, self._open(read_only=False) as conn:
                migrate(conn)
                self._check_store(conn)
                with self._bound(conn, read_only=False):
                    if synced is None:
                        yield conn
                        return
                    bind_publisher(conn, synced.publish)
                    try:
                        yield conn
                        if not synced.lost:
                            with transaction(conn):  # what was written outside a transaction() (a migration)
                                pass
                    finally:
                        unbind_publisher(conn)
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
            with self._lease(), self._open(read_only=False) as conn:  # older than this code: upgrade it, then read
                migrate(conn)
                self._check_store(conn)
            upgraded = True

    @contextlib.contextmanager
    def across(self, task_ids: list[str] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read of the per-item tables across partitions (`task_ids`, default every one): with
        partition stores, their stores attached read-only; else the file, read-only."""
        if not self.partition_stores:
            with self.connect(read_only=True) as conn:
                yield conn
            return
        with self._across(read_only=True, task_ids=task_ids) as conn:
            yield conn

    @contextlib.contextmanager
    def _across(self, read_only: bool, task_ids: list[str] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory ledger whose per-item tables are views over the stores (ledger/partition_stores.py),
        bound to the control ledger (read-only when `read_only`)."""
        with self._open(read_only=False, database=":memory:") as conn:
            blank_ledger(conn)
            prepare_item_store(conn, self.database)
            wanted = [self.partition] if self.partition else task_ids
            if self.storage is not None:
                with control_connection(self.ledger_url, read_only=True) as db:
                    stores = read_copies(self.storage, db, self.stores_dir, wanted)
            else:
                stores = store_paths(self.stores_dir, wanted)
            attach_read_only(conn, stores, self.lock_timeout_s)
            with self._bound(conn, read_only=read_only):
                yield conn

    @contextlib.contextmanager
    def _pulled(self) -> Iterator[SyncedStore | None]:
        """With object storage, this machine's copy of the partition's store made its current version
        (ledger/store_versions.py); else nothing to do (None)."""
        if self.storage is None or not (self.partition_stores and self.partition is not None):
            yield None
            return
        synced = SyncedStore(self.storage, self.partition, self.store)
        with control_connection(self.ledger_url, read_only=True) as db:
            synced.pull(db)
        try:
            yield synced
        finally:
            if synced.lost:  # its commits are not the current version's: the next run downloads that
                synced.drop_copy()

    def _lease(self) -> contextlib.AbstractContextManager:
        """The partition's store lease for a write (with partition stores), else nothing to hold."""
        if not (self.partition_stores and self.partition is not None):
            return contextlib.nullcontext()
        url = self.ledger_url
        return partition_lease.leased(
            lambda: control_connection(url, read_only=False),
            self.partition,
            key=url,
            timeout_s=self.lock_timeout_s,
        )

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
            refuse_item_store_without_ledger(conn, self.store)
        elif read_only:
            refuse_local_ledger(conn, self.store)
        else:
            prepare_item_store(conn, self.store)

    @contextlib.contextmanager
    def _bound(self, conn: duckdb.DuckDBPyConnection, read_only: bool) -> Iterator[None]:
        if self.ledger_url is None:
            yield
            return
        with bound_ledger(conn, self.ledger_url, read_only=read_only):
            yield

    @contextlib.contextmanager
    def _open(self, read_only: bool, database: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """The file (`store`, or `database`) opened, waiting out other writers, with the session
        settings; closed after."""
        path = database or self.store
        if database is None:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = retry_while_locked(lambda: duckdb.connect(str(path), read_only=read_only), path, self.lock_timeout_s)
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
