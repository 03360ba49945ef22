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
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(Exception):
    """The parent received SIGINT or SIGTERM."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def start_group(cmd: Sequence[str], env: dict | None = None, **popen) -> subprocess.Popen:
    """Start `cmd` as the leader of a new process group (`popen`: more Popen arguments, e.g. stdout)."""
    return subprocess.Popen(list(cmd), env=env, start_new_session=True, **popen)


class _SignalState:
    """What the handler stop_on_signals installs knows: whether a stop was raised already, and
    whether a signal waits for the end of a signals_held block."""

    stopping = False
    held = 0
    pending: int | None = None


_state = _SignalState()


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Inside stop_on_signals, a SIGINT or SIGTERM during the block raises Stopped only when the block
    ends: a signal between starting a child and keeping its Popen would otherwise leave the child
    unknown, and running. (Not a signal mask: children would inherit it and ignore the stop.)"""
    _state.held += 1
    try:
        yield
    finally:
        _state.held -= 1
    if not _state.held and _state.pending is not None:
        signum, _state.pending = _state.pending, None
        raise Stopped(signum)


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
    """Inside the block, the first SIGINT or SIGTERM raises Stopped (the default SIGTERM would end
    the process without running any cleanup); later ones are ignored, so a second Ctrl-C (or a
    SIGTERM to the whole process group after a SIGINT) cannot cut the cleanup short, which is bounded
    by stop_group's grace. The previous handlers come back after the block."""

    def _raise(signum, _frame):
        if _state.stopping:
            return
        _state.stopping = True
        if _state.held:
            _state.pending = signum
            return
        raise Stopped(signum)

    _state.stopping, _state.pending = False, None
    previous = {s: signal.signal(s, _raise) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _state.stopping, _state.pending = False, None
