"""The provider status sensor at scale, at small N with the conditions forced: a tick polls the
least recently polled jobs first, so with more jobs in flight than one tick polls every job is
still polled within two ticks; a tick's poll results are recorded set-based (one UPDATE of the
job rows, one INSERT of status events, whatever the count); shards held back for the provider's
job cap are recorded with one statement. The jobs are registered by the sensor benchmark's own
registration (`bench.sensor.register_jobs`) against the emulator, its batches held in flight."""

from __future__ import annotations

import dataclasses
from typing import Any

import dagster as dg
import pytest

from batch_assets.bench.profile import ProfilingWarehouse
from batch_assets.bench.sensor import HOLD_S, PARTITION, register_jobs
from batch_assets.defs import sensors
from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets
from batch_assets.ledger.states import IN_FLIGHT_SQL
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.resources import ProvidersResource, default_resources

from .conftest import FAST_EMULATOR

JOBS = 200
PER_TICK = 120  # fewer than JOBS, more than half of them: two ticks reach every job


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    return {**FAST_EMULATOR, "queue_delay_s": HOLD_S}  # every batch stays in flight


@pytest.fixture
def fleet(tmp_path, emulator, monkeypatch) -> Warehouse:
    """JOBS in-flight jobs across the four providers; the project's Definitions pointed at them."""
    wh = ProfilingWarehouse(database=tmp_path / "warehouse.duckdb", data_dir=tmp_path / "data")
    with wh.connect() as conn:
        seed_support_tickets(conn, days=1, per_day=60)
        seed_kb_articles(conn, days=1, per_day=10)
        seed_product_reviews(conn, days=1, per_day=20)
    shares, _real = register_jobs(wh, emulator.base_url, JOBS)
    assert shares == {"openai": 50, "dashscope": 50, "anthropic": 50, "gemini": 50}
    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(wh.database))
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(wh.data_dir))
    monkeypatch.setenv("BATCH_ASSETS_EMULATOR_URL", emulator.base_url)
    for key in (
        "BATCH_ASSETS_PROVIDER_MODE",
        "BATCH_ASSETS_OPENAI_MODE",
        "BATCH_ASSETS_DASHSCOPE_MODE",
        "BATCH_ASSETS_ANTHROPIC_MODE",
        "BATCH_ASSETS_GEMINI_MODE",
    ):
        monkeypatch.delenv(key, raising=False)
    wh.statements.clear()
    return wh


def poll_times(wh: Warehouse) -> dict[str, Any]:
    with wh.connect() as conn:
        return dict(
            conn.execute(f"SELECT job_key, last_polled_at FROM ledger.provider_job WHERE {IN_FLIGHT_SQL}").fetchall()
        )


def writes(wh: ProfilingWarehouse, prefix: str) -> int:
    return sum(1 for _s, sql in wh.statements if " ".join(sql.split()).startswith(prefix))


@pytest.mark.slow
def test_every_job_is_polled_within_two_ticks_and_each_tick_is_recorded_in_one_batch(fleet, monkeypatch):
    wh = fleet
    assert len(poll_times(wh)) == JOBS
    monkeypatch.setattr(sensors, "POLL_MAX_JOBS", PER_TICK)  # a tick cannot reach every job
    with dg.instance_for_test() as instance:
        from batch_assets.definitions import defs as load

        definitions = load()
        sensor = definitions.resolve_sensor_def(sensors.SENSOR_NAME)
        # The jobs submit_pending created were recorded (polled) by it; the rest never were.
        cursor, seen, tick_times = None, [poll_times(wh)], []
        for _ in range(4):
            result = sensor.evaluate_tick(
                dg.build_sensor_context(
                    instance=instance, cursor=cursor, definitions=definitions, resources=default_resources()
                )
            )
            cursor = result.cursor
            seen.append(poll_times(wh))
            polled_now = {k for k, t in seen[-1].items() if t != seen[-2][k]}
            assert len(polled_now) == PER_TICK
            # The tick's poll results were recorded together (one UPDATE): one poll time for all.
            (when,) = {seen[-1][k] for k in polled_now}
            tick_times.append(when)
    never = {k for k, t in seen[0].items() if t is None}
    assert len(never) > PER_TICK
    # Tick 1 polled only never polled jobs; tick 2 took the rest of them first.
    assert {k for k, t in seen[1].items() if t == tick_times[0]} <= never
    # After tick 2 and every later tick, each job was polled in that tick or the one before.
    for tick in range(2, len(seen)):
        assert min(seen[tick].values()) >= tick_times[tick - 2]


@pytest.mark.slow
def test_poll_results_are_recorded_with_one_statement_whatever_their_number(fleet, emulator):
    wh = fleet
    never_before = sum(t is None for t in poll_times(wh).values())
    adapters = ProvidersResource(emulator_url=emulator.base_url, max_retries=2)
    result = poll_jobs(wh, adapters.adapter, max_jobs=PER_TICK)
    assert result.polled == PER_TICK and not result.errors
    # The poll results in one UPDATE; the lease marks taken and cleared in one each.
    assert writes(wh, "UPDATE ledger.provider_job AS j") == 1
    assert writes(wh, "UPDATE ledger.provider_job") == 3
    assert writes(wh, "INSERT INTO ledger.status_event") == 1
    # The least recently polled first: the never polled went first, the next call polls the rest.
    never = {k for k, t in poll_times(wh).items() if t is None}
    assert len(never) == never_before - PER_TICK > 0
    wh.statements.clear()
    again = poll_jobs(wh, adapters.adapter, max_jobs=len(never))
    assert again.polled == len(never)
    assert all(t is not None for t in poll_times(wh).values())
    assert writes(wh, "UPDATE ledger.provider_job") == 3


