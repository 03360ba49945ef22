"""`batch-assets bench --sensor-jobs N`: the provider status sensor at N in-flight jobs.

The emulator runs in this process (as the tests start it, `emulator.testing.running_emulator`),
its batches held in `validating` for a day so every job stays in flight. N jobs are registered,
spread evenly over the four providers (one demo task each), then K real sensor evaluations run:
`dg.build_sensor_context` + the loaded Definitions' `provider_status_sensor`, with the project's
resources read from the environment, exactly as the daemon evaluates it.

How the jobs are registered. A few per provider go through the real submission path
(`freeze_manifest` → `cut_shards` → `submit_pending`, the task's concurrent-job cap raised to N).
The rest would take the same path at 30–50 ms a job (several ledger connections and two API calls
each): 15–25 minutes at 30,000. So they are created by the real adapters against the emulator —
the provider's input prepared (uploaded) once, then one real `create` call per job, 8 at a time —
and recorded by the ledger's own set-based writers (`ledger.jobs.insert_jobs` and
`insert_status_events`) in one statement each, as rows identical to what `submit_pending`
records (state, batch id, input file, raw status, request counts). Each such job points at its
task's first real shard. The sensor cannot tell the two kinds apart.

Per tick it prints the wall time, the jobs polled (the PollResult of the sensor's own `poll_jobs`), the snapshots
recorded in the ledger (jobs whose `last_polled_at` moved in the tick), and the process's peak
RSS. Correctness checks, any of which failing makes the run fail: every job was registered and is
in flight; every tick recorded a snapshot for each job it polled; polling is round robin, least
recently polled first (no job waits longer than ceil(N / the fewest polls of a tick) ticks);
resident memory grew by at most MEMORY_GROWTH_LIMIT_MB between the end of tick 2 and the end of
the last tick.

The targets (`--strict` exits 1 when one is missed): every tick within TICK_TARGET_S, and from
the second tick on every job polled within the last two ticks. How many jobs a tick polls within
its budget depends on the machine (the emulator answers from one thread; in this process it also
shares the interpreter with the sensor: `--emulator-process` runs it apart).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TICKS = 4
DEFAULT_WORKDIR = Path("data") / "bench-sensor"
TICK_TARGET_S = 30.0
MEMORY_GROWTH_LIMIT_MB = 64.0
PARTITION = "2026-11-20"
# One demo task per provider (the demo seed fills their sources for PARTITION).
TASK_OF = {
    "openai": "ticket_triage",
    "dashscope": "review_sentiment",
    "anthropic": "ticket_summary",
    "gemini": "kb_embeddings",
}
# Requests per shard of the really submitted jobs: a few jobs per provider from the demo rows.
SHARD_REQUESTS = 5
# Every batch stays in `validating` this long (simulated seconds at speed 1): all in flight.
HOLD_S = 86_400.0
CREATE_WORKERS = 8
_ENV = ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR", "BATCH_ASSETS_EMULATOR_URL")
_MODE_ENV = (
    "BATCH_ASSETS_PROVIDER_MODE",
    "BATCH_ASSETS_OPENAI_MODE",
    "BATCH_ASSETS_DASHSCOPE_MODE",
    "BATCH_ASSETS_ANTHROPIC_MODE",
    "BATCH_ASSETS_GEMINI_MODE",
)


class SensorBenchmarkError(AssertionError):
    """A correctness check failed: the timings mean nothing."""


@dataclass
class Tick:
    number: int
    seconds: float
    polled: int | None  # the sensor's own count (its poll_jobs result)
    poll_s: float  # of the tick's seconds: polling and recording the results (poll_jobs)
    recorded: int  # jobs whose last_polled_at moved during the tick
    peak_rss_mb: float
    rss_mb: float
    not_polled_in_two_ticks: int | None  # from tick 2 on: in-flight jobs not polled in this tick or the one before
    # How many ticks ago the least recently polled job was polled (1: this tick; never: number + 1).
    staleness: int = 0
    listed: int | None = None  # of the polled jobs, those whose snapshot came from a batch listing


@dataclass
class SensorReport:
    jobs: int
    registered: dict[str, int]
    submitted_for_real: int
    register_s: float
    ticks: list[Tick] = field(default_factory=list)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return all(ok for _name, ok, _detail in self.checks)

    @property
    def fast_enough(self) -> bool:
        return all(t.seconds <= TICK_TARGET_S for t in self.ticks)

    @property
    def within_two_ticks(self) -> bool:
        return len(self.ticks) >= 2 and not any(t.not_polled_in_two_ticks for t in self.ticks)

    @property
    def target_met(self) -> bool:
        return self.fast_enough and self.within_two_ticks

    def text(self) -> str:
        lines = [
            f"sensor benchmark: {self.jobs:,} in-flight jobs "
            f"({', '.join(f'{p} {n:,}' for p, n in self.registered.items())}; "
            f"{self.submitted_for_real} through submit_pending), registered in {self.register_s:.1f} s",
            f"{'tick':>4} {'seconds':>8} {'polling':>8} {'polled':>7} {'listed':>7} {'recorded':>8} "
            f"{'peak RSS MB':>11} "
            f"{'RSS MB':>7} {'not polled in 2 ticks':>21} {'oldest poll (ticks ago)':>23}",
        ]
        for t in self.ticks:
            gap = "-" if t.not_polled_in_two_ticks is None else str(t.not_polled_in_two_ticks)
            lines.append(
                f"{t.number:>4} {t.seconds:>8.2f} {t.poll_s:>8.2f} {t.polled if t.polled is not None else '?':>7} "
                f"{t.listed if t.listed is not None else '?':>7} {t.recorded:>8} {t.peak_rss_mb:>11.0f} "
                f"{t.rss_mb:>7.0f} {gap:>21} {t.staleness:>23}"
            )
        lines.append(
            f"target: every tick <= {TICK_TARGET_S:.0f} s: {'met' if self.fast_enough else 'MISSED'} "
            f"(slowest {max((t.seconds for t in self.ticks), default=0):.2f} s); every job polled within "
            f"2 ticks: {'met' if self.within_two_ticks else 'MISSED'}; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus"
        )
        lines += [f"  [{'ok' if ok else 'FAILED'}] {name}: {detail}" for name, ok, detail in self.checks]
        return "\n".join(lines)


def _rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB."""
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, kb = line.split()[:2]
                values[key] = int(kb) / 1024
    return values.get("VmRSS:", 0.0), values.get("VmHWM:", 0.0)


