"""The local emulator's OpenAI Batch wire format, exercised through the real `openai` SDK over HTTP."""

from __future__ import annotations

import json
import math
import random
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from batch_assets.emulator import server
from batch_assets.emulator.schema_values import value_for_schema
from batch_assets.emulator.settings import EmulatorSettings
from batch_assets.emulator.testing import EmulatorHandle, running_emulator
from batch_assets.emulator.text import Topic

from .conftest import WIRE_EMULATOR

pytestmark = pytest.mark.usefixtures("no_emulator_left_running")

# These tests keep the request log on, so that its middleware runs too.
FAST = {**WIRE_EMULATOR, "log_requests": True}
TERMINAL = {"completed", "failed", "expired", "cancelled"}
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

TRIAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "shipping", "bug", "other"]},
        "reason": {"type": "string", "minLength": 5, "maxLength": 120},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "priority": {"type": "integer", "minimum": 1, "maximum": 5},
        "escalate": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 1, "maxItems": 3},
        "customer": {
            "type": "object",
            "properties": {"summary": {"type": "string"}, "sentiment": {"type": "string", "enum": ["pos", "neg"]}},
            "required": ["summary", "sentiment"],
            "additionalProperties": False,
        },
    },
    "required": ["category", "reason", "confidence", "priority", "escalate", "tags", "customer"],
    "additionalProperties": False,
}


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    return FAST


def sdk(emulator: EmulatorHandle) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=emulator.openai_base_url)


@pytest.fixture
def client(emulator: EmulatorHandle) -> Iterator[openai.OpenAI]:
    with sdk(emulator) as openai_client:
        yield openai_client


def ticket(
    i: int, *, schema: dict[str, Any] | None = TRIAGE_SCHEMA, url: str = "/v1/chat/completions"
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Classify the support ticket."},
            {"role": "user", "content": f"Ticket {i}: my parcel never arrived and the refund for invoice {i} is late."},
        ],
    }
    if schema is not None:
        json_schema = {"name": "triage", "schema": schema, "strict": True}
        body["response_format"] = {"type": "json_schema", "json_schema": json_schema}
    return {"custom_id": f"ticket-{i}", "method": "POST", "url": url, "body": body}


