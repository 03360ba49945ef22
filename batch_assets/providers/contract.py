"""The provider contract: what every batch provider adapter offers the pipeline, in one typed form.

Modelled on what the four services really have, not on one of them:
- submission = `prepare_input` (upload a file, or nothing where the shard travels in the create
  request itself) then `create`; `create` is made without SDK auto-retry and answers CREATED, FAILED
  or UNKNOWN (the request may or may not have been processed: look it up before creating again);
- `find_job` answers FOUND, ABSENT or CANNOT_TELL (with the reason) for a job key;
- `poll` receives the previously recorded state and returns a `JobSnapshot` that also says whether
  the results can be fetched yet (a batch may report success before its results file exists);
- `stream_results` writes a terminal job's results (file download or the provider's results
  stream) to disk, never holding them whole in memory;
- `cancel`, `delete_remote_files`;
- optionally `poll_listed` (see `ListingProvider`): many jobs' snapshots from the provider's batch
  listing, a page of batches per call instead of one retrieve per job. Without it (the default of
  `poll_listed` below) every job is polled with `poll`.

The pipeline reaches providers only through this module and `providers.registry`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from batch_assets.providers.limits import ProviderLimits, load_limits

if TYPE_CHECKING:
    from batch_assets.providers.wire import WireFormat


class JobState(StrEnum):
    """Internal job states; every provider's own statuses map onto these."""

    CREATED = "CREATED"  # intent recorded locally, provider not yet asked
    VALIDATING = "VALIDATING"
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    FINALIZING = "FINALIZING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    EXPIRED = "EXPIRED"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.EXPIRED, JobState.CANCELLED})

# Metadata key (or display name) under which every batch carries its ledger job_key: how an
# ambiguous or crashed submission is found again instead of being created twice.
JOB_KEY_METADATA = "batch_assets_job"


@dataclass(frozen=True)
class BatchError:
    """The provider's own error for a whole batch (or one of its validation errors)."""

    code: str | None
    message: str
    line: int | None = None
    param: str | None = None

    def as_dict(self) -> dict:
        return {
            k: v
            for k, v in {"code": self.code, "message": self.message, "line": self.line, "param": self.param}.items()
            if v is not None
        }


@dataclass(frozen=True)
class JobSnapshot:
    """What one poll (or the create call) tells us about a provider batch, mapped to the internal state."""

    provider_batch_id: str
    raw_status: str
    state: JobState
    request_total: int | None = None
    request_completed: int | None = None
    request_failed: int | None = None
    # Real provider files only (OpenAI/DashScope output and error files, a Gemini responses file);
    # None where results come from the batch itself (Anthropic's results stream, Gemini inline).
    output_file_id: str | None = None
    error_file_id: str | None = None
    # Whether `stream_results` can fetch this job's results now. A terminal job whose results are
    # not ready yet (success reported before the results file exists) must be polled again.
    results_ready: bool = False
    errors: tuple[BatchError, ...] = ()
    cancel_requested: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    # The provider's own timestamps of the batch (UTC), None where it does not report one: when it
    # was created, began processing (in progress / started), began finalizing, and ended (completed,
    # failed, expired or cancelled). The report's durations come from them, not from poll times.
    provider_created_at: datetime | None = None
    provider_started_at: datetime | None = None
    provider_finalizing_at: datetime | None = None
    provider_ended_at: datetime | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def results_pending(self) -> bool:
        """Succeeded (or ended) by the provider's word, but its results cannot be fetched yet."""
        return self.terminal and not self.results_ready and self.state != JobState.FAILED


def utc_from_unix(seconds: float | None) -> datetime | None:
    """A provider's unix-seconds timestamp (OpenAI, DashScope) as a UTC datetime; None stays None."""
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def utc(instant: datetime | None) -> datetime | None:
    """A timestamp an SDK parsed (RFC 3339: Anthropic, Gemini) in UTC; a naive one is taken as UTC."""
    if instant is None:
        return None
    return instant.replace(tzinfo=UTC) if instant.tzinfo is None else instant.astimezone(UTC)


