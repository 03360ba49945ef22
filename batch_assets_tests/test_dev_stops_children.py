"""`batch-assets dev` stops every process it started — the emulator, `dg dev` and what `dg dev` started
(the webserver and the daemon) — on SIGINT or SIGTERM, sent to it or to its whole process group (Ctrl-C
in its terminal), and removes the record other shells find its emulator by.

The real emulator runs; `dg` is a fake beside a stand-in `python` (dev finds `dg` next to
sys.executable) that starts a "webserver" and a "daemon" (one ignores SIGINT) and waits. No timing is
asserted: every wait is for a condition, bounded only so that a broken stop fails instead of hanging."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from batch_assets import dev_stack
from batch_assets.ports import free_port

pytestmark = pytest.mark.slow  # starts the emulator

FAKE_DG = textwrap.dedent("""
    import os, subprocess, sys
    sleep = "import signal, time; signal.signal(signal.SIGINT, signal.{}); time.sleep(600)"
    webserver = subprocess.Popen([sys.executable, "-c", sleep.format("SIG_DFL")])
    daemon = subprocess.Popen([sys.executable, "-c", sleep.format("SIG_IGN")])  # only SIGKILL stops it
    path = os.environ["FAKE_DG_PIDS"]
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {webserver.pid} {daemon.pid}")
    os.rename(path + ".tmp", path)
    webserver.wait()
""")

DEV = textwrap.dedent("""
    import sys
    sys.executable = sys.argv[1]  # dev looks for `dg` beside it, and starts the emulator with it
    from batch_assets.cli import main
    sys.exit(main(["dev", *sys.argv[2:]]))
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie (exited, not reaped yet) counts as gone
    return stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _until(condition, what: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert proc.poll() is None, f"batch-assets dev ended (status {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    dg = bin_dir / "dg"
    dg.write_text(f"#!{sys.executable}\n{FAKE_DG}")
    for script in (python, dg):
        script.chmod(0o755)
    return python


@pytest.mark.parametrize(
    ("signum", "to_group"),
    [(signal.SIGINT, True), (signal.SIGTERM, True), (signal.SIGTERM, False)],
    ids=["SIGINT-to-group", "SIGTERM-to-group", "SIGTERM-to-dev"],
)
def test_a_signal_stops_every_child(tmp_path, monkeypatch, signum, to_group):
    data_dir, pids_file = tmp_path / "data", tmp_path / "dg.pids"
    monkeypatch.setenv("FAKE_DG_PIDS", str(pids_file))
    for name in ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_EMULATOR_URL"):
        monkeypatch.delenv(name, raising=False)
    ui_port, emulator_port = free_port(), free_port()
    argv = ["--data-dir", data_dir, "--ui-port", ui_port, "--emulator-port", emulator_port]
    dev = subprocess.Popen(
        [sys.executable, "-c", DEV, _fake_bin(tmp_path), *map(str, argv)],
        start_new_session=True,  # its own process group, as a shell's job is
        stdout=subprocess.DEVNULL,
    )
    try:
        _until(pids_file.exists, "the fake dg started its webserver and daemon", dev)
        _until(lambda: len(_children(dev.pid)) == 2, "the emulator and dg ran under dev", dev)
        assert dev_stack.recorded_emulator_url(data_dir) == f"http://127.0.0.1:{emulator_port}"
        dg, webserver, daemon = map(int, pids_file.read_text().split())
        (emulator,) = set(_children(dev.pid)) - {dg}
        started = [emulator, dg, webserver, daemon]
        assert all(_alive(pid) for pid in started)

        if to_group:
            os.killpg(dev.pid, signum)
        else:
            dev.send_signal(signum)

        assert dev.wait(timeout=120) == 128 + signum
        left = [pid for pid in started if _alive(pid)]
        assert left == [], f"still running after dev stopped: {left}"
        assert not (data_dir / dev_stack.STACK_FILE).exists()
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()
