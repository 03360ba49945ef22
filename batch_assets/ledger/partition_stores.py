"""`distributed` per-item stores: one DuckDB file per task partition, and reads across them.

With the control ledger and the tasks' tables in PostgreSQL, the warehouse file would hold only the
per-item tables (manifest items, shard lines, raw and parsed results, retry decisions, applied
results, review, revocation, the sensitive-data mapping), and every run of every partition would
queue for its one write lock. So each partition gets its own file, `<data_dir>/partitions/<task_id>.duckdb`,
written only under the partition's lease (ledger/partition_lease.py): runs of different partitions
write at once.

What reads across partitions (the sensor, the CLI, reports over many days) opens an in-memory
DuckDB with the stores attached read-only and every per-item table a view over the union of theirs
under its usual name (`ledger.manifest_item`, …), so the same SQL runs on `local` and here; a write
through it fails (a view), which is how a writer that forgot its partition shows itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from batch_assets.ledger.file_locks import retry_while_locked
from batch_assets.ledger.schema import SCHEMA_FILE, latest_version

STORES_DIR = "partitions"
_BLANK = "__blank"  # the empty table of the current schema each view of a read across stores starts from
_TASK_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def store_path(folder: Path, task_id: str) -> Path:
    """The partition's store file in the stores' `folder` (task ids are `<task_name>_<YYYYMMDD>`: safe file names)."""
    if not _TASK_ID_RE.match(task_id):
        raise ValueError(f"task id {task_id!r} cannot name a partition store file")
    return folder / f"{task_id}.duckdb"


def store_paths(folder: Path, task_ids: Sequence[str] | None = None) -> list[Path]:
    """The stores that exist in `folder`: of `task_ids`, or every one."""
    if task_ids is not None:
        return [p for p in (store_path(folder, t) for t in sorted(set(task_ids))) if p.exists()]
    return sorted(folder.glob("*.duckdb")) if folder.is_dir() else []


def blank_ledger(conn: duckdb.DuckDBPyConnection) -> None:
    """The current ledger schema, empty, on a fresh (in-memory) connection: schema.sql at once,
    cheaper than replaying every migration for each read across stores."""
    conn.execute(SCHEMA_FILE.read_text(encoding="utf-8"))
    conn.execute(
        "INSERT INTO ledger.schema_version (version, description, applied_at) "
        "VALUES (?, 'read across partition stores', now()::TIMESTAMP)",
        [latest_version()],
    )


def per_item_tables(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """The ledger tables of a migrated per-item store (its control tables dropped), but its version."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = 'ledger' AND table_name <> 'schema_version' ORDER BY 1"
        ).fetchall()
    ]


def attach_read_only(conn: duckdb.DuckDBPyConnection, stores: Sequence[Path], lock_timeout_s: float) -> None:
    """Attach each store as s0, s1, … read-only, waiting out a writer that holds one (as a
    Warehouse connection waits for its file), and turn each per-item table of `conn` (migrated,
    empty) into a view over it and the stores' tables: every read sees the union in this schema's
    column order, and every write fails, also with no store yet (none is silently kept in memory)."""
    for n, path in enumerate(stores):
        _attach(conn, path, f"s{n}", lock_timeout_s)
    for table in per_item_tables(conn):
        conn.execute(f"ALTER TABLE ledger.{table} RENAME TO {table}{_BLANK}")
        parts = [f"SELECT * FROM ledger.{table}{_BLANK}"]
        parts += [f"SELECT * FROM s{n}.ledger.{table}" for n in range(len(stores))]
        conn.execute(f"CREATE VIEW ledger.{table} AS {' UNION ALL BY NAME '.join(parts)}")


def _attach(conn: duckdb.DuckDBPyConnection, path: Path, alias: str, lock_timeout_s: float) -> None:
    retry_while_locked(lambda: conn.execute(f"ATTACH '{_quoted(path)}' AS {alias} (READ_ONLY)"), path, lock_timeout_s)


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
