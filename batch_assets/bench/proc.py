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

import contextlib
import multiprocessing
import os
import resource
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RSS_METHOD = ("fresh forkserver child process per stage/floor; VmHWM reset via /proc/self/clear_refs=5 "
              "just before the measured section, peak = VmHWM from /proc/self/status right after it")
_PRELOAD = ["batch_assets.bench.work"]


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _io_bytes() -> tuple[int, int] | None:
    """(read_bytes, write_bytes) of this process so far: what it made the storage layer read and
    write (page-cache hits are not counted), or None where /proc/self/io is missing."""
    try:
        with open("/proc/self/io") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["read_bytes"]), int(fields["write_bytes"])
    except (OSError, KeyError, ValueError):
        return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_kb() -> int:
    hwm = _status_kb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Probe:
    """Times one section of a child's work and records its peak RSS; used once per child."""

    def __init__(self) -> None:
        self.wall_s: float | None = None
        self.cpu_s: float | None = None
        self.base_rss_mb: float | None = None
        self.peak_rss_mb: float | None = None
        self.peak_reset = False
        self.load_avg: float | None = None
        self.disk_read_mb: float | None = None
        self.disk_write_mb: float | None = None

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        if self.wall_s is not None:
            raise RuntimeError("a Probe measures one section only")
        self.peak_reset = _reset_peak()
        self.load_avg = os.getloadavg()[0]
        base = _status_kb("VmRSS")
        self.base_rss_mb = (base if base is not None else _peak_kb()) / 1024
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        io0 = _io_bytes()
        t0 = time.perf_counter()
        yield
        self.wall_s = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        io1 = _io_bytes()
        self.cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        self.peak_rss_mb = _peak_kb() / 1024
        if io0 is not None and io1 is not None:
            self.disk_read_mb = (io1[0] - io0[0]) / 2**20
            self.disk_write_mb = (io1[1] - io0[1]) / 2**20


@dataclass(frozen=True)
class Measured:
    name: str
    result: Any
    wall_s: float | None       # None when the work did not use probe.measure()
    cpu_s: float | None
    base_rss_mb: float | None
    peak_rss_mb: float | None
    peak_reset: bool
    load_avg: float | None     # 1-minute load average when the section started (shared machines)
    process_s: float           # whole child, fork to exit (for the log)
    disk_read_mb: float | None = None    # read from storage during the section (page-cache misses)
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
        conn.send(("ok", (result, probe.wall_s, probe.cpu_s, probe.base_rss_mb, probe.peak_rss_mb, probe.peak_reset,
                          probe.load_avg, probe.disk_read_mb, probe.disk_write_mb)))
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
        raise ChildFailed(f"benchmark step {fn_name!r} died without a result (exit code {proc.exitcode}; "
                          "a negative code is the signal, e.g. -9 = killed, often out of memory)")
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
