"""`make services` / `make test`'s PostgreSQL: started on 127.0.0.1 and a free port, found again by a
second start, stopped by its PID; a test that needs it skips without it, and fails under CI."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from batch_assets.ports import LOOPBACK, free_port, is_listening
from batch_assets.services import postgres, s3
from batch_assets.services.__main__ import TEST_S3_VARIABLE, TEST_URL_VARIABLE, env_lines

pytestmark = pytest.mark.slow  # initdb and a server start


@pytest.fixture
def server_dir(tmp_path: Path):
    if postgres.bin_dir() is None and not os.environ.get("CI"):
        pytest.skip("Debian's postgresql is not installed (make test installs it)")
    yield tmp_path / "services"
    postgres.discard(tmp_path / "services")


def test_start_binds_loopback_is_found_again_and_stops_by_pid(server_dir):
    import psycopg

    server = postgres.start(server_dir)
    assert postgres.start(server_dir) == server  # a second start reuses the running server
    with psycopg.connect(server.url) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
        assert conn.info.port == server.port
    lines = env_lines(server)
    assert lines[0] == f"export BATCH_ASSETS_LEDGER_URL={server.url}"
    assert lines[1] == "export BATCH_ASSETS_DAGSTER_PG_URL=" + server.url.replace("postgresql:", "postgresql+psycopg2:")
    assert lines[2:] == [f"export BATCH_ASSETS_TABLES_URL={server.url}", "export BATCH_ASSETS_TABLES_SCHEMA=warehouse"]
    assert postgres.stop(server_dir)
    assert postgres.running(server_dir) is None
    assert not postgres._alive(server.pid)  # gone (or a zombie its adopter has not reaped yet)
    assert not postgres.stop(server_dir)


def _run_needing_postgres(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_needs_pg.py"
    test.write_text(textwrap.dedent("def test_it(postgres_url):\n    assert postgres_url\n"))
    clean = {k: v for k, v in os.environ.items() if k not in (TEST_URL_VARIABLE, "CI")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "batch_assets_tests.postgres_fixture", "-rs", str(test)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**clean, **env},
        timeout=120,
    )


def test_without_a_server_a_test_skips_with_a_message_and_fails_under_ci(tmp_path):
    skipped = _run_needing_postgres(tmp_path)
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout and "run `make test`" in skipped.stdout
    failed = _run_needing_postgres(tmp_path, CI="1")
    assert failed.returncode == 1 and "no PostgreSQL for this test" in failed.stdout
    with socket.socket() as closed:  # a port nothing listens on: the URL is set but no server answers
        closed.bind((LOOPBACK, 0))
        dead = f"postgresql://postgres@{LOOPBACK}:{closed.getsockname()[1]}/postgres"
    skipped = _run_needing_postgres(tmp_path, **{TEST_URL_VARIABLE: dead})
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout and "does not answer" in skipped.stdout
    failed = _run_needing_postgres(tmp_path, CI="1", **{TEST_URL_VARIABLE: dead})
    assert failed.returncode == 1 and "does not answer" in failed.stdout


def _services(*args: str, **popen) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "batch_assets.services", *args], capture_output=True, text=True, timeout=120, **popen
    )


def test_a_stale_state_file_is_not_a_server_and_stop_leaves_its_pid_alone(tmp_path):
    # After a reboot or a kill -9 the recorded PID may belong to another process: never signal it.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state = postgres.Running(pid=other.pid, port=1, data_dir=str(tmp_path / "postgres"))
        (tmp_path / postgres.STATE_FILE).write_text(json.dumps(dataclasses.asdict(state)), encoding="utf-8")
        bucket = s3.RunningS3(pid=other.pid, port=free_port())  # the PID lives, nothing answers S3 there
        (tmp_path / s3.STATE_FILE).write_text(json.dumps(dataclasses.asdict(bucket)), encoding="utf-8")
        status = _services("status", "--dir", str(tmp_path))
        assert (status.returncode, status.stdout.splitlines()) == (
            1,
            ["PostgreSQL not running", "S3 server not running"],
        )
        stop = _services("stop", "--dir", str(tmp_path))
        assert (stop.returncode, stop.stdout.splitlines()) == (
            0,
            ["no PostgreSQL was running", "no S3 server was running"],
        )
        assert other.poll() is None
        assert not (tmp_path / postgres.STATE_FILE).exists() and not (tmp_path / s3.STATE_FILE).exists()
    finally:
        other.kill()
        other.wait()


def test_failures_are_one_line_naming_what_failed_and_the_fix(tmp_path):
    (tmp_path / postgres.STATE_FILE).write_text("{", encoding="utf-8")
    broken = _services("status", "--dir", str(tmp_path))
    assert broken.returncode == 1 and broken.stderr.count("\n") == 1 and "delete it" in broken.stderr
    (tmp_path / postgres.STATE_FILE).unlink()
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        refused = _services("start", "--dir", str(tmp_path), "--port", str(taken.getsockname()[1]))
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "start failed: port" in refused.stderr and "is taken; pick another with --port" in refused.stderr


def test_run_stops_its_server_when_the_command_fails_or_is_terminated(server_dir):
    failed = _services(
        "run",
        "--",
        sys.executable,
        "-c",
        f"import os; print(os.environ['{TEST_URL_VARIABLE}']); print(os.environ['{TEST_S3_VARIABLE}']); exit(3)",
    )
    assert failed.returncode == 3
    pg_url, s3_endpoint = failed.stdout.strip().splitlines()[-2:]
    port = int(pg_url.rsplit(":", 1)[1].split("/")[0])
    assert not is_listening(port)
    assert s3_endpoint.startswith(f"http://{LOOPBACK}:") and not is_listening(int(s3_endpoint.rsplit(":", 1)[1]))
    wrapper = subprocess.Popen(
        [sys.executable, "-m", "batch_assets.services", "run", "--", "sleep", "60"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        announced = wrapper.stdout.readline()  # "services: PostgreSQL for the tests at URL (pid N)"
        pid = int(announced.rsplit("pid ", 1)[1].rstrip(")\n"))
        os.kill(wrapper.pid, signal.SIGTERM)
        assert wrapper.wait(timeout=60) != 0
    finally:
        wrapper.kill()
        wrapper.stdout.close()
    assert not postgres._alive(pid)


def test_the_s3_server_binds_loopback_holds_the_bucket_and_stops_by_pid(tmp_path, s3_storage):
    server = s3.start(tmp_path)
    try:
        assert s3.start(tmp_path) == server  # found again
        assert is_listening(server.port)
        with open(f"/proc/{server.pid}/cmdline", "rb") as f:
            assert f"-H\0{LOOPBACK}\0".encode() in f.read()
        store = dataclasses.replace(s3_storage, endpoint=server.endpoint)
        (tmp_path / "f").write_bytes(b"x")
        assert store.put_file(tmp_path / "f", "k") and not store.put_file(tmp_path / "f", "k")  # immutable keys
        assert [k for k, _ in store.objects("")] == ["k"]
        assert any(line.startswith("export BATCH_ASSETS_STORAGE_URL=s3://") for line in s3.env_lines(server))
    finally:
        assert s3.stop(tmp_path)
    assert not is_listening(server.port) and s3.running(tmp_path) is None


def test_an_s3_start_cut_off_by_a_signal_leaves_no_server_running(tmp_path, monkeypatch):
    """SIGTERM of `services run` while the S3 server is still coming up (its handler raises in the
    wait) must not leave moto_server behind: nothing has recorded its PID yet."""
    started = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    def interrupted(_port):
        raise SystemExit(128 + signal.SIGTERM)

    monkeypatch.setattr(s3.subprocess, "Popen", popen)
    monkeypatch.setattr(s3, "_answers", interrupted)
    with pytest.raises(SystemExit):
        s3.start(tmp_path)
    (proc,) = started
    assert proc.poll() is not None and not (tmp_path / s3.STATE_FILE).exists()
