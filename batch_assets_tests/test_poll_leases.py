"""Polling sharded over several status sensors: poll leases on the job rows (FOR UPDATE SKIP LOCKED on
PostgreSQL), run-key claims so that one sensor asks for each run, and the sharding setting.

The scale case runs two real status sensors whose scopes overlap (every job, and the openai and
anthropic jobs) and a `batch-assets poll` over 2,000 in-flight emulator jobs, five rounds; each
round forces the three polls to overlap (every poller has taken its leases before any polls), and
every job is polled exactly once per round."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import dagster as dg
import pytest

from batch_assets.bench.sensor import HOLD_S, register_jobs
from batch_assets.cli import main as cli_main
from batch_assets.cli import poll as cli_poll
from batch_assets.defs import sensors
from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets
from batch_assets.ledger.control_db import connect_postgres
from batch_assets.ledger.poll_leases import release_poll_leases, take_poll_leases
from batch_assets.ledger.run_requests import claim_run_keys, forget_old_run_requests
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect import poll
from batch_assets.pipeline.collect.poll_scopes import (
    EVERY_JOB,
    POLL_SENSORS_VAR,
    PollScope,
    PollScopeError,
    poll_scopes,
    task_bucket,
)
from batch_assets.resources import default_resources

from .conftest import FAST_EMULATOR
from .postgres_fixture import ledger_backend, postgres_url  # noqa: F401  (fixtures)

TASKS = ("ticket_triage", "review_sentiment", "kb_embeddings")
PROVIDER_OF = {"ticket_triage": "openai", "review_sentiment": "dashscope", "kb_embeddings": "gemini"}


def _jobs(wh: Warehouse, per_task: int) -> None:
    """`per_task` in-flight jobs for each of TASKS (rows only: no provider behind them)."""
    with wh.control() as db:
        for name in TASKS:
            task_id, provider = f"{name}_20261120", PROVIDER_OF[name]
            db.execute(
                """INSERT INTO ledger.batch_task (task_id, task_name, partition_date, item_type, provider, model,
                       endpoint, prompt_version, output_schema_version, status, created_at, updated_at)
                   VALUES (?, ?, DATE '2026-11-20', 'x', ?, 'm', '/v1/x', 'p1', 's1', 'submitted',
                           now()::TIMESTAMP, now()::TIMESTAMP)""",
                [task_id, name, provider],
            )
            db.execute(
                """INSERT INTO ledger.provider_job (job_key, task_id, shard_id, provider, endpoint, state,
                       provider_batch_id, created_at, state_changed_at)
                   SELECT ? || ':' || CAST(g.i AS VARCHAR), ?, 's', ?, '/v1/x', 'in_progress',
                          'batch_' || ? || CAST(g.i AS VARCHAR), now()::TIMESTAMP, now()::TIMESTAMP
                   FROM generate_series(1, ?) AS g(i)""",
                [task_id, task_id, provider, name, per_task],
            )


@pytest.fixture
def ledger(tmp_path, ledger_backend) -> Warehouse:  # noqa: F811
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    _jobs(wh, 10)
    return wh


def test_two_pollers_take_disjoint_leases_and_a_released_or_lapsed_lease_is_taken_again(ledger):
    with ledger.control() as db:
        first = take_poll_leases(db, "a", 60, max_jobs=12)
        second = take_poll_leases(db, "b", 60)
        assert len(first.jobs) == 12 and len(second.jobs) == 18
        assert not {j["job_key"] for j in first.jobs} & {j["job_key"] for j in second.jobs}
        assert second.held_elsewhere == 12
        # Nothing is left for a third poller while both hold theirs; the scope counts only its own jobs.
        third = take_poll_leases(db, "c", 60, providers=["openai"])
        assert third.jobs == [] and third.held_elsewhere == 10
        assert release_poll_leases(db, "a") == 12
        again = take_poll_leases(db, "c", 60)
        assert {j["job_key"] for j in again.jobs} == {j["job_key"] for j in first.jobs}
        # A poller that died: its lease lapses (forced into the past) and another takes its jobs.
        db.execute("UPDATE ledger.provider_job SET poll_lease_until = now()::TIMESTAMP - INTERVAL '1 second'")
        taken = take_poll_leases(db, "d", 60, task_names=["kb_embeddings"])
        assert len(taken.jobs) == 10 and {j["provider"] for j in taken.jobs} == {"gemini"}


def test_run_keys_are_claimed_by_one_sensor_and_asked_again_only_by_it(ledger):
    with ledger.control() as db:
        assert claim_run_keys(db, "s1", [("k1", "t", "j"), ("k2", "t", "j"), ("k1", "t", "j")]) == {"k1", "k2"}
        assert claim_run_keys(db, "s2", [("k1", "t", "j"), ("k3", "t", "j")]) == {"k3"}
        assert claim_run_keys(db, "s1", [("k1", "t", "j")]) == {"k1"}  # its own, asked again: Dagster drops it
        assert forget_old_run_requests(db) == 0
        assert forget_old_run_requests(db, older_than_s=-1) == 3


def test_skip_locked_leaves_rows_another_transaction_is_leasing(tmp_path, postgres_url, monkeypatch):  # noqa: F811
    from batch_assets.ledger.distributed import LEDGER_URL_VAR

    monkeypatch.setenv(LEDGER_URL_VAR, postgres_url)
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    _jobs(wh, 10)
    holder, other = connect_postgres(postgres_url), connect_postgres(postgres_url)
    other.execute("SET lock_timeout = '5s'")  # waiting for the locked rows would fail, not hang
    try:
        with holder.transaction():
            held = take_poll_leases(holder, "holder", 60, max_jobs=20)  # locked, not committed yet
            beside = take_poll_leases(other, "other", 60)
            assert len(held.jobs) == 20 and len(beside.jobs) == 10
            assert not {j["job_key"] for j in held.jobs} & {j["job_key"] for j in beside.jobs}
    finally:
        holder.conn.close()
        other.conn.close()


def test_the_sharding_setting_names_the_sensors_and_refuses_a_bad_value(monkeypatch):
    monkeypatch.delenv(POLL_SENSORS_VAR, raising=False)
    assert poll_scopes() == [EVERY_JOB]
    assert [s.name for s in poll_scopes("providers")] == [
        "provider_status_sensor__openai",
        "provider_status_sensor__dashscope",
        "provider_status_sensor__anthropic",
        "provider_status_sensor__gemini",
    ]
    buckets = poll_scopes("buckets:3")
    assert [s.name for s in buckets][-1] == "provider_status_sensor__bucket_3_of_3"
    names = [f"task_{i}" for i in range(60)]
    # Each task in exactly one bucket, and every bucket holds some.
    held = [b.task_names(names) for b in buckets]
    assert sorted(n for h in held for n in h) == sorted(names) and all(held)
    assert all(task_bucket(n, 3) == b.bucket for b, h in zip(buckets, held, strict=True) for n in h)
    for bad in ("bucket:4", "buckets:0", "buckets:x", "all"):
        with pytest.raises(PollScopeError, match=f"{POLL_SENSORS_VAR}=.*use one, providers, or buckets:N"):
            poll_scopes(bad)


# --- two overlapping sensors and a CLI poll over 2,000 emulator jobs ---------------------------------

JOBS = 2000
ROUNDS = 5
POLLERS = 3


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    return {**FAST_EMULATOR, "queue_delay_s": HOLD_S}  # every batch stays in flight


@pytest.mark.slow
def test_overlapping_sensors_and_a_cli_poll_poll_each_job_once_per_round(
    tmp_path,
    emulator,
    postgres_url,  # noqa: F811
    monkeypatch,
    capsys,
):
    from batch_assets.ledger.distributed import LEDGER_URL_VAR

    monkeypatch.setenv(LEDGER_URL_VAR, postgres_url)
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    with wh.connect() as conn:
        seed_support_tickets(conn, days=1, per_day=60)
        seed_kb_articles(conn, days=1, per_day=10)
        seed_product_reviews(conn, days=1, per_day=20)
    register_jobs(wh, emulator.base_url, JOBS)
    for var, value in {
        "BATCH_ASSETS_DATABASE": str(wh.database),
        "BATCH_ASSETS_DATA_DIR": str(wh.data_dir),
        "BATCH_ASSETS_EMULATOR_URL": emulator.base_url,
    }.items():
        monkeypatch.setenv(var, value)
    for provider in ("PROVIDER", "OPENAI", "DASHSCOPE", "ANTHROPIC", "GEMINI"):
        monkeypatch.delenv(f"BATCH_ASSETS_{provider}_MODE", raising=False)
    # No poll may stop at its time budget here: the test counts polls, not speed.
    monkeypatch.setattr(sensors, "POLL_BUDGET_S", 600.0)
    monkeypatch.setattr(cli_poll, "POLL_BUDGET_S", 600.0)
    # A sensor tick takes at most 700 jobs, so which poller takes which jobs varies round by round.
    monkeypatch.setattr(sensors, "POLL_MAX_JOBS", 700)

    counts: Counter = Counter()
    by_poller: dict[str, set] = {}
    polled_by: list[list[int]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(POLLERS, timeout=120)
    real_record, real_listed = poll._record, poll._listed_jobs

    def counted_record(wh_, snapshots, result):
        with lock:
            counts.update(snapshots.keys())
            by_poller[threading.current_thread().name] = set(snapshots)
        return real_record(wh_, snapshots, result)

    def leased_then_wait(jobs, adapters):
        barrier.wait()  # every poller holds its leases before any of them polls
        return real_listed(jobs, adapters)

    monkeypatch.setattr(poll, "_record", counted_record)
    monkeypatch.setattr(poll, "_listed_jobs", leased_then_wait)

    from batch_assets.definitions import defs as load

    definitions = load()
    task_jobs = [job for job in definitions.jobs or [] if job.name.endswith(("__submit", "__collect"))]
    overlapping = PollScope("provider_status_sensor__openai_anthropic", providers=("openai", "anthropic"))
    (second,) = sensors.build_provider_status_sensors(task_jobs, [overlapping])
    first = definitions.resolve_sensor_def(sensors.SENSOR_NAME)
    with dg.instance_for_test() as instance:
        cursors: dict[str, str | None] = {first.name: None, second.name: None}
        errors: list[BaseException] = []

        def tick(sensor):
            try:
                context = dg.build_sensor_context(
                    instance=instance,
                    cursor=cursors[sensor.name],
                    definitions=definitions,
                    resources=default_resources(),
                )
                cursors[sensor.name] = sensor.evaluate_tick(context).cursor
            except BaseException as exc:  # surfaced below, in the test's thread
                errors.append(exc)
                barrier.abort()

        def cli():
            try:
                assert cli_main(["poll"]) == 0
            except BaseException as exc:
                errors.append(exc)
                barrier.abort()

        for _ in range(ROUNDS):
            counts.clear()
            by_poller.clear()
            threads = [threading.Thread(target=tick, args=(s,)) for s in (first, second)]
            threads.append(threading.Thread(target=cli))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors
            assert len(counts) == JOBS and set(counts.values()) == {1}, Counter(counts.values())
            with wh.control() as db:
                assert db.execute("SELECT count(poll_owner) FROM ledger.provider_job").scalar() == 0
            polled_by.append(sorted(len(c) for c in by_poller.values()))
    # Every round's CLI poll printed its summary; the pollers shared the jobs, not polled them twice.
    assert capsys.readouterr().out.count("polled ") == ROUNDS
    assert all(sum(shares) == JOBS for shares in polled_by), polled_by


def test_the_definitions_hold_one_status_sensor_per_provider_when_asked(monkeypatch):
    from batch_assets.definitions import defs as load

    monkeypatch.setenv(POLL_SENSORS_VAR, "providers")
    names = sorted(s.name for s in load().sensors or [] if s.name.startswith("provider_status_sensor"))
    assert names == sorted(f"provider_status_sensor__{p}" for p in ("openai", "dashscope", "anthropic", "gemini"))


def test_a_cli_poll_of_an_unknown_task_is_one_line_naming_it(ledger, monkeypatch, capsys):
    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(ledger.database))
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(ledger.data_dir))
    assert cli_main(["poll", "--task", "no_such_task"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no task or task_id 'no_such_task'" in err and "batch-assets jobs" in err
