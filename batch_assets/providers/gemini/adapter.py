"""Google Gemini Batch adapter on the official `google-genai` SDK.

Shards go as uploaded JSONL files (every response line carries its request's `key`). Inline
requests are used only when a task opts in (`limits.max_inline_bytes` above 0; the provider default
is 0): inlined responses may come back out of order (googleapis/python-genai#1909) and without
their `metadata.key` (python-genai#2008, js-genai#1191), so an inline job's responses are written
out only when every one carries its key, never matched by position. A job may also report
SUCCEEDED before its responses exist (tidyverse/ellmer#926 keeps polling for the output file): its
snapshot is terminal with `results_ready` false until they do.
Batch embeddings always go by file (inline embedding requests carry no per-request key). The job
key is the batch's display name, which is how a lost create is found again. Inline responses are
written to disk in the same `{key, response | error}` line shape as the responses file, so ingest
reads both the same way.

A failed batch's cause is the operation's `error` (a google.rpc.Status). The SDK's Gemini API
converter (`google.genai.batches._BatchJob_from_mldev`) maps only the operation's `metadata`, so the
adapter reads a failed operation once more as sent, through the SDK's own API client, and records
the status under its gRPC code name (RESOURCE_EXHAUSTED is capacity, INVALID_ARGUMENT validation).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from google.genai.errors import ExperimentalWarning

from batch_assets.providers.contract import (
    TERMINAL_STATES,
    BatchError,
    ClientSettings,
    CreateOutcome,
    CreateRequest,
    CreateResult,
    FindHints,
    FindOutcome,
    FindResult,
    InputKind,
    JobRef,
    JobSnapshot,
    JobState,
    PreparedInput,
    ResultFile,
    create_outcome_for_status,
    utc,
)
from batch_assets.providers.gemini.formats import grpc_code_name
from batch_assets.providers.listing import list_snapshots

try:  # the SDK sends through httpx, or its fork httpx2 where that is installed
    import httpx2
except ImportError:  # pragma: no cover
    httpx2 = None

EMBED_ENDPOINT = "embedContent"
# Dropped connections and timeouts: the create may or may not have reached the service.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError,) + ((httpx2.TransportError,) if httpx2 else ())
# Per-call options for the create: exactly one attempt, whatever the client's retry options.
SINGLE_ATTEMPT = types.HttpOptions(retry_options=types.HttpRetryOptions(attempts=1))

# Batches per page when listing them to find a lost create (the SDK pager follows nextPageToken).
LIST_PAGE_SIZE = 100

STATE_MAP = {
    "JOB_STATE_PENDING": JobState.SUBMITTED,
    "JOB_STATE_QUEUED": JobState.SUBMITTED,
    "JOB_STATE_RUNNING": JobState.RUNNING,
    "JOB_STATE_UPDATING": JobState.RUNNING,
    "JOB_STATE_PAUSED": JobState.RUNNING,
    "JOB_STATE_CANCELLING": JobState.RUNNING,
    "JOB_STATE_SUCCEEDED": JobState.COMPLETED,
    "JOB_STATE_PARTIALLY_SUCCEEDED": JobState.COMPLETED,
    "JOB_STATE_FAILED": JobState.FAILED,
    "JOB_STATE_CANCELLED": JobState.CANCELLED,
    "JOB_STATE_EXPIRED": JobState.EXPIRED,
}


def _state_name(job) -> str:
    state = job.state
    return getattr(state, "value", None) or str(state or "JOB_STATE_UNSPECIFIED")


def _inline_responses(job) -> list:
    dest = job.dest
    if dest is None:
        return []
    return dest.inlined_responses or dest.inlined_embed_content_responses or []


def snapshot_from_job(job, previous: JobState = JobState.SUBMITTED) -> JobSnapshot:
    """One Gemini batch job as a JobSnapshot. JOB_STATE_UNSPECIFIED (or a state this code does not
    know) says nothing new: the previous state is kept. The results can be fetched once the job
    is terminal and names its responses file or holds inline responses. Its own times: create_time
    and end_time; start_time only where the service sends one (Vertex AI; the Gemini API has none,
    and update_time is its last change, not its start)."""
    raw = _state_name(job)
    state = STATE_MAP.get(raw, previous)
    file_name = job.dest.file_name if job.dest is not None else None
    terminal = state in TERMINAL_STATES
    error = getattr(job, "error", None)
    errors = (BatchError(code=grpc_code_name(error.code), message=error.message or ""),) if error else ()
    return JobSnapshot(
        provider_batch_id=job.name,
        raw_status=raw,
        state=state,
        output_file_id=file_name if terminal else None,
        results_ready=terminal and bool(file_name or _inline_responses(job)),
        errors=errors,
        cancel_requested=raw == "JOB_STATE_CANCELLING",
        provider_created_at=utc(job.create_time),
        provider_started_at=utc(getattr(job, "start_time", None)),
        provider_ended_at=utc(job.end_time) if terminal else None,
    )


def _created_unix(job) -> float | None:
    """The job's creation time (the operation's metadata.createTime), None where not given."""
    return job.create_time.timestamp() if job.create_time is not None else None


def rpc_status_error(status: object) -> BatchError | None:
    """A google.rpc.Status (`{code, message}` as sent) as a BatchError named by its gRPC code."""
    if not isinstance(status, dict) or not status:
        return None
    code = status.get("status") or grpc_code_name(status.get("code"))
    return BatchError(code=code, message=str(status.get("message") or ""))


def error_of(exc: genai_errors.APIError) -> BatchError:
    return BatchError(code=exc.status or str(exc.code), message=exc.message or str(exc))


def _inline_request(line: dict) -> dict:
    """A REST-shaped input line (`{key, request}`) as the SDK's InlinedRequest."""
    req = line["request"]
    gen = req.get("generationConfig") or {}
    config = {
        k: v
        for k, v in {
            "temperature": gen.get("temperature"),
            "max_output_tokens": gen.get("maxOutputTokens"),
            "response_mime_type": gen.get("responseMimeType"),
            "response_json_schema": gen.get("responseJsonSchema"),
            "response_schema": gen.get("responseSchema"),
            "system_instruction": req.get("systemInstruction"),
        }.items()
        if v is not None
    }
    return {"contents": req["contents"], "config": config, "metadata": {"key": line["key"]}}


