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

Why a thread and not a process pool: the work is CPU-bound Python, so a second thread would not
make it faster (the GIL), and one thread keeps the order of jobs (a batch's input is read before
another batch created after it, as the enqueued-token limit expects).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

from batch_assets.emulator import clock

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
        self._allowed: int | None = None  # jobs that may still start before a pause; None: no pause
        self._gate = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._running = 0  # jobs started and not finished (0 while the worker is held)
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
            if item is _STOP or self._closed:
                return
            key, job = item  # type: ignore[misc]
            with self._lock:
                self._gate.wait_for(lambda: self._allowed is None or self._allowed > 0 or self._closed)
                if self._closed:
                    return  # a job held at close is left to the next start (it is resubmitted then)
                if self._allowed is not None:
                    self._allowed -= 1
                self._waiting.discard(key)
                self._running += 1
            try:
                job()
            except Exception:  # a failed job must not stop the worker; its batch stays unfinished
                log.exception("background job %s failed", key)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._running -= 1
                    self._idle.notify_all()

    def pause(self, after: int = 0) -> None:
        """Hold the worker once `after` more jobs have started (the job in hand, if any, finishes):
        `pause(after=1)` lets a batch's input be read, then holds the writing of its results."""
        with self._lock:
            self._allowed = after
            self._gate.notify_all()

    def wait_held(self, timeout: float | None = None) -> bool:
        """After pause(): wait until the job that was in hand has finished, so nothing runs until
        resume() (a test's next step cannot race it); False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: self._running == 0, timeout)

    def resume(self) -> None:
        with self._lock:
            self._allowed = None
            self._gate.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every submitted job has run; False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Stop after the job in hand; jobs still waiting are dropped (a restart resubmits them)."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._gate.notify_all()
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


def results_target(record: dict[str, Any]) -> dict[str, Any]:
    """How a batch will end as things stand (state, requests processed by then): the results its
    background job writes. A cancel or an expiry that lies ahead moves the target; staged results
    for another target are written again."""
    timeline = clock.Timeline.from_dict(record["timeline"])
    cancel_at = record["cancel_requested_at"]
    if cancel_at is not None:
        return {"state": clock.CANCELLED, "processed": timeline.processed_at(cancel_at)}
    if timeline.will_expire:
        return {"state": clock.EXPIRED, "processed": timeline.processed_at(timeline.expires)}
    return {"state": clock.DONE, "processed": timeline.total}


def staged_for(record: dict[str, Any], target: dict[str, Any]) -> bool:
    """Whether the batch's staged results are those of `target`."""
    staged = record.get("staged")
    return staged is not None and staged["state"] == target["state"] and staged["processed"] == target["processed"]
