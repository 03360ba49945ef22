"""Stage 3 — submit shards as provider batches, idempotently.

Per shard: record the intent (provider_job row in state CREATED) → prepare the input (upload where
the provider takes files) → record the file id → create the batch (tagged with the job_key) →
record the batch id. Each step is committed before the next network call, so after a crash
anywhere the job is found again (`find_job`) instead of being created twice: a duplicate
submission is duplicate billing. A create whose outcome is unknown (timeout, 5xx, 429) is looked
up before it is tried again. At most `max_concurrent_jobs` batches per provider are in flight; the
rest wait for a later run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from batch_assets.ledger.jobs import insert_job_intent, record_snapshot, set_input_file
from batch_assets.ledger.shards import mark_shards_deferred
from batch_assets.ledger.states import IN_FLIGHT_SQL, TaskStatus
from batch_assets.ledger.tasks import set_task_status
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts, scalar
from batch_assets.providers.contract import (
    JOB_KEY_METADATA, BatchProvider, CreateOutcome, CreateRequest, FindHints, FindOutcome, InputKind, JobSnapshot,
    PreparedInput,
)
from batch_assets.spec.resolve import ResolvedTask


@dataclass(frozen=True)
class SubmitSummary:
    task_id: str
    submitted: list[str]
    recovered: list[str]
    waiting_for_capacity: int
    already_submitted: int


# A batch created just before the intent's clock reading (clock skew) is still looked at.
CLOCK_SKEW_S = 3600
# Pause before creating again after an unknown outcome, doubled each time.
CREATE_BACKOFF_S = 0.5


class SubmissionRefused(RuntimeError):
    """The provider refused a batch outright (nothing was created)."""


class SubmissionUnresolved(RuntimeError):
    """A create kept ending in an unknown outcome, and the batch could not be found either."""


def job_key_for(shard_id: str) -> str:
    return f"{shard_id}:job1"


def _known_batch_ids(wh: Warehouse, provider: str) -> frozenset[str]:
    """Batches already claimed by ledger jobs (never adopted for another job)."""
    with wh.connect() as conn:
        return frozenset(r[0] for r in conn.execute(
            "SELECT provider_batch_id FROM ledger.provider_job WHERE provider = ? AND provider_batch_id IS NOT NULL",
            [provider]).fetchall())


def _create(adapter: BatchProvider, request: CreateRequest, prepared: PreparedInput,
            hints: Callable[[], FindHints], shard_id: str) -> JobSnapshot:
    """Create the batch once; after an unknown outcome, adopt it if the provider has it, else create
    again (at most settings.max_retries more times, with a short backoff). A refusal raises."""
    retries = adapter.settings.max_retries
    for attempt in range(retries + 1):
        result = adapter.create(request, prepared)
        if result.outcome == CreateOutcome.CREATED:
            return result.snapshot
        error = result.error.as_dict() if result.error else {}
        if result.outcome == CreateOutcome.FAILED:
            raise SubmissionRefused(f"{adapter.name} refused the batch for shard {shard_id} (job {request.job_key}): "
                                    f"HTTP {result.status_code} {error}")
        found = adapter.find_job(request.job_key, hints())
        if found.outcome == FindOutcome.FOUND:
            return found.snapshot
        if attempt < retries:
            time.sleep(CREATE_BACKOFF_S * 2 ** attempt)
    raise SubmissionUnresolved(f"creating the {adapter.name} batch for shard {shard_id} (job {request.job_key}) "
                               f"gave no answer {retries + 1} times and no such batch was found; last: {error}")


def submit_pending(wh: Warehouse, task: ResolvedTask, partition_date: str, adapter: BatchProvider) -> SubmitSummary:
    spec = task.spec
    task_id = task.task_id(partition_date)
    with wh.connect() as conn:
        shards = fetch_dicts(conn, """
            SELECT s.shard_id, s.path, s.line_count, j.job_key, j.state, j.input_file_id, j.provider_batch_id,
                   epoch(j.created_at)::BIGINT AS intent_unix
            FROM ledger.shard s LEFT JOIN ledger.provider_job j USING (shard_id)
            WHERE s.task_id = ? ORDER BY s.shard_no
        """, [task_id])
        in_flight = scalar(conn, f"SELECT count(*) FROM ledger.provider_job WHERE provider = ? AND {IN_FLIGHT_SQL}",
                           [spec.provider])
    capacity = max(task.limits.max_concurrent_jobs - in_flight, 0)
    submitted, recovered, waiting, already = [], [], 0, 0
    for shard in shards:
        if shard["provider_batch_id"]:
            already += 1
            continue
        job_key = shard["job_key"] or job_key_for(shard["shard_id"])
        if shard["job_key"] is not None:
            # Intent recorded by an earlier run that may have crashed after the create call.
            found = adapter.find_job(job_key, FindHints(
                created_after_unix=int(shard["intent_unix"]) - CLOCK_SKEW_S, line_count=int(shard["line_count"]),
                known_batch_ids=_known_batch_ids(wh, spec.provider)))
            if found.outcome == FindOutcome.FOUND:
                with wh.connect() as conn:
                    record_snapshot(conn, job_key, found.snapshot, submitted=True)
                recovered.append(job_key)
                continue
        if capacity <= 0:
            # Recorded so the sensor asks for this partition's submissions again when room frees.
            with wh.connect() as conn:
                mark_shards_deferred(conn, [shard["shard_id"]])
            waiting += 1
            continue
        if shard["job_key"] is None:
            with wh.connect() as conn:
                insert_job_intent(conn, job_key, task_id, shard["shard_id"], spec.provider, spec.endpoint)
        file_id = shard["input_file_id"]
        if file_id:
            prepared = PreparedInput(InputKind.FILE, Path(shard["path"]), file_id)
        else:
            prepared = adapter.prepare_input(Path(shard["path"]), job_key, spec.endpoint, task.limits.max_inline_bytes)
            file_id = prepared.file_id
            if file_id:
                with wh.connect() as conn:
                    set_input_file(conn, job_key, file_id)
        request = CreateRequest(
            job_key=job_key, endpoint=spec.endpoint, model=spec.model,
            completion_window=task.limits.completion_window, line_count=int(shard["line_count"]),
            metadata={JOB_KEY_METADATA: job_key, "task_id": task_id, "shard_id": shard["shard_id"],
                      "lines": str(shard["line_count"])},
        )
        intent_unix = int(shard["intent_unix"]) if shard["intent_unix"] is not None else int(time.time())
        snapshot = _create(adapter, request, prepared, lambda: FindHints(
            created_after_unix=intent_unix - CLOCK_SKEW_S, line_count=int(shard["line_count"]),
            known_batch_ids=_known_batch_ids(wh, spec.provider)), shard["shard_id"])
        with wh.connect() as conn:
            record_snapshot(conn, job_key, snapshot, submitted=True)
        submitted.append(job_key)
        capacity -= 1
    if submitted or recovered:
        with wh.connect() as conn:
            set_task_status(conn, task_id, TaskStatus.SUBMITTED)
    return SubmitSummary(task_id, submitted, recovered, waiting, already)