def jsonl(lines: list[Any]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()


def submit(client: openai.OpenAI, lines: list[Any], endpoint: str = "/v1/chat/completions", **kwargs: Any) -> Any:
    uploaded = client.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch")
    return client.batches.create(input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h", **kwargs)


def wait(client: openai.OpenAI, batch_id: str, statuses: set[str] = TERMINAL, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in statuses:
            return batch
        assert time.monotonic() < deadline, f"batch stuck in {batch.status}"
        time.sleep(0.01)


def read_lines(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


def content_of(line: dict[str, Any]) -> Any:
    return line["response"]["body"]["choices"][0]["message"]["content"]


# --- lifecycle and answers ----------------------------------------------------------------------


@pytest.mark.slow
def test_batch_runs_through_every_status_and_answers_conform_to_the_schema(tmp_path: Path) -> None:
    knobs = {"queue_delay_s": 0.2, "seconds_per_request": 0.015, "finalize_delay_s": 0.2}
    with running_emulator(tmp_path, **knobs) as emu, sdk(emu) as client:
        created = submit(client, [ticket(i) for i in range(20)], metadata={"task": "triage"})
        assert created.status == "validating"
        assert created.id.startswith("batch_") and created.expires_at == created.created_at + 86_400
        assert created.request_counts.total == 0 and created.metadata == {"task": "triage"}
        seen = ["validating"]
        while seen[-1] not in TERMINAL:
            batch = client.batches.retrieve(created.id)
            if batch.status != seen[-1]:
                seen.append(batch.status)
            if batch.status == "finalizing":
                assert batch.output_file_id is None and batch.request_counts.completed == 20
            time.sleep(0.005)
        output_file = client.files.retrieve(batch.output_file_id)
        lines = read_lines(client, batch.output_file_id)
    assert seen == ["validating", "in_progress", "finalizing", "completed"]
    assert batch.model == "gpt-4o-mini" and batch.error_file_id is None and batch.errors is None
    assert batch.request_counts.model_dump() == {"total": 20, "completed": 20, "failed": 0}
    assert batch.created_at <= batch.in_progress_at <= batch.finalizing_at <= batch.completed_at
    assert batch.usage.input_tokens > 0 and batch.usage.output_tokens > 0
    assert batch.usage.total_tokens == batch.usage.input_tokens + batch.usage.output_tokens
    assert output_file.purpose == "batch_output" and output_file.filename == f"{batch.id}_output.jsonl"
    assert sorted(line["custom_id"] for line in lines) == sorted(f"ticket-{i}" for i in range(20))
    for line in lines:
        assert set(line) == {"id", "custom_id", "response", "error"} and line["error"] is None
        assert line["id"].startswith("batch_req_") and line["response"]["request_id"].startswith("req_")
        assert line["response"]["status_code"] == 200
        body = line["response"]["body"]
        assert list(body) == [
            "id",
            "object",
            "created",
            "model",
            "choices",
            "usage",
            "service_tier",
            "system_fingerprint",
        ]
        assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
        choice = body["choices"][0]
        assert choice["finish_reason"] == "stop" and choice["logprobs"] is None
        assert choice["message"]["role"] == "assistant" and choice["message"]["refusal"] is None
        usage = body["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        answer = json.loads(choice["message"]["content"])
        jsonschema.validate(answer, TRIAGE_SCHEMA)
        # Free-text fields are phrased from the prompt's own words.
        assert re.search(r"ticket|parcel|arrived|refund|invoice|late|never", answer["reason"])
    usage_sum = sum(line["response"]["body"]["usage"]["prompt_tokens"] for line in lines)
    assert usage_sum == batch.usage.input_tokens


@pytest.mark.slow
def test_plain_text_json_mode_and_token_counts(client: openai.OpenAI) -> None:
    plain = ticket(1, schema=None)
    json_mode = ticket(2, schema=None)
    json_mode["body"]["response_format"] = {"type": "json_object"}
    chinese = ticket(3, schema=None)
    chinese["body"]["messages"] = [{"role": "user", "content": "我的包裹还没有到" * 10}]
    capped = ticket(4, schema=None)
    capped["body"]["max_tokens"] = 3
    batch = wait(client, submit(client, [plain, json_mode, chinese, capped]).id)
    lines = {line["custom_id"]: line["response"]["body"] for line in read_lines(client, batch.output_file_id)}
    assert isinstance(lines["ticket-1"]["choices"][0]["message"]["content"], str)
    assert isinstance(json.loads(lines["ticket-2"]["choices"][0]["message"]["content"]), dict)
    # About one token per CJK character: 80 characters plus message framing.
    assert 80 <= lines["ticket-3"]["usage"]["prompt_tokens"] <= 90
    assert lines["ticket-4"]["choices"][0]["finish_reason"] == "length"
    assert lines["ticket-4"]["usage"]["completion_tokens"] <= 3


@pytest.mark.slow
def test_embeddings_are_deterministic_unit_vectors(client: openai.OpenAI) -> None:
    def request(custom_id: str, text: Any, **extra: Any) -> dict[str, Any]:
        body = {"model": "text-embedding-3-small", "input": text, **extra}
        return {"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings", "body": body}

    lines = [
        request("a", "hello world"),
        request("b", ["hello world", "other"], dimensions=64),
        request("c", "hello world"),
    ]
    batch = wait(client, submit(client, lines, endpoint="/v1/embeddings").id)
    bodies = {line["custom_id"]: line["response"]["body"] for line in read_lines(client, batch.output_file_id)}
    assert bodies["a"]["object"] == "list" and bodies["a"]["model"] == "text-embedding-3-small"
    assert bodies["a"]["usage"]["prompt_tokens"] == bodies["a"]["usage"]["total_tokens"] > 0
    vector = bodies["a"]["data"][0]["embedding"]
    assert len(vector) == 1536 and math.isclose(math.hypot(*vector), 1.0, abs_tol=1e-5)
    assert [d["index"] for d in bodies["b"]["data"]] == [0, 1]
    assert all(len(d["embedding"]) == 64 for d in bodies["b"]["data"])
    assert bodies["c"]["data"][0]["embedding"] == vector


@pytest.mark.slow
def test_responses_endpoint_answers_with_structured_output(client: openai.OpenAI) -> None:
    body = {
        "model": "gpt-4.1-nano",
        "instructions": "Classify the ticket.",
        "input": "The parcel is late.",
        "text": {"format": {"type": "json_schema", "name": "triage", "schema": TRIAGE_SCHEMA, "strict": True}},
    }
    line = {"custom_id": "r1", "method": "POST", "url": "/v1/responses", "body": body}
    batch = wait(client, submit(client, [line], endpoint="/v1/responses").id)
    [result] = read_lines(client, batch.output_file_id)
    response = result["response"]["body"]
    assert response["object"] == "response" and response["status"] == "completed"
    assert response["id"].startswith("resp_")
    jsonschema.validate(json.loads(response["output"][0]["content"][0]["text"]), TRIAGE_SCHEMA)
    assert response["usage"]["total_tokens"] == response["usage"]["input_tokens"] + response["usage"]["output_tokens"]


@pytest.mark.slow
def test_same_request_gets_the_same_answer(tmp_path: Path) -> None:
    def answers(custom_prefix: str) -> dict[str, Any]:
        with running_emulator(tmp_path, **FAST) as emu, sdk(emu) as client:
            lines = [ticket(i) for i in range(5)]
            for line in lines:
                line["custom_id"] = custom_prefix + line["custom_id"]
            batch = wait(client, submit(client, lines).id)
            output = read_lines(client, batch.output_file_id)
        return {line["custom_id"].removeprefix(custom_prefix): content_of(line) for line in output}

    first, again_after_restart = answers("a-"), answers("b-")
    assert first == again_after_restart
    assert len(set(first.values())) > 1  # different requests, different answers


def test_schema_values_conform_to_varied_schemas() -> None:
    schema = {
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "minLength": 3, "maxLength": 8},
                    "qty": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9, "multipleOf": 3},
                    "when": {"type": "string", "format": "date-time"},
                },
                "required": ["sku", "qty"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 2, "maxItems": 4},
            "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
            "labels": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True, "minItems": 2},
            "ratio": {"type": ["number", "null"], "exclusiveMinimum": 0, "exclusiveMaximum": 0.5},
            "fixed": {"const": 7},
            "both": {"allOf": [{"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]}]},
        },
        "required": ["items", "note", "labels", "ratio", "fixed", "both"],
        "additionalProperties": False,
    }
    topic = Topic("Customer asks about a missing parcel")
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for seed in range(200):
        validator.validate(value_for_schema(schema, random.Random(seed), topic))


# --- per-item failures and output quirks ---------------------------------------------------------


@pytest.mark.slow
def test_item_errors_are_http_error_lines_in_the_error_file(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    emulator.configure(item_error_rate=0.5)
    bad_body = ticket(99)
    bad_body["body"]["messages"] = []
    bad_limit = ticket(98)
    bad_limit["body"]["max_tokens"] = "many"
    lines = [ticket(i) for i in range(30)] + [bad_body, bad_limit]
    batch = wait(client, submit(client, lines).id)
    assert batch.status == "completed"
    output, errors = read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)
    assert client.files.retrieve(batch.error_file_id).filename == f"{batch.id}_error.jsonl"
    assert {line["custom_id"] for line in output} | {line["custom_id"] for line in errors} == {
        line["custom_id"] for line in lines
    }
    assert batch.request_counts.model_dump() == {"total": 32, "completed": len(output), "failed": len(errors)}
    assert {line["response"]["status_code"] for line in errors} == {400, 429, 500}
    for line in errors:
        assert line["error"] is None and line["id"].startswith("batch_req_")
        assert set(line["response"]["body"]["error"]) == {"message", "type", "param", "code"}
    [empty] = [line for line in errors if line["custom_id"] == "ticket-99"]
    assert empty["response"]["body"]["error"]["code"] == "empty_array"
    [limit] = [line for line in errors if line["custom_id"] == "ticket-98"]
    assert limit["response"]["body"]["error"]["param"] == "max_tokens"
    rate_limited = next(line for line in errors if line["response"]["status_code"] == 429)
    assert rate_limited["response"]["body"]["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.slow
def test_output_is_not_in_input_order_unless_asked(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    lines = [ticket(i) for i in range(30)]
    shuffled = wait(client, submit(client, lines).id)
    order = [line["custom_id"] for line in read_lines(client, shuffled.output_file_id)]
    assert sorted(order) == sorted(line["custom_id"] for line in lines)
    assert order != [line["custom_id"] for line in lines]
    emulator.configure(shuffle_output=False)
    ordered = wait(client, submit(client, lines).id)
    assert [line["custom_id"] for line in read_lines(client, ordered.output_file_id)] == [
        line["custom_id"] for line in lines
    ]


@pytest.mark.slow
def test_content_filter_truncation_and_duplicate_lines(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    emulator.configure(content_filter_rate=0.3, truncate_rate=0.4, duplicate_output_lines=0.3)
    batch = wait(client, submit(client, [ticket(i) for i in range(40)]).id)
    lines = read_lines(client, batch.output_file_id)
    assert batch.request_counts.completed == 40 and len(lines) > 40
    assert len({line["custom_id"] for line in lines}) == 40
    reasons = {line["response"]["body"]["choices"][0]["finish_reason"] for line in lines}
    assert reasons == {"stop", "length", "content_filter"}
    for line in lines:
        choice = line["response"]["body"]["choices"][0]
        if choice["finish_reason"] == "content_filter":
            assert choice["message"]["content"] is None
        elif choice["finish_reason"] == "length":
            with pytest.raises(json.JSONDecodeError):
                json.loads(choice["message"]["content"])


# --- terminal states other than completed --------------------------------------------------------


@pytest.mark.slow
def test_expiry_keeps_finished_work_and_reports_the_rest(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    emulator.configure(seconds_per_request=0.02, completion_window_s=0.3)
    batch = wait(client, submit(client, [ticket(i) for i in range(40)]).id)
    assert batch.status == "expired" and batch.expired_at is not None and batch.completed_at is None
    output, errors = read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)
    assert 0 < len(output) < 40 and len(output) + len(errors) == 40
    assert batch.request_counts.model_dump() == {"total": 40, "completed": len(output), "failed": len(errors)}
    for line in errors:
        assert line["response"] is None
        assert line["error"] == {
            "code": "batch_expired",
            "message": "This request could not be executed before the completion window expired.",
        }


@pytest.mark.slow
def test_forced_expiry_applies_to_the_next_batch_only(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    emulator.configure(force_batch_status="expired")
    forced = wait(client, submit(client, [ticket(i) for i in range(10)]).id)
    normal = wait(client, submit(client, [ticket(i) for i in range(10)]).id)
    assert forced.status == "expired" and forced.request_counts.completed == 5
    assert normal.status == "completed"
    assert emulator.settings.force_batch_status is None


@pytest.mark.slow
def test_cancel_keeps_results_finished_before_the_cancel(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    emulator.configure(seconds_per_request=0.02, cancel_delay_s=0.1)
    created = submit(client, [ticket(i) for i in range(100)])
    running = wait(client, created.id, {"in_progress"})
    while running.request_counts.completed < 3:
        running = client.batches.retrieve(created.id)
    cancelling = client.batches.cancel(created.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    batch = wait(client, created.id)
    assert batch.status == "cancelled" and batch.cancelled_at >= batch.cancelling_at
    output, errors = read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)
    assert len(output) == batch.request_counts.completed >= 3 and len(output) + len(errors) == 100
    assert {line["error"]["code"] for line in errors} == {"batch_cancelled"}
    assert client.batches.cancel(created.id).status == "cancelled"  # idempotent
    done = wait(client, submit(client, [ticket(1)]).id)
    with pytest.raises(openai.BadRequestError):
        client.batches.cancel(done.id)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "code", "line"),
    [
        ("empty", "empty_file", None),
        ("bad_json", "invalid_json_line", 2),
        ("duplicate", "duplicate_custom_id", 2),
        ("url", "url_mismatch", 1),
        ("models", "model_mismatch", 2),
        ("no_body", "missing_required_parameter", 1),
        ("too_many", "too_many_tasks", None),
        ("forced", "token_limit_exceeded", None),
    ],
)
def test_batch_level_validation_failures(
    emulator: EmulatorHandle, client: openai.OpenAI, case: str, code: str, line: int | None
) -> None:
    good = [ticket(i) for i in range(3)]
    other_model = ticket(1)
    other_model["body"]["model"] = "gpt-4o"
    inputs: dict[str, bytes] = {
        "empty": b"\n",
        "bad_json": jsonl(good[:1]) + b"{not json\n",
        "duplicate": jsonl([good[0], good[0]]),
        "url": jsonl([ticket(0, url="/v1/embeddings")]),
        "models": jsonl([good[0], other_model]),
        "no_body": jsonl([{"custom_id": "x", "method": "POST", "url": "/v1/chat/completions"}]),
        "too_many": jsonl(good),
        "forced": jsonl(good),
    }
    if case == "too_many":
        emulator.configure(max_requests_per_batch=2)
    if case == "forced":
        emulator.configure(force_batch_status="failed")
    uploaded = client.files.create(file=("input.jsonl", inputs[case]), purpose="batch")
    created = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert created.status == "validating"
    batch = wait(client, created.id)
    assert batch.status == "failed" and batch.failed_at is not None and batch.in_progress_at is None
    assert batch.output_file_id is None and batch.error_file_id is None
    assert batch.request_counts.model_dump() == {"total": 0, "completed": 0, "failed": 0}
    first = batch.errors.data[0]
    assert (first.code, first.line) == (code, line) and first.message


@pytest.mark.slow
def test_enqueued_token_limit_counts_active_batches(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    emulator.configure(seconds_per_request=0.05, enqueued_token_limit=1000)
    first = submit(client, [ticket(i) for i in range(20)])  # ~35 prompt tokens each
    second = submit(client, [ticket(i) for i in range(20)])
    assert wait(client, second.id).errors.data[0].code == "token_limit_exceeded"
    client.batches.cancel(first.id)


# --- listing, errors, retries ---------------------------------------------------------------------


@pytest.mark.slow
def test_list_pagination_newest_first(client: openai.OpenAI) -> None:
    uploaded = client.files.create(file=("input.jsonl", jsonl([ticket(0)])), purpose="batch")
    created = [
        client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h").id
        for _ in range(7)
    ]
    page = client.batches.list(limit=3)
    assert [b.id for b in page.data] == created[::-1][:3] and page.has_more
    assert [b.id for b in client.batches.list(limit=3)] == created[::-1]  # the SDK follows `after`
    last = client.batches.list(limit=3, after=created[1])
    assert [b.id for b in last.data] == [created[0]] and not last.has_more
    assert [f.id for f in client.files.list(purpose="batch")] == [uploaded.id]


@pytest.mark.slow
def test_file_endpoints(client: openai.OpenAI) -> None:
    data = jsonl([ticket(0)])
    uploaded = client.files.create(
        file=("input.jsonl", data), purpose="batch", expires_after={"anchor": "created_at", "seconds": 3600}
    )
    assert uploaded.id.startswith("file-") and uploaded.bytes == len(data) and uploaded.status == "processed"
    assert uploaded.expires_at == uploaded.created_at + 3600
    assert client.files.content(uploaded.id).content == data
    assert client.files.delete(uploaded.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(uploaded.id)


@pytest.mark.slow
def test_http_errors_use_the_openai_error_body(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.batches.retrieve("batch_nope")
    assert missing.value.body["message"] == "No batch found with id 'batch_nope'."
    with pytest.raises(openai.BadRequestError) as wrong_format:
        client.files.create(file=("input.csv", b"a,b\n"), purpose="batch")
    assert wrong_format.value.body["message"] == "Invalid file format for Batch API. Must be .jsonl"
    uploaded = client.files.create(file=("input.jsonl", jsonl([ticket(0)])), purpose="batch")
    with pytest.raises(openai.BadRequestError) as bad_window:
        client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="48h")
    assert bad_window.value.body["param"] == "completion_window"
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-missing", endpoint="/v1/chat/completions", completion_window="24h")
    request = urllib.request.Request(f"{emulator.openai_base_url}/batches")
    with pytest.raises(urllib.error.HTTPError) as unauthorized:
        urllib.request.urlopen(request, timeout=5)
    assert unauthorized.value.code == 401
    assert set(json.loads(unauthorized.value.read())["error"]) == {"message", "type", "param", "code"}


@pytest.mark.slow
def test_injected_failures_are_retried_by_the_sdk(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    emulator.configure(fail_next_requests=1)
    assert client.batches.list().data == []  # the 429 was retried after retry-after-ms
    assert emulator.settings.fail_next_requests == 0
    emulator.configure(fail_next_requests=1, fail_status=503)
    with pytest.raises(openai.InternalServerError):
        client.with_options(max_retries=0).batches.list()
    emulator.configure(fail_next_requests=1, fail_status=429)
    with pytest.raises(openai.RateLimitError):
        client.with_options(max_retries=0).files.list()


@pytest.mark.slow
def test_settings_admin_endpoint(emulator: EmulatorHandle) -> None:
    url = f"{emulator.base_url}/_emulator/settings"
    change = urllib.request.Request(url, data=json.dumps({"item_error_rate": 0.25}).encode(), method="POST")
    with urllib.request.urlopen(change, timeout=5) as response:
        assert json.loads(response.read())["item_error_rate"] == 0.25
    with urllib.request.urlopen(url, timeout=5) as response:
        assert json.loads(response.read())["item_error_rate"] == 0.25
    assert emulator.settings.item_error_rate == 0.25
    unknown = urllib.request.Request(url, data=b'{"warp_speed": 9}', method="POST")
    with pytest.raises(urllib.error.HTTPError) as rejected:
        urllib.request.urlopen(unknown, timeout=5)
    assert rejected.value.code == 400


def test_cli_flags_override_the_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"item_error_rate": 0.1, "speed": 5}))
    started: dict[str, Any] = {}
    monkeypatch.setattr(server, "serve", lambda **kwargs: started.update(kwargs))
    server.main(["--port", "9999", "--state-dir", str(tmp_path), "--speed", "50", "--no-shuffle-output"])
    assert started["port"] == 9999 and started["state_dir"] == tmp_path
    assert started["settings"] == EmulatorSettings(item_error_rate=0.1, speed=50.0, shuffle_output=False)
    server.check_loopback("127.0.0.1")
    with pytest.raises(ValueError, match="loopback"):
        server.check_loopback("0.0.0.0")


# --- DashScope dialect, persistence ----------------------------------------------------------------


@pytest.mark.slow
def test_dashscope_prefix_uses_dashscope_ids(emulator: EmulatorHandle, client: openai.OpenAI) -> None:
    emulator.configure(item_error_rate=0.3)
    with openai.OpenAI(api_key="sk-ds", base_url=emulator.dashscope_base_url) as dashscope:
        lines = [ticket(i) for i in range(10)]
        for line in lines:
            line["body"]["model"] = "qwen-plus"
        uploaded = dashscope.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch")
        assert uploaded.id.startswith("file-batch-") and uploaded.expires_at is None
        created = dashscope.batches.create(
            input_file_id=uploaded.id,
            endpoint="/v1/chat/completions",
            completion_window="14d",
            metadata={"ds_name": "t"},
        )
        assert created.status == "validating" and created.expires_at is None
        batch = wait(dashscope, created.id)
        assert batch.status == "completed" and batch.expires_at == batch.created_at + 14 * 86_400
        assert batch.output_file_id.startswith("file-batch_output-")
        assert batch.error_file_id.startswith("file-batch_error-")
        for line in read_lines(dashscope, batch.output_file_id):
            assert UUID.match(line["id"]) and line["response"]["request_id"] == line["id"]
            body = line["response"]["body"]
            assert body["id"] == f"chatcmpl-{line['id']}" and "system_fingerprint" not in body
            assert body["usage"]["prompt_tokens_details"] == {"text_tokens": body["usage"]["prompt_tokens"]}
        test_line = {
            "custom_id": "t1",
            "method": "POST",
            "url": "/v1/chat/ds-test",
            "body": {"model": "batch-test-model", "messages": [{"role": "user", "content": "hi"}]},
        }
        test_batch = wait(dashscope, submit(dashscope, [test_line], endpoint="/v1/chat/ds-test").id)
        [result] = read_lines(dashscope, test_batch.output_file_id)
        assert result["response"]["body"]["choices"][0]["message"] == {"content": "This is a test result."}
        # The two providers do not see each other's objects.
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve(batch.id)
        with pytest.raises(openai.NotFoundError):
            dashscope.files.retrieve(client.files.create(file=("a.jsonl", jsonl([ticket(0)])), purpose="batch").id)


@pytest.mark.slow
def test_state_survives_a_restart(tmp_path: Path) -> None:
    slow = {**FAST, "seconds_per_request": 0.01}
    with running_emulator(tmp_path, **slow) as emu, sdk(emu) as client:
        finished = wait(client, submit(client, [ticket(i) for i in range(5)]).id)
        output = client.files.content(finished.output_file_id).content
        unfinished = submit(client, [ticket(i) for i in range(30)])
    with running_emulator(tmp_path, **slow) as emu, sdk(emu) as client:
        again = client.batches.retrieve(finished.id)
        assert again.model_dump() == finished.model_dump()
        assert client.files.content(finished.output_file_id).content == output
        assert wait(client, unfinished.id).status == "completed"
        assert {b.id for b in client.batches.list()} == {finished.id, unfinished.id}
