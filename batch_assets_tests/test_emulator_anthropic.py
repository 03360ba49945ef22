"""The local emulator's Anthropic Message Batches wire format, exercised through the real `anthropic` SDK."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anthropic
import jsonschema
import pytest
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse

from batch_assets.emulator.testing import EmulatorHandle, running_emulator

from .conftest import WIRE_EMULATOR as FAST

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

VERSION = {"anthropic-version": "2023-06-01"}
RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
TRIAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "shipping", "bug", "other"]},
        "reason": {"type": "string", "minLength": 5, "maxLength": 120},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 1, "maxItems": 3},
    },
    "required": ["category", "reason", "confidence", "tags"],
    "additionalProperties": False,
}


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_emulator_left_running: None) -> None:
    """No real credentials, profiles or custom headers reach the SDK; no emulator outlives a test."""
    for name in [n for n in os.environ if n.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    return FAST


def sdk(emulator: EmulatorHandle, max_retries: int = 2) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=emulator.base_url, max_retries=max_retries)


@pytest.fixture
def client(emulator: EmulatorHandle) -> Iterator[anthropic.Anthropic]:
    with sdk(emulator) as anthropic_client:
        yield anthropic_client


def ticket(i: int, *, schema: dict[str, Any] | None = TRIAGE_SCHEMA, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-haiku-4-5",
        "max_tokens": 512,
        "system": "You triage customer support tickets.",
        "messages": [{"role": "user", "content": f"Ticket {i}: my parcel never arrived and invoice {i} is unpaid."}],
    }
    if schema is not None:
        body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    body.update(params)
    return {"custom_id": f"ticket-{i}", "params": body}


def wait(client: anthropic.Anthropic, batch_id: str, timeout: float = 10.0) -> MessageBatch:
    deadline = time.monotonic() + timeout
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        assert time.monotonic() < deadline, f"batch still {batch.processing_status}"
        time.sleep(0.01)


def results(client: anthropic.Anthropic, batch_id: str) -> dict[str, Any]:
    """custom_id -> result, read through the SDK's own results() stream."""
    found = {}
    for line in client.messages.batches.results(batch_id):
        assert isinstance(line, MessageBatchIndividualResponse)
        found[line.custom_id] = line.result
    return found


def http(
    emulator: EmulatorHandle, method: str, path: str, headers: dict[str, str], body: Any = None
) -> tuple[int, dict[str, str], bytes]:
    """A raw request, for what the SDK hides: headers sent and received, exact bytes."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{emulator.base_url}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def raw_results(emulator: EmulatorHandle, batch: MessageBatch) -> tuple[dict[str, str], bytes]:
    url = batch.results_url
    assert url is not None and url.startswith(emulator.base_url)
    status, headers, data = http(emulator, "GET", url.removeprefix(emulator.base_url), {"x-api-key": "k", **VERSION})
    assert status == 200
    return headers, data


def strict_lines(data: bytes) -> list[MessageBatchIndividualResponse]:
    """Every line, validated (not merely constructed) against the SDK's result type; no blank lines."""
    assert data.endswith(b"\n")
    lines = data.decode().split("\n")[:-1]
    assert all(line.strip() for line in lines), "blank line in results"
    return [MessageBatchIndividualResponse.model_validate(json.loads(line)) for line in lines]


# --- lifecycle and answers ----------------------------------------------------------------------


