"""Anthropic Message Batches adapter on the official `anthropic` SDK (reference §2; mapping §6).

There is no file upload: a shard's JSONL lines are the `requests` array of one create call.
The results JSONL is streamed to disk verbatim.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import anthropic

from batch_assets.providers.base import ClientSettings, JobSnapshot, JobState, stream_to_file

LOCAL_PREFIX = "local:"


def snapshot_from_batch(batch) -> JobSnapshot:
    """Anthropic has one terminal status, `ended`; the internal state comes from
    cancel_initiated_at and the request counts (reference §6, a judgment kept in this one place):
    ended + cancel initiated -> CANCELLED; ended with every request expired -> EXPIRED; else COMPLETED."""
    c = batch.request_counts
    total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
    if batch.processing_status == "ended":
        if batch.cancel_initiated_at is not None:
            state = JobState.CANCELLED
        elif total and c.expired == total:
            state = JobState.EXPIRED
        else:
            state = JobState.COMPLETED
    else:  # in_progress, or canceling (cancel flag below)
        state = JobState.RUNNING
    ended = batch.processing_status == "ended"
    return JobSnapshot(
        provider_batch_id=batch.id, raw_status=batch.processing_status, state=state,
        request_total=total, request_completed=c.succeeded if ended else total - c.processing,
        request_failed=(c.errored + c.canceled + c.expired) if ended else 0,
        # The results stream is addressed by the batch id; it exists only once the batch ended.
        output_file_id=batch.id if ended and batch.results_url else None,
        cancel_requested=batch.cancel_initiated_at is not None,
    )


class AnthropicBatchAdapter:
    provider = "anthropic"

    def __init__(self, settings: ClientSettings):
        self._client = anthropic.Anthropic(api_key=settings.api_key, base_url=settings.base_url,
                                           max_retries=settings.max_retries, timeout=settings.timeout_s)

    def upload_shard(self, path: Path, job_key: str, inline_max_bytes: int = 0) -> str:
        return LOCAL_PREFIX + str(path)

    def create_job(self, input_file_id: str, endpoint: str, model: str, metadata: dict[str, str],
                   completion_window: str) -> JobSnapshot:
        path = Path(input_file_id.removeprefix(LOCAL_PREFIX))
        with open(path, encoding="utf-8") as f:
            requests = [json.loads(line) for line in f if line.strip()]
        return snapshot_from_batch(self._client.messages.batches.create(requests=requests))

    def find_job(self, job_key: str, not_before_unix: int, line_count: int = 0,
                 known_batch_ids: frozenset[str] = frozenset()) -> JobSnapshot | None:
        """Batches carry no metadata, so a batch created after the recorded intent, with exactly the
        shard's request count and not claimed by another ledger job, is taken as ours. If more than
        one matches, none is adopted (a person must decide): never a silent duplicate."""
        candidates = []
        for batch in self._client.messages.batches.list(limit=100):
            created = batch.created_at.timestamp() if isinstance(batch.created_at, datetime) else 0
            if created < not_before_unix:
                break  # newest first
            snap = snapshot_from_batch(batch)
            if batch.id not in known_batch_ids and snap.request_total == line_count:
                candidates.append(snap)
        return candidates[0] if len(candidates) == 1 else None

    def poll(self, provider_batch_id: str) -> JobSnapshot:
        return snapshot_from_batch(self._client.messages.batches.retrieve(provider_batch_id))

    def cancel(self, provider_batch_id: str) -> JobSnapshot:
        return snapshot_from_batch(self._client.messages.batches.cancel(provider_batch_id))

    def download(self, file_id: str, dest: Path) -> int:
        with self._client.messages.batches.with_streaming_response.results(file_id) as response:
            return stream_to_file(response, dest)

    def delete_file(self, file_id: str) -> None:
        """Results belong to the batch: deleting the (ended) batch deletes them."""
        self._client.messages.batches.delete(file_id)