class InputKind(StrEnum):
    FILE = "file"  # an uploaded provider file (OpenAI, DashScope, Gemini file jobs)
    INLINE = "inline"  # requests travel inside the create call (Gemini inline)
    REQUEST_BODY = "request_body"  # the create call's body is the request list (Anthropic)


@dataclass(frozen=True)
class PreparedInput:
    """Where a shard is for the create call: an uploaded file, or the local file sent inline."""

    kind: InputKind
    shard_path: Path
    file_id: str | None = None  # set exactly when kind is FILE


@dataclass(frozen=True)
class CreateRequest:
    job_key: str
    endpoint: str
    model: str
    completion_window: str
    line_count: int
    metadata: Mapping[str, str]  # carries JOB_KEY_METADATA -> job_key


class CreateOutcome(StrEnum):
    CREATED = "created"  # the provider accepted the batch (snapshot set)
    FAILED = "failed"  # the provider refused it: nothing was created (error set)
    UNKNOWN = "unknown"  # timeout, dropped connection, 5xx, 429: it may exist; find_job before retrying


@dataclass(frozen=True)
class CreateResult:
    outcome: CreateOutcome
    snapshot: JobSnapshot | None = None
    error: BatchError | None = None
    status_code: int | None = None


def create_outcome_for_status(status_code: int) -> CreateOutcome:
    """What an HTTP error answer to a create call means.

    A 4xx other than 408 (timeout), 409 (conflict) and 429 (rate limit) is a definite refusal:
    nothing was created. 408, 409, 429 and every 5xx may have been processed: UNKNOWN.
    """
    if 400 <= status_code <= 499 and status_code not in (408, 409, 429):
        return CreateOutcome.FAILED
    return CreateOutcome.UNKNOWN


class FindOutcome(StrEnum):
    FOUND = "found"
    ABSENT = "absent"  # confirmed: no batch carries this job key (creating it is safe)
    CANNOT_TELL = "cannot_tell"  # not decidable now (reason says why): never create, look again later


@dataclass(frozen=True)
class FindHints:
    """What the ledger knows about a submission that may or may not have been created."""

    created_after_unix: int  # no earlier than the recorded intent (minus clock skew)
    line_count: int
    known_batch_ids: frozenset[str] = frozenset()  # batches already claimed by other ledger jobs
    # The shard file whose lines were sent: its request ids (custom_id / key) tell a batch that
    # carries no job key apart from another of the same size (read line by line, only if needed).
    shard_path: Path | None = None


@dataclass(frozen=True)
class FindResult:
    outcome: FindOutcome
    snapshot: JobSnapshot | None = None
    reason: str = ""
    candidates: tuple[str, ...] = ()  # batch ids that might be ours (CANNOT_TELL)


@dataclass(frozen=True)
class JobRef:
    """A recorded job, as the ledger holds it, for calls that act on an existing batch."""

    provider_batch_id: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    input_file_id: str | None = None


@dataclass(frozen=True)
class ResultFile:
    kind: str  # "output" | "error"
    path: Path
    byte_count: int
    provider_file_id: str | None  # the provider file it came from (None for a results stream)
    # Answers the provider returned that cannot be matched to a request (left out of the file).
    unmatched_lines: int = 0


@dataclass(frozen=True)
class ClientSettings:
    """How to reach one provider: its API key (from the environment only), base URL and whether
    that is the local emulator or the live service (`mode`, recorded on every job it creates)."""

    api_key: str
    base_url: str | None = None
    max_retries: int = 4
    timeout_s: float = 120.0
    mode: str = "emulator"
    # The provider account the key belongs to: quota (concurrent batches, enqueued tokens, creation
    # rate) is counted per account, shared by every task and submitter using it.
    account: str = "default"
    # The account's own limits where they differ from the provider's limits.yaml (tier-dependent).
    account_max_concurrent_jobs: int | None = None
    account_max_enqueued_tokens: int | None = None
    account_max_creates_per_minute: int | None = None

    def __repr__(self) -> str:  # never print the key
        return f"ClientSettings(base_url={self.base_url!r}, mode={self.mode!r}, account={self.account!r}, api_key=***)"


