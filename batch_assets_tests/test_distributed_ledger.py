"""`distributed` chosen by configuration alone: with BATCH_ASSETS_LEDGER_URL set, the control tables
are in PostgreSQL and the warehouse file keeps only the per-item tables (ledger/distributed.py).

On a real PostgreSQL: what a Warehouse connection binds and refuses, the commit order of a stage's
transaction across the two stores, eight submit processes on one partition with two SIGKILLed after
their create calls, and two partitions submitted at once by separate processes on a Dagster instance
in PostgreSQL, carried by the sensor to applied."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from batch_assets.ledger.control_db import CONTROL_TABLES, as_control
from batch_assets.ledger.distributed import LEDGER_URL_VAR, LedgerStoreError
from batch_assets.ledger.statements import insert_values
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets_tests import ledger_rows, sensor_ticks

from .conftest import DAY1, DAY2

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MARKER_TIMEOUT_S = 60.0  # how long a process may take to reach its fault point (not a timing assumption)
CLAIM_LEASE_S = 3.0


def _task_row(task_id: str) -> dict:
    return {
        "task_id": task_id,
        "task_name": "t",
        "partition_date": DAY1,
        "item_type": "ticket",
        "provider": "openai",
        "model": "m",
        "endpoint": "/v1/chat/completions",
        "prompt_version": "v1",
        "output_schema_version": "v1",
        "status": "FROZEN",
    }


def _add_task(conn, task_id: str) -> None:
    insert_values(conn, "batch_task", _task_row(task_id), fixed={"created_at": "now()", "updated_at": "now()"})


def _add_reject(conn) -> None:
    """A per-item row (the file's `ledger.source_reject`)."""
    row = {"task_id": "t_20261120", "business_id": "b", "row_count": 1, "reason_code": "null_key", "reason": "r"}
    insert_values(conn, "source_reject", row, fixed={"recorded_at": "now()"})


def _file_tables(wh: Warehouse) -> set[str]:
    with Warehouse.at(wh.database, wh.data_dir, ledger_url=None)._open(read_only=True) as conn:
        return {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'ledger'"
            ).fetchall()
        }


def test_the_control_tables_are_in_postgres_and_the_file_keeps_the_per_item_tables(tmp_path, postgres_url):
    wh = Warehouse.at(tmp_path / "w.duckdb", tmp_path, ledger_url=postgres_url)
    with wh.connect() as conn:
        assert as_control(conn).dialect == "postgres"
        _add_task(conn, "t_20261120")
        _add_reject(conn)
    tables = _file_tables(wh)
    assert not tables & set(CONTROL_TABLES) and {"manifest_item", "shard_line", "applied_result"} <= tables
    with psycopg.connect(postgres_url) as pg:
        assert pg.execute("SELECT task_id FROM ledger.batch_task").fetchall() == [("t_20261120",)]
    with wh.connect(read_only=True) as conn:
        assert ledger_rows.rows(conn, "SELECT count(*) FROM ledger.source_reject") == [(1,)]


def test_a_read_only_connection_cannot_write_the_postgres_ledger(tmp_path, postgres_url):
    wh = Warehouse.at(tmp_path / "w.duckdb", tmp_path, ledger_url=postgres_url)
    with wh.connect() as conn:
        _add_task(conn, "t_20261120")
    with wh.connect(read_only=True) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            as_control(conn).execute("DELETE FROM ledger.batch_task")
    with wh.connect() as conn:  # the pooled connection writes again for the next writer
        assert as_control(conn).execute("SELECT count(*) FROM ledger.batch_task").scalar() == 1


def test_a_stage_transaction_commits_both_stores_or_neither(tmp_path, postgres_url):
    wh = Warehouse.at(tmp_path / "w.duckdb", tmp_path, ledger_url=postgres_url)
    with wh.connect() as conn:
        with pytest.raises(RuntimeError, match="cut off"):
            with transaction(conn):
                _add_task(conn, "t_20261120")
                _add_reject(conn)
                raise RuntimeError("cut off")
        assert ledger_rows.rows(conn, "SELECT count(*) FROM ledger.batch_task") == [(0,)]
        assert ledger_rows.rows(conn, "SELECT count(*) FROM ledger.source_reject") == [(0,)]
        with transaction(conn):
            _add_task(conn, "t_20261120")
            _add_reject(conn)
            # Inside the block another session sees nothing yet: the control row commits with the file's.
            with psycopg.connect(postgres_url) as other:
                assert other.execute("SELECT count(*) FROM ledger.batch_task").fetchone() == (0,)
        assert ledger_rows.rows(conn, "SELECT count(*) FROM ledger.batch_task") == [(1,)]
        assert ledger_rows.rows(conn, "SELECT count(*) FROM ledger.source_reject") == [(1,)]


