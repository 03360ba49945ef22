"""ledger/schema.sql: the committed file is what the migrations build, and it shows what they did."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import duckdb
import pytest

from batch_assets.ledger import schema

REPO = Path(__file__).resolve().parents[1]
_EVENT_RE = re.compile(
    r"CREATE TABLE (?:IF NOT EXISTS )?ledger\.(?P<create>\w+)"
    r"|DROP TABLE (?:IF EXISTS )?ledger\.(?P<drop>\w+)"
    r"|ALTER TABLE ledger\.(?P<renamed>\w+) RENAME TO (?P<to>\w+)"
    r"|ALTER TABLE ledger\.(?P<added_to>\w+) ADD COLUMN (?P<column>\w+) (?P<type>\w+)"
    r"|ALTER TABLE ledger\.(?P<dropped_from>\w+) DROP COLUMN (?P<dropped>\w+)",
    re.IGNORECASE,
)


@pytest.fixture(scope="module")
def generated() -> str:
    return schema.current_schema_sql()


@pytest.fixture(scope="module")
def blocks(generated: str) -> dict[str, list[str]]:
    """{table: its column and constraint lines} from the generated file."""
    found = re.findall(r"^CREATE TABLE ledger\.(\w+) \(\n(.*?)\n\);$", generated, re.MULTILINE | re.DOTALL)
    return {table: [line.strip().rstrip(",") for line in body.splitlines()] for table, body in found}


def _migration_events() -> list[re.Match]:
    """The schema changes of every migration in order, comments left out."""
    events = []
    for migration in schema.migrations():
        text = re.sub(r"--[^\n]*", "", migration.sql)
        events.extend(_EVENT_RE.finditer(text))
    return events


def test_committed_schema_sql_is_what_the_migrations_build(generated):
    committed = schema.SCHEMA_FILE.read_text(encoding="utf-8") if schema.SCHEMA_FILE.exists() else ""
    assert committed == generated, (
        f"{schema.SCHEMA_FILE.relative_to(REPO)} differs from the schema the migrations build; "
        f"regenerate it with `{schema.REGENERATE_COMMAND}` and commit it with the migration"
    )


def test_schema_sql_header_names_the_latest_migration_and_the_command(generated):
    header = generated.split("\n\n", 1)[0]
    assert "GENERATED" in header
    assert f"schema version {schema.latest_version()}" in header
    assert f"{schema.latest_version():04d}" in header
    assert schema.REGENERATE_COMMAND in header


def test_schema_sql_run_on_an_empty_database_builds_the_same_ledger(generated):
    conn = duckdb.connect(":memory:")
    try:
        conn.execute(generated)
        rebuilt = schema.render_schema(conn)
    finally:
        conn.close()
    assert rebuilt == generated.split("\n\n", 1)[1]


def test_every_table_the_migrations_leave_has_one_block_in_alphabetical_order(blocks):
    tables = {"schema_version"}  # created by schema.current_version(), before the first migration
    for event in _migration_events():
        if event["create"]:
            tables.add(event["create"])
        elif event["drop"]:
            tables.discard(event["drop"])
        elif event["renamed"]:
            tables.discard(event["renamed"])
            tables.add(event["to"])
    assert list(blocks) == sorted(tables)


def test_every_column_a_later_migration_added_is_in_its_tables_block(blocks):
    added: dict[tuple[str, str], str] = {}  # (table, column) -> type, following rebuilds and renames
    for event in _migration_events():
        if event["added_to"]:
            added[(event["added_to"], event["column"])] = event["type"].upper()
        elif event["dropped_from"]:
            added.pop((event["dropped_from"], event["dropped"]), None)
        elif event["renamed"]:
            added = {((event["to"] if t == event["renamed"] else t), c): ty for (t, c), ty in added.items()}
    assert added, "the migrations add columns with ALTER TABLE; the pattern above no longer finds them"
    assert ("shard", "deferred_at") in added and ("provider_job", "collected_at") in added
    for (table, column), column_type in added.items():
        lines = {line.split()[0]: line.split()[1] for line in blocks[table]}
        assert lines.get(column) == column_type, f"ledger.{table}.{column} {column_type} is not in schema.sql"


def test_a_columns_compression_set_by_a_migration_is_shown(blocks):
    body = next(line for line in blocks["raw_result"] if line.split()[0] == "body")
    assert body.split()[1] == "JSON"
    assert body.endswith("USING COMPRESSION zstd")
    assert [line for lines in blocks.values() for line in lines if "USING COMPRESSION" in line] == [body]


def test_key_nullability_and_defaults_come_from_the_catalog(blocks):
    def lines(table: str) -> list[str]:
        return [" ".join(line.split()) for line in blocks[table]]

    assert "PRIMARY KEY (custom_id, attempt)" in lines("parsed_result")
    assert "PRIMARY KEY (task_id, item_no)" in lines("manifest_item")
    assert not any(line.startswith("PRIMARY KEY") for line in lines("raw_result"))
    assert "item_no BIGINT NOT NULL" in lines("manifest_item")  # NOT NULL since the rebuild of 0011
    assert "cancel_requested BOOLEAN NOT NULL DEFAULT false" in lines("provider_job")
    assert "review_state VARCHAR NOT NULL DEFAULT 'pending'" in lines("compliance_hold")


def test_schema_sql_is_shipped_as_package_data():
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]
    patterns = package_data.get("*", []) + package_data.get("batch_assets.ledger", [])
    assert any(fnmatch.fnmatch(schema.SCHEMA_FILE.name, p) for p in patterns)
