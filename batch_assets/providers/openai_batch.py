"""OpenAI Batch API adapter on the official `openai` SDK (reference §1; status mapping §6).

Also serves any OpenAI-compatible batch endpoint (the local emulator; DashScope's compatible mode).
"""

from __future__ import annotations

from pathlib import Path

import openai

from batch_assets.providers.base import JOB_KEY_METADATA, ClientSettings, JobSnapshot, JobState, stream_to_file

STATUS_MAP = {
    "validating": JobState.VALIDATING,
    "in_progress": JobState.RUNNING,
    "finalizing": JobState.FINALIZING,
    "completed": JobState.COMPLETED,
    "failed": JobState.FAILED,
    "expired": JobState.EXPIRED,
    "cancelled": JobState.CANCELLED,
    # Transitional cancel: stay RUNNING with the cancel flag (reference §6 notes).
    "cancelling": JobState.RUNNING,
}


def snapshot_from_batch(batch) -> JobSnapshot:
    counts = batch.request_counts
    errors = [e.model_dump() for e in (batch.errors.data or [])] if batch.errors and batch.errors.data else []
    return JobSnapshot(
        provider_batch_id=batch.id,
        raw_status=batch.status,
        state=STATUS_MAP.get(batch.status, JobState.RUNNING),
        request_total=counts.total if counts else None,
        request_completed=counts.completed if counts else None,
        request_failed=counts.failed if counts else None,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        errors=errors,
        cancel_requested=batch.status == "cancelling" or batch.cancelling_at is not None,
        metadata=dict(batch.metadata or {}),
    )


class OpenAIBatchAdapter:
    provider = "openai"

    def __init__(self, settings: ClientSettings):
        self._client = openai.OpenAI(
            api_key=settings.api_key, base_url=settings.base_url,
            max_retries=settings.max_retries, timeout=settings.timeout_s,
        )

    def upload_shard(self, path: Path, job_key: str, inline_max_bytes: int = 0) -> str:
        with open(path, "rb") as f:
            return self._client.files.create(file=(path.name, f, "application/jsonl"), purpose="batch").id

    def create_job(self, input_file_id: str, endpoint: str, model: str, metadata: dict[str, str],
                   completion_window: str) -> JobSnapshot:
        batch = self._client.batches.create(
            input_file_id=input_file_id, endpoint=endpoint, completion_window=completion_window, metadata=metadata,
        )
        return snapshot_from_batch(batch)

    def _job_key_of(self, batch) -> str | None:
        return (batch.metadata or {}).get(JOB_KEY_METADATA)

    def find_job(self, job_key: str, not_before_unix: int, line_count: int = 0,
                 known_batch_ids: frozenset[str] = frozenset()) -> JobSnapshot | None:
        # Newest first; stop paging once batches are older than the recorded intent.
        for batch in self._client.batches.list(limit=100):
            if self._job_key_of(batch) == job_key:
                return snapshot_from_batch(batch)
            if batch.created_at < not_before_unix:
                return None
        return None

    def poll(self, provider_batch_id: str) -> JobSnapshot:
        return snapshot_from_batch(self._client.batches.retrieve(provider_batch_id))

    def cancel(self, provider_batch_id: str) -> JobSnapshot:
        return snapshot_from_batch(self._client.batches.cancel(provider_batch_id))

    def download(self, file_id: str, dest: Path) -> int:
        """Stream a provider file to disk (never whole in memory); returns bytes written."""
        with self._client.files.with_streaming_response.content(file_id) as response:
            return stream_to_file(response, dest)

    def delete_file(self, file_id: str) -> None:
        self._client.files.delete(file_id)



class DashScopeBatchAdapter(OpenAIBatchAdapter):
    """Alibaba Bailian / DashScope batch through its OpenAI-compatible base URL (reference §4).

    DashScope documents only ds_name / ds_description / ds_batch_finish_callback as metadata, so the
    job_key travels as ds_name (<= 100 chars) rather than under our own key [GUESS: other keys
    may be rejected by the live service].
    """

    provider = "dashscope"

    def create_job(self, input_file_id: str, endpoint: str, model: str, metadata: dict[str, str],
                   completion_window: str) -> JobSnapshot:
        ds_metadata = {"ds_name": metadata[JOB_KEY_METADATA][:100],
                       "ds_description": f"batch_assets {metadata.get('task_id', '')} {metadata.get('shard_id', '')}"[:200]}
        return super().create_job(input_file_id, endpoint, model, ds_metadata, completion_window)

    def _job_key_of(self, batch) -> str | None:
        return (batch.metadata or {}).get("ds_name")
