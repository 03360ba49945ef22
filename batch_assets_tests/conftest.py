"""Shared fixtures: a real DuckDB file per test, the emulator on a free loopback port, the demo task."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets
from batch_assets.emulator.testing import EmulatorHandle, running_emulator
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.providers.contract import ClientSettings
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
from batch_assets.resources import EMULATOR_API_KEY
from batch_assets.spec.resolve import ResolvedTask, load_all_tasks

# Fails a test not marked slow that starts the emulator or Dagster, so `make test-fast` stays fast.
pytest_plugins = ["batch_assets_tests.slow_guard", "batch_assets_tests.postgres_fixture"]

# Emulator clock knobs that finish a small batch in well under a second.
FAST_EMULATOR = {
    "queue_delay_s": 0.02,
    "seconds_per_request": 0.0005,
    "finalize_delay_s": 0.02,
    "cancel_delay_s": 0.02,
    "log_requests": False,
}
DAY1, DAY2 = "2026-11-20", "2026-11-21"
# What makes rich (and our progress switch) treat output as a terminal; tests decide that themselves.
TERMINAL_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "BATCH_ASSETS_PROGRESS")


@pytest.fixture(autouse=True)
def _not_a_terminal(monkeypatch):
    """Whatever the developer's or CI's shell says (e.g. FORCE_COLOR), output is not a terminal
    unless a test sets it."""
    for name in TERMINAL_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _ledger_env(request, monkeypatch):
    """BATCH_ASSETS_TEST_LEDGER=postgres runs every test with its control ledger in a fresh
    PostgreSQL database (`distributed`); unset, the ledger is in each test's DuckDB file."""
    monkeypatch.delenv("BATCH_ASSETS_LEDGER_URL", raising=False)
    if os.environ.get("BATCH_ASSETS_TEST_LEDGER") == "postgres":
        monkeypatch.setenv("BATCH_ASSETS_LEDGER_URL", request.getfixturevalue("postgres_url"))


# ../shared/ (recorded provider samples) lies beside the checkout here and in CI.
SHARED = Path(__file__).resolve().parents[2] / "shared"
SAMPLES = SHARED / "reference" / "provider_samples"


def shared_file(path: Path) -> Path:
    """A fixture file under ../shared/: a test that needs it skips outside CI, but fails in CI
    (`CI` set), where a missing file means the fixtures were not provided."""
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing (CI is set, so the shared fixtures must be present)")
        pytest.skip(f"shared fixture not found: {path}")
    return path


@pytest.fixture
def warehouse(tmp_path: Path) -> Warehouse:
    return Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")


@pytest.fixture
def seeded_warehouse(warehouse: Warehouse) -> Warehouse:
    """Two days of demo tickets, 60 a day (with every edge case of the seed data)."""
    with warehouse.connect() as conn:
        seed_support_tickets(conn, days=2, per_day=60)
    return warehouse


@pytest.fixture(scope="session")
def ticket_task() -> ResolvedTask:
    return load_all_tasks()["ticket_triage"]


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    """The settings the `emulator` fixture starts with; a test module may override this fixture."""
    return FAST_EMULATOR


@pytest.fixture
def emulator(tmp_path: Path, emulator_knobs: dict[str, Any]) -> Iterator[EmulatorHandle]:
    with running_emulator(tmp_path / "emulator", **emulator_knobs) as handle:
        yield handle


@pytest.fixture
def adapter(emulator: EmulatorHandle) -> OpenAIBatchAdapter:
    return OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emulator.openai_base_url, max_retries=2))


@pytest.fixture
def dagster_env(monkeypatch: pytest.MonkeyPatch, seeded_warehouse: Warehouse, emulator: EmulatorHandle) -> Warehouse:
    """Environment the project's Definitions read: this test's warehouse and emulator, no real keys."""
    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(seeded_warehouse.database))
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(seeded_warehouse.data_dir))
    monkeypatch.setenv("BATCH_ASSETS_EMULATOR_URL", emulator.base_url)
    for key in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "BATCH_ASSETS_PROVIDER_MODE",
        "BATCH_ASSETS_OPENAI_MODE",
        "BATCH_ASSETS_DASHSCOPE_MODE",
        "BATCH_ASSETS_ANTHROPIC_MODE",
        "BATCH_ASSETS_GEMINI_MODE",
    ):
        monkeypatch.delenv(key, raising=False)  # emulator mode, whatever the developer's shell has
    return seeded_warehouse


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


# --- Core-pipeline helpers (shared by test_submit, test_ingest_parse_apply, test_reconcile, test_sensor) ---