@contextlib.contextmanager
def _environment(database: Path, data_dir: Path, emulator_url: str) -> Iterator[None]:
    """The project's Definitions read their warehouse and emulator from the environment."""
    saved = {k: os.environ.get(k) for k in (*_ENV, *_MODE_ENV)}
    os.environ.update(dict(zip(_ENV, (str(database), str(data_dir), emulator_url))))
    for key in _MODE_ENV:
        os.environ.pop(key, None)  # emulator mode, whatever the shell has
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _counting_polls() -> Iterator[list]:
    """The sensor's own poll results, tick by tick: the real `poll_jobs` runs, its PollResult is
    noted on the way out (the sensor only logs its count)."""
    from batch_assets.defs import sensors

    results: list = []
    real = sensors.poll_jobs

    def counted(*args, **kwargs):
        started = time.perf_counter()
        result = real(*args, **kwargs)
        results.append((result, time.perf_counter() - started))
        return result

    sensors.poll_jobs = counted
    try:
        yield results
    finally:
        sensors.poll_jobs = real


def _shares(jobs: int, providers: tuple[str, ...]) -> dict[str, int]:
    base, extra = divmod(jobs, len(providers))
    return {p: base + (1 if i < extra else 0) for i, p in enumerate(providers)}


def register_jobs(
    wh, emulator_url: str, jobs: int, log: Callable[[str], None] = lambda _m: None
) -> tuple[dict[str, int], int]:
    """Register `jobs` in-flight jobs spread over the four providers (see the module docstring).
    The warehouse must hold the demo rows of PARTITION. Returns (jobs per provider, how many went
    through submit_pending)."""
    from batch_assets.ledger.jobs import insert_jobs, insert_status_events
    from batch_assets.ledger.transaction import transaction
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending
    from batch_assets.providers.contract import JOB_KEY_METADATA, CreateOutcome, CreateRequest, JobState
    from batch_assets.resources import ProvidersResource
    from batch_assets.spec.resolve import load_all_tasks

    created = JobState.CREATED.value
    tasks = load_all_tasks()
    providers = ProvidersResource(emulator_url=emulator_url, max_retries=2)
    shares = _shares(jobs, tuple(TASK_OF))
    real_total = 0
    for provider, share in shares.items():
        if share == 0:
            continue
        task = tasks[TASK_OF[provider]]
        # The benchmark's configuration: the cap raised so that every job may be in flight.
        task = dataclasses.replace(
            task,
            limits=dataclasses.replace(
                task.limits, max_requests_per_shard=SHARD_REQUESTS, max_concurrent_jobs=max(jobs, 1)
            ),
        )
        task_id = task.task_id(PARTITION)
        adapter = providers.adapter(provider)
        freeze_manifest(wh, task, PARTITION)
        cut_shards(wh, task, PARTITION)
        with wh.control() as db:  # the control ledger, wherever it is
            shards = db.execute(
                "SELECT shard_id, path, line_count FROM ledger.shard WHERE task_id = ? ORDER BY shard_no", [task_id]
            ).dicts()
        # The real path when its shards fit this provider's share (else they stay unsubmitted).
        summary = submit_pending(wh, task, PARTITION, adapter) if len(shards) <= share else None
        real = len(summary.submitted) if summary else 0
        real_total += real
        rest = share - real
        if rest <= 0:
            continue
        first = shards[0]
        prepared = adapter.prepare_input(
            wh.files.local(first["path"]),
            f"{first['shard_id']}:bench",
            task.spec.endpoint,
            task.limits.max_inline_bytes,
        )
        keys = [f"{first['shard_id']}:bench{i}" for i in range(rest)]

        def create(
            job_key: str, provider=provider, task=task, task_id=task_id, first=first, adapter=adapter, prepared=prepared
        ):
            request = CreateRequest(
                job_key=job_key,
                endpoint=task.spec.endpoint,
                model=task.spec.model,
                completion_window=task.limits.completion_window,
                line_count=int(first["line_count"]),
                metadata={
                    JOB_KEY_METADATA: job_key,
                    "task_id": task_id,
                    "shard_id": first["shard_id"],
                    "lines": str(first["line_count"]),
                },
            )
            result = adapter.create(request, prepared)
            if result.outcome != CreateOutcome.CREATED:
                raise SensorBenchmarkError(f"creating {provider} batch {job_key} failed: {result.error}")
            return result.snapshot

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=CREATE_WORKERS) as pool:
            snaps = list(pool.map(create, keys))
        # What each create answered, one list per column, into the ledger in one statement.
        params = [
            keys,
            [s.provider_batch_id for s in snaps],
            [s.raw_status for s in snaps],
            [s.state.value for s in snaps],
            [s.request_total for s in snaps],
        ]
        rows = """SELECT unnest(?::VARCHAR[]) AS job_key, unnest(?::VARCHAR[]) AS provider_batch_id,
                         unnest(?::VARCHAR[]) AS raw_status, unnest(?::VARCHAR[]) AS state,
                         unnest(?::BIGINT[]) AS request_total"""
        with wh.connect() as conn, transaction(conn):
            insert_jobs(
                conn,
                task_id,
                f"""
                SELECT job_key, {_lit(first["shard_id"])} AS shard_id, {_lit(provider)} AS provider,
                       {_lit(task.spec.endpoint)} AS endpoint, provider_batch_id,
                       {_lit(prepared.file_id)} AS input_file_id, NULL AS output_file_id, NULL AS error_file_id,
                       raw_status, state, false AS cancel_requested, request_total, 0 AS request_completed,
                       0 AS request_failed, NULL AS provider_errors, now()::TIMESTAMP AS created_at,
                       now()::TIMESTAMP AS submitted_at, now()::TIMESTAMP AS state_changed_at,
                       CAST(NULL AS TIMESTAMP) AS terminal_at, CAST(NULL AS TIMESTAMP) AS last_polled_at,
                       CAST(NULL AS TIMESTAMP) AS downloaded_at
                FROM ({rows}) AS created""",
                params,
            )
            insert_status_events(
                conn,
                f"""
                SELECT job_key, from_state, to_state, raw_status, request_total, 0 AS request_completed,
                       0 AS request_failed, now()::TIMESTAMP AS observed_at
                FROM (SELECT job_key, NULL AS from_state, {_lit(created)} AS to_state, NULL AS raw_status,
                             NULL::BIGINT AS request_total FROM ({rows}) AS intents
                      UNION ALL
                      SELECT job_key, {_lit(created)}, state, raw_status, request_total FROM ({rows}) AS answers)
                      AS events""",
                params * 2,
            )
        log(
            f"  {provider}: {real} jobs through submit_pending, {rest:,} created in "
            f"{time.perf_counter() - started:.1f} s and recorded set-based"
        )
    return shares, real_total


