"""The freeze reads a source query again instead of copying it only when reading it again gives
the same rows (pipeline/stable_source.py); anything else is copied as before."""

from __future__ import annotations

import dataclasses

import duckdb
import pytest

from batch_assets.demo.seed import seed_support_tickets
from batch_assets.demo.seed_kb import seed_kb_articles
from batch_assets.demo.seed_reviews import seed_product_reviews
from batch_assets.pipeline.freeze import source as source_stage
from batch_assets.pipeline.freeze import stable_source
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.spec.resolve import load_all_tasks

from .conftest import DAY1

PARAMS = {"partition_date": DAY1}


@pytest.fixture
def conn() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE tickets (id VARCHAR, body VARCHAR, day DATE, n INTEGER)")
    c.execute("INSERT INTO tickets VALUES ('a', 'x', DATE '2026-11-20', 1), ('b', 'y', DATE '2026-11-21', 2)")
    c.execute("CREATE VIEW v_tickets AS SELECT * FROM tickets")
    c.execute("CREATE SCHEMA ledger; CREATE TABLE ledger.manifest_item (id VARCHAR)")
    c.execute("CREATE SEQUENCE seq")
    c.execute("CREATE MACRO twice(x) AS x || x")
    yield c
    c.close()


ACCEPTED = [
    "SELECT id, body FROM tickets WHERE day = $partition_date",
    "SELECT id, upper(body) || '!' AS body FROM main.tickets WHERE day = $partition_date::DATE;",
    "WITH t AS (SELECT * FROM tickets WHERE day = $partition_date) SELECT id, body FROM t ORDER BY 1",
    "SELECT t.id, t.body FROM tickets t JOIN tickets u USING (id) WHERE t.id IN (SELECT id FROM tickets WHERE n > 0)",
    "SELECT DISTINCT id, body FROM tickets WHERE day >= now()::DATE - INTERVAL 400 DAY "
    "UNION ALL SELECT id, body FROM tickets WHERE CASE WHEN n BETWEEN 1 AND 2 THEN true ELSE false END",
    "SELECT id, coalesce(body, '') AS body FROM tickets WHERE body IS NOT NULL AND NOT (id LIKE 'z%')",
]

