"""Which provider status sensors there are, and which jobs each polls.

`BATCH_ASSETS_POLL_SENSORS` chooses, when the definitions load:

- unset or `one` (the default): one sensor, `provider_status_sensor`, polling every job;
- `providers`: one sensor per provider, `provider_status_sensor__<provider>`;
- `buckets:N`: N sensors, `provider_status_sensor__bucket_<i>_of_<N>`, each polling the tasks whose
  name falls in its bucket (a stable hash of the task name, the same on every machine).

Every sensor plans the collect and submit runs of every task; the ledger's run-request claims
(ledger/run_requests.py) let one of them ask for each run, and the poll leases (ledger/poll_leases.py)
keep sensors whose scopes overlap — during a change of this setting, or a second code location on
the same ledger — and `batch-assets poll` from polling one job twice at once.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from batch_assets.providers.registry import PROVIDERS

POLL_SENSORS_VAR = "BATCH_ASSETS_POLL_SENSORS"
BASE_SENSOR_NAME = "provider_status_sensor"
MAX_BUCKETS = 64


class PollScopeError(ValueError):
    """The setting names no valid sharding (the message names the variable and the fix)."""


@dataclass(frozen=True)
class PollScope:
    """The jobs one poller polls: of `providers` (None: all) and of the tasks in bucket `bucket` of
    `buckets` (buckets = 1: all)."""

    name: str = BASE_SENSOR_NAME
    providers: tuple[str, ...] | None = None
    bucket: int = 0
    buckets: int = 1

    def holds_task(self, task_name: str) -> bool:
        return self.buckets == 1 or task_bucket(task_name, self.buckets) == self.bucket

    def holds(self, task_name: str, provider: str) -> bool:
        return (self.providers is None or provider in self.providers) and self.holds_task(task_name)

    def task_names(self, names: Iterable[str]) -> list[str] | None:
        """Of `names`, those in this scope's bucket (None: no bucket, every task)."""
        return None if self.buckets == 1 else sorted(n for n in set(names) if self.holds_task(n))


EVERY_JOB = PollScope()


def task_bucket(task_name: str, buckets: int) -> int:
    """The bucket of a task: CRC-32 of its name (stable across processes, unlike hash())."""
    return zlib.crc32(task_name.encode("utf-8")) % buckets


def poll_scopes(setting: str | None = None) -> list[PollScope]:
    """The sensors `setting` (default: $BATCH_ASSETS_POLL_SENSORS) asks for."""
    raw = (os.environ.get(POLL_SENSORS_VAR, "") if setting is None else setting).strip().lower()
    if raw in ("", "one"):
        return [EVERY_JOB]
    if raw == "providers":
        return [PollScope(f"{BASE_SENSOR_NAME}__{p}", providers=(p,)) for p in PROVIDERS]
    kind, _, count = raw.partition(":")
    if kind == "buckets" and count.isdigit() and 1 <= int(count) <= MAX_BUCKETS:
        n = int(count)
        return [PollScope(f"{BASE_SENSOR_NAME}__bucket_{i + 1}_of_{n}", bucket=i, buckets=n) for i in range(n)]
    raise PollScopeError(
        f"{POLL_SENSORS_VAR}={raw!r} is not a sharding of the status sensors: use one, providers, or "
        f"buckets:N with N from 1 to {MAX_BUCKETS}"
    )
