"""Measuring one section of a benchmark child's work: wall and cpu time, peak RSS (VmHWM reset
just before it), the load average and the bytes read from and written to storage (/proc/self/io)."""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Iterator


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
