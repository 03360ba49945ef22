"""Anthropic Message Batches adapter on the official `anthropic` SDK.

There is no file upload: a shard's JSONL lines are the `requests` array of one create call, sent
as they are (`_create_body`), not decoded and re-encoded by the SDK.
Batches carry no metadata, so a lost create is looked for among the batches created since the
intent with the shard's request count, and told apart by the request ids in their results (so only
once they have ended). The results JSONL is streamed to disk verbatim, from the batch's results stream.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO

import anthropic
from anthropic.types.messages import MessageBatch

from batch_assets.providers.contract import (
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
from batch_assets.providers.files import stream_to_file
from batch_assets.providers.listing import list_snapshots, sdk_pages

MATCHED_BY_REQUEST_IDS = "matched by the request ids in its results"
# Batches per page when listing them to find a lost create.
LIST_PAGE_SIZE = 100
# Batches per page when polling by listing: the documented maximum (1 to 1000), fewest calls.
POLL_PAGE_SIZE = 1000
CREATE_PATH = "/v1/messages/batches"
# A create body up to this size is built in memory, a larger one in a temporary file.
_BODY_IN_MEMORY_BYTES = 8 << 20


def snapshot_from_batch(batch) -> JobSnapshot:
    """Anthropic has one terminal status, `ended`; the internal state comes from
    cancel_initiated_at and the request counts (a judgment kept in this one place):
    ended + cancel initiated -> CANCELLED; ended with every request expired -> EXPIRED; else COMPLETED.
    The results can be fetched once the batch ended and names its results_url. Its own times are
    created_at and ended_at: a batch is in progress from its creation, with no start time of its own."""
    c = batch.request_counts
    total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
    ended = batch.processing_status == "ended"
    if ended:
        if batch.cancel_initiated_at is not None:
            state = JobState.CANCELLED
        elif total and c.expired == total:
            state = JobState.EXPIRED
        else:
            state = JobState.COMPLETED
    else:  # in_progress, or canceling (cancel flag below)
        state = JobState.RUNNING
    return JobSnapshot(
        provider_batch_id=batch.id,
        raw_status=batch.processing_status,
        state=state,
        request_total=total,
        request_completed=c.succeeded if ended else total - c.processing,
        request_failed=(c.errored + c.canceled + c.expired) if ended else 0,
        results_ready=ended and bool(batch.results_url),
        cancel_requested=batch.cancel_initiated_at is not None,
        provider_created_at=utc(batch.created_at),
        provider_ended_at=utc(batch.ended_at) if ended else None,
    )


def error_of(exc: anthropic.APIStatusError) -> BatchError:
    """The provider's error from an HTTP error answer (body `{"type": "error", "error": {type, message}}`)."""
    return BatchError(code=exc.type or str(exc.status_code), message=exc.api_message or exc.message)