def test_a_local_ledger_file_is_refused_rather_than_hidden(tmp_path, postgres_url, monkeypatch, capsys):
    from batch_assets.cli import main

    local = Warehouse.at(tmp_path / "w.duckdb", tmp_path, ledger_url=None)
    with local.connect() as conn:
        _add_task(conn, "t_20261120")
    for read_only in (False, True):
        with pytest.raises(LedgerStoreError, match=f"holds a local control ledger .*{LEDGER_URL_VAR} is set"):
            with Warehouse.at(local.database, tmp_path, ledger_url=postgres_url).connect(read_only=read_only):
                pass
    with local.connect() as conn:  # nothing was dropped
        assert ledger_rows.rows(conn, "SELECT task_id FROM ledger.batch_task") == [("t_20261120",)]
    monkeypatch.setenv(LEDGER_URL_VAR, postgres_url)
    code = main(["report", "--database", str(local.database)])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "use a new data directory" in err
    assert "postgres@" not in err  # the URL's user and password stay out of messages


def test_a_per_item_store_without_the_ledger_url_is_refused(tmp_path, postgres_url):
    with Warehouse.at(tmp_path / "w.duckdb", tmp_path, ledger_url=postgres_url).connect():
        pass
    for read_only in (False, True):
        with pytest.raises(LedgerStoreError, match=f"keeps its control ledger in PostgreSQL: set {LEDGER_URL_VAR}"):
            with Warehouse.at(tmp_path / "w.duckdb", tmp_path, ledger_url=None).connect(read_only=read_only):
                pass


def test_a_bad_ledger_url_is_one_line_naming_the_variable(monkeypatch, tmp_path):
    from batch_assets.spec.errors import SettingError

    monkeypatch.setenv(LEDGER_URL_VAR, "mysql://db/x")
    with pytest.raises(SettingError, match=f"{LEDGER_URL_VAR} is not a PostgreSQL URL"):
        Warehouse.at(tmp_path / "w.duckdb")
    wh = Warehouse.at(tmp_path / "w.duckdb", ledger_url="postgresql://u:secret@127.0.0.1:1/none")
    with pytest.raises(ConnectionError, match="cannot reach the PostgreSQL ledger at 127.0.0.1:1/none") as err:
        with wh.connect():
            pass
    assert "secret" not in str(err.value)


# --- processes on one partition and across partitions -----------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "BATCH_ASSETS_FAULTPOINT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONWARNINGS"] = "error"
    return {**env, **extra}


def _wait_for_marker(marker: Path, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + MARKER_TIMEOUT_S
    while not marker.exists():
        assert proc.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, f"{marker.name} not reached in {MARKER_TIMEOUT_S}s"
        time.sleep(0.02)


def _wait_for_claims_to_run_out(wh: Warehouse) -> None:
    deadline = time.monotonic() + CLAIM_LEASE_S + MARKER_TIMEOUT_S
    live = "SELECT count(*) FROM ledger.provider_job WHERE claim_expires_at > now()::TIMESTAMP"
    while True:
        with wh.connect() as conn:
            if not ledger_rows.scalar(conn, live):
                return
        assert time.monotonic() < deadline, "the killed runs' claims never ran out"
        time.sleep(0.1)


@pytest.mark.slow
def test_eight_submit_processes_two_killed_after_the_create_leave_one_batch_per_shard(
    ledger_backend, seeded_copy, ticket_task, emulator, adapter, wait_for_jobs, tmp_path
):
    import dataclasses

    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.soak import provider_batch_ids

    wh = seeded_copy
    task = dataclasses.replace(ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=5))
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    with wh.connect() as conn:
        shards = [r[0] for r in ledger_rows.rows(conn, "SELECT shard_id FROM ledger.shard")]
    assert len(shards) == 10
    cmd = [sys.executable, "-m", "batch_assets_tests.stage_process", "submit", str(wh.database), str(wh.data_dir)]
    cmd += [str(task.yaml_path), DAY1, emulator.base_url]
    markers = [tmp_path / f"killed{i}.reached" for i in range(2)]
    procs: list[tuple[subprocess.Popen, object]] = []

    def start(i: int) -> None:
        extra = {"KILL_TEST_CLAIM_LEASE_S": str(CLAIM_LEASE_S)}
        if i < 2:
            extra["BATCH_ASSETS_FAULTPOINT"] = f"submit.created={markers[i]}"
        log = open(tmp_path / f"submit{i}.log", "wb")
        procs.append((subprocess.Popen(cmd, env=_env(**extra), stdout=log, stderr=subprocess.STDOUT), log))

    def reached(i: int) -> None:
        _wait_for_marker(markers[i], procs[i][0], tmp_path / f"submit{i}.log")

    try:
        # Two armed processes create a batch each and stop before the ledger records it; the six
        # others start while they hold their claims, then both are killed.
        start(0)
        reached(0)
        start(1)
        if ledger_backend == "local":  # the stopped run holds the warehouse file: the next waits for it
            os.kill(procs[0][0].pid, signal.SIGKILL)
        reached(1)
        for i in range(2, 8):
            start(i)
        for proc, _ in procs[:2]:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        for i, (proc, _) in enumerate(procs[2:], start=2):
            assert proc.wait(timeout=120) == 0, (tmp_path / f"submit{i}.log").read_text(errors="replace")
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            log.close()
    assert [p.returncode for p, _ in procs[:2]] == [-signal.SIGKILL] * 2
    # The killed runs' claims run out; a restarted run finds their batches at the provider and adopts them.
    _wait_for_claims_to_run_out(wh)
    restart = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120)
    assert restart.returncode == 0, restart.stdout + restart.stderr
    wait_for_jobs(wh, adapter)
    with wh.connect() as conn:
        jobs = ledger_rows.rows(conn, "SELECT shard_id, provider_batch_id FROM ledger.provider_job")
    batches = provider_batch_ids(emulator, "openai")
    assert sorted(s for s, _ in jobs) == sorted(shards)  # one job per shard
    assert sorted(b for _, b in jobs) == sorted(batches) and len(set(batches)) == len(shards)  # none twice


