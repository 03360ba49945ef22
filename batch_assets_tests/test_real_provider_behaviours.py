"""Seven real provider behaviours, each reproduced by the emulator and classed right (issue 43, item 10).

Each test first shows the behaviour through the provider's official SDK over HTTP (the emulator
models the real service), then runs one partition through the pipeline against it and checks the
item's class and retry decision:

* OpenAI `error_file_id: ""` on a clean completed batch (tobert/kaibo#93): no file, not a file id;
* an OpenAI expired batch that does not count its unfinished requests as failed
  (warmbly/warmbly#333): they are still `expired`, resent;
* a chat refusal, `message.refusal` set and `content` null: content policy, held;
* an Anthropic `timeout_error` result: the provider's failure, retried;
* a Gemini prompt blocked (`promptFeedback.blockReason`, no candidates): content policy, held;
* Gemini's output budget spent while thinking (MAX_TOKENS, content without parts): cut off, re-asked;
* an Anthropic structured refusal naming its `stop_details.category`: held, the category kept.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.settle.retry_ledger import plan_retries
from batch_assets.providers.registry import provider_limits
from batch_assets.resources import ProvidersResource
from batch_assets.spec.resolve import load_all_tasks

DAY = "2026-11-20"
OPENAI_DONE = ("completed", "failed", "expired", "cancelled")
GEMINI_DONE = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


@pytest.fixture
def emulator_knobs(emulator_knobs: dict[str, Any]) -> dict[str, Any]:
    return {**emulator_knobs, "item_faults_by_occurrence": True}


def _adapter(emulator: EmulatorHandle, provider: str):
    return ProvidersResource(emulator_url=emulator.base_url, max_retries=2).adapter(provider)


def _outcomes(wh: Warehouse) -> list[dict]:
    """Every failed attempt: its class, code, message and retry decision."""
    with wh.connect() as conn:
        return fetch_dicts(
            conn,
            """SELECT p.custom_id, p.error_class, p.error_code, p.error_message, p.finish_reason, d.action
               FROM ledger.parsed_result p JOIN ledger.retry_decision d USING (custom_id, attempt)
               WHERE p.error_class IS NOT NULL ORDER BY p.custom_id""",
        )


def _run(wh: Warehouse, task, emulator: EmulatorHandle, run_partition, provider: str | None = None) -> list[dict]:
    adapter = _adapter(emulator, provider or task.spec.provider)
    run_partition(wh, task, DAY, adapter)
    plan_retries(wh, task, DAY)
    return _outcomes(wh)


def _openai_batch(emulator: EmulatorHandle, tmp_path, n: int = 20):
    lines = [
        {
            "custom_id": f"r{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"Ticket {i}"}]},
        }
        for i in range(n)
    ]
    path = tmp_path / "openai.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    client = openai.OpenAI(api_key="k", base_url=emulator.openai_base_url)
    uploaded = client.files.create(file=path.open("rb"), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    while batch.status not in OPENAI_DONE:
        batch = client.batches.retrieve(batch.id)
    return client, batch


def _gemini_task():
    base = load_all_tasks()["ticket_triage"]
    spec = base.spec.model_copy(
        update={"provider": "gemini", "endpoint": "generateContent", "model": "gemini-2.5-flash", "name": "triage_gem"}
    )
    return dataclasses.replace(base, spec=spec, limits=provider_limits("gemini").with_overrides(spec.limits))


def _gemini_responses(emulator: EmulatorHandle, tmp_path, n: int = 20) -> list[dict]:
    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=emulator.base_url))
    path = tmp_path / "gemini.jsonl"
    lines = [
        {
            "key": f"k{i}",
            "request": {
                "contents": [{"parts": [{"text": f"Ticket {i}"}]}],
                "generationConfig": {"maxOutputTokens": 64},
            },
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    uploaded = client.files.upload(file=path, config=types.UploadFileConfig(mime_type="jsonl"))
    job = client.batches.create(model="gemini-2.5-flash", src=uploaded.name)
    while job.state.value not in GEMINI_DONE:
        job = client.batches.get(name=job.name)
    assert job.state.value == "JOB_STATE_SUCCEEDED"
    return [json.loads(x) for x in client.files.download(file=job.dest.file_name).decode().splitlines()]


def _anthropic_results(emulator: EmulatorHandle, n: int = 20) -> list:
    client = anthropic.Anthropic(api_key="k", base_url=emulator.base_url)
    batch = client.messages.batches.create(
        requests=[
            {
                "custom_id": f"r{i}",
                "params": {
                    "model": "claude-haiku-4-5",
                    "max_tokens": 64,
                    "messages": [{"role": "user", "content": f"Ticket {i}"}],
                },
            }
            for i in range(n)
        ]
    )
    while batch.processing_status != "ended":
        batch = client.messages.batches.retrieve(batch.id)
    return list(client.messages.batches.results(batch.id))


# --- OpenAI ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_empty_error_file_id_is_no_file(
    emulator: EmulatorHandle, seeded_copy: Warehouse, ticket_task, run_partition, tmp_path
) -> None:
    emulator.configure(openai_empty_error_file_id=True)
    _, batch = _openai_batch(emulator, tmp_path)
    assert batch.status == "completed" and batch.error_file_id == "" and batch.output_file_id

    assert _run(seeded_copy, ticket_task, emulator, run_partition) == []
    with seeded_copy.connect() as conn:
        ids = conn.execute("SELECT DISTINCT error_file_id FROM ledger.provider_job").fetchall()
        applied = conn.execute("SELECT count(*) FROM ledger.applied_result").fetchone()[0]
        sent = conn.execute("SELECT count(*) FROM ledger.shard_line").fetchone()[0]
    assert ids == [(None,)] and applied == sent > 0


@pytest.mark.slow
def test_expired_requests_not_counted_as_failed_are_still_expired_and_resent(
    emulator: EmulatorHandle, seeded_copy: Warehouse, ticket_task, run_partition, tmp_path
) -> None:
    emulator.configure(expired_counts_unfinished_as_failed=False, force_batch_status="expired")
    client, batch = _openai_batch(emulator, tmp_path)
    unfinished = [json.loads(x) for x in client.files.content(batch.error_file_id).text.splitlines()]
    assert batch.status == "expired" and batch.request_counts.failed == 0
    assert batch.request_counts.completed + len(unfinished) == 20
    assert {line["error"]["code"] for line in unfinished} == {"batch_expired"}

    emulator.configure(force_batch_status="expired")
    outcomes = _run(seeded_copy, ticket_task, emulator, run_partition)
    assert outcomes and {(o["error_class"], o["action"]) for o in outcomes} == {("expired", "retry")}


@pytest.mark.slow
def test_a_chat_refusal_with_null_content_is_held_for_compliance(
    emulator: EmulatorHandle, seeded_copy: Warehouse, ticket_task, run_partition, tmp_path
) -> None:
    emulator.configure(openai_refusal_rate=0.3)
    client, batch = _openai_batch(emulator, tmp_path)
    lines = [json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()]
    messages = [line["response"]["body"]["choices"][0]["message"] for line in lines]
    refused = [m for m in messages if m["refusal"] is not None]
    assert refused and all(m["content"] is None for m in refused)

    outcomes = _run(seeded_copy, ticket_task, emulator, run_partition)
    assert outcomes and {(o["error_class"], o["action"]) for o in outcomes} == {
        ("content_policy_error", "compliance_hold")
    }
    assert {o["error_message"] for o in outcomes} == {refused[0]["refusal"]}


# --- Anthropic ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_anthropic_timeout_error_is_the_providers_failure_and_retried(
    emulator: EmulatorHandle, seeded_copy: Warehouse, run_partition
) -> None:
    emulator.configure(anthropic_timeout_error_rate=0.3)
    errored = [r for r in _anthropic_results(emulator) if r.result.type == "errored"]
    assert errored and {r.result.error.error.type for r in errored} == {"timeout_error"}

    outcomes = _run(seeded_copy, load_all_tasks()["ticket_summary"], emulator, run_partition)
    assert outcomes and {(o["error_class"], o["error_code"], o["action"]) for o in outcomes} == {
        ("internal_error", "timeout_error", "retry")
    }


@pytest.mark.slow
def test_an_anthropic_refusal_keeps_its_policy_category(
    emulator: EmulatorHandle, seeded_copy: Warehouse, run_partition
) -> None:
    emulator.configure(anthropic_refusal_rate=0.3, anthropic_refusal_category="cyber")
    refused = [r.result.message for r in _anthropic_results(emulator) if r.result.type == "succeeded"]
    refused = [m for m in refused if m.stop_reason == "refusal"]
    assert refused and all(m.stop_details.category == "cyber" and m.content == [] for m in refused)

    outcomes = _run(seeded_copy, load_all_tasks()["ticket_summary"], emulator, run_partition)
    assert outcomes and {(o["error_class"], o["action"]) for o in outcomes} == {
        ("content_policy_error", "compliance_hold")
    }
    assert all("cyber" in o["error_message"] for o in outcomes)


# --- Gemini ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_gemini_prompt_blocked_without_candidates_is_held_for_compliance(
    emulator: EmulatorHandle, seeded_copy: Warehouse, run_partition, tmp_path
) -> None:
    emulator.configure(gemini_prompt_blocked_rate=0.3)
    blocked = [
        line["response"] for line in _gemini_responses(emulator, tmp_path) if "promptFeedback" in line["response"]
    ]
    assert blocked and all("candidates" not in r and r["promptFeedback"]["blockReason"] for r in blocked)

    outcomes = _run(seeded_copy, _gemini_task(), emulator, run_partition)
    assert outcomes and {(o["error_class"], o["action"]) for o in outcomes} == {
        ("content_policy_error", "compliance_hold")
    }
    assert {o["error_message"] for o in outcomes} == {blocked[0]["promptFeedback"]["blockReason"]}


@pytest.mark.slow
def test_gemini_max_tokens_reached_while_thinking_is_a_cut_off_answer_asked_again(
    emulator: EmulatorHandle, seeded_copy: Warehouse, run_partition, tmp_path
) -> None:
    emulator.configure(gemini_thinking_max_tokens_rate=0.3)
    responses = [line["response"] for line in _gemini_responses(emulator, tmp_path)]
    thought_out = [r for r in responses if r["candidates"][0]["finishReason"] == "MAX_TOKENS"]
    assert thought_out
    for r in thought_out:
        assert "parts" not in r["candidates"][0]["content"] and r["usageMetadata"]["thoughtsTokenCount"] == 64

    outcomes = _run(seeded_copy, _gemini_task(), emulator, run_partition)
    assert outcomes and {(o["error_class"], o["error_code"], o["finish_reason"], o["action"]) for o in outcomes} == {
        ("parse_error", "finish_reason_length", "length", "retry")
    }
