"""Google Gemini Batch adapter on the official `google-genai` SDK (reference §3; mapping §6).

Shards under the provider's inline limit are sent inline; larger ones are uploaded as JSONL files.
Inline responses are written to disk in the same `{key, response | error}` line shape as the
responses file, so ingest reads both the same way. Embedding tasks use batch embeddings.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from google import genai
from google.genai import types
from google.genai.errors import ExperimentalWarning

from batch_assets.providers.base import JOB_KEY_METADATA, ClientSettings, JobSnapshot, JobState

INLINE_PREFIX = "inline:"
EMBED_ENDPOINT = "embedContent"

STATE_MAP = {
    "JOB_STATE_PENDING": JobState.SUBMITTED, "JOB_STATE_QUEUED": JobState.SUBMITTED,
    "JOB_STATE_RUNNING": JobState.RUNNING, "JOB_STATE_UPDATING": JobState.RUNNING,
    "JOB_STATE_PAUSED": JobState.RUNNING, "JOB_STATE_CANCELLING": JobState.RUNNING,
    "JOB_STATE_SUCCEEDED": JobState.COMPLETED, "JOB_STATE_PARTIALLY_SUCCEEDED": JobState.COMPLETED,
    "JOB_STATE_FAILED": JobState.FAILED, "JOB_STATE_CANCELLED": JobState.CANCELLED,
    "JOB_STATE_EXPIRED": JobState.EXPIRED,
}


def _state_name(job) -> str:
    state = job.state
    return getattr(state, "value", None) or str(state or "JOB_STATE_UNSPECIFIED")


def snapshot_from_job(job, previous: JobState = JobState.SUBMITTED) -> JobSnapshot:
    raw = _state_name(job)
    state = STATE_MAP.get(raw, previous)  # UNSPECIFIED: keep the previous state (reference §6)
    output = None
    if state in (JobState.COMPLETED, JobState.CANCELLED, JobState.EXPIRED, JobState.FAILED) and job.dest is not None:
        if job.dest.file_name:
            output = job.dest.file_name
        elif job.dest.inlined_responses or job.dest.inlined_embed_content_responses:
            output = INLINE_PREFIX + job.name
    errors = [{"code": str(job.error.code), "message": job.error.message}] if getattr(job, "error", None) else []
    return JobSnapshot(provider_batch_id=job.name, raw_status=raw, state=state, output_file_id=output,
                       errors=errors, cancel_requested=raw == "JOB_STATE_CANCELLING")


def _inline_request(line: dict) -> dict:
    """A REST-shaped input line (`{key, request}`) as the SDK's InlinedRequest."""
    req = line["request"]
    gen = req.get("generationConfig") or {}
    config = {k: v for k, v in {
        "temperature": gen.get("temperature"), "max_output_tokens": gen.get("maxOutputTokens"),
        "response_mime_type": gen.get("responseMimeType"), "response_json_schema": gen.get("responseJsonSchema"),
        "system_instruction": req.get("systemInstruction"),
    }.items() if v is not None}
    return {"contents": req["contents"], "config": config, "metadata": {"key": line["key"]}}


class GeminiBatchAdapter:
    provider = "gemini"

    def __init__(self, settings: ClientSettings):
        retry = types.HttpRetryOptions(attempts=settings.max_retries + 1) if settings.max_retries else None
        self._client = genai.Client(api_key=settings.api_key, http_options=types.HttpOptions(
            base_url=settings.base_url, timeout=int(settings.timeout_s * 1000), retry_options=retry))

    def upload_shard(self, path: Path, job_key: str, inline_max_bytes: int = 0) -> str:
        if path.stat().st_size <= inline_max_bytes:
            return INLINE_PREFIX + str(path)
        uploaded = self._client.files.upload(
            file=str(path), config=types.UploadFileConfig(display_name=job_key, mime_type="jsonl"))
        return uploaded.name

    def create_job(self, input_file_id: str, endpoint: str, model: str, metadata: dict[str, str],
                   completion_window: str) -> JobSnapshot:
        config = {"display_name": metadata[JOB_KEY_METADATA]}
        inline = input_file_id.startswith(INLINE_PREFIX)
        if endpoint == EMBED_ENDPOINT:
            if inline:  # batch embeddings inline take no per-request keys: always go by file
                input_file_id = self.upload_shard(Path(input_file_id.removeprefix(INLINE_PREFIX)),
                                                  metadata[JOB_KEY_METADATA])
            with warnings.catch_warnings():  # the SDK marks batch embeddings experimental; we use them on purpose
                warnings.simplefilter("ignore", ExperimentalWarning)
                job = self._client.batches.create_embeddings(model=model, src={"file_name": input_file_id}, config=config)
        elif inline:
            with open(input_file_id.removeprefix(INLINE_PREFIX), encoding="utf-8") as f:
                src = [_inline_request(json.loads(line)) for line in f if line.strip()]
            job = self._client.batches.create(model=model, src=src, config=config)
        else:
            job = self._client.batches.create(model=model, src=input_file_id, config=config)
        return snapshot_from_job(job)

    def find_job(self, job_key: str, not_before_unix: int, line_count: int = 0,
                 known_batch_ids: frozenset[str] = frozenset()) -> JobSnapshot | None:
        for job in self._client.batches.list(config={"page_size": 100}):
            if job.display_name == job_key:
                return snapshot_from_job(job)
        return None

    def poll(self, provider_batch_id: str) -> JobSnapshot:
        return snapshot_from_job(self._client.batches.get(name=provider_batch_id))

    def cancel(self, provider_batch_id: str) -> JobSnapshot:
        self._client.batches.cancel(name=provider_batch_id)
        return self.poll(provider_batch_id)

    def download(self, file_id: str, dest: Path) -> int:
        tmp = dest.with_suffix(dest.suffix + ".part")
        if file_id.startswith(INLINE_PREFIX):
            job = self._client.batches.get(name=file_id.removeprefix(INLINE_PREFIX))
            responses = job.dest.inlined_responses or job.dest.inlined_embed_content_responses or []
            with open(tmp, "w", encoding="utf-8") as out:
                for r in responses:
                    line = {"key": (r.metadata or {}).get("key")}
                    if r.error is not None:
                        line["error"] = r.error.model_dump(mode="json", by_alias=True, exclude_none=True)
                    else:
                        line["response"] = r.response.model_dump(mode="json", by_alias=True, exclude_none=True)
                    out.write(json.dumps(line, ensure_ascii=False) + "\n")
        else:
            self._client.files.download(file=file_id, destination=str(tmp))
        tmp.replace(dest)
        return dest.stat().st_size

    def delete_file(self, file_id: str) -> None:
        if not file_id.startswith(INLINE_PREFIX):
            self._client.files.delete(name=file_id)
