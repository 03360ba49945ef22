"""Run files (manifests, shards, raw result files) in object storage: every stage of a partition on
any machine (storage/run_files.py). Real PostgreSQL and S3 servers, each stage in a process of its
own (batch_assets_tests.stage_process) with a data directory nothing else uses."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import psycopg
import pytest

from batch_assets.ledger import store_versions
from batch_assets.ledger.store_versions import StoreVersionConflict
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline import faultpoints
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.retention import collect_file_garbage, purge_local
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import settle
from batch_assets.storage.run_files import CACHE_DIR
from batch_assets_tests import ledger_rows
from batch_assets_tests.pg_tables import storage_env, tables_in_postgres

from .conftest import DAY1
from .stage_runs import kill_at, run_stage

pytestmark = pytest.mark.slow
SENDING = ("freeze", "cut", "submit")
SETTLING = ("download", "ingest", "parse", "apply")


@pytest.fixture
def machine(monkeypatch, postgres_url, s3_storage, seeded_copy, tmp_path):
    """`machine(name)`: a Warehouse with an empty data directory of its own, on the environment
    `make services` prints (control ledger and tables in PostgreSQL, run files and stores in S3)."""
    tables_in_postgres(seeded_copy, postgres_url)
    monkeypatch.setenv("BATCH_ASSETS_LEDGER_URL", postgres_url)
    monkeypatch.setenv("BATCH_ASSETS_TABLES_URL", postgres_url)
    monkeypatch.setenv("BATCH_ASSETS_TABLES_SCHEMA", "biz")
    storage_env(monkeypatch, s3_storage)

    def at(name: str) -> Warehouse:
        wh = Warehouse.at(tmp_path / name / "warehouse.duckdb")
        assert wh.partition_stores and wh.storage == s3_storage
        return wh

    return at


def _stages(stages, wh, task, emulator, tmp_path) -> None:
    for stage in stages:
        run_stage(stage, wh, task, DAY1, emulator, tmp_path)


def _keys(s3_storage, kind: str) -> set[str]:
    return {k for k, _ in s3_storage.objects(kind)}


def _raw_paths(wh: Warehouse, task_id: str) -> list[str]:
    with wh.of(task_id).connect(read_only=True) as conn:
        return [r[0] for r in ledger_rows.rows(conn, "SELECT path FROM ledger.raw_file ORDER BY path")]


def _only_caches(*machines: Warehouse) -> None:
    """Nothing of the run on a machine's disk but its cache (deletable: every file is in S3)."""
    for wh in machines:
        assert {p.name for p in wh.data_dir.iterdir()} <= {CACHE_DIR}, sorted(wh.data_dir.iterdir())


def _no_local_path(postgres_url: str, wh: Warehouse, tmp_path: Path) -> None:
    """No text value in the PostgreSQL ledger, nor in any partition store, names a path on a machine."""
    here = str(tmp_path)
    with psycopg.connect(postgres_url) as pg:
        columns = pg.execute(
            """SELECT table_name, column_name FROM information_schema.columns
            WHERE table_schema = 'ledger' AND data_type IN ('text', 'character varying')"""
        ).fetchall()
        assert columns
        for table, column in columns:
            hits = pg.execute(
                f'SELECT count(*) FROM ledger."{table}" WHERE position(%s in "{column}") > 0', [here]
            ).fetchone()[0]
            assert hits == 0, f"ledger.{table}.{column} names a local path"
    with wh.connect(read_only=True) as conn:
        columns = conn.execute(
            """SELECT table_catalog, table_name, column_name FROM information_schema.columns
            WHERE table_schema = 'ledger' AND data_type = 'VARCHAR'"""
        ).fetchall()
        for catalog, table, column in columns:
            sql = f'SELECT count(*) FROM "{catalog}".ledger."{table}" WHERE position(? in "{column}") > 0'
            assert conn.execute(sql, [here]).fetchone()[0] == 0, f"{catalog}: ledger.{table}.{column}"