class GeminiBatchAdapter:
    name = "gemini"

    def __init__(self, settings: ClientSettings):
        self.settings = settings
        retry = types.HttpRetryOptions(attempts=settings.max_retries + 1) if settings.max_retries else None
        self._client = genai.Client(
            api_key=settings.api_key,
            http_options=types.HttpOptions(
                base_url=settings.base_url, timeout=int(settings.timeout_s * 1000), retry_options=retry
            ),
        )

    def prepare_input(self, shard_path: Path, job_key: str, endpoint: str, inline_max_bytes: int) -> PreparedInput:
        """Inline when the task opted in (`inline_max_bytes` > 0) and the shard is within it (never for
        embedContent); otherwise upload."""
        if endpoint != EMBED_ENDPOINT and 0 < shard_path.stat().st_size <= inline_max_bytes:
            return PreparedInput(InputKind.INLINE, shard_path)
        uploaded = self._client.files.upload(
            file=str(shard_path), config=types.UploadFileConfig(display_name=job_key, mime_type="jsonl")
        )
        return PreparedInput(InputKind.FILE, shard_path, uploaded.name)

    def create(self, request: CreateRequest, prepared: PreparedInput) -> CreateResult:
        """One create call with a single attempt (no SDK retry): a retried create could bill twice."""
        config = {"display_name": request.job_key, "http_options": SINGLE_ATTEMPT}
        try:
            if request.endpoint == EMBED_ENDPOINT:
                if prepared.kind != InputKind.FILE:
                    raise ValueError("Gemini batch embeddings take an uploaded file, not inline requests")
                with warnings.catch_warnings():  # the SDK marks batch embeddings experimental; used on purpose
                    warnings.simplefilter("ignore", ExperimentalWarning)
                    job = self._client.batches.create_embeddings(
                        model=request.model, src={"file_name": prepared.file_id}, config=config
                    )
            elif prepared.kind == InputKind.INLINE:
                with open(prepared.shard_path, encoding="utf-8") as f:
                    src = [_inline_request(json.loads(line)) for line in f if line.strip()]
                job = self._client.batches.create(model=request.model, src=src, config=config)
            else:
                job = self._client.batches.create(model=request.model, src=prepared.file_id, config=config)
        except genai_errors.APIError as exc:
            return CreateResult(create_outcome_for_status(exc.code), error=error_of(exc), status_code=exc.code)
        except TRANSPORT_ERRORS as exc:
            return CreateResult(CreateOutcome.UNKNOWN, error=BatchError(type(exc).__name__, str(exc)))
        try:
            snapshot = self._snapshot(job)
        except (genai_errors.APIError, *TRANSPORT_ERRORS) as exc:  # the batch exists: never report it unknown
            snapshot = replace(
                snapshot_from_job(job),
                errors=(
                    BatchError(None, f"the batch failed; its error could not be read: {type(exc).__name__}: {exc}"),
                ),
            )
        return CreateResult(CreateOutcome.CREATED, snapshot)

    def find_job(self, job_key: str, hints: FindHints) -> FindResult:
        """The batch whose display name is job_key."""
        for job in self._client.batches.list(config={"page_size": LIST_PAGE_SIZE}):
            if job.display_name == job_key:
                return FindResult(FindOutcome.FOUND, self._snapshot(job), reason="matched by display name")
        return FindResult(FindOutcome.ABSENT, reason="no batch has this job key as display name")

    def _operation_error(self, name: str) -> BatchError | None:
        """The batch operation's `error` as sent (the SDK's converter drops it): one raw GET of the
        operation through the SDK's API client (same key, base URL and retry options)."""
        response = self._client._api_client.request("get", name, {}, None)
        body = json.loads(response.body) if response.body else {}
        return rpc_status_error(body.get("error"))

    def _snapshot(self, job, previous: JobState = JobState.SUBMITTED) -> JobSnapshot:
        """snapshot_from_job, plus the operation's error for a failed batch."""
        snap = snapshot_from_job(job, previous)
        if snap.state == JobState.FAILED and not snap.errors:
            error = self._operation_error(job.name)
            if error is not None:
                snap = replace(snap, errors=(error,))
        return snap

    def poll(self, job: JobRef, previous: JobState) -> JobSnapshot:
        return self._snapshot(self._client.batches.get(name=job.provider_batch_id), previous)

    def poll_listed(
        self, jobs: Sequence[tuple[JobRef, JobState]], created_after_unix: float, deadline: float
    ) -> dict[str, JobSnapshot]:
        """The jobs' snapshots from the batch listing (newest first, LIST_PAGE_SIZE a page, the
        pager's nextPageToken), built by `_snapshot` exactly as `poll` builds them: the previous
        state kept for JOB_STATE_UNSPECIFIED, and a failed job's operation read once more for the
        error the SDK's converter drops (one GET for each of those few)."""
        return list_snapshots(
            self._job_pages(),
            {j.provider_batch_id: prev for j, prev in jobs},
            batch_id=lambda b: b.name,
            created_unix=_created_unix,
            snapshot=self._snapshot,
            created_after_unix=created_after_unix,
            deadline=deadline,
        )

    def _job_pages(self) -> Iterator[list]:
        pager = self._client.batches.list(config={"page_size": LIST_PAGE_SIZE})
        while True:
            yield list(pager.page)
            try:
                pager.next_page()
            except IndexError:  # the pager's "no more pages"
                return

    def cancel(self, job: JobRef) -> JobSnapshot:
        self._client.batches.cancel(name=job.provider_batch_id)
        return self._snapshot(self._client.batches.get(name=job.provider_batch_id), JobState.RUNNING)

    def stream_results(self, job: JobRef, dest_dir: Path, stem: str) -> list[ResultFile]:
        """The responses file, streamed to `dest_dir/stem.output.jsonl`; for an inline job its
        responses, written there one `{key, response | error}` line each. Nothing if there are none.

        Inline responses may come back in any order, so one without its `metadata.key` cannot be
        matched to its request (by position it would misattribute answers): it is left out and
        counted (`unmatched_lines`); its request then has no line and is sent again as a file."""
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"{stem}.output.jsonl"
        tmp = dest.with_suffix(dest.suffix + ".part")
        file_name = job.output_file_id
        if file_name:
            self._client.files.download(file=file_name, destination=str(tmp))
        else:
            remote = self._client.batches.get(name=job.provider_batch_id)
            file_name = remote.dest.file_name if remote.dest is not None else None
            if file_name:
                self._client.files.download(file=file_name, destination=str(tmp))
            else:
                responses = _inline_responses(remote)
                if not responses:
                    return []
                keyed = [r for r in responses if (r.metadata or {}).get("key")]
                unmatched = len(responses) - len(keyed)
                with open(tmp, "w", encoding="utf-8") as out:
                    for r in keyed:
                        line = {"key": r.metadata["key"]}
                        if r.error is not None:
                            line["error"] = r.error.model_dump(mode="json", by_alias=True, exclude_none=True)
                        else:
                            line["response"] = r.response.model_dump(mode="json", by_alias=True, exclude_none=True)
                        out.write(json.dumps(line, ensure_ascii=False) + "\n")
                tmp.replace(dest)
                return [ResultFile("output", dest, dest.stat().st_size, None, unmatched_lines=unmatched)]
        tmp.replace(dest)
        return [ResultFile("output", dest, dest.stat().st_size, file_name)]

    def delete_remote_files(self, job: JobRef) -> list[str]:
        """Delete the uploaded input file and the responses file; a file already gone is skipped."""
        deleted = []
        for name in (job.input_file_id, job.output_file_id):
            if not name:
                continue
            try:
                self._client.files.delete(name=name)
            except genai_errors.ClientError as exc:
                # Gemini answers a file that no longer exists with 403 PERMISSION_DENIED ("... or it may
                # not exist"), not 404: both mean there is nothing left to delete.
                if exc.code in (403, 404):
                    continue
                raise
            deleted.append(name)
        return deleted