@pytest.mark.slow
def test_shards_held_back_for_the_job_cap_are_recorded_with_one_statement(tmp_path, emulator, ticket_task):
    wh = ProfilingWarehouse(database=tmp_path / "warehouse.duckdb", data_dir=tmp_path / "data")
    with wh.connect() as conn:
        seed_support_tickets(conn, days=1, per_day=60)
    task = dataclasses.replace(
        ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=5, max_concurrent_jobs=2)
    )
    freeze_manifest(wh, task, PARTITION)
    shards = cut_shards(wh, task, PARTITION).total_shards
    adapter = ProvidersResource(emulator_url=emulator.base_url, max_retries=2).adapter("openai")
    wh.statements.clear()
    summary = submit_pending(wh, task, PARTITION, adapter)
    with wh.connect() as conn:
        deferred = conn.execute("SELECT count(*) FROM ledger.shard WHERE deferred_at IS NOT NULL").fetchone()[0]
        total = conn.execute("SELECT count(*) FROM ledger.shard").fetchone()[0]
    assert total == shards > 2
    assert len(summary.submitted) == 2 and summary.waiting_for_capacity == deferred == total - 2
    # The first shard refused records its place in its admission; the rest wait in one statement.
    assert writes(wh, "UPDATE ledger.shard SET deferred_at = coalesce") == 2


def test_a_batch_of_poll_results_keeps_the_rules_of_one(warehouse):
    """record_snapshots: transitions and raw-status changes add events, a newly terminal job gets
    the next terminal_seq, a terminal job stays terminal and only learns about its results."""
    from batch_assets.ledger.jobs import insert_jobs, record_snapshots, snapshot_columns
    from batch_assets.providers.contract import JobSnapshot, JobState

    states = {"a": JobState.VALIDATING, "b": JobState.RUNNING, "c": JobState.COMPLETED, "d": JobState.RUNNING}
    with warehouse.connect() as conn:
        insert_jobs(
            conn,
            "t_20261120",
            """
            SELECT 'job_' || k AS job_key, 's' AS shard_id, 'openai' AS provider, '/v1/chat/completions' AS endpoint,
                   'batch_' || k AS provider_batch_id, NULL AS input_file_id, NULL AS output_file_id,
                   NULL AS error_file_id, lower(state) AS raw_status, state, false AS cancel_requested,
                   10 AS request_total, 0 AS request_completed, 0 AS request_failed, NULL AS provider_errors,
                   now()::TIMESTAMP AS created_at, now()::TIMESTAMP AS submitted_at,
                   now()::TIMESTAMP AS state_changed_at, NULL AS terminal_at, NULL AS last_polled_at,
                   NULL AS downloaded_at
            FROM (SELECT unnest(?::VARCHAR[]) AS k, unnest(?::VARCHAR[]) AS state)""",
            [list(states), [s.value for s in states.values()]],
        )
        seq_before = conn.execute("SELECT coalesce(max(terminal_seq), 0) FROM ledger.provider_job").fetchone()[0]
        snaps = {
            "job_a": JobSnapshot("batch_a", "in_progress", JobState.RUNNING, 10, 3, 0),
            "job_b": JobSnapshot(
                "batch_b", "completed", JobState.COMPLETED, 10, 10, 0, output_file_id="file-out", results_ready=True
            ),
            "job_c": JobSnapshot(
                "batch_c", "failed", JobState.FAILED, 10, 0, 10, output_file_id="file-late", results_ready=True
            ),
            "job_d": JobSnapshot("batch_d", "in_progress", JobState.RUNNING, 10, 5, 0),  # raw status changed only
        }
        changed = record_snapshots(conn, snapshot_columns(snaps))
        rows = {
            r[0]: r[1:]
            for r in conn.execute("""
            SELECT job_key, state, raw_status, request_completed, output_file_id, results_ready,
                   terminal_seq IS NOT NULL, last_polled_at IS NOT NULL FROM ledger.provider_job""").fetchall()
        }
        events = sorted(
            conn.execute("SELECT job_key, from_state, to_state, raw_status FROM ledger.status_event").fetchall()
        )
        seq_after = conn.execute("SELECT max(terminal_seq) FROM ledger.provider_job").fetchone()[0]
    assert changed == [("job_a", "VALIDATING", "RUNNING"), ("job_b", "RUNNING", "COMPLETED")]
    assert rows["job_a"] == ("RUNNING", "in_progress", 3, None, False, False, True)
    assert rows["job_b"] == ("COMPLETED", "completed", 10, "file-out", True, True, True)
    # Terminal already: its state, raw status and counts stay; it learns the results file and readiness.
    assert rows["job_c"][:3] == ("COMPLETED", "completed", 0) and rows["job_c"][3:5] == ("file-late", True)
    assert events == [
        ("job_a", "VALIDATING", "RUNNING", "in_progress"),
        ("job_b", "RUNNING", "COMPLETED", "completed"),
        ("job_d", "RUNNING", "RUNNING", "in_progress"),
    ]
    assert seq_after == seq_before + 1
