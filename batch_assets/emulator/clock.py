"""The simulated clock of one batch: where it stands at any real instant.

A batch's schedule is fixed when it is created (knobs are snapshotted then), so its state is a
pure function of the current time. The knobs are simulated seconds; dividing them by `speed`
gives real seconds, so every timestamp reported is a real unix time and never in the future.
The clock itself runs nothing: state is worked out lazily whenever a request asks. (Reading a
batch's input and writing its results is the `worker`'s; a batch waiting on it is shown in the
state before, see each provider's `_shown_at`.)
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

from batch_assets.emulator.settings import EmulatorSettings

QUEUED, RUNNING, FINALIZING, DONE = "queued", "running", "finalizing", "done"
EXPIRED, CANCELLING, CANCELLED = "expired", "cancelling", "cancelled"
TERMINAL = frozenset({DONE, EXPIRED, CANCELLED})


def now() -> float:
    return time.time()


@dataclass(frozen=True)
class Phase:
    state: str
    processed: int  # requests finished so far, successfully or not
    since: float  # real instant the state was entered


@dataclass(frozen=True)
class Timeline:
    created: float
    running: float  # end of the queue / validation delay
    per_request: float  # real seconds per request
    finalize: float  # real seconds from the last request to done
    cancel_delay: float  # real seconds from a cancel request to cancelled
    expires: float  # end of the completion window
    total: int
    halt_after: int | None = None  # processing stops after this many requests (stuck batches)

    @classmethod
    def plan(cls, created: float, total: int, settings: EmulatorSettings, window_s: float) -> Timeline:
        speed = settings.speed
        running = created + settings.queue_delay_s / speed
        per_request = settings.seconds_per_request / speed
        halt_after = None
        expires = created + window_s / speed
        if settings.force_batch_status == "stuck":
            halt_after = 0
        elif settings.force_batch_status == "expired":
            # Half the requests finish, then the window closes at once: expiry with partial output.
            halt_after = total // 2
            expires = running + halt_after * per_request
        return cls(
            created=created,
            running=running,
            per_request=per_request,
            finalize=settings.finalize_delay_s / speed,
            cancel_delay=settings.cancel_delay_s / speed,
            expires=expires,
            total=total,
            halt_after=halt_after,
        )

    @property
    def finalizing(self) -> float:
        if self.halt_after is not None and self.halt_after < self.total:
            return math.inf
        return self.running + self.total * self.per_request

    @property
    def done(self) -> float:
        return self.finalizing + self.finalize

    @property
    def will_expire(self) -> bool:
        return self.expires < self.finalizing

    def processed_at(self, instant: float) -> int:
        if instant < self.running:
            return 0
        count = self.total if self.per_request == 0 else int((instant - self.running) / self.per_request)
        cap = self.total if self.halt_after is None else min(self.total, self.halt_after)
        return min(count, cap)

    def phase(self, at: float, cancel_requested_at: float | None = None) -> Phase:
        if cancel_requested_at is not None:
            processed = self.processed_at(cancel_requested_at)
            cancelled_at = cancel_requested_at + self.cancel_delay
            if at >= cancelled_at:
                return Phase(CANCELLED, processed, cancelled_at)
            return Phase(CANCELLING, processed, cancel_requested_at)
        if self.will_expire and at >= self.expires:
            return Phase(EXPIRED, self.processed_at(self.expires), self.expires)
        if at < self.running:
            return Phase(QUEUED, 0, self.created)
        if at < self.finalizing:
            return Phase(RUNNING, self.processed_at(at), self.running)
        if at < self.done:
            return Phase(FINALIZING, self.total, self.finalizing)
        return Phase(DONE, self.total, self.done)

    def progress_end(self, at: float, cancel_requested_at: float | None = None) -> float:
        """The last instant normal progress applied: now, or when a cancel or expiry stopped it."""
        end = at
        if cancel_requested_at is not None:
            end = min(end, cancel_requested_at)
        if self.will_expire:
            end = min(end, self.expires)
        return end

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timeline:
        return cls(**data)
