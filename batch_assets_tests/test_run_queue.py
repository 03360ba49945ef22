"""A real dagster-daemon with deploy/dagster.local.yaml (the QueuedRunCoordinator, one run per task
partition, at most 2 runs per provider) launches 9 submit runs over 3 partitions submitted through
the webserver, as `make dev-distributed` does: no two runs of one partition ever ran at once, and
never more than 2 of the provider's. The ledger, tables and Dagster's storage are in PostgreSQL, run
files and partition stores in S3."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from batch_assets.bench.at_once import most_at_once
from batch_assets.components.asset_metadata import TAG_PROVIDER, TAG_TASK_PARTITION
from batch_assets.demo.runner import seed_demo_tables
from batch_assets.deployment.local_stack import (
    INSTANCE_PG_VARIABLE,
    Launch,
    prepare_instance,
    submit_runs,
    wait_for_location,
)
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.ports import LOOPBACK, free_port
from batch_assets.process_group import start_group, stop_group

from .pg_tables import demo_env_on_postgres, storage_env
from .postgres_fixture import postgres_url, s3_storage  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # starts PostgreSQL-backed Dagster, the daemon and the emulator

DAYS = ("2026-11-20", "2026-11-21", "2026-11-22")
RUNS_PER_DAY = 3
PROVIDER_CAP = 2  # deploy/dagster.local.yaml's limit on batch_assets/provider
RUNS_TIMEOUT_S = 420.0


def test_the_daemon_never_runs_two_runs_of_a_partition_nor_more_than_the_provider_cap(
    tmp_path,
    emulator,
    postgres_url,  # noqa: F811
    s3_storage,  # noqa: F811
    monkeypatch,
):
    from batch_assets.ledger.distributed import LEDGER_URL_VAR

    demo_env_on_postgres(monkeypatch, postgres_url)
    storage_env(monkeypatch, s3_storage)
    monkeypatch.setenv(LEDGER_URL_VAR, postgres_url)
    data_dir = tmp_path / "data"
    wh = Warehouse.at(data_dir / "warehouse.duckdb", data_dir)
    seed_demo_tables(wh, days=len(DAYS))
    home = prepare_instance(tmp_path / "dagster_home")
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        INSTANCE_PG_VARIABLE: os.environ["BATCH_ASSETS_DAGSTER_PG_URL"],
        "DAGSTER_HOME": str(home),
        "BATCH_ASSETS_DATABASE": str(wh.database),
        "BATCH_ASSETS_DATA_DIR": str(data_dir),
        "BATCH_ASSETS_EMULATOR_URL": emulator.base_url,
        "VIRTUAL_ENV": str(bin_dir.parent),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    port = free_port()
    log = (tmp_path / "dg_dev.log").open("wb")
    stack = start_group(
        [str(bin_dir / "dg"), "dev", "--host", LOOPBACK, "--port", str(port)],
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_location(port, 240, alive=lambda: stack.poll() is None)
        launches = [Launch("ticket_triage__submit", "ticket_triage", day) for day in DAYS for _ in range(RUNS_PER_DAY)]
        run_ids = submit_runs(port, launches)
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        monkeypatch.setenv(INSTANCE_PG_VARIABLE, env[INSTANCE_PG_VARIABLE])
        with dg.DagsterInstance.from_config(str(home)) as instance:
            deadline = time.monotonic() + RUNS_TIMEOUT_S
            while True:
                records = instance.get_run_records(dg.RunsFilter(run_ids=run_ids))
                if all(r.dagster_run.is_finished for r in records) and len(records) == len(run_ids):
                    break
                assert time.monotonic() < deadline, [r.dagster_run.status for r in records]
                assert stack.poll() is None, (tmp_path / "dg_dev.log").read_text()[-3000:]
                time.sleep(1.0)
            # Every run the daemon launched, also the collect runs the status sensor asked for meanwhile.
            everything = instance.get_run_records(dg.RunsFilter(job_name=None))
    finally:
        stop_group(stack)
        log.close()
    statuses = {r.dagster_run.run_id: r.dagster_run.status for r in records}
    assert set(statuses.values()) == {dg.DagsterRunStatus.SUCCESS}, statuses
    started = [r for r in everything if r.start_time is not None]
    assert len(started) >= len(run_ids)
    now = time.time()
    by_partition: dict[str, list] = {}
    by_provider: dict[str, list] = {}
    for r in started:
        span = (r.start_time, r.end_time or now)
        by_partition.setdefault(r.dagster_run.tags[TAG_TASK_PARTITION], []).append(span)
        by_provider.setdefault(r.dagster_run.tags[TAG_PROVIDER], []).append(span)
    assert sorted(by_partition) == [f"ticket_triage:{day}" for day in DAYS]
    assert all(most_at_once(spans) == 1 for spans in by_partition.values()), by_partition
    assert most_at_once(by_provider["openai"]) <= PROVIDER_CAP, by_provider
    # The runs did the work: every partition's shards went out once (a repeat submits nothing new).
    with wh.control(read_only=True) as db:
        shards = db.execute("SELECT task_id, count(*), count(DISTINCT shard_id) FROM ledger.shard GROUP BY 1").rows
    assert len(shards) == len(DAYS) and all(total == distinct > 0 for _task, total, distinct in shards)
