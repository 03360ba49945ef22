"""A SIGINT or SIGTERM to a parent that runs a child through batch_assets.process_group stops the
child and everything the child started, even a grandchild that ignores SIGINT (`batch-assets dev`
runs `dg dev` this way; dg dev starts the webserver and the daemon)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# The child starts a grandchild that ignores SIGINT, writes both pids, then waits.
CHILD = textwrap.dedent("""
    import os, subprocess, sys
    grandchild = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"])
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {grandchild.pid}")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    grandchild.wait()
""")

PARENT = textwrap.dedent("""
    import sys
    from batch_assets.process_group import Stopped, start_group, stop_group, stop_on_signals
    with stop_on_signals():
        child = start_group([sys.executable, "-c", sys.argv[1], sys.argv[2]])
        try:
            child.wait()
        except Stopped as stopped:
            sys.exit(128 + stopped.signum)
        finally:
            stop_group(child, grace_s=1.0)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def _wait_for(path: Path, proc: subprocess.Popen) -> tuple[int, int]:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None, "the parent ended before its child started"
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    child, grandchild = map(int, path.read_text().split())
    return child, grandchild


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_parent_stops_the_whole_tree(tmp_path, signum):
    pids = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(pids)])
    child, grandchild = _wait_for(pids, parent)
    assert _alive(child) and _alive(grandchild)

    parent.send_signal(signum)

    assert parent.wait(timeout=60) == 128 + signum
    assert not _alive(child) and not _alive(grandchild)


def test_only_the_first_signal_stops_and_one_while_held_waits_for_the_block_end():
    from batch_assets.process_group import Stopped, signals_held, stop_on_signals

    with stop_on_signals():
        with pytest.raises(Stopped) as stopped:
            with signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                held = "the block went on"  # the signal waits for the end of the block
        assert held and stopped.value.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)  # a second signal during the cleanup changes nothing
    with stop_on_signals(), pytest.raises(Stopped):  # a new block stops again
        os.kill(os.getpid(), signal.SIGINT)
