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


# information_schema's data_type of each shared type on PostgreSQL.
_PG_TYPES = {
    "VARCHAR": "character varying",
    "BIGINT": "bigint",
    "INTEGER": "integer",
    "BOOLEAN": "boolean",
    "TIMESTAMP": "timestamp without time zone",
    "DATE": "date",
    "DOUBLE": "double precision",
}


def _columns(table_sql: str) -> list[tuple[str, str, str]]:
    """(name, shared type, the column's definition as written) of one CREATE TABLE statement."""
    body = table_sql[table_sql.index("(") + 1 : table_sql.rindex(")")]
    found = []
    for line in body.splitlines():
        words = line.strip().rstrip(",").split()
        if words and words[0] != "PRIMARY":
            found.append((words[0], words[1], " ".join(words).replace(" DOUBLE", " DOUBLE PRECISION", 1)))
    return found


def upgrade_control_schema(db: PgControl) -> list[str]:
    """Bring the control tables up to schema.sql: missing tables created, missing columns added; a
    column whose type differs is refused (no data is rewritten). Returns what was changed."""
    have: dict[str, dict[str, str]] = {}
    for table, column, kind in db.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'ledger'"
    ).rows:
        have.setdefault(table, {})[column] = kind
    import psycopg

    text = SCHEMA_FILE.read_text(encoding="utf-8")
    changes = []
    for sequence in CONTROL_SEQUENCES:
        statement = _statement(text, f"CREATE SEQUENCE ledger.{sequence}")
        db.execute(statement.replace("CREATE SEQUENCE", "CREATE SEQUENCE IF NOT EXISTS", 1))
    for table, statement in zip(CONTROL_TABLES, control_schema_sql()[1 + len(CONTROL_SEQUENCES) :], strict=True):
        if table not in have:
            db.execute(statement)
            changes.append(f"created ledger.{table}")
            continue
        for column, kind, definition in _columns(_statement(text, f"CREATE TABLE ledger.{table} (")):
            found = have[table].get(column)
            if found is None:
                try:
                    with db.transaction():  # a savepoint: the error below is the only outcome
                        db.execute(f"ALTER TABLE ledger.{table} ADD COLUMN {definition}")
                except psycopg.Error as exc:
                    raise ControlSchemaError(
                        f"cannot add ledger.{table}.{column} ({definition}) to the PostgreSQL ledger: "
                        f"{str(exc).splitlines()[0]}"
                    ) from None
                changes.append(f"added ledger.{table}.{column}")
            elif found != _PG_TYPES[kind]:
                raise ControlSchemaError(
                    f"the PostgreSQL ledger's ledger.{table}.{column} is {found}, this code needs {kind}: "
                    "migrate that column by hand, or recreate the ledger"
                )
    return changes


def ensure_control_schema(db: PgControl) -> int:
    """Create the control tables in an empty database (once, whoever comes first), or bring an older
    one up to this code's schema (tables and columns added, the version recorded); returns the
    version. A ledger newer than this code is refused."""
    latest = latest_version()
    with db.transaction():
        db.execute(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})")
        version = stored_version(db)
        if version > latest:
            raise ControlSchemaError(
                f"the PostgreSQL ledger is at schema version {version}, this code needs {latest}: "
                "upgrade batch_assets on every machine that uses it"
            )
        if version == 0:
            for statement in control_schema_sql():
                db.execute(statement)
            db.execute(
                "CREATE TABLE ledger.schema_version (version INTEGER PRIMARY KEY, description VARCHAR, "
                "applied_at TIMESTAMP)"
            )
        else:
            # Also at the same version: a control table listed since (e.g. dry_run) may be missing.
            upgrade_control_schema(db)
        if version < latest:
            db.execute(
                "INSERT INTO ledger.schema_version (version, description, applied_at) VALUES (?, ?, now()::TIMESTAMP)",
                [latest, migrations()[-1].description],
            )
    return latest
