"""Waiting out another process's lock on a DuckDB file.

DuckDB lets one process at a time open a database file for writing (readers in other processes
are refused meanwhile), so opening or attaching one retries with backoff while another process
holds it, up to a timeout.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb

log = logging.getLogger(__name__)
T = TypeVar("T")

_lock_waits = 0
_lock_waits_guard = threading.Lock()


def is_lock_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return "lock" in text.lower() and ("Conflicting" in text or "Could not set lock" in text)


def lock_waits() -> int:
    """How many times this process found a DuckDB file locked by another process and waited
    (counted once per open or attach that had to wait)."""
    return _lock_waits


def retry_while_locked(action: Callable[[], T], path: Path, timeout_s: float) -> T:
    """`action()` (opening or attaching `path`), tried again with backoff while another process
    holds the file's lock; the lock error is raised after `timeout_s`."""
    global _lock_waits
    deadline = time.monotonic() + timeout_s
    delay, waited = 0.05, False
    while True:
        try:
            return action()
        except (duckdb.IOException, duckdb.ConnectionException, duckdb.BinderException) as exc:
            if not is_lock_conflict(exc) or time.monotonic() > deadline:
                raise
            if not waited:
                waited = True
                with _lock_waits_guard:
                    _lock_waits += 1
                log.info("%s is locked by another process; waiting up to %.0f s", path, timeout_s)
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 1.0)
