"""OpenAI Batch API adapter on the official `openai` SDK.

Also serves any OpenAI-compatible batch endpoint (the local emulator; DashScope's compatible mode,
whose adapter subclasses this one). The shard is uploaded as a `batch` file; the batch carries
the ledger job key in its metadata; results are an output file and an error file, streamed to disk.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import openai

from batch_assets.providers.contract import (
    JOB_KEY_METADATA,
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
    utc_from_unix,
)
from batch_assets.providers.files import stream_to_file
from batch_assets.providers.listing import list_snapshots, sdk_pages

# Batches per page when listing them to find a lost create (the SDK pages on with `after`).
LIST_PAGE_SIZE = 100

STATUS_MAP = {
    "validating": JobState.VALIDATING,
    "in_progress": JobState.RUNNING,
    "finalizing": JobState.FINALIZING,
    "completed": JobState.COMPLETED,
    "failed": JobState.FAILED,
    "expired": JobState.EXPIRED,
    "cancelled": JobState.CANCELLED,
    # Transitional cancel: the job stays RUNNING, with the cancel flag set.
    "cancelling": JobState.RUNNING,
}


def _batch_errors(batch) -> tuple[BatchError, ...]:
    data = batch.errors.data if batch.errors and batch.errors.data else []
    return tuple(BatchError(code=e.code, message=e.message or "", line=e.line, param=e.param) for e in data)


# The timestamp a batch ended at, by the status that ended it (the others stay null).
_ENDED_AT = {"completed": "completed_at", "failed": "failed_at", "expired": "expired_at", "cancelled": "cancelled_at"}


def snapshot_from_batch(batch) -> JobSnapshot:
    """One OpenAI batch object as a JobSnapshot. Its results can be fetched once it is terminal and
    names an output or error file (a batch may report completion before its files exist). Its own
    times (unix seconds): created_at, in_progress_at, finalizing_at, and the end its status names."""
    counts = batch.request_counts
    state = STATUS_MAP.get(batch.status, JobState.RUNNING)
    ended = _ENDED_AT.get(batch.status)
    return JobSnapshot(
        provider_batch_id=batch.id,
        raw_status=batch.status,
        state=state,
        request_total=counts.total if counts else None,
        request_completed=counts.completed if counts else None,
        request_failed=counts.failed if counts else None,
        # A clean batch may report `error_file_id: ""` (tobert/kaibo#93, live): no file, never an id.
        output_file_id=batch.output_file_id or None,
        error_file_id=batch.error_file_id or None,
        results_ready=state in TERMINAL_STATES and bool(batch.output_file_id or batch.error_file_id),
        errors=_batch_errors(batch),
        cancel_requested=batch.status == "cancelling" or batch.cancelling_at is not None,
        metadata=dict(batch.metadata or {}),
        provider_created_at=utc_from_unix(batch.created_at),
        provider_started_at=utc_from_unix(batch.in_progress_at),
        provider_finalizing_at=utc_from_unix(batch.finalizing_at),
        provider_ended_at=utc_from_unix(getattr(batch, ended, None)) if ended else None,
    )


def error_of(exc: openai.APIStatusError) -> BatchError:
    """The provider's error from an HTTP error answer (body `{"error": {code, message, param, type}}`)."""
    return BatchError(code=exc.code or exc.type or str(exc.status_code), message=exc.message, param=exc.param)