def _request_ids(shard_path: Path) -> frozenset[str]:
    """The custom_ids the shard file sends (one line at a time; only the ids are kept)."""
    ids = set()
    with open(shard_path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                ids.add(json.loads(line)["custom_id"])
    return frozenset(ids)


def _create_body(shard_path: Path) -> IO[bytes]:
    """The create call's JSON body, `{"requests":[<line>,<line>,...]}`, with the shard's lines as
    they are (each line is one request object, written by the product), rewound for sending.

    The SDK's `batches.create(requests=...)` would need every line decoded into dicts, which it
    then copies and encodes again, about ten times the client CPU of this one pass over the file. A
    malformed line is refused by the API with a 400, as the SDK's own call would be."""
    body = tempfile.SpooledTemporaryFile(max_size=_BODY_IN_MEMORY_BYTES)
    body.write(b'{"requests":[')
    separator = b""
    with open(shard_path, "rb") as f:
        for line in f:
            line = line.strip()
            if line:
                body.write(separator + line)
                separator = b","
    body.write(b"]}")
    body.seek(0)
    return body


def _created_unix(batch) -> float:
    return batch.created_at.timestamp() if isinstance(batch.created_at, datetime) else 0.0


class AnthropicBatchAdapter:
    name = "anthropic"

    def __init__(self, settings: ClientSettings):
        self.settings = settings
        self._client = anthropic.Anthropic(
            api_key=settings.api_key,
            base_url=settings.base_url,
            max_retries=settings.max_retries,
            timeout=settings.timeout_s,
        )

    def prepare_input(self, shard_path: Path, job_key: str, endpoint: str, inline_max_bytes: int) -> PreparedInput:
        """Nothing to upload: the shard's lines are the create call's request body."""
        return PreparedInput(InputKind.REQUEST_BODY, shard_path)

    def create(self, request: CreateRequest, prepared: PreparedInput) -> CreateResult:
        """One create call, without the SDK's auto-retry (a retried create could bill twice).

        Made with the SDK client's own `post` (the call `messages.batches.create` makes: same
        path, headers, auth, timeout and errors) and the body already serialised (`_create_body`),
        which the SDK sends as it is, with its Content-Length."""
        try:
            with _create_body(prepared.shard_path) as body:
                batch = self._client.with_options(max_retries=0).post(
                    CREATE_PATH,
                    cast_to=MessageBatch,
                    content=body,
                    options={"headers": {"Content-Type": "application/json"}},
                )
        except anthropic.APIStatusError as exc:
            return CreateResult(
                create_outcome_for_status(exc.status_code), error=error_of(exc), status_code=exc.status_code
            )
        except anthropic.APIConnectionError as exc:  # timeouts included
            return CreateResult(CreateOutcome.UNKNOWN, error=BatchError(type(exc).__name__, str(exc)))
        return CreateResult(CreateOutcome.CREATED, snapshot_from_batch(batch))

    def find_job(self, job_key: str, hints: FindHints) -> FindResult:
        """Batches carry no metadata, so time and size only pick candidates: batches created at or
        after `hints.created_after_unix` with exactly the shard's request count, not claimed by
        another ledger job. None -> ABSENT. While any candidate has not ended -> CANNOT_TELL (its
        results, the only thing that tells, do not exist yet). Once all have ended, each one's results
        are streamed and their custom_ids checked against the shard file's request ids: the one
        whose results are all this shard's -> FOUND; none -> ABSENT; more than one -> CANNOT_TELL."""
        candidates: list[JobSnapshot] = []
        for batch in self._client.messages.batches.list(limit=LIST_PAGE_SIZE):
            if _created_unix(batch) < hints.created_after_unix:
                break  # newest first
            snap = snapshot_from_batch(batch)
            if batch.id not in hints.known_batch_ids and snap.request_total == hints.line_count:
                candidates.append(snap)
        if not candidates:
            return FindResult(FindOutcome.ABSENT, reason="no unclaimed batch of this size since the intent")
        ids = tuple(c.provider_batch_id for c in candidates)
        unfinished = [c.provider_batch_id for c in candidates if not c.results_ready]
        if unfinished:
            return FindResult(
                FindOutcome.CANNOT_TELL,
                candidates=ids,
                reason=f"waiting for candidate batches {', '.join(unfinished)} to end: "
                f"{len(candidates)} unclaimed batch(es) of {hints.line_count} requests were "
                "created since the intent, and only their results tell whose they are",
            )
        if hints.shard_path is None:
            return FindResult(
                FindOutcome.CANNOT_TELL,
                candidates=ids,
                reason="no shard file to match the candidates' request ids against",
            )
        request_ids = _request_ids(hints.shard_path)
        matches = [c for c in candidates if self._results_all_in(c.provider_batch_id, request_ids)]
        if not matches:
            return FindResult(
                FindOutcome.ABSENT,
                reason=f"none of the ended candidate batches {', '.join(ids)} holds this shard's request ids",
            )
        if len(matches) == 1:
            return FindResult(FindOutcome.FOUND, matches[0], reason=MATCHED_BY_REQUEST_IDS)
        return FindResult(
            FindOutcome.CANNOT_TELL,
            candidates=tuple(m.provider_batch_id for m in matches),
            reason=f"{len(matches)} batches ({', '.join(m.provider_batch_id for m in matches)}) hold "
            "exactly this shard's request ids: a person must decide (batch-assets jobs adopt)",
        )

    def _results_all_in(self, batch_id: str, request_ids: frozenset[str]) -> bool:
        """Whether the ended batch's results (streamed line by line, stopping at the first stranger)
        are all answers to `request_ids`."""
        seen = 0
        with self._client.messages.batches.with_streaming_response.results(batch_id) as response:
            for line in response.iter_lines():
                if not line.strip():
                    continue
                try:
                    custom_id = json.loads(line).get("custom_id")
                except (ValueError, AttributeError):
                    return False
                if custom_id not in request_ids:
                    return False
                seen += 1
        return seen > 0

    def poll(self, job: JobRef, previous: JobState) -> JobSnapshot:
        return snapshot_from_batch(self._client.messages.batches.retrieve(job.provider_batch_id))

    def poll_listed(
        self, jobs: Sequence[tuple[JobRef, JobState]], created_after_unix: float, deadline: float
    ) -> dict[str, JobSnapshot]:
        """The jobs' snapshots from the batch listing (newest first, POLL_PAGE_SIZE a page, the
        `after_id` cursor), built as `poll` builds them; see `providers.listing.list_snapshots`."""
        return list_snapshots(
            self._batch_pages(),
            {j.provider_batch_id: prev for j, prev in jobs},
            batch_id=lambda b: b.id,
            created_unix=_created_unix,
            snapshot=lambda b, _prev: snapshot_from_batch(b),
            created_after_unix=created_after_unix,
            deadline=deadline,
        )

    def _batch_pages(self) -> Iterator[Sequence]:
        # A generator, as the walk expects: nothing is listed until it asks for the first page.
        yield from sdk_pages(self._client.messages.batches.list(limit=POLL_PAGE_SIZE))

    def cancel(self, job: JobRef) -> JobSnapshot:
        return snapshot_from_batch(self._client.messages.batches.cancel(job.provider_batch_id))

    def stream_results(self, job: JobRef, dest_dir: Path, stem: str) -> list[ResultFile]:
        """Stream the batch's results (addressed by the batch id) to `dest_dir/stem.output.jsonl`,
        only once the batch ended and its results are there; otherwise nothing."""
        batch = self._client.messages.batches.retrieve(job.provider_batch_id)
        if batch.processing_status != "ended" or not batch.results_url:
            return []
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"{stem}.output.jsonl"
        with self._client.messages.batches.with_streaming_response.results(job.provider_batch_id) as response:
            size = stream_to_file(response, dest)
        return [ResultFile("output", dest, size, None)]

    def delete_remote_files(self, job: JobRef) -> list[str]:
        """Nothing to delete per file: there is no uploaded input, and the results belong to the
        batch itself (they go when the batch is deleted or expires). Returns []."""
        return []
