"""An account-level error pauses the provider account until an operator resumes it (issue 43, item 8).

Model Studio's Arrearage / AccessDenied / InvalidApiKey (https://help.aliyun.com/en/model-studio/error-code)
say the account itself cannot be used: the parse that records one pauses the provider in the ledger
(`ledger.account_pause`), the send gate refuses every send to it (asset, CLI retry) with a verdict
naming the account, the code and the fix, and `batch-assets resume dashscope` lifts it, records the
operator action and makes the stopped items due again. Official `openai` SDK over HTTP against the
emulator (its `dashscope_item_error_codes` knob), real DuckDB file.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import dagster as dg
import pytest

from batch_assets.cli import main as cli_main
from batch_assets.definitions import defs as load_definitions
from batch_assets.demo import seed_product_reviews, seed_support_tickets
from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.send_gate import SendRefused, may_send
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.retry_ledger import plan_retries
from batch_assets.providers.contract import TERMINAL_STATES
from batch_assets.resources import ProvidersResource, default_resources
from batch_assets.spec.resolve import load_all_tasks

DAY = "2026-11-20"
KNOBS = {
    "queue_delay_s": 0.02,
    "seconds_per_request": 0.0005,
    "finalize_delay_s": 0.02,
    "cancel_delay_s": 0.02,
    "log_requests": False,
}


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    return KNOBS


@pytest.fixture
def reviews(warehouse: Warehouse) -> Warehouse:
    """A day of product reviews (the DashScope task's source) and of support tickets (an OpenAI task's)."""
    with warehouse.connect() as conn:
        seed_product_reviews(conn, days=1, per_day=28)
        seed_support_tickets(conn, days=1, per_day=50)
    return warehouse


@pytest.fixture
def env(reviews: Warehouse, emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """What the CLI reads: this test's warehouse and emulator, emulator mode whatever the shell says."""
    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(reviews.database))
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(reviews.data_dir))
    monkeypatch.setenv("BATCH_ASSETS_EMULATOR_URL", emulator.base_url)
    for key in ("BATCH_ASSETS_PROVIDER_MODE", "BATCH_ASSETS_DASHSCOPE_MODE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    return reviews


def _task(name: str = "review_sentiment"):
    task = load_all_tasks()[name]
    retry = task.spec.retry.model_copy(update={"backoff_s": 0.0, "max_failed_fraction": 1.0})
    return dataclasses.replace(task, spec=task.spec.model_copy(update={"retry": retry}))


def _adapter(emulator: EmulatorHandle, provider: str = "dashscope"):
    return ProvidersResource(emulator_url=emulator.base_url, max_retries=2).adapter(provider)


def _rows(wh: Warehouse, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        return fetch_dicts(conn, sql, params or [])


def _send_and_collect(wh: Warehouse, task, adapter) -> None:
    """Cut (first attempt and due retries), submit, poll to terminal, collect, parse, decide, apply."""
    cut_shards(wh, task, DAY)
    submit_pending(wh, task, DAY, adapter)
    deadline = time.monotonic() + 30
    while True:
        poll_jobs(wh, lambda _p: adapter, task_id=task.task_id(DAY))
        jobs = _rows(wh, "SELECT state FROM ledger.provider_job WHERE task_id = ?", [task.task_id(DAY)])
        if all(j["state"] in TERMINAL_STATES for j in jobs):
            break
        assert time.monotonic() < deadline, jobs
        time.sleep(0.03)
    collect_raw_results(wh, task, DAY, adapter)
    parse_results(wh, task, DAY)
    plan_retries(wh, task, DAY)
    apply_results(wh, task, DAY)


@pytest.mark.slow
def test_an_account_error_pauses_the_account_until_an_operator_resumes_it(
    env: Warehouse, emulator: EmulatorHandle, capsys
) -> None:
    wh, task, adapter = env, _task(), _adapter(emulator)
    task_id = task.task_id(DAY)
    # The account falls into arrears: a few lines say so, the others are throttled.
    emulator.configure(item_error_rate=1.0, dashscope_item_error_codes=["Throttling.RateQuota", "Arrearage"])
    freeze_manifest(wh, task, DAY)
    _send_and_collect(wh, task, adapter)
    [pause] = _rows(wh, "SELECT * FROM ledger.account_pause")
    assert (pause["provider"], pause["error_code"], pause["task_id"], pause["resumed_at"]) == (
        "dashscope",
        "Arrearage",
        task_id,
        None,
    )
    held = _rows(wh, "SELECT count(*) AS n FROM ledger.retry_decision WHERE error_class = 'account_error'")[0]["n"]
    assert held == pause["items"] > 0

    # The provider status sensor asks for no submit run of the throttled items' due retries, and logs why.
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    with dg.instance_for_test() as instance:
        defs = load_definitions()
        sensor = defs.resolve_sensor_def("provider_status_sensor")
        ctx = dg.build_sensor_context(instance=instance, definitions=defs, resources=default_resources())
        ctx.log.addHandler(handler)
        result = sensor.evaluate_tick(ctx)
    assert [r for r in result.run_requests if r.job_name == "review_sentiment__submit"] == []
    [paused_line] = [r.getMessage() for r in records if "account paused" in r.getMessage()]
    assert paused_line.startswith("dashscope: account paused") and "batch-assets resume dashscope" in paused_line

    # The gate refuses every send to the paused account, naming it, the code and the fix.
    [refusal] = may_send(wh, task, DAY)
    assert refusal.check == "account_active" and not refusal.passed
    for words in ("dashscope", "Arrearage", "overdue payment", "batch-assets resume dashscope"):
        assert words in refusal.reason
    jobs_before = _rows(wh, "SELECT count(*) AS n FROM ledger.provider_job")[0]["n"]
    cut_shards(wh, task, DAY)  # the throttled items' retries are due
    with pytest.raises(SendRefused, match="account_active"):
        submit_pending(wh, task, DAY, adapter)
    assert _rows(wh, "SELECT count(*) AS n FROM ledger.provider_job")[0]["n"] == jobs_before
    # `batch-assets retry` goes through the same gate, and so is refused too.
    assert cli_main(["retry", task_id]) == 1
    assert "account_active" in capsys.readouterr().err

    # The report names the paused account among its notes.
    assert cli_main(["report", "--task", task_id]) == 0
    assert "PAUSED dashscope: account paused" in capsys.readouterr().out

    # Another provider's account is not paused.
    tickets = _task("ticket_triage")
    freeze_manifest(wh, tickets, DAY)
    assert [v.check for v in may_send(wh, tickets, DAY) if v.check == "account_active"] == []

    # The operator settles the bill and resumes: the pause is lifted, the action recorded, and the
    # items it stopped are due again; the next round sends them.
    emulator.configure(item_error_rate=0.0, dashscope_item_error_codes=[])
    assert cli_main(["resume", "dashscope", "--reason", "invoice paid"]) == 0
    out = capsys.readouterr().out
    assert "dashscope" in out and "resumed" in out and str(held) in out
    [lifted] = _rows(wh, "SELECT * FROM ledger.account_pause")
    assert lifted["resumed_at"] is not None
    [action] = _rows(wh, "SELECT * FROM ledger.operator_action WHERE action = 'resume'")
    assert "dashscope" in action["detail"] and "invoice paid" in action["detail"]
    assert may_send(wh, task, DAY) == []
    _send_and_collect(wh, task, adapter)
    left = _rows(
        wh,
        "SELECT count(*) AS n FROM ledger.manifest_item m ANTI JOIN ledger.applied_result a USING (custom_id) "
        "WHERE m.task_id = ? AND m.custom_id IN (SELECT custom_id FROM ledger.shard_line)",
        [task_id],
    )[0]["n"]
    assert left == 0

    # Resuming an account that is not paused changes nothing.
    assert cli_main(["resume", "dashscope"]) == 0
    assert "not paused" in capsys.readouterr().out
    assert len(_rows(wh, "SELECT * FROM ledger.operator_action WHERE action = 'resume'")) == 1
