"""The provider interface, the internal job state machine (SPEC §6) and provider clients' settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol


class JobState(StrEnum):
    CREATED = "CREATED"        # intent recorded locally, provider not yet asked
    VALIDATING = "VALIDATING"
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    FINALIZING = "FINALIZING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    EXPIRED = "EXPIRED"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.EXPIRED, JobState.CANCELLED})


@dataclass(frozen=True)
class JobSnapshot:
    """What one poll of a provider batch tells us, already mapped to the internal state."""

    provider_batch_id: str
    raw_status: str
    state: JobState
    request_total: int | None = None
    request_completed: int | None = None
    request_failed: int | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict] = field(default_factory=list)
    cancel_requested: bool = False
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class ClientSettings:
    """How to reach one provider: its API key (from the environment only) and base URL."""

    api_key: str
    base_url: str | None = None
    max_retries: int = 4
    timeout_s: float = 120.0

    def __repr__(self) -> str:  # never print the key
        return f"ClientSettings(base_url={self.base_url!r}, api_key=***)"


class BatchAdapter(Protocol):
    """One provider's batch API behind the operations the pipeline needs."""

    provider: str

    def upload_shard(self, path: Path, job_key: str) -> str: ...

    def create_job(self, input_file_id: str, endpoint: str, model: str, metadata: dict[str, str],
                   completion_window: str) -> JobSnapshot: ...

    def find_job(self, job_key: str, not_before_unix: int) -> JobSnapshot | None: ...

    def poll(self, provider_batch_id: str) -> JobSnapshot: ...

    def cancel(self, provider_batch_id: str) -> JobSnapshot: ...

    def download(self, file_id: str, dest: Path) -> int: ...

    def delete_file(self, file_id: str) -> None: ...