def test_batch_runs_to_ended_with_schema_conforming_answers(tmp_path: Path) -> None:
    knobs = {**FAST, "queue_delay_s": 0.1, "seconds_per_request": 0.01, "finalize_delay_s": 0.1}
    with running_emulator(tmp_path, **knobs) as emu, sdk(emu) as client:
        created = client.messages.batches.create(requests=[ticket(i) for i in range(20)])
        assert created.id.startswith("msgbatch_01") and created.type == "message_batch"
        assert created.processing_status == "in_progress" and created.results_url is None
        assert created.ended_at is None and created.cancel_initiated_at is None and created.archived_at is None
        assert created.expires_at - created.created_at == timedelta(hours=24)
        assert created.request_counts.model_dump() == {
            "processing": 20,
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
        with pytest.raises(anthropic.AnthropicError, match="No `results_url`"):
            client.messages.batches.results(created.id)
        polls = []
        while (batch := client.messages.batches.retrieve(created.id)).processing_status != "ended":
            polls.append(batch)
            time.sleep(0.01)
        # Only `processing` is counted until the whole batch has ended.
        assert polls and all(p.request_counts.processing == 20 and p.results_url is None for p in polls)
        found = results(client, batch.id)
        headers, data = raw_results(emu, batch)
        _, _, raw_batch = http(emu, "GET", f"/v1/messages/batches/{batch.id}", {"x-api-key": "k", **VERSION})
    assert batch.request_counts.model_dump() == {
        "processing": 0,
        "succeeded": 20,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    assert batch.results_url == f"{emu.base_url}/v1/messages/batches/{batch.id}/results"
    assert created.created_at < batch.ended_at < batch.expires_at
    wire = json.loads(raw_batch)
    assert list(wire) == [
        "id",
        "type",
        "processing_status",
        "request_counts",
        "ended_at",
        "created_at",
        "expires_at",
        "archived_at",
        "cancel_initiated_at",
        "results_url",
    ]
    assert all(RFC3339_Z.match(wire[k]) for k in ("created_at", "ended_at", "expires_at"))
    assert headers["content-type"] == "application/binary"
    assert sorted(found) == sorted(f"ticket-{i}" for i in range(20))
    assert [line.custom_id for line in strict_lines(data)] != sorted(found, key=lambda c: int(c.split("-")[1]))
    for result in found.values():
        assert result.type == "succeeded"
        message = result.message
        assert message.id.startswith("msg_01") and message.role == "assistant" and message.type == "message"
        assert message.model == "claude-haiku-4-5" and message.stop_reason == "end_turn"
        assert message.stop_sequence is None and message.usage.service_tier == "batch"
        assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
        [block] = message.content
        answer = json.loads(block.text)
        jsonschema.validate(answer, TRIAGE_SCHEMA)
        assert re.search(r"ticket|parcel|never|arrived|invoice|unpaid", answer["reason"])


def test_plain_text_answers_follow_the_prompt(client: anthropic.Anthropic) -> None:
    text = "My parcel never arrived although the courier marked it delivered, and the refund is late."
    summary = ticket(
        1,
        schema=None,
        messages=[{"role": "user", "content": f"Summarize this support ticket in two sentences.\n\n{text}"}],
    )
    in_system = ticket(
        2,
        schema=None,
        system=[{"type": "text", "text": "Answer in one sentence."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
    )
    capped = ticket(3, schema=None, max_tokens=3)
    stopped = ticket(4, schema=None, stop_sequences=[" "])
    same_as_summary = {**summary, "custom_id": "again"}
    batch = wait(
        client, client.messages.batches.create(requests=[summary, in_system, capped, stopped, same_as_summary]).id
    )
    found = {custom_id: result.message for custom_id, result in results(client, batch.id).items()}
    two = found["ticket-1"].content[0].text
    assert len(re.findall(r"[.!?](?:\s|$)", two)) == 2
    assert re.search(r"parcel|courier|delivered|refund|arrived", two)
    assert len(re.findall(r"[.!?](?:\s|$)", found["ticket-2"].content[0].text)) == 1
    assert found["again"].content == found["ticket-1"].content  # same params, same answer
    assert found["ticket-3"].stop_reason == "max_tokens" and found["ticket-3"].usage.output_tokens <= 3
    assert found["ticket-4"].stop_reason == "stop_sequence" and found["ticket-4"].stop_sequence == " "
    assert " " not in found["ticket-4"].content[0].text


# --- per-request failures and output quirks -------------------------------------------------------


def test_errored_refusal_and_max_tokens_results(emulator: EmulatorHandle, client: anthropic.Anthropic) -> None:
    emulator.configure(item_error_rate=0.3, content_filter_rate=0.3, truncate_rate=0.4)
    system_role = ticket(99, messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    requests = [ticket(i) for i in range(40)] + [system_role]
    batch = wait(client, client.messages.batches.create(requests=requests).id)
    found = results(client, batch.id)
    strict_lines(raw_results(emulator, batch)[1])
    errored = {c: r for c, r in found.items() if r.type == "errored"}
    succeeded = {c: r.message for c, r in found.items() if r.type == "succeeded"}
    assert len(errored) + len(succeeded) == 41
    assert batch.request_counts.model_dump() == {
        "processing": 0,
        "succeeded": len(succeeded),
        "errored": len(errored),
        "canceled": 0,
        "expired": 0,
    }
    kinds = {r.error.error.type for r in errored.values()}
    assert {"rate_limit_error", "invalid_request_error"} <= kinds and kinds & {"api_error", "overloaded_error"}
    for result in errored.values():
        assert result.error.type == "error" and result.error.request_id.startswith("req_")
    assert errored["ticket-99"].error.error.type == "invalid_request_error"
    assert 'Unexpected role "system"' in errored["ticket-99"].error.error.message
    reasons = {m.stop_reason for m in succeeded.values()}
    assert reasons == {"end_turn", "refusal", "max_tokens"}
    for message in succeeded.values():
        if message.stop_reason == "refusal":
            assert message.content[0].text and message.stop_details.type == "refusal"
        elif message.stop_reason == "max_tokens":
            with pytest.raises(json.JSONDecodeError):
                json.loads(message.content[0].text)
        else:
            jsonschema.validate(json.loads(message.content[0].text), TRIAGE_SCHEMA)


def test_order_and_duplicate_lines(emulator: EmulatorHandle, client: anthropic.Anthropic) -> None:
    requests = [ticket(i) for i in range(30)]
    emulator.configure(shuffle_output=False, duplicate_output_lines=0.3)
    batch = wait(client, client.messages.batches.create(requests=requests).id)
    ids = [line.custom_id for line in client.messages.batches.results(batch.id)]
    assert ids[:30] == [r["custom_id"] for r in requests] and len(ids) > 30
    assert set(ids[30:]) <= set(ids[:30]) and batch.request_counts.succeeded == 30


# --- cancel, expiry, forced states ---------------------------------------------------------------


def test_cancel_ends_with_canceled_results(emulator: EmulatorHandle, client: anthropic.Anthropic) -> None:
    emulator.configure(seconds_per_request=0.02, cancel_delay_s=0.2)
    created = client.messages.batches.create(requests=[ticket(i) for i in range(100)])
    time.sleep(0.15)  # a few requests finish
    canceling = client.messages.batches.cancel(created.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at is not None
    assert canceling.request_counts.processing == 100 and canceling.results_url is None
    again = client.messages.batches.cancel(created.id)  # idempotent while canceling
    assert again.cancel_initiated_at == canceling.cancel_initiated_at
    batch = wait(client, created.id)
    counts = batch.request_counts
    assert counts.processing == 0 and counts.succeeded > 0 and counts.canceled > 0
    assert counts.succeeded + counts.canceled == 100 and batch.ended_at > batch.cancel_initiated_at
    found = results(client, batch.id)
    assert sum(r.type == "canceled" for r in found.values()) == counts.canceled
    _, data = raw_results(emulator, batch)
    canceled_line = next(json.loads(line) for line in data.splitlines() if b'"canceled"' in line)
    assert canceled_line["result"] == {"type": "canceled"}
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.cancel(batch.id)  # already ended


def test_expiry_and_forced_states(emulator: EmulatorHandle, client: anthropic.Anthropic) -> None:
    emulator.configure(seconds_per_request=0.02, completion_window_s=0.3)
    batch = wait(client, client.messages.batches.create(requests=[ticket(i) for i in range(40)]).id)
    counts = batch.request_counts
    assert 0 < counts.succeeded < 40 and counts.succeeded + counts.expired == 40
    assert batch.ended_at == batch.expires_at and batch.cancel_initiated_at is None
    assert sum(r.type == "expired" for r in results(client, batch.id).values()) == counts.expired

    emulator.configure(seconds_per_request=0.001, completion_window_s=None, force_batch_status="expired")
    forced = wait(client, client.messages.batches.create(requests=[ticket(i) for i in range(10)]).id)
    assert (forced.request_counts.succeeded, forced.request_counts.expired) == (5, 5)

    emulator.configure(force_batch_status="failed")  # no batch-level failure: every request errors
    failed = wait(client, client.messages.batches.create(requests=[ticket(i) for i in range(4)]).id)
    assert failed.request_counts.errored == 4
    assert {r.error.error.type for r in results(client, failed.id).values()} <= {"api_error", "overloaded_error"}

    emulator.configure(force_batch_status="stuck")
    stuck = client.messages.batches.create(requests=[ticket(i) for i in range(3)])
    time.sleep(0.1)
    assert client.messages.batches.retrieve(stuck.id).processing_status == "in_progress"
    client.messages.batches.cancel(stuck.id)
    assert wait(client, stuck.id).request_counts.canceled == 3
    assert emulator.settings.force_batch_status is None


def test_delete_only_once_ended(emulator: EmulatorHandle, client: anthropic.Anthropic) -> None:
    emulator.configure(seconds_per_request=0.05)
    running = client.messages.batches.create(requests=[ticket(i) for i in range(100)])
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.batches.delete(running.id)
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    client.messages.batches.cancel(running.id)
    wait(client, running.id)
    deleted = client.messages.batches.delete(running.id)
    assert (deleted.id, deleted.type) == (running.id, "message_batch_deleted")
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(running.id)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.delete(running.id)


# --- listing, validation, errors, retries ---------------------------------------------------------


def test_list_pagination_newest_first(client: anthropic.Anthropic) -> None:
    created = [client.messages.batches.create(requests=[ticket(0)]).id for _ in range(7)]
    newest_first = created[::-1]
    page = client.messages.batches.list(limit=3)
    assert [b.id for b in page.data] == newest_first[:3] and page.has_more
    assert (page.first_id, page.last_id) == (newest_first[0], newest_first[2])
    assert [b.id for b in client.messages.batches.list(limit=3)] == newest_first  # SDK follows after_id
    tail = client.messages.batches.list(limit=3, after_id=newest_first[5])
    assert [b.id for b in tail.data] == newest_first[6:] and not tail.has_more
    before = client.messages.batches.list(limit=2, before_id=newest_first[4])
    assert [b.id for b in before.data] == newest_first[2:4] and before.has_more
    # Paging backwards, the SDK follows before_id=first_id: page by page towards the newest.
    backwards = [b.id for b in client.messages.batches.list(limit=2, before_id=newest_first[4])]
    assert backwards == newest_first[2:4] + newest_first[0:2]
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.list(limit=1001)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"custom_id": "x" * 65}, "requests.1.custom_id: String should have at most 64 characters"),
        ({"custom_id": "ticket:1"}, "requests.1.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"),
        ({"custom_id": "ticket-0"}, "requests.1.custom_id: Duplicate custom_id 'ticket-0'"),
        (
            {"params": {"model": "m", "max_tokens": 0, "messages": []}},
            "requests.1.params.max_tokens: Input should be greater than or equal to 1",
        ),
        ({"params": {"model": "m", "messages": []}}, "requests.1.params.max_tokens: Field required"),
    ],
)
def test_create_rejects_bad_requests_synchronously(
    client: anthropic.Anthropic, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as rejected:
        client.messages.batches.create(requests=[ticket(0), {**ticket(1), **change}])
    body = rejected.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith(message)
    assert body["request_id"] == rejected.value.request_id and body["request_id"].startswith("req_")
    assert client.messages.batches.list().data == []  # nothing was created


def test_request_limits(emulator: EmulatorHandle, client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="at least 1 item"):
        client.messages.batches.create(requests=[])
    emulator.configure(max_requests_per_batch=2)
    with pytest.raises(anthropic.BadRequestError, match="at most 2 items"):
        client.messages.batches.create(requests=[ticket(i) for i in range(3)])


def test_not_found_auth_and_headers(emulator: EmulatorHandle, client: anthropic.Anthropic) -> None:
    emulator.configure(queue_delay_s=3600)  # the batch below must still be running when its results are asked for
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.batches.retrieve("msgbatch_01nope")
    assert missing.value.body["error"]["type"] == "not_found_error"
    assert set(missing.value.body) == {"type", "error", "request_id"}
    path = "/v1/messages/batches"
    status, _, body = http(emulator, "GET", path, VERSION)
    assert status == 401 and json.loads(body)["error"]["type"] == "authentication_error"
    status, _, body = http(emulator, "GET", path, {"x-api-key": "k"})
    assert status == 400 and "anthropic-version" in json.loads(body)["error"]["message"]
    status, headers, body = http(emulator, "POST", path, {"x-api-key": "k", **VERSION}, {"requests": [ticket(0)]})
    assert status == 200 and headers["request-id"].startswith("req_")
    created = json.loads(body)
    status, _, body = http(emulator, "GET", f"{path}/{created['id']}", {"authorization": "Bearer k", **VERSION})
    assert status == 200 and json.loads(body)["id"] == created["id"]
    status, _, body = http(emulator, "GET", f"{path}/{created['id']}/results", {"x-api-key": "k", **VERSION})
    assert status == 404 and json.loads(body)["error"]["type"] == "not_found_error"  # not ended yet


def test_injected_429_is_retried_by_the_sdk(emulator: EmulatorHandle, client: anthropic.Anthropic) -> None:
    emulator.configure(fail_next_requests=2)
    assert client.messages.batches.list().data == []  # two 429s, retried
    assert emulator.settings.fail_next_requests == 0
    emulator.configure(fail_next_requests=1)
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.with_options(max_retries=0).messages.batches.list()
    assert limited.value.body["error"]["type"] == "rate_limit_error"
    assert limited.value.response.headers["retry-after"] == "1"
    emulator.configure(fail_next_requests=1, fail_status=529)
    with pytest.raises(anthropic.InternalServerError) as overloaded:
        client.with_options(max_retries=0).messages.batches.list()
    assert overloaded.value.status_code == 529 and overloaded.value.body["error"]["type"] == "overloaded_error"


def test_state_survives_a_restart(tmp_path: Path) -> None:
    slow = {**FAST, "seconds_per_request": 0.01}
    with running_emulator(tmp_path, **slow) as emu, sdk(emu) as client:
        finished = wait(client, client.messages.batches.create(requests=[ticket(i) for i in range(5)]).id)
        data = raw_results(emu, finished)[1]
        unfinished = client.messages.batches.create(requests=[ticket(i) for i in range(30)])
    with running_emulator(tmp_path, **slow) as emu, sdk(emu) as client:
        again = client.messages.batches.retrieve(finished.id)
        assert again.model_dump(exclude={"results_url"}) == finished.model_dump(exclude={"results_url"})
        assert again.results_url == f"{emu.base_url}/v1/messages/batches/{finished.id}/results"  # the new port
        assert raw_results(emu, again)[1] == data
        assert wait(client, unfinished.id).request_counts.succeeded == 30
        assert [b.id for b in client.messages.batches.list()] == [unfinished.id, finished.id]