class OpenAIBatchAdapter:
    name = "openai"

    def __init__(self, settings: ClientSettings):
        self.settings = settings
        self._client = openai.OpenAI(
            api_key=settings.api_key,
            base_url=settings.base_url,
            max_retries=settings.max_retries,
            timeout=settings.timeout_s,
        )

    def prepare_input(self, shard_path: Path, job_key: str, endpoint: str, inline_max_bytes: int) -> PreparedInput:
        """Upload the shard as a `batch` purpose file (the SDK retries uploads: a duplicate upload
        costs nothing, unlike a duplicate batch)."""
        with open(shard_path, "rb") as f:
            uploaded = self._client.files.create(file=(shard_path.name, f, "application/jsonl"), purpose="batch")
        return PreparedInput(InputKind.FILE, shard_path, uploaded.id)

    def _create_metadata(self, request: CreateRequest) -> dict[str, str]:
        return dict(request.metadata)

    def _job_key_of(self, metadata: Mapping[str, str] | None) -> str | None:
        return (metadata or {}).get(JOB_KEY_METADATA)

    def create(self, request: CreateRequest, prepared: PreparedInput) -> CreateResult:
        """One create call, without the SDK's auto-retry: a retried create after a lost answer
        could create the batch twice, so the caller decides (find_job first)."""
        if prepared.kind != InputKind.FILE or not prepared.file_id:
            raise ValueError(f"{self.name} batches take an uploaded file, got {prepared.kind}")
        try:
            batch = self._client.with_options(max_retries=0).batches.create(
                input_file_id=prepared.file_id,
                endpoint=request.endpoint,
                completion_window=request.completion_window,
                metadata=self._create_metadata(request),
            )
        except openai.APIStatusError as exc:
            return CreateResult(
                create_outcome_for_status(exc.status_code), error=error_of(exc), status_code=exc.status_code
            )
        except openai.APIConnectionError as exc:  # timeouts included: the request may have been processed
            return CreateResult(CreateOutcome.UNKNOWN, error=BatchError(type(exc).__name__, str(exc)))
        return CreateResult(CreateOutcome.CREATED, snapshot_from_batch(batch))

    def find_job(self, job_key: str, hints: FindHints) -> FindResult:
        """The batch whose metadata carries job_key. Batches are listed newest first; paging stops
        at the first one created before `hints.created_after_unix`."""
        for batch in self._client.batches.list(limit=LIST_PAGE_SIZE):
            if self._job_key_of(batch.metadata) == job_key:
                return FindResult(FindOutcome.FOUND, snapshot_from_batch(batch), reason="matched by metadata")
            if batch.created_at < hints.created_after_unix:
                break
        return FindResult(FindOutcome.ABSENT, reason="no batch carries this job key")

    def poll(self, job: JobRef, previous: JobState) -> JobSnapshot:
        return snapshot_from_batch(self._client.batches.retrieve(job.provider_batch_id))

    def poll_listed(
        self, jobs: Sequence[tuple[JobRef, JobState]], created_after_unix: float, deadline: float
    ) -> dict[str, JobSnapshot]:
        """The jobs' snapshots from the batch listing (newest first, LIST_PAGE_SIZE a page, the
        `after` cursor), built as `poll` builds them; see `providers.listing.list_snapshots`."""
        return list_snapshots(
            self._batch_pages(),
            {j.provider_batch_id: prev for j, prev in jobs},
            batch_id=lambda b: b.id,
            created_unix=lambda b: b.created_at,
            snapshot=lambda b, _prev: snapshot_from_batch(b),
            created_after_unix=created_after_unix,
            deadline=deadline,
        )

    def _batch_pages(self) -> Iterator[Sequence]:
        # A generator, as the walk expects: nothing is listed until it asks for the first page.
        yield from sdk_pages(self._client.batches.list(limit=LIST_PAGE_SIZE))

    def cancel(self, job: JobRef) -> JobSnapshot:
        return snapshot_from_batch(self._client.batches.cancel(job.provider_batch_id))

    def stream_results(self, job: JobRef, dest_dir: Path, stem: str) -> list[ResultFile]:
        """Stream the output and error files (those the job names) to `dest_dir/stem.{kind}.jsonl`."""
        dest_dir.mkdir(parents=True, exist_ok=True)
        files = []
        for kind, file_id in (("output", job.output_file_id), ("error", job.error_file_id)):
            if not file_id:
                continue
            dest = dest_dir / f"{stem}.{kind}.jsonl"
            with self._client.files.with_streaming_response.content(file_id) as response:
                size = stream_to_file(response, dest)
            files.append(ResultFile(kind, dest, size, file_id))
        return files

    def delete_remote_files(self, job: JobRef) -> list[str]:
        """Delete the job's input, output and error files; a file already gone is skipped."""
        deleted = []
        for file_id in (job.input_file_id, job.output_file_id, job.error_file_id):
            if not file_id:
                continue
            try:
                self._client.files.delete(file_id)
            except openai.NotFoundError:
                continue
            deleted.append(file_id)
        return deleted
