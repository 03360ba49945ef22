"""The control tables' schema on PostgreSQL, taken from the one schema the migrations define.

`schema.sql` (generated from migrations/, see schema.py) is the single source: the control tables'
CREATE TABLE statements and the terminal sequence are read from it and run on PostgreSQL as they
are (they use only types both engines share). The PostgreSQL ledger records the schema version it
was created at in `ledger.schema_version`, as the DuckDB file does; a database at another version
is refused with a one-line error rather than used as if it matched.
"""

from __future__ import annotations

import re

from batch_assets.ledger.control_db import CONTROL_TABLES, PgControl
from batch_assets.ledger.schema import SCHEMA_FILE, latest_version, migrations

CONTROL_SEQUENCES = ("terminal_seq",)
# Types a control table may use: spelled the same in DuckDB's catalog and PostgreSQL.
SHARED_TYPES = {"VARCHAR", "BIGINT", "INTEGER", "BOOLEAN", "TIMESTAMP", "DATE", "DOUBLE"}
_LOCK_KEY = 0x6261_7463_6821  # pg_advisory_xact_lock key: one creator of the schema at a time


class ControlSchemaError(RuntimeError):
    """The PostgreSQL ledger cannot be used by this code (the message names the version and the fix)."""


def _statement(text: str, head: str) -> str:
    m = re.search(rf"^{re.escape(head)}.*?;$", text, re.MULTILINE | re.DOTALL)
    if m is None:
        raise ControlSchemaError(f"{SCHEMA_FILE}: no `{head}`; regenerate it: python -m batch_assets.ledger.schema")
    return m.group(0).strip()


def column_types(table_sql: str) -> list[str]:
    """The type of every column of one CREATE TABLE statement (its second word)."""
    body = table_sql[table_sql.index("(") + 1 : table_sql.rindex(")")]
    return [line.split()[1] for line in body.splitlines() if line.strip() and not line.strip().startswith("PRIMARY")]


def control_schema_sql() -> list[str]:
    """The statements that create the control tables on PostgreSQL, in order."""
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    tables = [_statement(text, f"CREATE TABLE ledger.{t} (") for t in CONTROL_TABLES]
    for table in tables:
        odd = sorted({t.rstrip(",") for t in column_types(table)} - SHARED_TYPES)
        if odd:
            raise ControlSchemaError(
                f"{SCHEMA_FILE}: a control table uses {', '.join(odd)}, not shared with PostgreSQL"
            )
    sequences = [_statement(text, f"CREATE SEQUENCE ledger.{s}") for s in CONTROL_SEQUENCES]
    tables = [t.replace(" DOUBLE,", " DOUBLE PRECISION,").replace(" DOUBLE\n", " DOUBLE PRECISION\n") for t in tables]
    return ["CREATE SCHEMA IF NOT EXISTS ledger", *sequences, *tables]


def stored_version(db: PgControl) -> int:
    exists = db.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'ledger' AND table_name = 'schema_version'"
    ).scalar()
    if not exists:
        return 0
    return int(db.execute("SELECT coalesce(max(version), 0) FROM ledger.schema_version").scalar())


def ensure_control_schema(db: PgControl) -> int:
    """Create the control tables in an empty database (once, whoever comes first) or check that the
    existing ones are at this code's schema version; returns the version."""
    latest = latest_version()
    with db.transaction():
        db.execute(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})")
        version = stored_version(db)
        if version == 0:
            for statement in control_schema_sql():
                db.execute(statement)
            db.execute(
                "CREATE TABLE ledger.schema_version (version INTEGER PRIMARY KEY, description VARCHAR, "
                "applied_at TIMESTAMP)"
            )
            db.execute(
                "INSERT INTO ledger.schema_version (version, description, applied_at) VALUES (?, ?, now()::TIMESTAMP)",
                [latest, migrations()[-1].description],
            )
            return latest
    if version != latest:
        newer = version > latest
        raise ControlSchemaError(
            f"the PostgreSQL ledger is at schema version {version}, this code needs {latest}: "
            + ("upgrade batch_assets on every machine that uses it" if newer else "recreate it (no upgrade path yet)")
        )
    return version
