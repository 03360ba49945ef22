"""The emulator's background work: reading a batch's input and writing its results, off the request path.

A real batch service validates and runs a batch on its own machines while clients poll; the
emulator does the same with one `Worker` per app: a single thread that runs jobs first in, first
out, so that no API call ever does the slow part. A batch's state machine holds it in the state
before (validating, in progress, finalizing) until its job has committed, so nothing reports a
finished batch before its results file exists.

Jobs are idempotent and keyed: submitting a key already waiting is a no-op, and every provider
resubmits what its records say is unfinished when the app starts, so a restarted emulator picks
up where it stopped (a half-written file is never visible: results are written to a temporary
file and renamed into place, see `Store.blob_writer`).

`pause()` / `resume()` hold the worker between jobs, for tests that need a batch caught mid-way.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import BinaryIO

log = logging.getLogger("batch_assets.emulator.worker")
Job = Callable[[], None]
_names = itertools.count(1)
_STOP = object()


class Worker:
    """One background thread running keyed jobs in submission order."""

    def __init__(self) -> None:
        self._queue: queue.Queue[object] = queue.Queue()
        self._waiting: set[str] = set()
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._running.set()
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._thread: threading.Thread | None = None
        self._name = f"batch-results-worker-{next(_names)}"
        self._closed = False

    def submit(self, key: str, job: Job) -> None:
        """Run `job` in the background unless a job with `key` is already waiting."""
        with self._lock:
            if self._closed or key in self._waiting:
                return
            self._waiting.add(key)
            self._busy += 1
            if self._thread is None:
                # Started on first use: an app that never gets a batch never starts a thread.
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put((key, job))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            self._running.wait()
            key, job = item  # type: ignore[misc]
            with self._lock:
                self._waiting.discard(key)
            try:
                job()
            except Exception:  # a failed job must not stop the worker; its batch stays unfinished
                log.exception("background job %s failed", key)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._idle.notify_all()

    def pause(self) -> None:
        """Hold the worker before its next job (the job in hand, if any, finishes)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every submitted job has run; False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Stop after the job in hand; jobs still waiting are dropped (a restart resubmits them)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._running.set()
        if thread is not None:
            # Drain what waits, so the stop comes next.
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._queue.put(_STOP)
            thread.join(timeout)


def write_lines(sink: BinaryIO, lines: Iterable[str]) -> int:
    """Write each line (plus a newline) to `sink` as it comes; returns the bytes written.

    Nothing is gathered: a results file of any size goes out one line at a time, holding only the
    line in hand (and the sink's own buffer) in memory.
    """
    written = 0
    for line in lines:
        data = line.encode() + b"\n"
        sink.write(data)
        written += len(data)
    return written
