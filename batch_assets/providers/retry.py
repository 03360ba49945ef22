"""Bounded exponential backoff for provider calls that may be repeated safely (polls, downloads).

`is_transient` classifies the official SDKs' exceptions: an HTTP 408, 409, 429 or 5xx answer,
a timeout, or a dropped connection is worth another try; anything else (a 4xx refusal, a bug)
is raised at once. Never wrap a create call: repeating it could create a batch twice.

The sleep function is injectable, so the backoff is tested without waiting.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx

T = TypeVar("T")

TRANSIENT_STATUSES = frozenset({408, 409, 429})


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK error carries: openai/anthropic `status_code`, google-genai `code`."""
    for attr in ("status_code", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _transport_error_types() -> tuple[type[BaseException], ...]:
    """The transport errors of httpx and of the SDKs this process has loaded (an SDK that is not
    loaded raised nothing: importing every SDK here would load them all into every stage process)."""
    types: list[type[BaseException]] = [httpx.TransportError, TimeoutError, ConnectionError]
    for sdk in ("openai", "anthropic"):
        module = sys.modules.get(sdk)
        if module is not None:
            types.append(module.APIConnectionError)  # openai's APITimeoutError is a subclass
    return tuple(types)


def is_transient(exc: BaseException) -> bool:
    """Whether repeating the call may succeed: 408/409/429/5xx, a timeout, a connection error."""
    if isinstance(exc, _transport_error_types()):
        return True
    status = _status_of(exc)
    return status is not None and (status in TRANSIENT_STATUSES or status >= 500)


@dataclass(frozen=True)
class Backoff:
    """At most `attempts` calls; waits base_s, 2*base_s, 4*base_s, … (capped at max_s), with jitter."""

    attempts: int = 4
    base_s: float = 1.0
    max_s: float = 30.0
    jitter: float = 0.2  # each wait is scaled by a random factor in [1 - jitter, 1]

    def delay(self, retry: int) -> float:
        """The wait before retry number `retry` (1-based)."""
        return min(self.max_s, self.base_s * 2 ** (retry - 1)) * (1 - self.jitter * random.random())


DEFAULT_BACKOFF = Backoff()


def call_with_retry(
    fn: Callable[[], T],
    *,
    backoff: Backoff = DEFAULT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
) -> T:
    """`fn()`, repeated after a transient error with exponential backoff; the last error is raised
    once `backoff.attempts` calls have failed, a non-transient one at once. `on_retry(retry, exc,
    delay)` is told before each wait."""
    retry = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            retry += 1
            if retry >= backoff.attempts or not is_transient(exc):
                raise
            delay = backoff.delay(retry)
            if on_retry is not None:
                on_retry(retry, exc, delay)
            sleep(delay)