def _settled(wh: Warehouse, task, postgres_url: str):
    task_id = task.task_id(DAY1)
    rec, verdict = settle(wh, task_id, task.spec.retry.max_failed_fraction)
    assert rec.unresolved == 0 and rec.problems() == [], (rec.unresolved, rec.problems())
    assert verdict.passed, verdict.reasons
    table, key = task.spec.apply.table, task.spec.apply.key
    with psycopg.connect(postgres_url) as pg:
        assert pg.execute(f"SELECT count(*), count(DISTINCT {key}) FROM biz.{table}").fetchone() == (
            rec.applied,
            rec.applied,
        )
    return rec


def test_a_partition_sent_from_one_machine_is_collected_parsed_and_applied_on_another(
    machine, ticket_task, emulator, adapter, wait_for_jobs, s3_storage, postgres_url, tmp_path
):
    a, b, c = machine("a"), machine("b"), machine("c")
    _stages(SENDING, a, ticket_task, emulator, tmp_path)
    wait_for_jobs(c, adapter)
    _stages(SETTLING, b, ticket_task, emulator, tmp_path)  # b's disk had none of a's files

    rec = _settled(c, ticket_task, postgres_url)  # c, a third machine, reads it all from the servers
    assert rec.applied > 0
    task_id = ticket_task.task_id(DAY1)
    with c.control() as db:
        (manifest,) = db.execute("SELECT manifest_uri FROM ledger.batch_task").rows[0]
        shards = [r[0] for r in db.execute("SELECT path FROM ledger.shard").rows]
    raws = _raw_paths(c, task_id)
    assert shards and raws
    for kind, recorded in (("manifests", [manifest]), ("shards", shards), ("raw", raws)):
        keys = {s3_storage.key_of(u) for u in recorded}  # content-keyed: <kind>/<task>/<sha256>/<name>
        assert all(k.startswith(f"{kind}/{task_id}/") and len(k.split("/")[2]) == 64 for k in keys)
        assert keys == _keys(s3_storage, kind)
    _only_caches(a, b, c)
    _no_local_path(postgres_url, c, tmp_path)
    assert collect_file_garbage(c, grace=dt.timedelta(0)) == []  # every object is named by a ledger row


def test_a_raw_file_uploaded_by_a_run_killed_before_its_ledger_row_is_an_orphan_and_the_rerun_reuses_its_key(
    machine, ticket_task, emulator, adapter, wait_for_jobs, s3_storage, postgres_url, tmp_path
):
    a, b = machine("a"), machine("b")
    task_id = ticket_task.task_id(DAY1)
    _stages(SENDING, a, ticket_task, emulator, tmp_path)
    wait_for_jobs(a, adapter)

    kill_at("download.file_written", b, ticket_task, DAY1, emulator, tmp_path)  # uploaded, no row yet
    orphans = _keys(s3_storage, "raw")
    assert orphans and _raw_paths(a, task_id) == []
    kill_at("download.file_written", a, ticket_task, DAY1, emulator, tmp_path)  # again, on another machine
    assert _keys(s3_storage, "raw") == orphans  # the same bytes: the same key, no second object

    assert collect_file_garbage(a) == []  # younger than the grace period: it may still be committing
    assert collect_file_garbage(a, grace=dt.timedelta(0), dry_run=True) == sorted(orphans)
    assert _keys(s3_storage, "raw") == orphans
    assert collect_file_garbage(a, grace=dt.timedelta(0)) == sorted(orphans)
    assert _keys(s3_storage, "raw") == set()

    _stages(SETTLING, b, ticket_task, emulator, tmp_path)
    recorded = {s3_storage.key_of(u) for u in _raw_paths(a, task_id)}
    assert recorded >= orphans and recorded == _keys(s3_storage, "raw")  # the rerun's keys: the orphans'
    _settled(a, ticket_task, postgres_url)
    assert collect_file_garbage(a, grace=dt.timedelta(0)) == []