def _lit(value: str | None) -> str:
    from batch_assets.sqltext import sql_literal

    return "NULL" if value is None else sql_literal(value)


@contextlib.contextmanager
def _emulator(state_dir: Path, separate: bool) -> Iterator[tuple[str, Callable[[], None]]]:
    """The emulator, batches held in flight: in this process (as the tests run it), or with
    `separate` in its own process (as a provider is: not sharing the sensor's interpreter).
    Yields its base URL and a function that waits until its background worker is idle."""
    if not separate:
        from batch_assets.emulator.testing import running_emulator

        with running_emulator(state_dir, queue_delay_s=HOLD_S, log_requests=False) as emulator:
            yield emulator.base_url, lambda: emulator.worker.wait_idle(timeout=600)
        return
    from batch_assets.emulator.bench import emulator_process

    with emulator_process(state_dir, "--queue-delay-s", str(HOLD_S)) as (_process, base_url):
        # Small inputs are read within their create call: nothing left for its worker to do.
        yield base_url, lambda: None


def _in_flight(wh) -> int:
    from batch_assets.ledger.states import IN_FLIGHT_SQL
    from batch_assets.ledger.warehouse import scalar

    with wh.connect() as conn:
        return int(scalar(conn, f"SELECT count(*) FROM ledger.provider_job WHERE {IN_FLIGHT_SQL}"))


