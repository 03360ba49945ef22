"""Stage 3 — submit shards as provider batches, idempotently (SPEC §3.3).

Per shard: record the intent (provider_job row in state CREATED) → upload → record the file id →
create the batch (tagged with the job_key in its metadata) → record the batch id. Each step is
committed before the next network call, so after a crash anywhere the job is found again
(`find_job` by metadata) instead of being created twice: a duplicate submission is duplicate billing.
At most `max_concurrent_jobs` batches per provider are in flight; the rest wait for a later run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from batch_assets.ledger.jobs import insert_job_intent, record_snapshot, set_input_file
from batch_assets.ledger.shards import mark_shards_deferred
from batch_assets.ledger.states import IN_FLIGHT_SQL, TaskStatus
from batch_assets.ledger.tasks import set_task_status
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts, scalar
from batch_assets.providers.base import JOB_KEY_METADATA, BatchAdapter
from batch_assets.spec.resolve import ResolvedTask


@dataclass(frozen=True)
class SubmitSummary:
    task_id: str
    submitted: list[str]
    recovered: list[str]
    waiting_for_capacity: int
    already_submitted: int


def job_key_for(shard_id: str) -> str:
    return f"{shard_id}:job1"


def submit_pending(wh: Warehouse, task: ResolvedTask, partition_date: str, adapter: BatchAdapter) -> SubmitSummary:
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
            with wh.connect() as conn:
                known = frozenset(r[0] for r in conn.execute(
                    "SELECT provider_batch_id FROM ledger.provider_job WHERE provider = ? AND provider_batch_id IS NOT NULL",
                    [spec.provider]).fetchall())
            found = adapter.find_job(job_key, not_before_unix=int(shard["intent_unix"]) - 3600,
                                     line_count=int(shard["line_count"]), known_batch_ids=known)
            if found is not None:
                with wh.connect() as conn:
                    record_snapshot(conn, job_key, found, submitted=True)
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
        if not file_id:
            file_id = adapter.upload_shard(Path(shard["path"]), job_key, task.limits.max_inline_bytes)
            with wh.connect() as conn:
                set_input_file(conn, job_key, file_id)
        snapshot = adapter.create_job(
            input_file_id=file_id, endpoint=spec.endpoint, model=spec.model,
            metadata={JOB_KEY_METADATA: job_key, "task_id": task_id, "shard_id": shard["shard_id"],
                      "lines": str(shard["line_count"])},
            completion_window=task.limits.completion_window,
        )
        with wh.connect() as conn:
            record_snapshot(conn, job_key, snapshot, submitted=True)
        submitted.append(job_key)
        capacity -= 1
    if submitted or recovered:
        with wh.connect() as conn:
            set_task_status(conn, task_id, TaskStatus.SUBMITTED)
    return SubmitSummary(task_id, submitted, recovered, waiting, already)

