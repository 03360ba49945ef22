"""A local S3 server for development and the tests: moto's server mode on 127.0.0.1.

`start(state_dir)` runs `moto_server` (from the dev extras) on a free loopback port, waits until it
answers, creates the bucket and records the PID in `state_dir/s3.json`; `stop` ends it by that PID.
It keeps objects in memory: a development server, not storage.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from batch_assets.ports import LOOPBACK, free_port, port_in_use
from batch_assets.services.postgres import _alive  # one pid check (a zombie counts as gone) for both servers

STATE_FILE = "s3.json"
BUCKET = "batch-assets"
# moto accepts any credentials; these name the development server's, never a real account's.
ACCESS_KEY, SECRET_KEY, REGION = "batch-assets-dev", "batch-assets-dev-secret", "us-east-1"
START_TIMEOUT_S = 30.0


class S3ServiceError(RuntimeError):
    """The S3 server could not start (the message says why)."""


@dataclass(frozen=True)
class RunningS3:
    pid: int
    port: int

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


def _moto_server() -> str:
    found = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    if found is None:
        raise S3ServiceError("moto_server is not installed: install the dev extras (pip install -e '.[dev]')")
    return found


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/moto-api/", timeout=1):
            return True
    except OSError:
        return False


def running(state_dir: Path) -> RunningS3 | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    try:
        state = RunningS3(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise S3ServiceError(f"the state file {path} is unreadable ({exc}); delete it and start again") from None
    return state if _alive(state.pid) and _answers(state.port) else None


def start(state_dir: Path, port: int | None = None) -> RunningS3:
    """Start (or find running) the S3 server of `state_dir`, with the bucket created."""
    state_dir = state_dir.resolve()
    found = running(state_dir)
    if found is not None:
        return found
    if port is not None and port_in_use(port):
        raise S3ServiceError(f"port {port} on {LOOPBACK} is taken; pick another, or omit it for a free one")
    state_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = open(state_dir / "s3.log", "ab")  # noqa: SIM115 - the server's output, kept after this process ends
    proc = subprocess.Popen(
        [_moto_server(), "-H", LOOPBACK, "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # outlives `make services`, stopped by its PID
    )
    log.close()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise S3ServiceError(f"moto_server did not start on {LOOPBACK}:{port}; see {state_dir / 's3.log'}")
            time.sleep(0.1)
        state = RunningS3(pid=proc.pid, port=port)
        _create_bucket(state.endpoint)
        (state_dir / STATE_FILE).write_text(json.dumps(asdict(state)), encoding="utf-8")
    except BaseException:  # a failed start, or a signal meanwhile (SIGTERM of `services run`): none left running
        proc.kill()
        proc.wait()
        raise
    return state


def _create_bucket(endpoint: str) -> None:
    request = urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT")
    with urllib.request.urlopen(request, timeout=10):
        pass


def _recorded_moto(state_dir: Path) -> RunningS3 | None:
    """The recorded server when its process still runs moto_server on its port but no longer
    answers (hung): stopped too, never a PID the system gave to another program since."""
    path = state_dir / STATE_FILE
    try:
        state = RunningS3(**json.loads(path.read_text(encoding="utf-8")))
        cmdline = Path(f"/proc/{state.pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, TypeError):
        return None
    ours = any(part.endswith(b"moto_server") for part in cmdline) and str(state.port).encode() in cmdline
    return state if _alive(state.pid) and ours else None


def stop(state_dir: Path, timeout_s: float = 10.0) -> bool:
    """Stop the server `state_dir` recorded; False when none ran."""
    found = running(state_dir.resolve()) or _recorded_moto(state_dir.resolve())
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    if found is None:
        return False
    os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(found.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(found.pid):
        os.kill(found.pid, signal.SIGKILL)
    return True


def env_lines(server: RunningS3) -> list[str]:
    return [
        f"export BATCH_ASSETS_STORAGE_URL=s3://{BUCKET}/data",
        f"export BATCH_ASSETS_S3_ENDPOINT={server.endpoint}",
        f"export AWS_ACCESS_KEY_ID={ACCESS_KEY}",
        f"export AWS_SECRET_ACCESS_KEY={SECRET_KEY}",
        f"export AWS_REGION={REGION}",
    ]
