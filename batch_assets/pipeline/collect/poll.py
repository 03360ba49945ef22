"""Stage 4 — poll provider jobs and hand newly terminal partitions to collection.

Used by the provider status sensors, `batch-assets poll` and collect runs. Each poll first takes
lease marks on the jobs it polls (ledger/poll_leases.py) and polls only those: pollers whose scopes
overlap (poll_scopes.py) never poll one job twice at once. Polls non-terminal jobs concurrently, least recently polled
first, within a time budget per tick that includes recording them: the tick's poll results are
collected in memory and recorded in one set-based write (ledger.jobs.record_snapshots), every
transition with them. Terminal jobs whose provider has not made the results of a COMPLETED job
fetchable yet are polled too, until it has.

A provider with at least BULK_POLL_MIN_JOBS jobs to poll in a tick is polled through its batch
listing (`poll_listed`: a page of batches per HTTP call, newest first, stopping at the oldest job
of the tick) where its adapter can; the jobs the listing did not show are then retrieved one by
one like the others. A retrieve costs client-side CPU (SDK + httpx, bound by the GIL) and one
request against the provider's rate limit; a listed batch a fraction of that.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import duckdb

from batch_assets.ledger.admission import QuotaLimits
from batch_assets.ledger.jobs import record_snapshots, snapshot_columns
from batch_assets.ledger.poll_leases import LEASE_MARGIN_S, new_owner, release_poll_leases, take_poll_leases
from batch_assets.ledger.states import FAILED_TERMINAL_STATES
from batch_assets.ledger.tasks import task_names
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.poll_scopes import EVERY_JOB, PollScope
from batch_assets.providers.contract import BatchProvider, JobRef, JobSnapshot, JobState, poll_listed

# Seconds of the poll budget kept for recording the tick's poll results (at most a quarter of it).
RECORD_RESERVE_S = 2.0
# A provider with at least this many jobs to poll in a tick is polled through its batch listing;
# below it, one retrieve per job costs fewer calls than the pages down to its oldest job might.
BULK_POLL_MIN_JOBS = 50
# The listing stops at batches created this long before the oldest job's recorded intent (the
# provider's clock may differ from ours); a job it missed is retrieved on its own anyway.
LIST_CLOCK_SKEW_S = 3600


@dataclass
class PollResult:
    polled: int = 0
    listed: int = 0  # of them, the jobs whose snapshot came from a provider's batch listing
    transitions: list[tuple[str, str, str]] = field(default_factory=list)  # (job_key, from, to)
    errors: dict[str, str] = field(default_factory=dict)  # job_key -> error text
    # job_key -> the provider's reasons, for jobs that ended failed/expired/cancelled on this poll
    batch_failures: dict[str, str] = field(default_factory=dict)
    # provider -> why its listing failed (its jobs were then retrieved one by one)
    listing_errors: dict[str, str] = field(default_factory=dict)
    held_elsewhere: int = 0  # jobs due in the scope that another poller was polling (left to it)


def poll_jobs(
    wh: Warehouse,
    adapter_for: Callable[[str], BatchProvider],
    budget_s: float = 20.0,
    max_workers: int = 8,
    task_id: str | None = None,
    max_jobs: int | None = None,
    scope: PollScope = EVERY_JOB,
    poller: str = "poll",
    task_name: str | None = None,
) -> PollResult:
    """Poll the jobs due in `scope` (or of one task, or one task partition; at most `max_jobs`, the
    least recently polled, when given) that no other poller is polling, and record what changed.
    `poller` names who polls in the jobs' lease marks (a sensor's name, `cli`, `collect`)."""
    owner = new_owner(poller)
    with wh.control() as conn:  # control rows only: on PostgreSQL the warehouse file stays closed
        names = scope.task_names(task_names(conn).values()) if scope.buckets > 1 else None
        if task_name is not None:
            names = [task_name] if names is None or task_name in names else []
        leased = take_poll_leases(
            conn,
            owner,
            budget_s + LEASE_MARGIN_S,
            providers=scope.providers,
            task_names=names,
            task_id=task_id,
            max_jobs=max_jobs,
        )
    result = PollResult(held_elsewhere=leased.held_elsewhere)
    try:
        jobs = leased.jobs
        # Polls stop early enough that recording them (one set-based write) still fits the budget.
        deadline = time.monotonic() + budget_s - min(RECORD_RESERVE_S, budget_s / 4)
        adapters = {provider: adapter_for(provider) for provider in {j["provider"] for j in jobs}}
        bulk = _listed_jobs(jobs, adapters)
        snapshots = _poll_all(jobs, bulk, adapters, deadline, max_workers, result)
        if snapshots:
            _record(wh, snapshots, result)
    finally:
        if leased.jobs:  # recorded or given up: the next poller may take them
            with wh.control() as conn:
                release_poll_leases(conn, owner)
    return result


def _listed_jobs(jobs: list[dict], adapters: dict[str, BatchProvider]) -> dict[str, list[dict]]:
    """provider -> its jobs, for the providers polled through their batch listing this tick."""
    by_provider: dict[str, list[dict]] = {}
    for job in jobs:
        by_provider.setdefault(job["provider"], []).append(job)
    return {
        provider: provider_jobs
        for provider, provider_jobs in by_provider.items()
        if len(provider_jobs) >= BULK_POLL_MIN_JOBS and hasattr(adapters[provider], "poll_listed")
    }


def _poll_one(adapters: dict[str, BatchProvider], deadline: float, job: dict) -> JobSnapshot | None:
    if time.monotonic() > deadline:  # the rest waits for the next tick (round-robin by last_polled_at)
        return None
    return adapters[job["provider"]].poll(JobRef(job["provider_batch_id"]), JobState(job["state"]))


def _list_provider(
    adapters: dict[str, BatchProvider], deadline: float, provider: str, provider_jobs: list[dict]
) -> dict[str, JobSnapshot]:
    refs = [(JobRef(j["provider_batch_id"]), JobState(j["state"])) for j in provider_jobs]
    created_after = min(float(j["created_unix"]) for j in provider_jobs) - LIST_CLOCK_SKEW_S
    return poll_listed(adapters[provider], refs, created_after, deadline)


def _poll_all(
    jobs: list[dict],
    bulk: dict[str, list[dict]],
    adapters: dict[str, BatchProvider],
    deadline: float,
    max_workers: int,
    result: PollResult,
) -> dict[str, JobSnapshot]:
    """job_key -> snapshot for the jobs polled before the deadline; errors go to `result`."""
    snapshots: dict[str, JobSnapshot] = {}
    # The pool takes jobs in submission order, least recently polled first, so a job left out by
    # the deadline is among the first of the next tick. Listings go first; a job its provider's
    # listing did not show joins the queue when that listing is done.
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        listings: dict[Future, str] = {
            pool.submit(_list_provider, adapters, deadline, p, pj): p for p, pj in bulk.items()
        }
        polls: dict[Future, dict] = {
            pool.submit(_poll_one, adapters, deadline, job): job for job in jobs if job["provider"] not in bulk
        }
        pending = set(listings) | set(polls)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                if fut not in listings:
                    _take_poll(fut, polls.pop(fut), snapshots, result)
                    continue
                provider = listings.pop(fut)
                for job in _take_listing(fut, provider, bulk[provider], snapshots, result):
                    retrieve = pool.submit(_poll_one, adapters, deadline, job)
                    polls[retrieve] = job
                    pending.add(retrieve)
    return snapshots


def _take_listing(
    fut: Future, provider: str, provider_jobs: list[dict], snapshots: dict[str, JobSnapshot], result: PollResult
) -> list[dict]:
    """Keep the snapshots a provider's listing returned; the jobs it did not show, to retrieve one by one."""
    try:
        listed = fut.result()
    except Exception as exc:  # a failed listing falls back to one retrieve per job
        result.listing_errors[provider] = f"{type(exc).__name__}: {exc}"
        listed = {}
    missing = []
    for job in provider_jobs:
        snap = listed.get(job["provider_batch_id"])
        if snap is not None:
            snapshots[job["job_key"]] = snap
            result.listed += 1
        else:
            missing.append(job)
    return missing