def measure_ticks(wh, ticks: int, log: Callable[[str], None] = lambda _m: None) -> list[Tick]:
    """Evaluate the real sensor `ticks` times (cursor carried over) and measure each tick."""
    import dagster as dg

    from batch_assets.definitions import defs as load_definitions
    from batch_assets.defs.sensors import SENSOR_NAME
    from batch_assets.ledger.states import IN_FLIGHT_SQL
    from batch_assets.ledger.warehouse import scalar
    from batch_assets.resources import default_resources

    definitions = load_definitions()
    sensor = definitions.resolve_sensor_def(SENSOR_NAME)
    measured: list[Tick] = []
    starts: list = []
    with _counting_polls() as polls, dg.instance_for_test() as instance:
        cursor = None
        for number in range(1, ticks + 1):
            with wh.connect() as conn:
                starts.append(scalar(conn, "SELECT now()::TIMESTAMP"))
            polls.clear()
            started = time.perf_counter()
            context = dg.build_sensor_context(
                instance=instance, cursor=cursor, definitions=definitions, resources=default_resources()
            )
            result = sensor.evaluate_tick(context)
            seconds = time.perf_counter() - started
            cursor = result.cursor
            rss, peak = _rss_mb()
            with wh.connect() as conn:
                recorded = int(
                    scalar(conn, "SELECT count(*) FROM ledger.provider_job WHERE last_polled_at >= ?", [starts[-1]])
                )
                gap = (
                    None
                    if number < 2
                    else int(
                        scalar(
                            conn,
                            f"""
                    SELECT count(*) FROM ledger.provider_job WHERE {IN_FLIGHT_SQL}
                      AND (last_polled_at IS NULL OR last_polled_at < ?)""",
                            [starts[-2]],
                        )
                    )
                )
                oldest = scalar(
                    conn,
                    f"""SELECT CASE WHEN count(last_polled_at) < count(*) THEN NULL
                                                      ELSE min(last_polled_at) END
                                           FROM ledger.provider_job WHERE {IN_FLIGHT_SQL}""",
                )
            polled_in = max(
                (i for i, start in enumerate(starts, 1) if oldest is not None and start <= oldest), default=0
            )
            tick = Tick(
                number,
                seconds,
                polls[-1][0].polled if polls else None,
                polls[-1][1] if polls else 0.0,
                recorded,
                peak,
                rss,
                gap,
                number - polled_in + 1,
                polls[-1][0].listed if polls else None,
            )
            measured.append(tick)
            log(
                f"  tick {number}: {seconds:6.2f} s (poll_jobs {tick.poll_s:.2f} s), polled {tick.polled} "
                f"({tick.listed} from listings), "
                f"recorded {recorded:,}, "
                f"peak RSS {peak:,.0f} MB, RSS {rss:,.0f} MB"
                + ("" if gap is None else f", in flight and not polled in 2 ticks: {gap}")
                + f", oldest poll {tick.staleness} ticks ago"
            )
    return measured


