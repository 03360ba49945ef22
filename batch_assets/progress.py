"""Progress of long work (downloads, ingest, export, bench, demo), for whoever wants to show it.

Library code reports, a front end listens:

    with progress.task("download results", total=len(jobs), unit="jobs") as bar:
        for job in jobs:
            ...
            bar.advance()

Nothing is shown unless a reporter is installed (`with progress.reporting(r): ...`): in Dagster
runs and tests every call is a no-op, and this module imports nothing beyond the standard library.
The command line installs a `rich` reporter when stderr is a terminal (batch_assets/cli/console.py).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Protocol


class Bar(Protocol):
    """One piece of work in progress."""

    def advance(self, amount: float = 1) -> None: ...

    def update(
        self, *, completed: float | None = None, total: float | None = None, description: str | None = None
    ) -> None: ...


class Reporter(Protocol):
    """What a front end implements: start a bar, and be told when it is done."""

    def start(self, description: str, total: float | None, unit: str, keep: bool) -> Bar: ...

    def finish(self, bar: Bar) -> None: ...


class _NullBar:
    def advance(self, amount: float = 1) -> None:
        pass

    def update(
        self, *, completed: float | None = None, total: float | None = None, description: str | None = None
    ) -> None:
        pass


class NullReporter:
    """Shows nothing (the default)."""

    def start(self, description: str, total: float | None, unit: str, keep: bool) -> Bar:
        return _NullBar()

    def finish(self, bar: Bar) -> None:
        pass


# One reporter per process (not per thread): Dagster's in-process executor and the SDKs' worker
# threads report to the same display.
_lock = threading.Lock()
_reporter: Reporter = NullReporter()


def current() -> Reporter:
    return _reporter


@contextlib.contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    """Install `reporter` for the duration of the block (the previous one comes back after)."""
    global _reporter
    with _lock:
        previous, _reporter = _reporter, reporter
    try:
        yield reporter
    finally:
        with _lock:
            _reporter = previous


@contextlib.contextmanager
def task(description: str, total: float | None = None, unit: str = "items", *, keep: bool = False) -> Iterator[Bar]:
    """A bar for the block: `total` None means unknown (a spinner); `unit` "bytes" shows sizes. With
    `keep` the finished bar stays on screen (a milestone of a command); else it goes when done (work
    that may repeat many times, such as one partition's downloads)."""
    reporter = _reporter
    bar = reporter.start(description, total, unit, keep)
    try:
        yield bar
    finally:
        reporter.finish(bar)