def _take_poll(fut: Future, job: dict, snapshots: dict[str, JobSnapshot], result: PollResult) -> None:
    try:
        snap = fut.result()
    except Exception as exc:  # one failing poll never hides the others
        result.errors[job["job_key"]] = f"{type(exc).__name__}: {exc}"
        return
    if snap is not None:
        snapshots[job["job_key"]] = snap


def _record(wh: Warehouse, snapshots: dict[str, JobSnapshot], result: PollResult) -> None:
    """Record the tick's snapshots in one write; note the transitions and why failed batches failed."""
    with wh.control() as conn:
        result.transitions = record_snapshots(conn, snapshot_columns(snapshots))
    result.polled = len(snapshots)
    for job_key, _old, new in result.transitions:
        if JobState(new) in FAILED_TERMINAL_STATES:
            result.batch_failures[job_key] = failure_reason(snapshots[job_key])


def failure_reason(snap: JobSnapshot) -> str:
    """The provider's reasons for a batch that ended without running (all of) its requests,
    e.g. `token_limit_exceeded: Enqueued token limit reached …`."""
    reasons = "; ".join(f"{e.code}: {e.message}" if e.code else e.message for e in snap.errors)
    return f"{snap.state.value} ({snap.raw_status})" + (f": {reasons}" if reasons else "")


