"""`batch-assets bench --distributed`: the `distributed` backend as workers are added, beside `local`.

Starts throwaway PostgreSQL and S3 servers (batch_assets.services) and the emulator in its own
process, then for each worker count W (`--workers 1,2,4`):

- a fresh PostgreSQL database and S3 prefix hold the control ledger, the source and business tables,
  the run files and the partition stores; `--partitions` days of ticket_triage's source share
  `--items` items;
- W worker processes, each with its own empty data directory (as on separate machines), take
  partitions from one queue and run every stage of each — freeze, cut, submit, poll, download and
  ingest, parse, apply, settle — with the product's own stage functions;
- items per second (all items over the wall time from the common start to the last worker's end)
  and the workers' CPU seconds are reported; then the invariants are checked in the ledger and the
  stores: every partition final, every shard sent once (one provider job each), never more batches
  in flight at once than the provider account allows (the workers share one account), every answer
  applied once.

Then the control plane, on PostgreSQL and on the local DuckDB file: P processes race for N intent
claims (bench/claims.py), and P processes take and clear poll leases over in-flight jobs
(ledger/poll_leases.py); operations per second each, and the local file's lock waits.

Last, the status sensor at `--sensor-in-flight` jobs held in flight by the emulator (registered by
bench/sensor.py's `register_jobs`): one real tick of the one default sensor, then one tick of each of
the four per-provider sensors at once, each in its own process; the wall time and the jobs polled.

Targets (`--strict` exits 1 when one is missed): every invariant holds; each control-plane protocol
runs at ≥ CONTROL_TARGET operations per second on PostgreSQL; the most workers give at least
SCALE_TARGET × the throughput of one.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import resource
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from batch_assets.bench.at_once import at_once, most_at_once

TASK = "ticket_triage"
FIRST_DAY = "2026-11-20"
CONTROL_TARGET = 1000.0  # operations per second
SCALE_TARGET = 0.8  # throughput of the most workers / of one
EMULATOR_KNOBS = ("--speed", "200", "--queue-delay-s", "0.05", "--finalize-delay-s", "0.05")
WORKER_TIMEOUT_S = 3600.0
DEFAULT_ITEMS_DISTRIBUTED = 50_000  # without --items: over all partitions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--distributed",
        action="store_true",
        help="the distributed backend (PostgreSQL + S3, started for the run) as workers are added; "
        f"--items is then the total over --partitions (default {DEFAULT_ITEMS_DISTRIBUTED:,})",
    )
    p.add_argument(
        "--workers", default="1,2,4", metavar="W,W,…", help="worker counts for --distributed (default 1,2,4)"
    )
    p.add_argument("--partitions", type=int, default=16, help="partitions for --distributed (default 16)")
    p.add_argument(
        "--control-ops", type=int, default=500, metavar="N", help="operations per process in the control race"
    )
    p.add_argument("--control-processes", type=int, default=8, metavar="P", help="processes in the control race")
    p.add_argument(
        "--sensor-in-flight",
        type=int,
        default=30_000,
        metavar="N",
        help="for --distributed: the status sensor's tick at N in-flight jobs, with 1 sensor and one per "
        "provider (default 30,000; 0: skip)",
    )


@dataclass(frozen=True)
class WorkerRun:
    workers: int
    items: int
    wall_s: float
    cpu_s: float

    @property
    def items_per_s(self) -> float:
        return self.items / self.wall_s


def _days(n: int) -> list[str]:
    from datetime import date, timedelta

    start = date.fromisoformat(FIRST_DAY)
    return [(start + timedelta(days=i)).isoformat() for i in range(n)]


def _task_file() -> Path:
    from batch_assets.spec.resolve import tasks_dir

    return tasks_dir() / TASK / "defs.yaml"


def _adapter(emulator_url: str):
    """The openai adapter on the emulator, as the project's runs build it (creates never retried)."""
    from batch_assets.resources import ProvidersResource

    return ProvidersResource(emulator_url=emulator_url, max_retries=3).adapter("openai")


def _in_flight(wh, task_id: str) -> int:
    from batch_assets.ledger.job_reads import unfinished_jobs

    with wh.control() as db:
        return unfinished_jobs(db, task_id)


