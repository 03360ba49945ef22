"""Stage 4 — poll provider jobs and hand newly terminal partitions to collection.

Used by the provider status sensor. Polls non-terminal jobs concurrently, least recently polled
first, within a time budget per tick that includes recording them: the tick's poll results are
collected in memory and recorded in one set-based write (ledger.jobs.record_snapshots), every
transition with them. Terminal jobs whose provider has not made the results of a COMPLETED job
fetchable yet are polled too, until it has.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

import duckdb

from batch_assets.ledger.jobs import record_snapshots, snapshot_columns
from batch_assets.ledger.states import FAILED_TERMINAL_STATES, IN_FLIGHT_SQL
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.providers.contract import BatchProvider, JobRef, JobSnapshot, JobState
from batch_assets.providers.registry import provider_limits

# Seconds of the poll budget kept for recording the tick's poll results (at most a quarter of it).
RECORD_RESERVE_S = 2.0


@dataclass
class PollResult:
    polled: int = 0
    transitions: list[tuple[str, str, str]] = field(default_factory=list)  # (job_key, from, to)
    errors: dict[str, str] = field(default_factory=dict)                   # job_key -> error text
    # job_key -> the provider's reasons, for jobs that ended failed/expired/cancelled on this poll
    batch_failures: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectRequest:
    task_name: str
    partition_date: str
    job_keys: tuple[str, ...]

    @property
    def run_key(self) -> str:
        digest = hashlib.sha256("|".join(sorted(self.job_keys)).encode()).hexdigest()[:16]
        return f"collect:{self.task_name}:{self.partition_date}:{digest}"


def poll_jobs(wh: Warehouse, adapter_for: Callable[[str], BatchProvider], budget_s: float = 20.0,
              max_workers: int = 8, task_id: str | None = None, max_jobs: int | None = None) -> PollResult:
    """Poll non-terminal jobs (all of them, or one task partition's; at most `max_jobs`, the least
    recently polled, when given) and record what changed."""
    with wh.connect() as conn:
        jobs = fetch_dicts(conn, f"""
            SELECT job_key, provider, provider_batch_id, state,
                   epoch(now()::TIMESTAMP) - epoch(state_changed_at) AS seconds_in_state
            FROM ledger.provider_job
            WHERE ({IN_FLIGHT_SQL} OR (state = '{JobState.COMPLETED.value}' AND downloaded_at IS NULL
                                       AND results_ready = false))
              AND (? IS NULL OR task_id = ?)
            ORDER BY last_polled_at NULLS FIRST, job_key
            LIMIT ?
        """, [task_id, task_id, max_jobs])
    result = PollResult()
    # Polls stop early enough that recording them (one set-based write) still fits the budget.
    deadline = time.monotonic() + budget_s - min(RECORD_RESERVE_S, budget_s / 4)
    snapshots: dict[str, JobSnapshot] = {}
    adapters: dict[str, BatchProvider] = {}
    for provider in {j["provider"] for j in jobs}:
        adapters[provider] = adapter_for(provider)

    def poll_one(job: dict) -> JobSnapshot | None:
        if time.monotonic() > deadline:  # the rest waits for the next tick (round-robin by last_polled_at)
            return None
        return adapters[job["provider"]].poll(JobRef(job["provider_batch_id"]), JobState(job["state"]))

    # The pool takes jobs in submission order, least recently polled first, so a job left out by
    # the deadline is among the first of the next tick.
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        futures = {pool.submit(poll_one, job): job for job in jobs}
        for fut in as_completed(futures):
            job = futures[fut]
            try:
                snap = fut.result()
            except Exception as exc:  # one failing poll never hides the others
                result.errors[job["job_key"]] = f"{type(exc).__name__}: {exc}"
                continue
            if snap is not None:
                snapshots[job["job_key"]] = snap
        del futures
    if snapshots:
        with wh.connect() as conn:
            result.transitions = record_snapshots(conn, snapshot_columns(snapshots))
        result.polled = len(snapshots)
        for job_key, _old, new in result.transitions:
            if JobState(new) in FAILED_TERMINAL_STATES:
                result.batch_failures[job_key] = failure_reason(snapshots[job_key])
    return result


def failure_reason(snap: JobSnapshot) -> str:
    """The provider's reasons for a batch that ended without running (all of) its requests,
    e.g. `token_limit_exceeded: Enqueued token limit reached …`."""
    reasons = "; ".join(f"{e.code}: {e.message}" if e.code else e.message for e in snap.errors)
    return f"{snap.state.value} ({snap.raw_status})" + (f": {reasons}" if reasons else "")


def collect_requests_after(wh: Warehouse, after_seq: int) -> tuple[list[CollectRequest], int]:
    """Task partitions with jobs that became terminal after `after_seq` (the sensor's cursor).

    Returns one request per partition and the new high-water mark. The cursor only advances when
    Dagster has launched the tick's runs, and run keys are deterministic, so nothing is lost or
    requested twice.
    """
    with wh.connect(read_only=False) as conn:
        rows = fetch_dicts(conn, """
            SELECT t.task_name, strftime(t.partition_date, '%Y-%m-%d') AS partition_date,
                   list(j.job_key ORDER BY j.job_key) AS job_keys, max(j.terminal_seq) AS max_seq
            FROM ledger.provider_job j JOIN ledger.batch_task t USING (task_id)
            WHERE j.terminal_seq > ?
            GROUP BY t.task_name, t.partition_date ORDER BY 1, 2
        """, [after_seq])
    requests = [CollectRequest(r["task_name"], r["partition_date"], tuple(r["job_keys"])) for r in rows]
    return requests, max([after_seq, *(int(r["max_seq"]) for r in rows)])


def partitions_waiting_to_submit(wh: Warehouse, conn: duckdb.DuckDBPyConnection | None = None
                                 ) -> list[tuple[str, str, int]]:
    """(task_name, partition_date, shards waiting) for partitions whose shards were held back by
    the provider's concurrent-job cap, when that provider has room again."""
    if conn is None:
        with wh.connect() as own:
            return partitions_waiting_to_submit(wh, own)
    rows = conn.execute(f"""
        WITH waiting AS (
            SELECT t.task_name, strftime(t.partition_date, '%Y-%m-%d') AS partition_date, t.provider, count(*) AS shards
            FROM ledger.shard s JOIN ledger.batch_task t USING (task_id)
            LEFT JOIN ledger.provider_job j ON j.shard_id = s.shard_id AND j.provider_batch_id IS NOT NULL
            WHERE j.job_key IS NULL AND s.deferred_at IS NOT NULL  -- held back by a submit run, not mid-run
            GROUP BY ALL
        ), busy AS (
            SELECT provider, count(*) AS in_flight FROM ledger.provider_job
            WHERE {IN_FLIGHT_SQL} GROUP BY provider
        )
        SELECT w.task_name, w.partition_date, w.shards, w.provider, coalesce(b.in_flight, 0)
        FROM waiting w LEFT JOIN busy b USING (provider) ORDER BY 1, 2
    """).fetchall()
    return [(task, day, shards) for task, day, shards, provider, in_flight in rows
            if in_flight < provider_limits(provider).max_concurrent_jobs]