REFUSED = [
    ("SELECT * FROM read_csv('tickets.csv')", "table function"),
    ("SELECT id, body FROM tickets WHERE random() < 0.5", "random"),
    ("SELECT id, nextval('seq') AS n FROM tickets", "nextval"),
    ("SELECT id, string_agg(body, ',') AS body FROM tickets GROUP BY id", "string_agg"),
    ("SELECT id, body, row_number() OVER () AS k FROM tickets", "window"),
    ("SELECT id, body FROM tickets LIMIT 1", "limit"),
    ("SELECT id, body FROM tickets USING SAMPLE 50%", "sample"),
    ("SELECT DISTINCT ON (day) id, body FROM tickets", "distinct"),
    ("SELECT id, body FROM v_tickets", "view"),
    ("SELECT id, 'b' AS body FROM ledger.manifest_item", "ledger"),
    ("SELECT id, twice(body) AS body FROM tickets", "twice"),
    ("SELECT id, list_transform([body], x -> x) AS body FROM tickets", "lambda"),
    ("WITH RECURSIVE r(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM r WHERE k < 3) SELECT k FROM r", "recursive"),
    ("SELECT id, body FROM no_such_table", "not a table"),
    ("SELECT 1; SELECT 2", "more than one statement"),
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_a_pure_query_over_tables_is_read_again_with_the_same_rows(conn, sql):
    view = stable_source.view_sql(conn, sql, PARAMS)
    assert view is not None, stable_source.why_not(conn, sql, PARAMS)
    assert "$partition_date" not in view
    conn.execute(f"CREATE TEMP VIEW _v AS {view}")
    expected = sorted(conn.execute(sql, PARAMS).fetchall()) if "$" in sql else sorted(conn.execute(sql).fetchall())
    assert sorted(conn.execute("SELECT * FROM _v").fetchall()) == expected


@pytest.mark.parametrize(("sql", "reason"), REFUSED)
def test_a_query_whose_rows_may_differ_is_copied_and_says_why(conn, sql, reason):
    assert stable_source.view_sql(conn, sql, PARAMS) is None
    assert reason in stable_source.why_not(conn, sql, PARAMS).lower()


def test_a_parameter_without_a_value_is_refused(conn):
    assert "$other" in stable_source.why_not(conn, "SELECT * FROM tickets WHERE id = $other", PARAMS)


def test_a_parameter_is_a_literal_in_the_view_whatever_it_holds(conn):
    """A value with quotes stays one string literal (no SQL built by pasting)."""
    conn.execute("INSERT INTO tickets VALUES ('c', 'z', NULL, 3)")
    view = stable_source.view_sql(conn, "SELECT id FROM tickets WHERE body = $b OR id = $b", {"b": "z' OR 'x' = 'x"})
    assert conn.execute(view).fetchall() == []


def test_every_shipped_task_source_is_read_again(warehouse):
    """The project's own tasks (over DuckDB tables, filtered by day) take the view."""
    with warehouse.connect() as c:
        seed_support_tickets(c, days=1, per_day=50)
        seed_kb_articles(c, days=1, per_day=50)
        seed_product_reviews(c, days=1, per_day=50)
        for name, task in load_all_tasks().items():
            assert stable_source.why_not(c, task.spec.source.sql, PARAMS) is None, name


def _frozen(wh, task) -> tuple[list, list, str]:
    summary = freeze_manifest(wh, task, DAY1)
    with wh.connect() as c:
        parquet = c.execute(
            f"SELECT * EXCLUDE (item_no_base) FROM read_parquet('{summary.manifest_uri}') ORDER BY custom_id"
        ).fetchall()
        items = c.execute("SELECT * EXCLUDE (frozen_at) FROM ledger.manifest_item ORDER BY custom_id").fetchall()
    return parquet, items, summary.source_read


def test_the_freeze_over_a_view_equals_the_freeze_over_a_copy(seeded_copy, tmp_path, ticket_task, monkeypatch):
    """Same manifest Parquet and ledger rows either way, redactions and rejects included; the view
    is what the freeze used (seen from inside it)."""
    import shutil

    from batch_assets.ledger.warehouse import Warehouse

    copy_wh = Warehouse.at(tmp_path / "copy" / "warehouse.duckdb", tmp_path / "copy" / "data")
    copy_wh.database.parent.mkdir(parents=True)
    shutil.copy(seeded_copy.database, copy_wh.database)

    kinds: list[str] = []
    gate = source_stage.gate_loaded_source

    def seen(conn, task, columns):
        kinds.append(
            conn.execute("SELECT table_type FROM information_schema.tables WHERE table_name = '_raw_src'").fetchone()[0]
        )
        return gate(conn, task, columns)

    monkeypatch.setattr(source_stage, "gate_loaded_source", seen)
    over_view = _frozen(seeded_copy, ticket_task)
    monkeypatch.setattr(stable_source, "view_sql", lambda *a, **k: None)
    over_copy = _frozen(copy_wh, ticket_task)
    assert kinds == ["VIEW", "LOCAL TEMPORARY"]
    assert over_view[:2] == over_copy[:2] and len(over_view[1]) > 50
    # What the manifest asset's metadata shows of each.
    assert (over_view[2], over_copy[2]) == ("view", "copy: not read as a view")
    with seeded_copy.connect() as c:
        assert (
            c.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = '_raw_src'").fetchone()[0] == 0
        )


def test_a_source_that_is_not_pure_is_still_frozen_from_one_copy(seeded_copy, ticket_task):
    """A source whose rows change from one read to the next (here: a random subset) freezes what
    one read returned: every item in the ledger is in the Parquet and the other way round."""
    sql = ticket_task.spec.source.sql.rstrip().rstrip(";") + " AND random() < 0.5"
    task = dataclasses.replace(
        ticket_task,
        spec=ticket_task.spec.model_copy(update={"source": ticket_task.spec.source.model_copy(update={"sql": sql})}),
    )
    summary = freeze_manifest(seeded_copy, task, DAY1)
    assert summary.source_read == "copy: the query calls random (not a consistent scalar function)"
    assert freeze_manifest(seeded_copy, task, DAY1).source_read is None  # reused: nothing read
    with seeded_copy.connect() as c:
        in_file = {r[0] for r in c.execute(f"SELECT custom_id FROM read_parquet('{summary.manifest_uri}')").fetchall()}
        in_ledger = {r[0] for r in c.execute("SELECT custom_id FROM ledger.manifest_item").fetchall()}
    assert in_file == in_ledger and 0 < len(in_file) < 60