def _run_partition(wh, task, day: str, adapter) -> int:
    """Every stage of one partition until it is final, as its submit runs and the status sensor's
    collect runs would take it: shards that waited for the account's quota, and due retries, go out
    on the next round. Returns its items."""
    from batch_assets.pipeline.collect.ingest import collect_raw_results
    from batch_assets.pipeline.collect.parse import parse_results
    from batch_assets.pipeline.collect.poll import poll_jobs
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending
    from batch_assets.pipeline.settle.apply import apply_results
    from batch_assets.pipeline.settle.reconcile import settle

    task_id = task.task_id(day)
    items = freeze_manifest(wh, task, day).items
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while True:
        cut_shards(wh, task, day)  # first attempts, then the retries that are due
        submit_pending(wh, task, day, adapter)
        while _in_flight(wh, task_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{task_id}: provider jobs not terminal after {WORKER_TIMEOUT_S:.0f} s")
            time.sleep(0.2)
            poll_jobs(wh, lambda _p: adapter, task_id=task_id, poller="bench")
        collect_raw_results(wh, task, day, adapter)
        parse_results(wh, task, day)
        apply_results(wh, task, day)
        _, verdict = settle(wh, task_id, task.spec.retry.max_failed_fraction, task.spec.empty_source)
        if verdict.final_status is not None:
            return items
        if time.monotonic() > deadline:
            raise TimeoutError(f"{task_id}: not final after {WORKER_TIMEOUT_S:.0f} s")
        time.sleep(0.5)  # shards wait for quota another partition holds, or retries for their backoff


def _worker(k: int, env: dict, workdir: str, emulator_url: str, days, start, out) -> None:
    os.environ.update(env)
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.spec.resolve import load_task_file

    root = Path(workdir) / f"worker{k}"  # its own, empty data directory: another machine
    wh = Warehouse.at(root / "warehouse.duckdb", root)
    task = load_task_file(_task_file())
    adapter = _adapter(emulator_url)
    start.wait()
    items, error = 0, None
    try:
        while True:
            try:
                day = days.get_nowait()
            except queue.Empty:
                break
            items += _run_partition(wh, task, day, adapter)
    except Exception as exc:  # reported by the parent, with the worker's number
        error = f"worker {k}: {type(exc).__name__}: {exc}"
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out.put((k, items, usage.ru_utime + usage.ru_stime, error))


def _seed(env: dict, days: list[str], items: int) -> None:
    """ticket_triage's source for `days` (items spread evenly) into the PostgreSQL tables."""
    import duckdb

    from batch_assets.demo.seed import MIN_PER_DAY, seed_support_tickets
    from batch_assets.task_tables.postgres import PgTables

    tables = PgTables.from_env(env)
    with duckdb.connect() as conn:
        seed_support_tickets(conn, days=len(days), per_day=max(MIN_PER_DAY, items // len(days)))
        tables.publish(conn, "support_tickets", "SELECT * FROM support_tickets")


def _settings(server_url: str, bucket, name: str) -> dict[str, str]:
    from batch_assets.deployment.local_stack import exported
    from batch_assets.services import s3
    from batch_assets.services.postgres import create_database

    url = create_database(server_url, name)
    env = exported(s3.env_lines(bucket))
    env.update(
        {
            "BATCH_ASSETS_LEDGER_URL": url,
            "BATCH_ASSETS_TABLES_URL": url,
            "BATCH_ASSETS_TABLES_SCHEMA": "warehouse",
            "BATCH_ASSETS_STORAGE_URL": f"s3://{s3.BUCKET}/{name}",
            "BATCH_ASSETS_PROGRESS": "0",
        }
    )
    return env


def run_workers(workers: int, env: dict, workdir: Path, emulator_url: str, days: list[str]) -> WorkerRun:
    todo = multiprocessing.get_context("spawn").Queue()
    for day in days:
        todo.put(day)
    wall, results = at_once(
        _worker, [(k, env, str(workdir), emulator_url, todo) for k in range(workers)], WORKER_TIMEOUT_S
    )
    errors = [r[3] for r in results if r[3]]
    if errors:
        raise RuntimeError("; ".join(errors))
    return WorkerRun(workers, sum(r[1] for r in results), wall, sum(r[2] for r in results))


def check_invariants(env: dict, workdir: Path, days: list[str]) -> list[str]:
    """What the run must have left: every partition final, one provider job per shard, every answer
    applied once (read from the ledger and each partition's store)."""
    os.environ.update(env)
    from batch_assets.ledger.job_reads import job_spans, shards_sent_twice
    from batch_assets.ledger.tasks import final_statuses
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.pipeline.send.submit import account_limits
    from batch_assets.spec.resolve import load_task_file

    task = load_task_file(_task_file())
    wh = Warehouse.at(workdir / "check" / "warehouse.duckdb", workdir / "check")
    ids = [task.task_id(d) for d in days]
    problems = []
    with wh.control(read_only=True) as db:
        statuses = final_statuses(db, ids)
        twice = shards_sent_twice(db, ids)
        at_once = most_at_once(job_spans(db, ids, task.spec.provider))
    cap = account_limits(task.spec.provider).max_jobs
    if at_once > cap:
        problems.append(f"{at_once} {task.spec.provider} batches in flight at once, the account allows {cap}")
    not_final = sorted(t for t, status in statuses.items() if status is None)
    if len(statuses) != len(ids):
        problems.append(f"{len(ids) - len(statuses)} partition(s) never frozen")
    if not_final:
        problems.append(f"{len(not_final)} partition(s) not final: {', '.join(not_final[:5])}")
    if twice:
        problems.append(f"{len(twice)} shard(s) sent more than once")
    with wh.across(ids) as conn:
        applied, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (task_id, custom_id)) FROM ledger.applied_result"
        ).fetchone()
    if applied != distinct or applied == 0:
        problems.append(f"{applied} applied rows for {distinct} items")
    return problems


def main(args) -> int:
    saved = dict(os.environ)  # the checks point this process at each run's servers: put back after
    try:
        return _main(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _main(args) -> int:
    from batch_assets.bench import claims, control_plane, sensor_shards
    from batch_assets.bench.runner import DEFAULT_ITEMS
    from batch_assets.emulator.bench import emulator_process
    from batch_assets.services import postgres, s3

    items = DEFAULT_ITEMS_DISTRIBUTED if args.items == DEFAULT_ITEMS else args.items  # the pipeline's 1M: too many
    try:
        counts = sorted({int(w) for w in args.workers.split(",")})
    except ValueError:
        print(f"--workers {args.workers!r}: expected worker counts like 1,2,4", file=sys.stderr)
        return 2
    if not counts or counts[0] < 1 or args.partitions < 1 or items < args.partitions:
        print("--workers, --partitions must be at least 1 and --items at least --partitions", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="bench_distributed_"))
    days = _days(args.partitions)
    server = bucket = None
    stack = contextlib.ExitStack()
    runs: list[WorkerRun] = []
    problems: list[str] = []
    try:
        server = postgres.start(workdir / "services")
        bucket = s3.start(workdir / "services")
        _proc, emulator_url = stack.enter_context(emulator_process(workdir / "emulator", *EMULATOR_KNOBS))
        print(f"distributed: {items:,} items over {args.partitions} partitions of {TASK}, workers {counts}")
        for w in counts:
            name = f"bench_w{w}_{uuid.uuid4().hex[:6]}"
            env = _settings(server.url, bucket, name)
            _seed(env, days, items)
            run = run_workers(w, env, workdir / name, emulator_url, days)
            runs.append(run)
            found = check_invariants(env, workdir / name, days)
            problems += [f"{w} worker(s): {p}" for p in found]
            print(
                f"  {w} worker(s): {run.items:,} items in {run.wall_s:6.1f} s = {run.items_per_s:8,.0f} items/s, "
                f"CPU {run.cpu_s:6.1f} s ({run.cpu_s / run.wall_s:.2f} cores); invariants "
                + ("hold" if not found else "BROKEN: " + "; ".join(found))
            )
        ratio = runs[-1].items_per_s / runs[0].items_per_s
        print(f"  {counts[-1]} workers / 1: {ratio:.2f}x the throughput (target >= {SCALE_TARGET})")

        control_url = postgres.create_database(server.url, f"bench_control_{uuid.uuid4().hex[:6]}")
        from batch_assets.ledger.control_db import connect_postgres
        from batch_assets.ledger.control_schema import ensure_control_schema
        from batch_assets.ledger.warehouse import Warehouse

        ensure_control_schema(connect_postgres(control_url))
        n, p = args.control_ops, args.control_processes
        print(f"control plane: {p} processes x {n} operations")
        elapsed, won, _waits = claims.race("postgres", control_url, n, p)
        claim_rate = n * p / elapsed
        if sorted(won) != list(range(n)):
            problems.append(f"claims: {len(won)} wins for {n} intents")
        lease_rate = control_plane.lease_race(control_url, p, n)
        local = workdir / "local"
        with Warehouse.at(local / "warehouse.duckdb", local).connect():
            pass
        local_n = max(1, n // 10)  # one writing process at a time: a tenth of the work
        local_elapsed, local_won, local_waits = claims.race("duckdb", str(local), local_n, p)
        local_rate = local_n * p / local_elapsed
        if sorted(local_won) != list(range(local_n)):
            problems.append("local claims: an intent won twice or never")
        print(f"  postgres intent claims: {claim_rate:8,.0f} ops/s, each intent won once")
        print(f"  postgres poll leases:   {lease_rate:8,.0f} ops/s, no lease left held")
        print(
            f"  local (DuckDB file) intent claims: {local_rate:8,.0f} ops/s with {local_waits:,} lock waits; "
            f"postgres / local {claim_rate / local_rate:.0f}x"
        )
        if args.sensor_in_flight:
            print(f"status sensor tick at {args.sensor_in_flight:,} in-flight jobs (PostgreSQL ledger):")
            for line in sensor_shards.measure_sensors(_settings, server.url, bucket, workdir, args.sensor_in_flight):
                print(line)
        missed = [f"{name} {rate:,.0f} ops/s" for name, rate in (("claims", claim_rate), ("leases", lease_rate))]
        missed = [m for m, rate in zip(missed, (claim_rate, lease_rate), strict=True) if rate < CONTROL_TARGET]
        if ratio < SCALE_TARGET:
            missed.append(f"{counts[-1]} workers gave {ratio:.2f}x of 1")
    finally:
        stack.close()
        s3.stop(workdir / "services")
        postgres.discard(workdir / "services")
        shutil.rmtree(workdir, ignore_errors=True)
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    if missed:
        print("targets missed: " + "; ".join(missed))
        return 1 if args.strict else 0
    print("every invariant holds; every target met")
    return 0