def test_purging_a_final_partition_in_object_storage_deletes_its_shards_and_compresses_its_raw_files(
    machine, ticket_task, emulator, adapter, wait_for_jobs, s3_storage, postgres_url, tmp_path
):
    a, b = machine("a"), machine("b")
    task_id = ticket_task.task_id(DAY1)
    _stages(SENDING, a, ticket_task, emulator, tmp_path)
    wait_for_jobs(a, adapter)
    _stages(SETTLING, a, ticket_task, emulator, tmp_path)
    _settled(a, ticket_task, postgres_url)
    raws, shards = _keys(s3_storage, "raw"), _keys(s3_storage, "shards")
    answers = {Path(k).name: a.files.local(s3_storage.url(k)).read_bytes() for k in raws}

    summary = purge_local(b, dt.timedelta(0))  # on a machine that never had the files
    assert len(summary.shards) == len(shards) and len(summary.raw_files) == len(raws) and summary.bytes_freed > 0
    assert _keys(s3_storage, "shards") == set()
    archived = _keys(s3_storage, "raw")
    assert archived.isdisjoint(raws) and all(k.endswith(".gz") for k in archived) and len(archived) == len(raws)
    with b.of(task_id).connect(read_only=True) as conn:
        rows = ledger_rows.rows(conn, "SELECT purged_at IS NOT NULL, archived_path FROM ledger.raw_file")
    assert all(purged for purged, _ in rows) and {s3_storage.key_of(p) for _, p in rows} == archived
    for key in archived:  # the provider's answers survive, compressed: the only verbatim copy
        original = answers[Path(key).name.removesuffix(".gz")]
        assert gzip.decompress(b.files.local(s3_storage.url(key)).read_bytes()) == original

    again = purge_local(b, dt.timedelta(0))
    assert again.shards == [] and again.raw_files == []
    assert collect_file_garbage(b, grace=dt.timedelta(0)) == []  # the archives and manifest stay named
    assert _keys(s3_storage, "raw") == archived and _keys(s3_storage, "manifests")
    _only_caches(a, b)


@pytest.mark.parametrize("point", ["ingest.between_commits", "parse.before_commit", "apply.between_commits"])
def test_a_stage_killed_on_one_machine_and_rerun_on_another_ends_every_item_once(
    point, machine, ticket_task, emulator, adapter, wait_for_jobs, s3_storage, postgres_url, tmp_path
):
    """SIGKILL inside a stage on a (between_commits: its store version uploaded, the pointer not
    moved yet), the rest on b: every item final, nothing recorded twice, the lost version an orphan."""
    a, b = machine("a"), machine("b")
    stage = point.split(".")[0]
    task_id = ticket_task.task_id(DAY1)
    _stages(SENDING, a, ticket_task, emulator, tmp_path)
    wait_for_jobs(a, adapter)
    _stages(SETTLING[: SETTLING.index(stage)], a, ticket_task, emulator, tmp_path)
    before = _keys(s3_storage, "stores")
    kill_at(point, a, ticket_task, DAY1, emulator, tmp_path)
    orphans = _keys(s3_storage, "stores") - before  # uploaded by the killed run, named by no pointer
    assert len(orphans) == (1 if point.endswith("between_commits") else 0)

    _stages(SETTLING[SETTLING.index(stage) :], b, ticket_task, emulator, tmp_path)
    _settled(b, ticket_task, postgres_url)
    _recorded_once(b, task_id)
    with b.control() as db:
        current = store_versions.current(db, task_id).object_key
        collected = store_versions.collect_garbage(s3_storage, db, grace=dt.timedelta(0))
    assert orphans <= set(collected) and _keys(s3_storage, "stores") == {current}


def _recorded_once(wh: Warehouse, task_id: str) -> None:
    with wh.of(task_id).connect(read_only=True) as conn:
        for sql in (
            "SELECT count(*) - count(DISTINCT custom_id) FROM ledger.applied_result",
            "SELECT count(*) - count(DISTINCT (file_key, line_no)) FROM ledger.raw_result",
            "SELECT count(*) - count(DISTINCT path) FROM ledger.raw_file",
            "SELECT count(*) - count(DISTINCT (custom_id, attempt)) FROM ledger.parsed_result",
        ):
            assert ledger_rows.rows(conn, sql) == [(0,)], sql