def _wait_for_jobs(warehouse: Warehouse, adapter, timeout_s: float = 20.0) -> None:
    """Poll every submitted, non-terminal provider job until all are terminal (or fail the test)."""
    import time

    from batch_assets.pipeline.collect.poll import poll_jobs

    deadline = time.monotonic() + timeout_s
    while True:
        poll_jobs(warehouse, lambda _provider: adapter)
        with warehouse.control() as db:  # no per-item store opened: another run may hold one
            left = db.execute(
                "SELECT count(*) FROM ledger.provider_job WHERE terminal_at IS NULL AND provider_batch_id IS NOT NULL"
            ).scalar()
        if left == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{left} provider job(s) still not terminal after {timeout_s}s")
        time.sleep(0.03)


def _run_partition(warehouse: Warehouse, task: ResolvedTask, partition: str, adapter, *, apply: bool = True):
    """freeze -> cut -> submit -> wait -> collect -> parse (-> apply); returns the reconciliation."""
    from batch_assets.pipeline.collect.ingest import collect_raw_results
    from batch_assets.pipeline.collect.parse import parse_results
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending
    from batch_assets.pipeline.settle.apply import apply_results
    from batch_assets.pipeline.settle.reconcile import reconcile

    freeze_manifest(warehouse, task, partition)
    cut_shards(warehouse, task, partition)
    submit_pending(warehouse, task, partition, adapter)
    _wait_for_jobs(warehouse, adapter)
    collect_raw_results(warehouse, task, partition, adapter)
    parse_results(warehouse, task, partition)
    if apply:
        apply_results(warehouse, task, partition)
    return reconcile(warehouse, task.task_id(partition))


@pytest.fixture
def wait_for_jobs():
    """`wait_for_jobs(warehouse, adapter)`: poll until every submitted provider job is terminal."""
    return _wait_for_jobs


@pytest.fixture
def run_partition():
    """`run_partition(warehouse, task, partition, adapter, apply=True)`: the whole pipeline for one partition."""
    return _run_partition


@pytest.fixture(scope="session")
def _seeded_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("seeded_template") / "warehouse.duckdb"
    with Warehouse.at(path, path.parent / "data").connect() as conn:
        seed_support_tickets(conn, days=2, per_day=60)
    return path


@pytest.fixture
def seeded_copy(tmp_path: Path, _seeded_template: Path) -> Warehouse:
    """Same content as `seeded_warehouse` (2 days x 60 tickets, ledger migrated, nothing frozen), but
    copied from a session-wide template file instead of re-seeded: much faster for many small tests."""
    import shutil

    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    shutil.copy(_seeded_template, wh.database)
    return wh


@pytest.fixture(scope="module")
def finished_db(tmp_path_factory, _seeded_template, ticket_task) -> Path:
    """A warehouse with one partition of ticket_triage run to the end (one provider job); read-only use
    (one per test module: the CLI tests share it)."""
    import shutil

    root = tmp_path_factory.mktemp("cli_finished")
    wh = Warehouse.at(root / "warehouse.duckdb", root / "data")
    shutil.copy(_seeded_template, wh.database)
    with running_emulator(root / "emulator", **FAST_EMULATOR) as emu:
        adapter = OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emu.openai_base_url, max_retries=2))
        assert _run_partition(wh, ticket_task, DAY1, adapter).problems() == []
    return wh.database


@pytest.fixture
def all_seeded(warehouse: Warehouse) -> Warehouse:
    """One day of every demo source: 60 tickets, 10 KB articles, 20 product reviews (a task per provider)."""
    with warehouse.connect() as conn:
        seed_support_tickets(conn, days=1, per_day=60)
        seed_kb_articles(conn, days=1, per_day=10)
        seed_product_reviews(conn, days=1, per_day=20)
    return warehouse


# --- Sensor ticks (test_sensor, test_orphaned_intents; helpers in sensor_ticks.py) ---


@pytest.fixture(scope="module")
def defs():
    """The project's Definitions, loaded once a module: ticks get this test's resources from
    `default_resources()` (after `dagster_env`)."""
    from batch_assets.definitions import defs as load

    return load()


@pytest.fixture(scope="module")
def sensor_instance() -> Iterator[dg.DagsterInstance]:
    """One Dagster instance for the module (creating one costs seconds); the cursor is passed explicitly."""
    with dg.instance_for_test() as inst:
        yield inst


# --- Emulator wire-format tests (test_emulator_openai, test_emulator_anthropic, test_emulator_gemini) ---

# Their clock knobs: like FAST_EMULATOR, but one request a millisecond.
WIRE_EMULATOR = {
    "queue_delay_s": 0.02,
    "seconds_per_request": 0.001,
    "finalize_delay_s": 0.02,
    "cancel_delay_s": 0.02,
    "log_requests": False,
}


@pytest.fixture
def no_emulator_left_running() -> Iterator[None]:
    """Fails the test if an emulator thread outlives it; use with `pytest.mark.usefixtures`."""
    yield
    leftovers = [t.name for t in threading.enumerate() if t.name.startswith("emulator:")]
    assert not leftovers, f"emulator threads still running: {leftovers}"
