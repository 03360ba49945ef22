"""Source and business tables in PostgreSQL: the source query runs there (one read-only SELECT,
its rows streamed into DuckDB), the apply upserts the business table there, and a partition carried
through freeze → submit → collect → parse → apply ends as it does with the tables in DuckDB."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil

import duckdb
import psycopg
import pytest

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline import faultpoints
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.errors import SourceQueryError
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.revoke import revoke
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.spec.errors import SettingError
from batch_assets.task_tables.postgres import PgTables, copy_rows_into
from batch_assets_tests.pg_tables import demo_env_on_postgres, tables_in_postgres

from .conftest import DAY1

LINES = 50  # the seeded day's items sent (as in test_ingest_parse_apply)


def q(wh, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        cur = conn.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def submit_and_parse(wh, task, adapter, wait_for_jobs) -> None:
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    submit_pending(wh, task, DAY1, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, task, DAY1, adapter)
    parse_results(wh, task, DAY1)


def balanced(wh, task_id: str = "ticket_triage_20261120") -> None:
    assert reconcile(wh, task_id).problems() == []


def pg_rows(url: str, sql: str, params=None) -> list[dict]:
    with psycopg.connect(url) as conn:
        cur = conn.execute(sql, params)
        cols = [d.name for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def test_rows_cross_with_their_types_and_nulls_apart_from_empty_strings(postgres_url):
    tables = PgTables(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        pg.execute("""CREATE TABLE src (id text, d date, n int, big bigint, x double precision, s text,
                      b boolean, j jsonb, ts timestamp, tz timestamptz, num numeric(10,2), free numeric)""")
        pg.execute("""INSERT INTO src VALUES
            (' a ', '2026-11-20', 1, 9007199254740993, 1.5, '', true, '{"k": [1, "é"]}', '2026-11-20 10:00:00',
             '2026-11-20 10:00:00+02', 3.14, 12345678901234567890.5),
            ('b,"q"' || chr(10) || 'line', '2026-11-20', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
            ('other day', '2026-11-21', 3, 3, 3, 'x', false, '[]', NULL, NULL, 1, 1)""")
    duck = duckdb.connect()
    tables.read_query(
        duck, "_got", "SELECT * FROM src WHERE d = $partition_date ORDER BY id;", {"partition_date": DAY1}
    )
    types = dict(
        duck.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '_got'").fetchall()
    )
    assert types == {
        "id": "VARCHAR", "d": "DATE", "n": "INTEGER", "big": "BIGINT", "x": "DOUBLE", "s": "VARCHAR",
        "b": "BOOLEAN", "j": "JSON", "ts": "TIMESTAMP", "tz": "TIMESTAMP WITH TIME ZONE",
        "num": "DECIMAL(10,2)", "free": "DOUBLE",
    }  # fmt: skip
    first, second = duck.execute("SELECT * EXCLUDE (tz), epoch(tz) FROM _got ORDER BY id").fetchall()
    assert first[:9] == (
        " a ",
        dt.date(2026, 11, 20),
        1,
        9007199254740993,
        1.5,
        "",
        True,
        '{"k": [1, "é"]}',
        dt.datetime(2026, 11, 20, 10),
    )
    assert first[11] == dt.datetime(2026, 11, 20, 8, tzinfo=dt.UTC).timestamp()
    assert str(first[9]) == "3.14" and first[10] == pytest.approx(1.2345678901234567e19)
    assert second == ('b,"q"\nline', dt.date(2026, 11, 20), *[None] * 10)

    # An empty result is an empty table of the query's columns.
    tables.read_query(duck, "_none", "SELECT id, n FROM src WHERE false")
    assert duck.execute("SELECT count(*) FROM _none").fetchone() == (0,)
    assert [r[0] for r in duck.execute("DESCRIBE _none").fetchall()] == ["id", "n"]

    # And back: arrays, JSON, NULL and '' as they were.
    back = """SELECT * FROM (VALUES ('k1', '', [0.5, -2.25]::FLOAT[2], '{"a": 1}'::JSON, true),
                                   ('k2', NULL, NULL, NULL, NULL)) AS t(k, s, e, j, b)"""
    with tables.session(read_only=False) as pg:
        assert copy_rows_into(pg, duck, back, "_back") == {
            "k": "text", "s": "text", "e": "real[]", "j": "jsonb", "b": "boolean"
        }  # fmt: skip
        rows = pg.execute("SELECT k, s, e, j, b FROM _back ORDER BY k").fetchall()
    assert rows == [("k1", "", [0.5, -2.25], {"a": 1}, True), ("k2", None, None, None, None)]


def test_a_source_query_runs_read_only_and_its_errors_name_the_place_not_the_password(postgres_url):
    tables = PgTables(postgres_url)
    duck = duckdb.connect()
    with tables.session(read_only=False) as pg:
        pg.execute("CREATE SEQUENCE counter")
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        tables.read_query(duck, "_x", "SELECT nextval('counter') AS id")
    wrong = dataclasses.replace(tables, url=postgres_url.replace("@", ":s3cret@").rsplit(":", 1)[0] + ":1/db")
    with pytest.raises(RuntimeError) as caught:
        wrong.read_query(duck, "_x", "SELECT 1")
    assert "127.0.0.1:1/db" in str(caught.value) and "s3cret" not in str(caught.value) + repr(wrong)


def test_the_tables_setting_names_the_variable_and_the_fix():
    assert PgTables.from_env({}) is None
    got = PgTables.from_env(
        {"BATCH_ASSETS_TABLES_URL": "postgresql://u:pw@h:5/db", "BATCH_ASSETS_TABLES_SCHEMA": "biz"}
    )
    assert (got.schema, got.where) == ("biz", "h:5/db (schema biz)") and "pw" not in repr(got)
    with pytest.raises(SettingError, match="BATCH_ASSETS_TABLES_URL is not a PostgreSQL URL"):
        PgTables.from_env({"BATCH_ASSETS_TABLES_URL": "mysql://h/db"})
    with pytest.raises(SettingError, match="BATCH_ASSETS_TABLES_SCHEMA='a;b' is not a schema name"):
        PgTables.from_env({"BATCH_ASSETS_TABLES_URL": "postgresql://h/db", "BATCH_ASSETS_TABLES_SCHEMA": "a;b"})


@pytest.mark.slow
def test_a_partition_with_its_tables_in_postgres_ends_as_it_does_in_duckdb(
    seeded_copy, _seeded_template, tmp_path, ticket_task, adapter, wait_for_jobs, postgres_url
):
    local = Warehouse.at(tmp_path / "local" / "warehouse.duckdb", tmp_path / "local" / "data", tables=None)
    local.database.parent.mkdir(parents=True)
    shutil.copy(_seeded_template, local.database)
    freeze_manifest(local, ticket_task, DAY1)
    wh = tables_in_postgres(seeded_copy, postgres_url)

    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    # The same source rows give the same items and input hashes, wherever the table is.
    items = "SELECT custom_id, business_id, input_hash FROM ledger.manifest_item ORDER BY custom_id"
    assert q(wh, items) == q(local, items) and len(q(wh, items)) > LINES

    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale, s.target_table) == (LINES, 0, "ticket_labels")
    labels = pg_rows(postgres_url, "SELECT * FROM biz.ticket_labels ORDER BY ticket_id")
    parsed = {
        r["custom_id"]: r
        for r in q(wh, "SELECT p.custom_id, p.output_json, m.business_id, m.input_hash FROM ledger.parsed_result p "
                       "JOIN ledger.manifest_item m USING (custom_id)")
    }  # fmt: skip
    assert len(labels) == LINES
    for row in labels:
        p, answer = parsed[row["custom_id"]], json.loads(parsed[row["custom_id"]]["output_json"])
        assert (row["ticket_id"], row["input_hash"], row["output_version"]) == (p["business_id"], p["input_hash"], "v1")
        assert (row["category"], row["reason"]) == (answer["category"], answer["reason"])
        assert row["confidence"] == pytest.approx(answer["confidence"])
    with wh.connect() as conn:
        assert conn.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'ticket_labels'").fetchone() == (
            0,
        )

    again = apply_results(wh, ticket_task, DAY1)
    assert (again.applied, again.stale) == (0, 0)
    assert pg_rows(postgres_url, "SELECT * FROM biz.ticket_labels ORDER BY ticket_id") == labels
    balanced(wh)

    # A revoke takes the answer out of the PostgreSQL table.
    gone = labels[0]["custom_id"]
    summary = revoke(wh, custom_ids=[gone], reason="test", tasks={"ticket_triage": ticket_task})
    assert summary.by_action == {"removed": 1}
    assert gone not in {r["custom_id"] for r in pg_rows(postgres_url, "SELECT custom_id FROM biz.ticket_labels")}


@pytest.mark.slow
def test_an_apply_cut_off_after_the_business_write_completes_once_and_keeps_what_it_overwrote(
    seeded_copy, ticket_task, adapter, wait_for_jobs, postgres_url, monkeypatch
):
    """The business rows commit in PostgreSQL before ledger.applied_result in DuckDB: a crash between
    them leaves answers written but not recorded. The next apply records them without writing them
    again, the rows they overwrote are recorded once, and a changed source row is still stale."""
    wh = tables_in_postgres(seeded_copy, postgres_url)
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    usable = q(
        wh,
        """SELECT m.business_id FROM ledger.parsed_result p JOIN ledger.manifest_item m USING (custom_id)
           WHERE p.provider_succeeded AND p.error_class IS NULL ORDER BY 1""",
    )
    held, changed = [r["business_id"] for r in usable[:3]], usable[3]["business_id"]
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        pg.execute("""CREATE TABLE biz.ticket_labels (ticket_id text NOT NULL, category text,
                      confidence double precision, reason text, output_version text NOT NULL,
                      custom_id text NOT NULL, input_hash text NOT NULL, task_id text NOT NULL,
                      applied_at timestamp NOT NULL, PRIMARY KEY (ticket_id, output_version))""")
        pg.execute(
            "INSERT INTO biz.ticket_labels SELECT unnest(%s::text[]), 'account', 0.99, 'earlier', 'v1', "
            "'earlier-cid', 'earlier-hash', 'other_task', TIMESTAMP '2030-01-01 00:00:00'",
            [held],
        )
        pg.execute("UPDATE biz.support_tickets SET body = body || ' (edited)' WHERE ticket_id = %s", [changed])

    class Crash(Exception):
        pass

    def crash_at(point: str) -> None:
        if point == "apply.before_commit":
            raise Crash(point)

    monkeypatch.setattr(faultpoints, "reached", crash_at)
    with pytest.raises(Crash):
        apply_results(wh, ticket_task, DAY1)
    written = pg_rows(postgres_url, "SELECT * FROM biz.ticket_labels ORDER BY ticket_id")
    assert len(written) == LINES - 1  # every fresh answer, the 3 overwritten among them
    assert q(wh, "SELECT count(*) AS n FROM ledger.applied_result") == [{"n": 0}]
    monkeypatch.undo()

    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale) == (LINES - 1, 1)
    assert pg_rows(postgres_url, "SELECT * FROM biz.ticket_labels ORDER BY ticket_id") == written
    previous = q(wh, "SELECT business_id, previous_custom_id FROM ledger.applied_previous ORDER BY 1")
    assert previous == [{"business_id": k, "previous_custom_id": "earlier-cid"} for k in held]
    outcomes = dict(
        (r["outcome"], r["n"]) for r in q(wh, "SELECT outcome, count(*) AS n FROM ledger.applied_result GROUP BY 1")
    )
    assert outcomes == {"applied": LINES - 1, "stale": 1}
    balanced(wh)

    # A revoke of an answer that overwrote one puts the earlier row back, in PostgreSQL.
    summary = revoke(wh, task_name="ticket_triage", business_ids=[held[0]], tasks={"ticket_triage": ticket_task})
    assert summary.by_action == {"restored": 1}
    (back,) = pg_rows(postgres_url, "SELECT * FROM biz.ticket_labels WHERE ticket_id = %s", [held[0]])
    assert (back["custom_id"], back["reason"], back["task_id"]) == ("earlier-cid", "earlier", "other_task")
    assert back["applied_at"] == dt.datetime(2030, 1, 1)


@pytest.mark.slow
def test_a_source_query_postgres_refuses_fails_the_freeze_with_its_message(seeded_copy, ticket_task, postgres_url):
    wh = tables_in_postgres(seeded_copy, postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        pg.execute("ALTER TABLE biz.support_tickets RENAME TO tickets_elsewhere")
    with pytest.raises(SourceQueryError) as caught:
        freeze_manifest(wh, ticket_task, DAY1)
    message = str(caught.value)
    assert "source.sql in" in message and "(schema biz)" in message and 'relation "support_tickets"' in message
    assert "\n" not in message


@pytest.mark.slow
def test_the_demo_with_its_tables_and_dagster_in_postgres_runs_to_final(
    ledger_backend, tmp_path, monkeypatch, postgres_url
):
    """`make services` + `make demo` with the printed lines, for one task: the source table seeded
    into schema `warehouse`, the answers written there, the runs kept in Dagster's PostgreSQL. With
    the control ledger there too (`distributed`), each partition's items are in a store of its own
    and no warehouse file is made."""
    from batch_assets.demo.runner import run_demo

    demo_env_on_postgres(monkeypatch, postgres_url)
    printed: list[tuple[list, list]] = []
    code = run_demo(tmp_path / "data", tasks=("ticket_triage",), print_table=lambda h, r: printed.append((h, r)))
    assert code == 0
    headers, rows = printed[0]
    by_task = {r[0]: dict(zip(headers, r)) for r in rows}
    assert {t: v["status"] for t, v in by_task.items()} == {
        "ticket_triage_20261120": "COMPLETED_WITH_FAILURES",
        "ticket_triage_20261121": "COMPLETED_WITH_FAILURES",
    }
    applied = pg_rows(postgres_url, "SELECT task_id, count(*) AS n FROM warehouse.ticket_labels GROUP BY 1 ORDER BY 1")
    assert {r["task_id"]: r["n"] for r in applied} == {t: int(v["applied"]) for t, v in by_task.items()}
    assert pg_rows(postgres_url, "SELECT count(*) AS n FROM warehouse.support_tickets")[0]["n"] > 0
    runs = pg_rows(postgres_url, "SELECT count(*) AS n FROM public.runs WHERE status = 'SUCCESS'")[0]["n"]
    assert runs >= 4  # a submit and a collect run per partition, at least
    assert _no_source_in_duckdb(tmp_path / "data")  # the ledger only
    stores = sorted(p.name for p in (tmp_path / "data" / "partitions").glob("*.duckdb"))
    if ledger_backend == "distributed":
        assert stores == [f"{t}.duckdb" for t in sorted(by_task)]
        assert not (tmp_path / "data" / "warehouse.duckdb").exists()
        with psycopg.connect(os.environ["BATCH_ASSETS_LEDGER_URL"]) as conn:  # every lease given back
            assert conn.execute("SELECT count(*) FROM ledger.partition_lease").fetchone() == (0,)
    else:
        assert stores == [] and (tmp_path / "data" / "warehouse.duckdb").exists()


def _no_source_in_duckdb(data_dir) -> bool:
    """No DuckDB file under data_dir (the warehouse file, or the partition stores) holds a task table."""
    files = [data_dir / "warehouse.duckdb", *sorted((data_dir / "partitions").glob("*.duckdb"))]
    names = set()
    for path in (f for f in files if f.exists()):
        with duckdb.connect(str(path), read_only=True) as conn:
            names |= {
                r[0]
                for r in conn.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()
            }
    return not names & {"support_tickets", "ticket_labels"}


def test_two_first_applies_creating_the_business_table_at_once_both_go_on(postgres_url, ticket_task):
    """Two partitions' first applies create the business table at the same moment (found by
    `bench --distributed` with 2 workers): the second waits on PostgreSQL's catalog, then finds the
    table made instead of failing. The first's creation is held open until the second is seen waiting."""
    import threading
    import time

    from batch_assets.pipeline.settle.business_table_pg import ensure_business_table

    tables = PgTables(postgres_url, schema="race")
    errors: list[BaseException] = []

    def second() -> None:
        try:
            with tables.session(read_only=False) as pg:
                ensure_business_table(pg, tables, ticket_task)
        except BaseException as exc:  # surfaced in the test's thread
            errors.append(exc)

    with psycopg.connect(postgres_url, autocommit=True) as watcher:
        with tables.session(read_only=False) as first:
            target = ensure_business_table(first, tables, ticket_task)  # created, not committed
            thread = threading.Thread(target=second)
            thread.start()
            deadline = dt.datetime.now() + dt.timedelta(seconds=60)
            while not watcher.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                assert dt.datetime.now() < deadline, "the second creation never waited for the first"
                assert thread.is_alive(), errors
                time.sleep(0.05)
        thread.join(timeout=60)
    assert not errors, errors
    with tables.session(read_only=True) as pg:
        assert pg.execute(f"SELECT count(*) FROM {target}").fetchone()[0] == 0