def _sent_and_parsed(wh: Warehouse, task, adapter, wait_for_jobs) -> None:
    """The partition's stages up to apply, in this process."""
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    submit_pending(wh, task, DAY1, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, task, DAY1, adapter)
    parse_results(wh, task, DAY1)


def test_two_applies_racing_on_one_partition_store_apply_every_item_once(
    machine, ticket_task, adapter, wait_for_jobs, postgres_url, monkeypatch
):
    """a's apply has written the business rows when b's apply runs to its end and moves the store's
    pointer: a's compare-and-set fails, nothing of its transaction is kept, and its rerun starts from
    b's version and finds nothing left to apply."""
    a, b = machine("a"), machine("b")
    task_id = ticket_task.task_id(DAY1)
    _sent_and_parsed(a, ticket_task, adapter, wait_for_jobs)
    with a.control() as db:
        started_from = store_versions.current(db, task_id).version

    real_reached, won = faultpoints.reached, []

    def b_runs_first(point: str) -> None:
        if point == "apply.before_commit" and not won:
            won.append(None)  # b's own apply passes here too: it runs through
            won[0] = apply_results(b, ticket_task, DAY1)
        real_reached(point)

    monkeypatch.setattr(faultpoints, "reached", b_runs_first)
    with pytest.raises(StoreVersionConflict):
        apply_results(a, ticket_task, DAY1)
    monkeypatch.setattr(faultpoints, "reached", real_reached)
    with a.control() as db:
        assert store_versions.current(db, task_id).version > started_from  # b's compare-and-set won
    assert won[0].applied > 0
    assert apply_results(a, ticket_task, DAY1).applied == 0  # the rerun: from b's version, nothing left
    rec = _settled(a, ticket_task, postgres_url)
    assert rec.applied == won[0].applied
    _recorded_once(a, task_id)


def test_a_report_across_partitions_reads_a_final_partitions_summary_until_its_store_moves(
    machine, ticket_task, adapter, wait_for_jobs, monkeypatch, capsys
):
    """A final partition's figures are recorded with the control rows; `batch-assets report` on a
    machine with an empty data directory reads them without downloading the store, and reads the
    store again once a write has moved its version."""
    from batch_assets.ledger.transaction import transaction
    from batch_assets.pipeline.report.summaries import computed_figures, record_final_figures
    from batch_assets_tests.cli_calls import run

    a = machine("a")
    task_id = ticket_task.task_id(DAY1)
    _sent_and_parsed(a, ticket_task, adapter, wait_for_jobs)
    apply_results(a, ticket_task, DAY1)
    rec, verdict = settle(a, task_id, ticket_task.spec.retry.max_failed_fraction)
    assert verdict.final_status is not None

    def settings(_):
        return (ticket_task.spec.retry.max_failed_fraction, ticket_task.spec.empty_source)

    assert record_final_figures(a, [task_id], settings) == 1
    with a.across([task_id]) as conn:
        expected = computed_figures(conn, [task_id], settings, dt.datetime.now())[task_id].rec

    def report(name: str) -> dict:
        wh = machine(name)
        monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(wh.database))
        code, out, err = run(capsys, "report", "--format", "json")
        assert code == 0, err
        (row,) = [r for r in json.loads(out) if r["task_id"] == task_id]
        return row, list(wh.stores_dir.rglob("*.duckdb")) if wh.stores_dir.exists() else []

    row, downloaded = report("reader")
    assert downloaded == []  # no store read: the figures came from the PostgreSQL ledger
    assert (row["items"], row["applied"], row["status"]) == (
        expected.manifest_items,
        expected.applied,
        rec.final_status,
    )
    assert row["balanced"] and row["check"] == verdict.status

    with a.of(task_id).connect() as conn, transaction(conn):  # any write moves the store's version
        conn.execute(
            """INSERT INTO ledger.source_reject (task_id, business_id, row_count, reason_code, reason, recorded_at)
               VALUES (?, 'late', 1, 'test', 'test', now()::TIMESTAMP)""",
            [task_id],
        )
    row, downloaded = report("second_reader")
    assert downloaded  # the summary no longer holds: the store was read
    assert row["rejected"] == expected.source_rejects + 1