@dataclass(frozen=True)
class WaitingPartition:
    """A partition whose shards wait for quota while their provider account has room again."""

    task_name: str
    partition_date: str
    shards: int
    rate_capped: bool  # it waited for the creation cap: room comes back with time, not with a job's end


def partitions_waiting_to_submit(
    wh: Warehouse,
    conn: duckdb.DuckDBPyConnection | None = None,
    limits_of: Callable[[str, str], QuotaLimits] | None = None,
) -> list[WaitingPartition]:
    """Partitions with shards waiting for quota (`ledger.quotas.waiting_partitions`) whose provider
    account has room now by the reservations admission counts: a batch slot, its model's enqueued
    tokens for the smallest waiting shard, and the creation cap. `limits_of(provider, account)` gives
    an account's limits (default: the provider's limits.yaml). Admission decides; this only says
    whom a submit run may serve."""
    if conn is None:
        with wh.control() as own:
            return partitions_waiting_to_submit(wh, own, limits_of)
    from batch_assets.ledger.admission import is_rate_wait
    from batch_assets.ledger.quotas import account_holdings, waiting_partitions

    limits_of = limits_of or _provider_account_limits
    held: dict[tuple, dict] = {}
    for row in account_holdings(conn):
        account = held.setdefault((row["provider"], row["account"]), {"jobs": 0, "created": 0, "tokens": {}})
        account["jobs"] += row["jobs"]
        account["created"] = row["created_last_minute"]
        if row["model"] is not None:
            account["tokens"][row["model"]] = row["tokens"]
    due: dict[tuple[str, str], WaitingPartition] = {}
    for w in waiting_partitions(conn):
        limits = limits_of(w["provider"], w["account"])
        h = held.get((w["provider"], w["account"]), {"jobs": 0, "created": 0, "tokens": {}})
        enqueued = h["tokens"].get(w["model"], 0)
        room = (
            h["jobs"] < limits.max_jobs
            and (not enqueued or enqueued + w["smallest_shard_tokens"] <= limits.max_tokens)
            and (limits.max_creates_per_minute is None or h["created"] < limits.max_creates_per_minute)
        )
        if room:  # one entry per partition, whatever models its shards wait with
            key = (w["task_name"], w["partition_date"])
            seen = due.get(key)
            due[key] = WaitingPartition(
                *key,
                w["shards"] + (seen.shards if seen else 0),
                is_rate_wait(w["reason"]) or bool(seen and seen.rate_capped),
            )
    return [due[k] for k in sorted(due)]


def _provider_account_limits(provider: str, _account: str) -> QuotaLimits:
    from batch_assets.pipeline.send.submit import account_limits  # send imports collect's neighbours

    return account_limits(provider)
