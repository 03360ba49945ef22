"""Versioned, forward-only migrations of the ledger schema (`ledger.*` in the warehouse file).

The migrations are the numbered `.sql` files in `migrations/` beside this module
(`NNNN_name.sql`, first line `-- description`). Each is applied once, in order, inside a
transaction, and recorded in `ledger.schema_version`. Never edit a released migration: add a file.
`schema.sql` beside this module is the schema they leave, generated: `python -m batch_assets.ledger.schema`.
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


# ---------------------------------------------------------------------------------------------------
# ledger/schema.sql: the schema the migrations produce, in one file a reader can open (issue 42).

SCHEMA_FILE = Path(__file__).with_name("schema.sql")
REGENERATE_COMMAND = "python -m batch_assets.ledger.schema"
_SIMPLE_DEFAULT_RE = re.compile(r"^(?:'(?:[^']|'')*'|-?\d+(?:\.\d+)?|true|false|NULL|[a-z_]+\(\))$")
_COMPRESSION_RE = re.compile(r"\bUSING COMPRESSION (\w+)")
_LEADING_IDENT_RE = re.compile(r'"(?:[^"]|"")*"|\S+')


def current_schema_sql() -> str:
    """The `ledger` schema every migration leaves, as the text of ledger/schema.sql: applied with
    `migrate()` (what `Warehouse.connect` runs) to a fresh in-memory DuckDB and read back from its catalog."""
    conn = duckdb.connect(":memory:")
    try:
        version = migrate(conn)
        body = render_schema(conn)
    finally:
        conn.close()
    first, last = migrations()[0].path.name[:4], migrations()[-1].path.name[:4]
    header = (
        "-- GENERATED FILE, do not edit: the ledger schema after every migration, read from DuckDB's catalog.\n"
        f"-- From batch_assets/ledger/migrations/{first}..{last} (schema version {version}).\n"
        f"-- Regenerate: {REGENERATE_COMMAND}   (a test fails when this file and the migrations differ)\n"
        "-- Change the schema by adding a migration, never by editing this file.\n"
    )
    return header + "\n" + body


def render_schema(conn: duckdb.DuckDBPyConnection, schema: str = "ledger") -> str:
    """Deterministic SQL for `schema`: CREATE SCHEMA, its tables, indexes, sequences and views, each by name."""
    _refuse_unrendered(conn, schema)
    ident = _identifier_quoter(conn)
    out = [f"CREATE SCHEMA {ident(schema)};"]
    tables = conn.execute(
        "SELECT table_name, sql FROM duckdb_tables() WHERE schema_name = ? ORDER BY table_name", [schema]
    ).fetchall()
    out.extend("\n" + _table_sql(conn, schema, table, table_sql, ident) for table, table_sql in tables)
    out.extend(_other_objects_sql(conn, schema, ident))
    return "\n".join(out) + "\n"


def _refuse_unrendered(conn: duckdb.DuckDBPyConnection, schema: str) -> None:
    """Raise on what render_schema does not render yet, rather than write a file that leaves it out."""
    unrendered = conn.execute(
        "SELECT 'type ' || type_name FROM duckdb_types() WHERE schema_name = $1 AND NOT internal "
        "UNION ALL SELECT DISTINCT 'macro ' || function_name FROM duckdb_functions() "
        "WHERE schema_name = $1 AND NOT internal "
        "UNION ALL SELECT 'comment or generated column ' || table_name || '.' || column_name FROM duckdb_columns() "
        "WHERE schema_name = $1 AND (comment IS NOT NULL OR is_generated)",
        [schema],
    ).fetchall()
    if unrendered:
        raise RuntimeError(f"render_schema does not render these yet, extend it: {sorted(r[0] for r in unrendered)}")


def _identifier_quoter(conn: duckdb.DuckDBPyConnection):
    """A name as written in SQL: bare unless it is a non-unreserved keyword or not lower_snake."""
    keywords = {
        k
        for (k,) in conn.execute(
            "SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category <> 'unreserved'"
        ).fetchall()
    }

    def ident(name: str) -> str:
        if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in keywords:
            return name
        return '"' + name.replace('"', '""') + '"'

    return ident


def _table_sql(conn: duckdb.DuckDBPyConnection, schema: str, table: str, table_sql: str, ident) -> str:
    """CREATE TABLE with one aligned column a line (in table order), then its keys and checks."""
    columns = conn.execute(
        "SELECT column_name, data_type, is_nullable, column_default FROM duckdb_columns() "
        "WHERE schema_name = ? AND table_name = ? ORDER BY column_index",
        [schema, table],
    ).fetchall()
    compression = _column_compressions(table_sql, [c[0] for c in columns])
    name_w = max(len(ident(c[0])) for c in columns)
    type_w = max(len(c[1]) for c in columns)
    lines = []
    for name, data_type, nullable, default in columns:
        extras = [] if nullable else ["NOT NULL"]
        if default is not None:
            extras.append(f"DEFAULT {default}" if _SIMPLE_DEFAULT_RE.match(default) else f"DEFAULT ({default})")
        if name in compression:
            extras.append(f"USING COMPRESSION {compression[name]}")
        line = f"{ident(name):<{name_w}}  {data_type}"
        lines.append(f"{line:<{name_w + 2 + type_w}}  {' '.join(extras)}" if extras else line)
    rank = {"PRIMARY KEY": 0, "UNIQUE": 1, "CHECK": 2, "FOREIGN KEY": 3}
    constraints = conn.execute(
        "SELECT constraint_type, constraint_text, constraint_column_names FROM duckdb_constraints() "
        "WHERE schema_name = ? AND table_name = ? AND constraint_type <> 'NOT NULL'",
        [schema, table],
    ).fetchall()
    for kind, text, cols in sorted(constraints, key=lambda c: (rank.get(c[0], 9), c[1])):
        # CHECK and FOREIGN KEY as DuckDB prints them
        lines.append(f"{kind} ({', '.join(ident(c) for c in cols)})" if kind in ("PRIMARY KEY", "UNIQUE") else text)
    return f"CREATE TABLE {ident(schema)}.{ident(table)} (\n    " + ",\n    ".join(lines) + "\n);"


def _other_objects_sql(conn: duckdb.DuckDBPyConnection, schema: str, ident) -> list[str]:
    def rows(sql: str) -> list[tuple]:
        return conn.execute(sql, [schema]).fetchall()

    indexes = rows("SELECT sql FROM duckdb_indexes() WHERE schema_name = ? AND NOT is_primary ORDER BY index_name")
    sequences = rows(
        "SELECT sequence_name, increment_by, min_value, max_value, start_value, cycle FROM duckdb_sequences() "
        "WHERE schema_name = ? ORDER BY sequence_name"
    )
    views = rows("SELECT sql FROM duckdb_views() WHERE schema_name = ? AND NOT internal ORDER BY view_name")
    out = ["\n-- Indexes" + ("" if indexes else ": none (primary keys and UNIQUE constraints are above)")]
    out.extend(sql for (sql,) in indexes)
    out.append("\n-- Sequences" + ("" if sequences else ": none"))
    out.extend(  # built from the columns: duckdb_sequences().sql leaves out the schema
        f"CREATE SEQUENCE {ident(schema)}.{ident(name)} INCREMENT BY {inc} MINVALUE {lo} MAXVALUE {hi} START {start}"
        f"{' CYCLE' if cycle else ' NO CYCLE'};"
        for name, inc, lo, hi, start, cycle in sequences
    )
    out.append("\n-- Views" + ("" if views else ": none"))
    out.extend(sql for (sql,) in views)
    return out


def _column_compressions(table_sql: str, column_names: list[str]) -> dict[str, str]:
    """{column: compression} for the columns a migration gave `USING COMPRESSION`. DuckDB keeps the
    setting only in the table's CREATE statement (`duckdb_tables().sql`); no catalog function has a column
    for it, and `pragma_storage_info` shows what segments use, which an empty table has none of. So the
    statement is split into its column definitions and each one read."""
    found = {}
    for name, item in zip(column_names, _definitions(table_sql), strict=False):
        leading = _LEADING_IDENT_RE.match(item).group(0)
        if (leading[1:-1].replace('""', '"') if leading.startswith('"') else leading) != name:
            raise RuntimeError(f"cannot read the column definitions of {table_sql!r}: expected {name!r}, met {item!r}")
        m = _COMPRESSION_RE.search(re.sub(r"'(?:[^']|'')*'", "''", item))  # string literals blanked
        if m:
            found[name] = m.group(1).lower()
    return found


def _definitions(table_sql: str) -> list[str]:
    """The top-level comma-separated items inside `CREATE TABLE name(...)`, quotes and parentheses respected."""
    items, current, depth, quote = [], [], 0, None
    for ch in table_sql:
        if quote or ch in "'\"":
            quote = None if ch == quote else (quote or ch)
        elif ch == "(":
            depth += 1
            if depth == 1:  # the one that opens the definitions
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        elif ch == "," and depth == 1:
            items.append("".join(current).strip())
            current = []
            continue
        if depth >= 1:
            current.append(ch)
    items.append("".join(current).strip())
    return items


def write_schema_file(path: Path = SCHEMA_FILE) -> Path:
    path.write_text(current_schema_sql(), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(f"wrote {write_schema_file()}")
