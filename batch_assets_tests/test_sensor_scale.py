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
from batch_assets.pipeline.manifest import freeze_manifest
from batch_assets.pipeline.poll import poll_jobs
from batch_assets.pipeline.shards import cut_shards
from batch_assets.pipeline.submit import submit_pending
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
    for key in ("BATCH_ASSETS_PROVIDER_MODE", "BATCH_ASSETS_OPENAI_MODE", "BATCH_ASSETS_DASHSCOPE_MODE",
                "BATCH_ASSETS_ANTHROPIC_MODE", "BATCH_ASSETS_GEMINI_MODE"):
        monkeypatch.delenv(key, raising=False)
    wh.statements.clear()
    return wh


def poll_times(wh: Warehouse) -> dict[str, Any]:
    with wh.connect() as conn:
        return dict(conn.execute(f"SELECT job_key, last_polled_at FROM ledger.provider_job WHERE {IN_FLIGHT_SQL}")
                    .fetchall())


def writes(wh: ProfilingWarehouse, prefix: str) -> int:
    return sum(1 for _s, sql in wh.statements if " ".join(sql.split()).startswith(prefix))


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
            result = sensor.evaluate_tick(dg.build_sensor_context(
                instance=instance, cursor=cursor, definitions=definitions, resources=default_resources()))
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


def test_poll_results_are_recorded_with_one_statement_whatever_their_number(fleet, emulator):
    wh = fleet
    never_before = sum(t is None for t in poll_times(wh).values())
    adapters = ProvidersResource(emulator_url=emulator.base_url, max_retries=2)
    result = poll_jobs(wh, adapters.adapter, max_jobs=PER_TICK)
    assert result.polled == PER_TICK and not result.errors
    assert writes(wh, "UPDATE ledger.provider_job") == 1
    assert writes(wh, "INSERT INTO ledger.status_event") == 1
    # The least recently polled first: the never polled went first, the next call polls the rest.
    never = {k for k, t in poll_times(wh).items() if t is None}
    assert len(never) == never_before - PER_TICK > 0
    wh.statements.clear()
    again = poll_jobs(wh, adapters.adapter, max_jobs=len(never))
    assert again.polled == len(never)
    assert all(t is not None for t in poll_times(wh).values())
    assert writes(wh, "UPDATE ledger.provider_job") == 1


def test_shards_held_back_for_the_job_cap_are_recorded_with_one_statement(tmp_path, emulator, ticket_task):
    wh = ProfilingWarehouse(database=tmp_path / "warehouse.duckdb", data_dir=tmp_path / "data")
    with wh.connect() as conn:
        seed_support_tickets(conn, days=1, per_day=60)
    task = dataclasses.replace(ticket_task, limits=dataclasses.replace(
        ticket_task.limits, max_requests_per_shard=5, max_concurrent_jobs=2))
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
    assert writes(wh, "UPDATE ledger.shard SET deferred_at") == 1