def check(report: SensorReport, in_flight: int) -> None:
    """The correctness checks (see the module docstring), appended to `report.checks`."""
    add = report.checks.append
    add(
        (
            "registered",
            in_flight == report.jobs and sum(report.registered.values()) == report.jobs,
            f"{in_flight:,} jobs in flight, {report.jobs:,} asked for",
        )
    )
    unrecorded = [t.number for t in report.ticks if t.polled is None or t.polled != t.recorded]
    add(
        (
            "every poll recorded",
            not unrecorded,
            "each tick recorded a snapshot for every job it polled"
            if not unrecorded
            else f"ticks {unrecorded}: polled and recorded differ (or the sensor's count was not seen)",
        )
    )
    # Round robin, whatever the machine's speed: least recently polled first, so no job waits
    # longer than it takes the slowest tick's pace to get through all of them once.
    fewest = min((t.polled or 0 for t in report.ticks), default=0)
    bound = max(2, -(-in_flight // fewest)) if fewest else None
    starved = [(t.number, t.staleness) for t in report.ticks if bound is None or t.staleness > bound]
    add(
        (
            "least recently polled first",
            not starved,
            f"the least recently polled job was polled at most {max(t.staleness for t in report.ticks)} ticks ago "
            f"(at the slowest tick's pace of {fewest:,} polls, {bound} ticks reach every job)"
            if not starved
            else f"(tick, ticks since the least recently polled job was polled): {starved}, more than {bound}",
        )
    )
    if len(report.ticks) >= 3:
        growth = report.ticks[-1].rss_mb - report.ticks[1].rss_mb
        add(
            (
                "memory flat",
                growth <= MEMORY_GROWTH_LIMIT_MB,
                f"RSS {report.ticks[1].rss_mb:,.0f} MB after tick 2, {report.ticks[-1].rss_mb:,.0f} MB after tick "
                f"{report.ticks[-1].number} (growth {growth:+.0f} MB, limit {MEMORY_GROWTH_LIMIT_MB:.0f})",
            )
        )


def run_sensor_benchmark(
    jobs: int,
    ticks: int = DEFAULT_TICKS,
    workdir: Path | None = None,
    keep: bool = False,
    log: Callable[[str], None] = lambda _m: None,
    emulator_process: bool = False,
) -> SensorReport:
    """Register `jobs` in-flight jobs against the emulator (in this process, or its own with
    `emulator_process`) and time `ticks` real sensor evaluations. Raises SensorBenchmarkError when
    a correctness check fails."""
    if jobs < 1 or ticks < 2:
        raise ValueError(f"need at least 1 job and 2 ticks, got {jobs} jobs and {ticks} ticks")
    from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets
    from batch_assets.ledger.warehouse import Warehouse

    root = Path(workdir if workdir is not None else DEFAULT_WORKDIR).resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    wh = Warehouse.at(root / "warehouse.duckdb", root / "data")
    try:
        with (
            _emulator(root / "emulator", emulator_process) as (emulator_url, wait_idle),
            _environment(wh.database, wh.data_dir, emulator_url),
        ):
            with wh.connect() as conn:
                seed_support_tickets(conn, days=1, per_day=60)
                seed_kb_articles(conn, days=1, per_day=10)
                seed_product_reviews(conn, days=1, per_day=20)
            log(f"sensor benchmark: registering {jobs:,} in-flight jobs in {root}")
            started = time.perf_counter()
            registered, real = register_jobs(wh, emulator_url, jobs, log)
            wait_idle()
            report = SensorReport(jobs, registered, real, time.perf_counter() - started)
            in_flight = _in_flight(wh)
            report.ticks = measure_ticks(wh, ticks, log)
            check(report, in_flight)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    if not report.correct:
        raise SensorBenchmarkError("the sensor benchmark is wrong, so its timings mean nothing:\n" + report.text())
    return report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sensor-jobs",
        type=int,
        default=None,
        metavar="N",
        help="instead of the pipeline stages: time real provider status sensor ticks at N in-flight "
        "jobs across the four providers (an in-process emulator)",
    )
    p.add_argument(
        "--emulator-process",
        action="store_true",
        help="with --sensor-jobs: run the emulator in its own process instead of this one",
    )
    p.add_argument(
        "--ticks",
        type=int,
        default=DEFAULT_TICKS,
        help=f"with --sensor-jobs: how many sensor ticks to time (default {DEFAULT_TICKS})",
    )


def main(args: argparse.Namespace) -> int:
    """`batch-assets bench --sensor-jobs N [--ticks K] [--emulator-process] [--workdir D] [--keep] [--strict]`."""
    workdir = args.workdir if args.workdir is not None else DEFAULT_WORKDIR
    try:
        report = run_sensor_benchmark(
            args.sensor_jobs,
            args.ticks,
            workdir,
            args.keep,
            log=lambda m: print(m, flush=True),
            emulator_process=args.emulator_process,
        )
    except SensorBenchmarkError as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        return 2
    print()
    print(report.text())
    if args.strict and not report.target_met:
        return 1
    return 0
