"""A CLI verb that talks to a provider finds the emulator a `batch-assets dev` over its data directory
recorded, unless BATCH_ASSETS_EMULATOR_URL says otherwise; when nothing answers there, the error is
one line naming the URL it tried and the fix, exit 1, and nothing is changed in the ledger."""

from __future__ import annotations

import pytest

from batch_assets import dev_stack
from batch_assets.cli.context import providers
from batch_assets.cli.errors import connection_failure, explain
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.ports import free_port
from batch_assets.providers.contract import JobRef
from batch_assets.resources import ProvidersResource

from .cli_calls import assert_one_line_error, run

JOB_KEY = "ticket_triage_20261120:s1:a1"


@pytest.fixture
def running_job(tmp_path, monkeypatch) -> Warehouse:
    """A warehouse whose ledger holds one running OpenAI batch; the CLI reads it through --database."""
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path)
    with wh.connect() as conn:
        conn.execute(
            """INSERT INTO ledger.provider_job (job_key, task_id, shard_id, provider, endpoint, provider_batch_id,
                   state, created_at, state_changed_at)
               VALUES (?, 'ticket_triage_20261120', 's1', 'openai', '/v1/chat/completions', 'batch_abc',
                   'IN_PROGRESS', now()::TIMESTAMP, now()::TIMESTAMP)""",
            [JOB_KEY],
        )
    for name in ("BATCH_ASSETS_EMULATOR_URL", "BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR", "BATCH_ASSETS_MODE"):
        monkeypatch.delenv(name, raising=False)
    return wh


def _job_state(wh: Warehouse) -> tuple:
    with wh.connect(read_only=True) as conn:
        return conn.execute(
            "SELECT state, cancel_requested, terminal_at FROM ledger.provider_job WHERE job_key = ?", [JOB_KEY]
        ).fetchone()


def test_a_closed_emulator_port_is_one_line_naming_the_url(capsys, running_job, monkeypatch):
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("BATCH_ASSETS_EMULATOR_URL", url)
    before = _job_state(running_job)
    code, out, err = run(capsys, "--database", running_job.database, "cancel", JOB_KEY)
    assert code == 1 and out == ""
    assert_one_line_error(
        err,
        f"batch-assets cancel: cannot reach the openai emulator at {url}/v1: connection refused",
        "`batch-assets dev`",
        "BATCH_ASSETS_EMULATOR_URL",
    )
    assert _job_state(running_job) == before


def test_the_dev_stacks_recorded_emulator_is_the_one_tried(capsys, running_job):
    url = f"http://127.0.0.1:{free_port()}"
    dev_stack.record(running_job.data_dir, emulator_url=url, ui_url="http://127.0.0.1:3000")  # this process: alive
    assert providers(running_job).emulator_url == url
    code, _, err = run(capsys, "--database", running_job.database, "cancel", JOB_KEY)
    assert code == 1
    assert_one_line_error(
        err,
        f"cannot reach the openai emulator at {url}/v1: connection refused",
        f"recorded in {running_job.data_dir / dev_stack.STACK_FILE}",
    )


def test_an_sdk_connection_error_names_the_url_it_tried():
    port = free_port()
    adapter = ProvidersResource(emulator_url=f"http://127.0.0.1:{port}", max_retries=0).adapter("openai")
    with pytest.raises(Exception) as caught:
        adapter.cancel(JobRef("batch_abc"))
    url, reason = connection_failure(caught.value)
    assert url == f"http://127.0.0.1:{port}/v1/batches/batch_abc/cancel" and reason == "connection refused"
    line, code = explain(caught.value)
    assert code == 1 and "\n" not in line
    assert line.startswith(f"cannot reach {url}: connection refused — ") and "batch-assets dev" in line


def test_other_errors_are_not_connection_failures():
    assert connection_failure(ValueError("bad batch id")) is None
