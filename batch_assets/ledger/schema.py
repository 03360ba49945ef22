"""Versioned, forward-only migrations of the ledger schema (`ledger.*` in the warehouse file).

The migrations are the numbered `.sql` files in `migrations/` beside this module
(`NNNN_name.sql`, first line `-- description`). Each is applied once, in order, inside a
transaction, and recorded in `ledger.schema_version`. Never edit a released migration: add a file.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from batch_assets.ledger.transaction import transaction

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_FILE_RE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    number: int
    description: str
    sql: str
    path: Path


@functools.cache
def migrations() -> tuple[Migration, ...]:
    """Every migration file, in order; numbers must run 1, 2, 3, … without gaps."""
    found = []
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        m = _FILE_RE.match(path.name)
        if not m:
            raise RuntimeError(f"{path}: migration files are named NNNN_lower_snake.sql")
        text = path.read_text(encoding="utf-8")
        first = text.splitlines()[0] if text else ""
        if not first.startswith("-- "):
            raise RuntimeError(f"{path}: the first line must be '-- <description>'")
        found.append(Migration(int(m.group(1)), first[3:].strip(), text, path))
    numbers = [m.number for m in found]
    if numbers != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{MIGRATIONS_DIR}: migration numbers must be 1..N without gaps, found {numbers}")
    return tuple(found)


def latest_version() -> int:
    return migrations()[-1].number


def current_version(conn: duckdb.DuckDBPyConnection) -> int:
    conn.execute("CREATE SCHEMA IF NOT EXISTS ledger")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ledger.schema_version "
        "(version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMP)"
    )
    row = conn.execute("SELECT coalesce(max(version), 0) FROM ledger.schema_version").fetchone()
    return int(row[0])


def stored_version(conn: duckdb.DuckDBPyConnection) -> int:
    """The file's schema version without creating anything (works on read-only connections);
    0 for a file that has no ledger yet."""
    exists = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'ledger' AND table_name = 'schema_version'"
    ).fetchone()[0]
    if not exists:
        return 0
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM ledger.schema_version").fetchone()[0])


def refuse_newer(version: int) -> None:
    """A file at a version newer than this code knows is refused: its schema may not be what the code
    expects, and the code must not read or write it as if it were."""
    latest = latest_version()
    if version > latest:
        raise RuntimeError(
            f"the ledger is at schema version {version}, newer than this code ({latest}); "
            "upgrade batch_assets before opening this warehouse"
        )


def migrate(conn: duckdb.DuckDBPyConnection, target: int | None = None) -> int:
    """Apply every migration newer than the file's version (up to `target`, default the latest),
    each in its own transaction; returns the resulting version.

    A file at a version newer than this code knows is refused: its schema may not be what the code
    expects, and the code must not write to it."""
    version = current_version(conn)
    latest = latest_version()
    refuse_newer(version)
    for migration in migrations():
        if migration.number <= version or (target is not None and migration.number > target):
            continue
        with transaction(conn):
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO ledger.schema_version (version, description, applied_at) VALUES (?, ?, now()::TIMESTAMP)",
                [migration.number, migration.description],
            )
    return max(version, latest if target is None else min(target, latest))
