"""A local PostgreSQL for the `distributed` ledger and the tests: Debian's server binaries, a data
directory of our own, 127.0.0.1 and a free port only, stopped by the PID it recorded.

initdb refuses to run as root, so as root the server runs as the `postgres` system user (created by
Debian's package). The state file (`<dir>/postgres.json`) holds the PID, the port and the URL, so a
second `start` reuses a running server and `stop` needs nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from batch_assets.ports import LOOPBACK, free_port, port_in_use

STATE_FILE = "postgres.json"
SUPERUSER = "postgres"


class ServiceError(RuntimeError):
    """A service that cannot be started or stopped; the message names what failed and the fix."""


@dataclass(frozen=True)
class Running:
    pid: int
    port: int
    data_dir: str

    @property
    def url(self) -> str:
        """The superuser's URL of the `postgres` database (trust authentication on loopback only)."""
        return f"postgresql://{SUPERUSER}@{LOOPBACK}:{self.port}/postgres"


def bin_dir() -> Path | None:
    """Where Debian's server binaries are (initdb and pg_ctl are not on PATH there)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def install() -> Path:
    """The server binaries, installed with apt when missing."""
    found = bin_dir()
    if found is not None:
        return found
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
        subprocess.run(
            [*sudo, "apt-get", "install", "-y", "-qq", "postgresql"], check=True, env=env, capture_output=True
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ServiceError(
            f"cannot install PostgreSQL with apt ({exc}); install Debian's `postgresql` package"
        ) from None
    found = bin_dir()
    if found is None:
        raise ServiceError("apt installed `postgresql` but no initdb was found under /usr/lib/postgresql/*/bin")
    return found


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", SUPERUSER, "--", *cmd] if os.geteuid() == 0 else cmd


def _alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped by whoever adopted it) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # no procfs (not Linux), or it just exited
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def _serves(state: Running) -> bool:
    """True when `state.pid` is alive and is the postmaster of `state.data_dir` — not a PID the system
    gave to another process after the server died (a reboot, a kill -9), which `stop` must not signal."""
    if not _alive(state.pid):
        return False
    try:
        recorded = (Path(state.data_dir) / "postmaster.pid").read_text(encoding="utf-8").split()[:1]
    except OSError:
        return False
    return recorded == [str(state.pid)] and _runs_data_dir(state)


def _runs_data_dir(state: Running) -> bool:
    """True when process `state.pid` has `state.data_dir` on its command line (`postgres -D DIR`)."""
    cmdline = Path(f"/proc/{state.pid}/cmdline")
    try:
        return state.data_dir in cmdline.read_bytes().decode(errors="replace").split("\0")
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no procfs (not Linux): postmaster.pid is all there is
    except OSError:
        return False


def running(state_dir: Path) -> Running | None:
    """The server this state directory started, if it still runs."""
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    try:
        state = Running(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise ServiceError(f"the state file {path} is unreadable ({exc}); delete it and start again") from None
    return state if _serves(state) else None


def create_database(admin_url: str, name: str) -> str:
    """A new, empty database `name` (letters, digits and _ only) on the server of `admin_url`; its URL."""
    import re
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise ServiceError(f"{name!r} is not a database name this project makes: use a-z, 0-9 and _")
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))


def start(state_dir: Path, port: int | None = None) -> Running:
    """Start (or find running) the server whose data lives in `state_dir/postgres`."""
    state_dir = state_dir.resolve()
    found = running(state_dir)
    if found is not None:
        return found
    if port is not None and port_in_use(port):
        raise ServiceError(f"port {port} on {LOOPBACK} is taken; pick another with --port, or omit it for a free one")
    binaries = install()
    state_dir.mkdir(parents=True, exist_ok=True)
    data = _data_dir(state_dir)
    if not (data / "PG_VERSION").exists():
        _run(_as_server_user([str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", SUPERUSER]), "initdb")
    port = port or free_port()
    options = f"-c listen_addresses={LOOPBACK} -p {port} -c unix_socket_directories={data}"
    log = data / "server.log"
    try:
        _run(
            _as_server_user([str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"]),
            "pg_ctl start",
        )
    except ServiceError as exc:
        raise ServiceError(f"{_server_said(log) or exc}; see {log}") from None
    pid = int((data / "postmaster.pid").read_text().split()[0])
    state = Running(pid=pid, port=port, data_dir=str(data))
    (state_dir / STATE_FILE).write_text(json.dumps(asdict(state)), encoding="utf-8")
    return state


def _data_dir(state_dir: Path) -> Path:
    """`state_dir/postgres`, or, as root when the server user cannot reach `state_dir` (a 0700 parent),
    a directory of its own under the system temp dir, remembered in `state_dir`."""
    if os.geteuid() != 0:
        return state_dir / "postgres"
    remembered = state_dir / "postgres.dir"
    if remembered.exists():
        return Path(remembered.read_text(encoding="utf-8").strip())
    shutil.chown(state_dir, SUPERUSER)
    reachable = subprocess.run(["runuser", "-u", SUPERUSER, "--", "test", "-w", str(state_dir)], check=False)
    if reachable.returncode == 0:
        data = state_dir / "postgres"
    else:
        data = Path(tempfile.mkdtemp(prefix="batch_assets_pg_")) / "data"
        shutil.chown(data.parent, SUPERUSER)
    remembered.write_text(str(data), encoding="utf-8")
    return data


def stop(state_dir: Path, timeout_s: float = 30.0) -> bool:
    """Stop the server by its recorded PID (fast shutdown); False when none was running."""
    state_dir = state_dir.resolve()
    path = state_dir / STATE_FILE
    found = running(state_dir)
    if found is None:
        path.unlink(missing_ok=True)
        return False
    os.kill(found.pid, signal.SIGINT)  # PostgreSQL's "fast" shutdown
    deadline = time.monotonic() + timeout_s
    while _alive(found.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(found.pid) and _runs_data_dir(found):
        os.kill(found.pid, signal.SIGKILL)
    path.unlink(missing_ok=True)
    return True


def _server_said(log: Path) -> str:
    """The server's last FATAL line and its HINT from its log ("" when there is none)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for i in range(len(lines) - 1, -1, -1):
        if "FATAL:" in lines[i]:
            said = "the server said: " + lines[i].split("FATAL:", 1)[1].strip()
            hint = lines[i + 1].split("HINT:", 1)[1].strip() if i + 1 < len(lines) and "HINT:" in lines[i + 1] else ""
            return f"{said} ({hint})" if hint else said
    return ""


def _run(cmd: list[str], what: str) -> None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServiceError(f"{what} failed: {exc}") from None
    if out.returncode != 0:
        detail = (out.stderr or out.stdout).strip().splitlines()
        raise ServiceError(f"{what} failed: {detail[-1] if detail else f'exit {out.returncode}'}")


def discard(state_dir: Path) -> None:
    """Stop the server and delete its data and state (a throwaway server: `make test`'s)."""
    state_dir = state_dir.resolve()
    stop(state_dir)
    remembered = state_dir / "postgres.dir"
    if remembered.exists():
        data = Path(remembered.read_text(encoding="utf-8").strip())
        shutil.rmtree(data.parent if data.parent.name.startswith("batch_assets_pg_") else data, ignore_errors=True)
    shutil.rmtree(state_dir, ignore_errors=True)
