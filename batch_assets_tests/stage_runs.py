"""Test helper: one pipeline stage in a fresh process (batch_assets_tests.stage_process), run to its
end or SIGKILLed at a fault point. The process reads the test's environment (ledger, tables and
storage settings) and is told the warehouse file and data directory: a "machine" of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.faultpoints import ENV as FAULTPOINT_ENV
from batch_assets.spec.resolve import ResolvedTask

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MARKER_TIMEOUT_S = 60.0  # how long the stage may take to reach its point (not a timing assumption)


def stage_cmd(stage: str, wh: Warehouse, task: ResolvedTask, day: str, emulator: EmulatorHandle) -> list[str]:
    return [
        sys.executable,
        "-m",
        "batch_assets_tests.stage_process",
        stage,
        str(wh.database),
        str(wh.data_dir),
        str(task.yaml_path),
        day,
        emulator.base_url,
    ]


def stage_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != FAULTPOINT_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONWARNINGS"] = "error"
    return {**env, **extra}


def run_stage(stage: str, wh: Warehouse, task: ResolvedTask, day: str, emulator: EmulatorHandle, log_dir: Path) -> None:
    """The stage in a fresh process, to its end (the test fails with its output when it does not)."""
    log = log_dir / f"{stage}.{wh.data_dir.name}.log"
    with open(log, "wb") as out:
        rc = subprocess.run(
            stage_cmd(stage, wh, task, day, emulator),
            env=stage_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=120,
        ).returncode
    assert rc == 0, log.read_text(errors="replace")


def kill_at(
    point: str, wh: Warehouse, task: ResolvedTask, day: str, emulator: EmulatorHandle, log_dir: Path, **env: str
) -> None:
    """Run the point's stage in a fresh process and SIGKILL it once it has reached the point."""
    stage = point.split(".")[0]
    marker, log = log_dir / f"{point}.reached", log_dir / f"{point}.log"
    marker.unlink(missing_ok=True)  # left by an earlier kill at this point
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            stage_cmd(stage, wh, task, day, emulator),
            env=stage_env(**{FAULTPOINT_ENV: f"{point}={marker}", **env}),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        kill_once_reached(proc, marker, point, lambda: log.read_text(errors="replace"))


def kill_once_reached(proc: subprocess.Popen, marker: Path, point: str, output=lambda: "") -> None:
    """SIGKILL `proc` once it has written the fault point's `marker` (the test fails if it ends first)."""
    try:
        deadline = time.monotonic() + MARKER_TIMEOUT_S
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"the process ended (rc {proc.returncode}) before reaching {point}:\n{output()}")
            assert time.monotonic() < deadline, f"{point} not reached in {MARKER_TIMEOUT_S}s"
            time.sleep(0.02)
        assert int(marker.read_text()) == proc.pid
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
