"""The status sensor's tick in `batch-assets bench --distributed`: at N jobs the emulator holds in
flight (registered by bench/sensor.py's `register_jobs`) on a PostgreSQL ledger, one real tick of the
default sensor, then one tick of each per-provider sensor ($BATCH_ASSETS_POLL_SENSORS=providers) at
once, each in its own process: the wall time, and how many jobs were polled."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from batch_assets.bench.at_once import at_once


def _tick_child(env: dict, sensor_name: str, start, out) -> None:
    """One real evaluation of `sensor_name` (the project's Definitions, resources from `env`)."""
    os.environ.update(env)
    import dagster as dg

    from batch_assets.definitions import defs as load
    from batch_assets.resources import default_resources

    definitions = load()
    sensor = definitions.resolve_sensor_def(sensor_name)
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, definitions=definitions, resources=default_resources())
        start.wait()
        began = time.perf_counter()
        sensor.evaluate_tick(context)
        out.put(time.perf_counter() - began)


def _polled_since(env: dict, since) -> int:
    from batch_assets.ledger.control_db import connect_postgres
    from batch_assets.ledger.job_reads import jobs_polled_since

    db = connect_postgres(env["BATCH_ASSETS_LEDGER_URL"])
    try:
        return jobs_polled_since(db, since)
    finally:
        db.conn.close()


def sensor_ticks(env: dict, sensors: list[str]) -> tuple[float, int]:
    """(wall seconds from the common start to the last tick's end, jobs polled) for one tick of each
    of `sensors`, evaluated at once in processes of their own."""
    from datetime import UTC, datetime

    since = datetime.now(UTC).replace(tzinfo=None)  # before the children start: none polls earlier
    wall, _answers = at_once(_tick_child, [(env, name) for name in sensors])
    return wall, _polled_since(env, since)


def measure_sensors(settings, server_url: str, bucket, workdir: Path, jobs: int) -> list[str]:
    """The tick at `jobs` in-flight jobs with one status sensor, then with one per provider."""
    from batch_assets.bench.sensor import HOLD_S, register_jobs
    from batch_assets.demo.runner import seed_demo_tables
    from batch_assets.emulator.bench import emulator_process
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.pipeline.collect.poll_scopes import POLL_SENSORS_VAR, poll_scopes

    env = settings(server_url, bucket, f"bench_sensor_{uuid.uuid4().hex[:6]}")
    os.environ.update(env)
    root = workdir / "sensor"
    wh = Warehouse.at(root / "warehouse.duckdb", root)
    seed_demo_tables(wh, days=1)
    lines = []
    with emulator_process(workdir / "sensor-emulator", "--queue-delay-s", str(HOLD_S)) as (_proc, url):
        env = {**env, "BATCH_ASSETS_EMULATOR_URL": url, "BATCH_ASSETS_DATABASE": str(wh.database),
               "BATCH_ASSETS_DATA_DIR": str(root), "BATCH_ASSETS_PROVIDER_MODE": "emulator"}  # fmt: skip
        started = time.perf_counter()
        register_jobs(wh, url, jobs)
        lines.append(f"  {jobs:,} in-flight jobs registered in {time.perf_counter() - started:.0f} s")
        for setting in ("one", "providers"):
            names = [scope.name for scope in poll_scopes(setting)]
            wall, polled = sensor_ticks({**env, POLL_SENSORS_VAR: setting}, names)
            lines.append(
                f"  {len(names)} sensor(s), one tick each, at once: {wall:5.1f} s, {polled:,} of {jobs:,} jobs polled"
            )
    return lines