class BatchProvider(Protocol):
    """One provider's batch API behind the operations the pipeline needs."""

    name: str
    settings: ClientSettings  # its max_retries also bounds the caller's re-tries of an UNKNOWN create

    def prepare_input(self, shard_path: Path, job_key: str, endpoint: str, inline_max_bytes: int) -> PreparedInput:
        """Upload the shard where the provider takes files; otherwise say how it travels.

        `endpoint` matters where a provider takes inline requests for some endpoints only."""

    def create(self, request: CreateRequest, prepared: PreparedInput) -> CreateResult:
        """Create the batch once (no SDK auto-retry): CREATED, FAILED or UNKNOWN."""

    def find_job(self, job_key: str, hints: FindHints) -> FindResult:
        """The batch created for job_key, if the provider can tell."""

    def poll(self, job: JobRef, previous: JobState) -> JobSnapshot: ...

    def cancel(self, job: JobRef) -> JobSnapshot: ...

    def stream_results(self, job: JobRef, dest_dir: Path, stem: str) -> list[ResultFile]:
        """Write the terminal job's result files under dest_dir (streamed); one per kind present."""

    def delete_remote_files(self, job: JobRef) -> list[str]:
        """Delete the provider-side input/output/error files of a finished job; the ids deleted."""


class ListingProvider(BatchProvider, Protocol):
    """A provider that can also poll many jobs at once through its batch listing."""

    def poll_listed(
        self, jobs: Sequence[tuple[JobRef, JobState]], created_after_unix: float, deadline: float
    ) -> dict[str, JobSnapshot]:
        """Snapshots (by provider batch id) of those of `jobs` (each with its previously recorded
        state) that the listing shows, built by the same function as `poll`'s. Pages newest first and
        stops once every job was seen, a page reaches batches created before `created_after_unix`,
        or `deadline` (time.monotonic) passed. Jobs missing from the answer must be polled with `poll`."""


def poll_listed(
    adapter: BatchProvider, jobs: Sequence[tuple[JobRef, JobState]], created_after_unix: float, deadline: float
) -> dict[str, JobSnapshot]:
    """The adapter's `poll_listed` where it has one; otherwise {} (the default): every job is then
    polled with `poll`, as is any job a listing did not show."""
    bulk = getattr(adapter, "poll_listed", None)
    if bulk is None:
        return {}
    return bulk(jobs, created_after_unix, deadline)


@dataclass(frozen=True)
class ProviderDefinition:
    """Everything the project knows about one provider, declared in its folder's `__init__.py`.

    Adding a provider is one folder (adapter, formats, limits.yaml, this definition) plus its name
    in `providers.registry.PROVIDERS`.
    """

    name: str
    # The implementation, built from ClientSettings, as "module:Class". Imported only when an adapter
    # is built: its SDK costs ~2 s and ~95 MB per process, and the local stages (which read a
    # provider's formats and limits to validate a task) never call a provider.
    adapter: str
    formats: Mapping[str, WireFormat]  # endpoint -> its wire format
    limits_path: Path  # the folder's limits.yaml
    emulator_path: str  # where it lives on the local emulator ("/v1", "", ...)
    live_base_url: str | None = None  # live default base URL (None: the SDK's own default)
    live_host: str | None = None  # where the SDK's own default goes (recorded per job)

    def adapter_class(self) -> type[BatchProvider]:
        module, _, cls = self.adapter.partition(":")
        return getattr(importlib.import_module(module), cls)

    def build_adapter(self, settings: ClientSettings) -> BatchProvider:
        return self.adapter_class()(settings)

    def limits(self) -> ProviderLimits:
        return load_limits(self.limits_path)
