"""Run one unit of benchmark work in a fresh child process and measure it there.

Why a child per stage: DuckDB and the Python allocator keep memory after a query, so the peak RSS
of a long-lived process says little about the stage that ran last. Every stage (and every floor)
therefore runs in its own process, forked from a `multiprocessing` forkserver that has already
imported DuckDB, pyarrow and the pipeline modules (a fresh interpreter would add ~1 s of imports per
child). Inside the child, just before the measured section:

* `/proc/self/clear_refs` is written with `5`, which resets the kernel's peak-RSS mark (VmHWM) to
  the current RSS (Linux >= 4.0; `resource.getrusage(RUSAGE_SELF).ru_maxrss` follows it);
* after the section, the peak is `VmHWM` from `/proc/self/status`.

The bytes the process read from and wrote to storage during the section (`read_bytes` /
`write_bytes` of `/proc/self/io`, all threads) are recorded too: a read from disk is a page the
page cache did not hold, which is how a stage at 10M items can take longer than ten times 1M on a
host whose cache holds the 1M run's files but not the 10M run's.

So `peak_rss_mb` is the highest resident set of the process while the stage ran, including the
interpreter and imported modules (`base_rss_mb`, ~100 MB). If clear_refs cannot be written the peak
is the child's lifetime VmHWM (still a fresh process, so still the stage's own peak).
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batch_assets.bench.probe import Probe

RSS_METHOD = (
    "fresh forkserver child process per stage/floor; VmHWM reset via /proc/self/clear_refs=5 "
    "just before the measured section, peak = VmHWM from /proc/self/status right after it"
)
_PRELOAD = ["batch_assets.bench.work"]


@dataclass(frozen=True)
class Measured:
    name: str
    result: Any
    wall_s: float | None  # None when the work did not use probe.measure()
    cpu_s: float | None
    base_rss_mb: float | None
    peak_rss_mb: float | None
    peak_reset: bool
    load_avg: float | None  # 1-minute load average when the section started (shared machines)
    process_s: float  # whole child, fork to exit (for the log)
    disk_read_mb: float | None = None  # read from storage during the section (page-cache misses)
    disk_write_mb: float | None = None


class ChildFailed(RuntimeError):
    """The work raised in the child (its traceback is the message) or the child died."""


def _child_main(conn, fn_name: str, kwargs: dict) -> None:
    # Results travel through the pipe; stdout would only carry DuckDB's progress bars.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        from batch_assets.bench import work

        probe = Probe()
        result = getattr(work, fn_name)(probe, **kwargs)
        conn.send(
            (
                "ok",
                (
                    result,
                    probe.wall_s,
                    probe.cpu_s,
                    probe.base_rss_mb,
                    probe.peak_rss_mb,
                    probe.peak_reset,
                    probe.load_avg,
                    probe.disk_read_mb,
                    probe.disk_write_mb,
                ),
            )
        )
    except BaseException:  # everything goes back to the parent, which raises it
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


_CTX: multiprocessing.context.BaseContext | None = None


def _context() -> multiprocessing.context.BaseContext:
    global _CTX
    if _CTX is None:
        try:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(_PRELOAD)
        except ValueError:  # no forkserver on this platform
            ctx = multiprocessing.get_context("spawn")
        _CTX = ctx
    return _CTX


def run_child(fn_name: str, **kwargs: Any) -> Measured:
    """Run `batch_assets.bench.work.<fn_name>(probe, **kwargs)` in a fresh child process."""
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    t0 = time.perf_counter()
    proc = ctx.Process(target=_child_main, args=(send, fn_name, kwargs), name=f"bench-{fn_name}")
    proc.start()
    send.close()
    message = None
    try:
        message = recv.recv()
    except EOFError:
        pass
    proc.join()
    elapsed = time.perf_counter() - t0
    recv.close()
    if message is None:
        raise ChildFailed(
            f"benchmark step {fn_name!r} died without a result (exit code {proc.exitcode}; "
            "a negative code is the signal, e.g. -9 = killed, often out of memory)"
        )
    status, payload = message
    if status != "ok":
        raise ChildFailed(f"benchmark step {fn_name!r} failed:\n{payload}")
    result, wall, cpu, base, peak, reset, load, read_mb, write_mb = payload
    return Measured(fn_name, result, wall, cpu, base, peak, reset, load, elapsed, read_mb, write_mb)


def remove_paths(*paths: Path) -> None:
    import shutil

    for p in paths:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()
