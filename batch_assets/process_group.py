"""Child processes that stop with their whole tree: `batch-assets dev` runs `dg dev`, which starts
the webserver and the daemon; a SIGINT or SIGTERM to `batch-assets dev` must stop all of them.

Each child gets its own process group (start_new_session), so a signal meant for the tree reaches
every process in it, and nothing the child started outlives it. On SIGINT or SIGTERM the parent
asks the group to stop (SIGINT: `dg dev` then stops its own children in order), waits, and kills
what is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence

STOP_GRACE_S = 20.0


class Stopped(Exception):
    """The parent received SIGINT or SIGTERM."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def start_group(cmd: Sequence[str], env: dict | None = None) -> subprocess.Popen:
    """Start `cmd` as the leader of a new process group."""
    return subprocess.Popen(list(cmd), env=env, start_new_session=True)


def stop_group(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGINT to the child's whole group, then SIGKILL to whatever is left after `grace_s`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    # The leader may be gone while processes it started still run in its group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise Stopped (the default SIGTERM would end the
    process without running any cleanup); the previous handlers come back after it."""

    def _raise(signum, _frame):
        raise Stopped(signum)

    previous = {s: signal.signal(s, _raise) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