@pytest.mark.slow
def test_two_partitions_submitted_at_once_by_two_processes_reach_applied_on_postgres(
    dagster_env, emulator, postgres_url, monkeypatch, tmp_path
):
    from batch_assets.demo.runner import DAGSTER_PG_VARIABLE, prepare_dagster_home
    from batch_assets.soak import provider_batch_ids

    monkeypatch.setenv(LEDGER_URL_VAR, postgres_url)
    monkeypatch.setenv(DAGSTER_PG_VARIABLE, postgres_url.replace("postgresql://", "postgresql+psycopg2://", 1))
    home = prepare_dagster_home(tmp_path / "dagster")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    wh = Warehouse.at(dagster_env.database, dagster_env.data_dir)
    assert wh.ledger_url == postgres_url
    script = (
        "import sys, dagster as dg\n"
        "from batch_assets.definitions import defs\n"
        "with dg.DagsterInstance.get() as instance:\n"
        "    run = defs().resolve_job_def('ticket_triage__submit').execute_in_process(\n"
        "        partition_key=sys.argv[1], instance=instance, raise_on_error=False)\n"
        "sys.exit(0 if run.success else 1)\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, day], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for day in (DAY1, DAY2)
    ]
    outputs = [p.communicate(timeout=300)[0].decode(errors="replace") for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]

    from batch_assets.definitions import defs

    d = defs()
    collect = d.resolve_job_def("ticket_triage__collect")
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        cursor, collected, deadline = None, [], time.monotonic() + 60
        while len(collected) < 2:
            assert time.monotonic() < deadline, f"only {collected} were requested"
            result = sensor_ticks.tick(d, instance, cursor)
            cursor = result.cursor
            for request in result.run_requests:
                run = collect.execute_in_process(
                    instance=instance, partition_key=request.partition_key, tags=request.tags
                )
                assert run.success
                (recon,) = [e for e in run.get_asset_check_evaluations() if e.check_name == "reconciliation"]
                assert recon.passed and recon.metadata["final_status"].value == "COMPLETED"
                collected.append(request.partition_key)
            time.sleep(0.1)
        assert sorted(collected) == [DAY1, DAY2]
        assert len(instance.get_run_records()) == 4  # two submit runs, two collect runs, all in PostgreSQL
    with psycopg.connect(postgres_url) as pg:
        statuses = dict(pg.execute("SELECT task_id, final_status FROM ledger.batch_task").fetchall())
        batch_ids = [r[0] for r in pg.execute("SELECT provider_batch_id FROM ledger.provider_job").fetchall()]
        paths = [r[0] for r in pg.execute("SELECT path FROM ledger.shard").fetchall()]
    assert statuses == {"ticket_triage_20261120": "COMPLETED", "ticket_triage_20261121": "COMPLETED"}
    assert sorted(batch_ids) == sorted(provider_batch_ids(emulator, "openai"))
    assert paths and all(Path(p).is_absolute() for p in paths)
    assert not _file_tables(wh) & set(CONTROL_TABLES)
    with wh.connect(read_only=True) as conn:
        per_task = dict(conn.execute("SELECT task_id, count(*) FROM ticket_labels GROUP BY 1").fetchall())
    assert per_task == {"ticket_triage_20261120": 50, "ticket_triage_20261121": 50}
