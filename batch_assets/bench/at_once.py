"""Processes started together: each waits on one barrier, so the clock starts when all are ready
(imports and connections are not timed), and puts one answer on a queue when it is done."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence

TIMEOUT_S = 3600.0


def at_once(target: Callable, args_per_process: Sequence[tuple], timeout_s: float = TIMEOUT_S) -> tuple[float, list]:
    """Run `target(*args, start, out)` in one spawned process per `args`; `target` waits on `start`
    when ready and puts its answer on `out`. Returns (seconds from the common start to the last
    answer, the answers in the order they came)."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(len(args_per_process) + 1), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, start, out)) for args in args_per_process]
    for p in procs:
        p.start()
    start.wait()
    began = time.perf_counter()
    answers = [out.get(timeout=timeout_s) for _ in procs]
    elapsed = time.perf_counter() - began
    for p in procs:
        p.join()
    return elapsed, answers


def most_at_once(spans: Sequence[tuple[float, float]]) -> int:
    """The most (start, end) spans open at one moment."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most
