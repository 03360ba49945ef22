"""DashScope's own error codes on result lines, classed by Model Studio's error-code list (issue 43, item 8).

https://help.aliyun.com/en/model-studio/error-code: InvalidParameter and the other 400s are
validation errors, Throttling.* capacity, InternalError / SystemError internal, DataInspectionFailed
content policy, and Arrearage / AccessDenied / InvalidApiKey an account that cannot be used: that
pauses the provider account in the ledger, the send gate refuses every send to it with a verdict
naming it and the fix, and `batch-assets resume dashscope` lifts it (an operator action) and reopens
the items it stopped.

The emulator's DashScope prefix writes a failed request as `error: {code, message}` with no
response; the `dashscope_item_error_codes` knob picks the codes. Official `openai` SDK over HTTP
against the emulator, real DuckDB file.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import openai
import pytest

from batch_assets.demo import seed_product_reviews
from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.retry_ledger import plan_retries
from batch_assets.providers.contract import TERMINAL_STATES
from batch_assets.resources import ProvidersResource
from batch_assets.spec.resolve import load_all_tasks

DAY = "2026-11-20"
KNOBS = {
    "queue_delay_s": 0.02,
    "seconds_per_request": 0.0005,
    "finalize_delay_s": 0.02,
    "cancel_delay_s": 0.02,
    "log_requests": False,
}
# Each code of the list the emulator is asked for, and the class it must end in.
EXPECTED = {
    "InvalidParameter": "validation_error",
    "BadRequest.EmptyInput": "validation_error",
    "InvalidURL": "validation_error",
    "Throttling": "rate_or_capacity_error",
    "Throttling.RateQuota": "rate_or_capacity_error",
    "Throttling.AllocationQuota": "rate_or_capacity_error",
    "InternalError": "internal_error",
    "SystemError": "internal_error",
    "DataInspectionFailed": "content_policy_error",
    "data_inspection_failed": "content_policy_error",
    "Arrearage": "account_error",
    "AccessDenied": "account_error",
    "AccessDenied.Unpurchased": "account_error",
    "InvalidApiKey": "account_error",
}
ACTIONS = {
    "validation_error": "await_operator",
    "rate_or_capacity_error": "retry",
    "internal_error": "retry",
    "content_policy_error": "compliance_hold",
    "account_error": "await_operator",
}


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    return KNOBS


@pytest.fixture
def reviews(warehouse: Warehouse) -> Warehouse:
    """A day of product reviews, the DashScope task's source."""
    with warehouse.connect() as conn:
        seed_product_reviews(conn, days=1, per_day=28)
    return warehouse


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
def test_the_emulator_writes_dashscope_codes_as_error_lines_without_a_response(emulator: EmulatorHandle) -> None:
    emulator.configure(item_error_rate=1.0, dashscope_item_error_codes=["InvalidParameter", "Arrearage"])
    lines = [
        {
            "custom_id": f"r-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "qwen-plus", "messages": [{"role": "user", "content": f"review {i}"}]},
        }
        for i in range(4)
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with openai.OpenAI(api_key="sk-ds", base_url=emulator.dashscope_base_url) as client:
        uploaded = client.files.create(file=("in.jsonl", data), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        deadline = time.monotonic() + 10
        while batch.status not in ("completed", "failed", "expired", "cancelled"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
            batch = client.batches.retrieve(batch.id)
        assert batch.status == "completed" and batch.request_counts.failed == 4 and batch.output_file_id is None
        errors = [json.loads(x) for x in client.files.content(batch.error_file_id).text.splitlines()]
    assert all(e["response"] is None and set(e["error"]) == {"code", "message"} for e in errors)
    assert sorted(e["error"]["code"] for e in errors) == [
        "Arrearage",
        "Arrearage",
        "InvalidParameter",
        "InvalidParameter",
    ]
    assert {e["error"]["message"] for e in errors if e["error"]["code"] == "Arrearage"} == {
        "Access denied, please make sure your account is in good standing."
    }


@pytest.mark.slow
def test_the_emulators_drawn_faults_answer_dashscope_codes(emulator: EmulatorHandle) -> None:
    emulator.configure(item_error_rate=1.0)
    lines = [
        {
            "custom_id": f"r-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "qwen-plus", "messages": [{"role": "user", "content": f"review {i}"}]},
        }
        for i in range(3)
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with openai.OpenAI(api_key="sk-ds", base_url=emulator.dashscope_base_url) as client:
        uploaded = client.files.create(file=("in.jsonl", data), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        deadline = time.monotonic() + 10
        while batch.status != "completed":
            assert time.monotonic() < deadline
            time.sleep(0.01)
            batch = client.batches.retrieve(batch.id)
        errors = [json.loads(x) for x in client.files.content(batch.error_file_id).text.splitlines()]
    # 429 / 500 / 400 draws, in that rotation, as DashScope names them.
    assert sorted(e["error"]["code"] for e in errors) == ["InternalError", "InvalidParameter", "Throttling.RateQuota"]


@pytest.mark.slow
def test_each_dashscope_code_lands_in_its_class_and_action(reviews: Warehouse, emulator: EmulatorHandle) -> None:
    codes = list(EXPECTED)
    emulator.configure(item_error_rate=1.0, dashscope_item_error_codes=codes)
    task = _task()
    freeze_manifest(reviews, task, DAY)
    _send_and_collect(reviews, task, _adapter(emulator))
    rows = _rows(
        reviews,
        "SELECT p.error_code, p.error_class, p.http_status, p.error_message, d.action "
        "FROM ledger.parsed_result p LEFT JOIN ledger.retry_decision d USING (custom_id, attempt)",
    )
    assert {r["error_code"] for r in rows} == set(codes), "every code came back on some line"
    assert {r["error_code"]: r["error_class"] for r in rows} == EXPECTED
    assert all(r["http_status"] is None and r["error_message"] for r in rows)
    assert {r["error_code"]: r["action"] for r in rows} == {c: ACTIONS[k] for c, k in EXPECTED.items()}
