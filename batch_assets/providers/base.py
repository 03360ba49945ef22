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

    def upload_shard(self, path: Path, job_key: str, inline_max_bytes: int = 0) -> str:
        """Make the shard available to the provider; returns the id the create call takes."""

    def create_job(self, input_file_id: str, endpoint: str, model: str, metadata: dict[str, str],
                   completion_window: str) -> JobSnapshot:
        """Create the batch; `metadata` carries the ledger job_key (JOB_KEY_METADATA)."""

    def find_job(self, job_key: str, not_before_unix: int, line_count: int,
                 known_batch_ids: frozenset[str]) -> JobSnapshot | None:
        """After a crash between create and record: the batch created for job_key, if any."""

    def poll(self, provider_batch_id: str) -> JobSnapshot: ...

    def cancel(self, provider_batch_id: str) -> JobSnapshot: ...

    def download(self, file_id: str, dest: Path) -> int:
        """Stream a result file (output_file_id / error_file_id of a snapshot) to dest; bytes written."""

    def delete_file(self, file_id: str) -> None:
        """Delete a provider-side file (inputs and results, after download)."""


# Metadata key (or display name) under which every batch carries its ledger job_key: how a crashed
# submission is found again instead of being created twice.
JOB_KEY_METADATA = "batch_assets_job"


def stream_to_file(response, dest: Path, chunk_bytes: int = 1 << 20) -> int:
    """Write a streaming SDK response to dest via a .part file (never whole in memory); bytes written."""
    tmp = dest.with_suffix(dest.suffix + ".part")
    written = 0
    with open(tmp, "wb") as out:
        for chunk in response.iter_bytes(chunk_bytes):
            out.write(chunk)
            written += len(chunk)
    tmp.replace(dest)
    return written
