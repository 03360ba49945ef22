"""`make services` / `make test`'s PostgreSQL: started on 127.0.0.1 and a free port, found again by a
second start, stopped by its PID; a test that needs it skips without it, and fails under CI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from batch_assets.services import postgres
from batch_assets.services.__main__ import TEST_URL_VARIABLE, env_lines

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
    assert postgres.stop(server_dir)
    assert postgres.running(server_dir) is None
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)
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
