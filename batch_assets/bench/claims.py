"""`batch-assets bench --claims N`: the intent-claim protocol raced by P processes on each ledger backend.

Every process tries to claim the same N new intents (as concurrent submitters of one partition do)
with the ledger's own `claim_new_intent`; on DuckDB each attempt opens the Warehouse as a submit run
does (one writing process at a time), on PostgreSQL each process keeps one connection. Reports
attempts per second per backend and their ratio, and fails when any intent was won twice or never.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from batch_assets.bench.at_once import at_once

TASK_ID = "bench_claims_20261120"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--claims", type=int, default=None, metavar="N", help="race P processes for N new intents on each backend"
    )
    p.add_argument("--claim-processes", type=int, default=8, metavar="P", help="processes for --claims (default 8)")
    p.add_argument(
        "--postgres-url",
        default=os.environ.get("BATCH_ASSETS_LEDGER_URL"),
        help="PostgreSQL for --claims (default $BATCH_ASSETS_LEDGER_URL; without it only DuckDB runs)",
    )


def _claim_all(backend: str, target: str, owner: str, n: int, run: str, start, out) -> None:
    from batch_assets.ledger.control_db import connect_postgres
    from batch_assets.ledger.file_locks import lock_waits
    from batch_assets.ledger.jobs import claim_new_intent
    from batch_assets.ledger.warehouse import Warehouse

    def claim(conn, i: int) -> bool:
        return claim_new_intent(conn, f"{run}-{i}", TASK_ID, f"{TASK_ID}:s{i}", "openai", "/v1/batches", owner)

    start.wait()
    if backend == "postgres":
        db = connect_postgres(target)
        won = [i for i in range(n) if claim(db, i)]
    else:
        wh = Warehouse.at(Path(target) / "warehouse.duckdb", Path(target))
        won = []
        for i in range(n):
            with wh.connect() as conn:
                if claim(conn, i):
                    won.append(i)
    out.put((won, lock_waits()))


def race(backend: str, target: str, n: int, processes: int) -> tuple[float, list[int], int]:
    """(seconds from the common start to the last process's end, every intent won, the times a
    process waited for the DuckDB file's lock). The job keys are this run's own, so a PostgreSQL
    ledger in use is only added to, never cleaned."""
    run = f"bench-claims-{os.getpid()}-{time.time_ns()}"
    elapsed, answers = at_once(_claim_all, [(backend, target, f"p{k}", n, run) for k in range(processes)])
    return elapsed, [i for won, _waits in answers for i in won], sum(waits for _won, waits in answers)


def main(args) -> int:
    from batch_assets.ledger.control_db import connect_postgres
    from batch_assets.ledger.control_schema import ensure_control_schema
    from batch_assets.ledger.warehouse import Warehouse

    n, processes = args.claims, args.claim_processes
    if n < 1 or processes < 1:
        print("--claims and --claim-processes must be at least 1")
        return 2
    results: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix="bench_claims_"))
    try:
        with Warehouse.at(work / "warehouse.duckdb", work).connect():
            pass  # migrated once, before the race
        backends = [("duckdb", str(work))]
        if args.postgres_url:
            ensure_control_schema(connect_postgres(args.postgres_url))
            backends.append(("postgres", args.postgres_url))
        for backend, target in backends:
            elapsed, won, waits = race(backend, target, n, processes)
            if sorted(won) != list(range(n)):
                print(f"FAILED: {backend}: {len(won)} wins for {n} intents ({len(set(won))} distinct)")
                return 1
            results[backend] = n * processes / elapsed
            print(
                f"{backend:9} {processes} processes x {n} intents: {results[backend]:,.0f} attempts/s, each won once"
                + (f" ({waits:,} lock waits)" if backend == "duckdb" else "")
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if "postgres" in results:
        print(f"postgres / duckdb: {results['postgres'] / results['duckdb']:.0f}x")
    return 0
