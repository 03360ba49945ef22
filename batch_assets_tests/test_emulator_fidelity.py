"""Real-service behaviours the emulator reproduces (issues #7 item 8 and #8), each through the
official SDK against `running_emulator(...)`. Conditions are forced with knobs, never timed."""

from __future__ import annotations

import importlib.util
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from batch_assets.emulator.testing import EmulatorHandle, running_emulator

from .conftest import WIRE_EMULATOR

pytestmark = pytest.mark.usefixtures("no_emulator_left_running")

# Every delay zero: a batch is terminal the moment it is created.
INSTANT = {**WIRE_EMULATOR, "queue_delay_s": 0, "seconds_per_request": 0, "finalize_delay_s": 0, "cancel_delay_s": 0}
GEMINI_MODEL = "gemini-2.5-flash"
# google-genai sends through httpx or its fork httpx2, whichever it finds; a dropped connection
# surfaces as that library's TransportError (RemoteProtocolError), not wrapped in an APIError.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError,)
if importlib.util.find_spec("httpx2") is not None:
    import httpx2

    TRANSPORT_ERRORS = (httpx.TransportError, httpx2.TransportError)


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with running_emulator(tmp_path / "emulator", **INSTANT) as emu:
        yield emu


# --- clients and inputs ---------------------------------------------------------------------------


def openai_client(emu: EmulatorHandle, base_url: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=base_url or emu.openai_base_url, max_retries=0)


def anthropic_client(emu: EmulatorHandle) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=emu.base_url, max_retries=0)


def gemini_client(emu: EmulatorHandle) -> genai.Client:
    # No retry_options: the SDK makes one attempt per call.
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=emu.base_url))


def chat_line(i: int, model: str = "gpt-4o-mini", **body: Any) -> dict[str, Any]:
    return {
        "custom_id": f"req-{i}",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": f"Ticket {i}: my parcel is late."}], **body},
    }


def jsonl(lines: list[Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def openai_batch(client: openai.OpenAI, lines: list[Any]) -> Any:
    uploaded = client.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch")
    return client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")


def openai_lines(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


def anthropic_request(i: int, **params: Any) -> dict[str, Any]:
    message = {"role": "user", "content": f"Ticket {i}: my parcel is late."}
    return {
        "custom_id": f"req-{i}",
        "params": {"model": "claude-sonnet-4-5", "max_tokens": 200, "messages": [message], **params},
    }


def gemini_request(i: int, **extra: Any) -> dict[str, Any]:
    return {"contents": [{"parts": [{"text": f"Ticket {i}: my parcel is late."}], "role": "user"}], **extra}


def gemini_file_batch(client: genai.Client, tmp_path: Path, lines: list[Any], model: str = GEMINI_MODEL) -> Any:
    path = tmp_path / "gemini-input.jsonl"
    path.write_bytes(jsonl(lines))
    uploaded = client.files.upload(file=path, config=types.UploadFileConfig(mime_type="jsonl"))
    return client.batches.create(model=model, src=uploaded.name)


def gemini_results(client: genai.Client, job: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in client.files.download(file=job.dest.file_name).decode().splitlines()]


# --- 1. never finished without results -------------------------------------------------------------


@pytest.mark.slow
def test_openai_and_dashscope_never_report_completed_without_files(emulator: EmulatorHandle) -> None:
    emulator.configure(item_error_rate=0.5)
    for base_url in (emulator.openai_base_url, emulator.dashscope_base_url):
        with openai_client(emulator, base_url) as client:
            created = openai_batch(client, [chat_line(i) for i in range(6)])
            assert created.status == "completed"
            assert created.output_file_id is not None and created.error_file_id is not None
            lines = openai_lines(client, created.output_file_id) + openai_lines(client, created.error_file_id)
            assert sorted(line["custom_id"] for line in lines) == [f"req-{i}" for i in range(6)]
            listed = next(b for b in client.batches.list() if b.id == created.id)
            assert listed.output_file_id == created.output_file_id


@pytest.mark.slow
def test_anthropic_never_reports_ended_without_results(emulator: EmulatorHandle) -> None:
    with anthropic_client(emulator) as client:
        created = client.messages.batches.create(requests=[anthropic_request(i) for i in range(3)])
        assert created.processing_status == "ended"
        assert created.results_url is not None
        assert created.request_counts.succeeded == 3
        assert len(list(client.messages.batches.results(created.id))) == 3


@pytest.mark.slow
def test_gemini_never_reports_succeeded_without_results(emulator: EmulatorHandle, tmp_path: Path) -> None:
    client = gemini_client(emulator)
    inline = client.batches.create(model=GEMINI_MODEL, src=[gemini_request(i) for i in range(3)])
    assert inline.state.value == "JOB_STATE_SUCCEEDED"
    assert inline.dest is not None and len(inline.dest.inlined_responses) == 3
    from_file = gemini_file_batch(client, tmp_path, [{"key": f"k{i}", "request": gemini_request(i)} for i in range(3)])
    assert from_file.state.value == "JOB_STATE_SUCCEEDED"
    assert [line["key"] for line in gemini_results(client, from_file)] == ["k0", "k1", "k2"]


# --- 3. calls that fail after the work was done ----------------------------------------------------


def _lose(path: str, mode: str = "lose", **rule: Any) -> dict[str, Any]:
    return {"after_processing_faults": [{"method": "POST", "path": path, "count": 1, "mode": mode, **rule}]}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["lose", "error"])
def test_openai_create_fails_after_the_batch_exists(emulator: EmulatorHandle, mode: str) -> None:
    with openai_client(emulator) as client:
        uploaded = client.files.create(file=("input.jsonl", jsonl([chat_line(0)])), purpose="batch")
        emulator.configure(**_lose(r"^/v1/batches$", mode, status=502))
        expected = openai.APIConnectionError if mode == "lose" else openai.InternalServerError
        with pytest.raises(expected) as raised:
            client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
        if mode == "error":
            assert raised.value.status_code == 502
        [batch] = client.batches.list().data
        assert batch.input_file_id == uploaded.id and batch.status == "completed"
        # The rule is used up: the next call answers normally.
        assert emulator.settings.after_processing_faults == []
        assert client.batches.retrieve(batch.id).id == batch.id


@pytest.mark.slow
def test_dashscope_create_fails_after_the_batch_exists(emulator: EmulatorHandle) -> None:
    with openai_client(emulator, emulator.dashscope_base_url) as client:
        uploaded = client.files.create(file=("input.jsonl", jsonl([chat_line(0, "qwen-plus")])), purpose="batch")
        emulator.configure(**_lose(r"^/compatible-mode/v1/batches$"))
        with pytest.raises(openai.APIConnectionError):
            client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
        assert [b.input_file_id for b in client.batches.list()] == [uploaded.id]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["lose", "error"])
def test_anthropic_create_fails_after_the_batch_exists(emulator: EmulatorHandle, mode: str) -> None:
    emulator.configure(**_lose(r"^/v1/messages/batches$", mode, status=500))
    with anthropic_client(emulator) as client:
        expected = anthropic.APIConnectionError if mode == "lose" else anthropic.InternalServerError
        with pytest.raises(expected):
            client.messages.batches.create(requests=[anthropic_request(0)])
        [batch] = client.messages.batches.list().data
        assert batch.request_counts.succeeded == 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["lose", "error"])
def test_gemini_create_fails_after_the_batch_exists(emulator: EmulatorHandle, mode: str, tmp_path: Path) -> None:
    client = gemini_client(emulator)
    emulator.configure(**_lose(r":batchGenerateContent$", mode))
    expected = TRANSPORT_ERRORS if mode == "lose" else (genai_errors.ServerError,)
    with pytest.raises(expected):
        client.batches.create(model=GEMINI_MODEL, src=[gemini_request(0)])
    [job] = list(client.batches.list())
    assert job.state.value == "JOB_STATE_SUCCEEDED"

    emulator.configure(**_lose(r":asyncBatchEmbedContent$", mode))
    with pytest.raises(expected), warnings.catch_warnings():
        warnings.simplefilter("ignore", genai_errors.ExperimentalWarning)
        client.batches.create_embeddings(
            model="gemini-embedding-001",
            src=types.EmbeddingsBatchJobSource(inlined_requests=types.EmbedContentBatch(contents=["a parcel is late"])),
        )
    assert len(list(client.batches.list())) == 2


@pytest.mark.slow
def test_after_processing_rules_match_method_path_and_count(emulator: EmulatorHandle) -> None:
    rule = {"method": "GET", "path": r"^/v1/batches/", "count": 2, "mode": "error", "status": 503}
    with openai_client(emulator) as client:
        created = openai_batch(client, [chat_line(0)])
        emulator.configure(after_processing_faults=[rule])
        client.batches.list()  # GET /v1/batches: the regex needs a trailing slash, so no match
        for _ in range(2):
            with pytest.raises(openai.InternalServerError):
                client.batches.retrieve(created.id)
        assert client.batches.retrieve(created.id).status == "completed"
    with pytest.raises(ValueError, match="mode"):
        emulator.configure(after_processing_faults=[{**rule, "mode": "explode"}])


# --- 2. item faults per (request id, occurrence) ---------------------------------------------------


def _openai_rounds(emu: EmulatorHandle) -> list[list[str]]:
    """Submit 12 requests, then resubmit the failed ones until none fail; the failed ids per round."""
    rounds = []
    pending = list(range(12))
    with openai_client(emu) as client:
        while pending:
            assert len(rounds) < 12, "resubmitted requests keep failing"
            batch = openai_batch(client, [chat_line(i) for i in pending])
            failed = sorted(line["custom_id"] for line in openai_lines(client, batch.error_file_id))
            rounds.append(failed)
            pending = [int(custom_id.removeprefix("req-")) for custom_id in failed]
    return rounds


@pytest.mark.slow
def test_item_faults_drawn_per_occurrence_let_a_resubmission_succeed(tmp_path: Path) -> None:
    knobs = {**INSTANT, "item_error_rate": 0.5, "item_faults_by_occurrence": True}
    with running_emulator(tmp_path / "one", **knobs) as emu:
        first = _openai_rounds(emu)
    with running_emulator(tmp_path / "two", **knobs) as emu:
        assert _openai_rounds(emu) == first  # deterministic across emulators
    assert first[0] and len(first) >= 2 and first[-1] == []
    assert all(set(later) <= set(earlier) for earlier, later in zip(first, first[1:], strict=False))

    # Without the knob, the same file gets the same draw whenever it is resubmitted.
    with running_emulator(tmp_path / "three", **{**knobs, "item_faults_by_occurrence": False}) as emu:
        with openai_client(emu) as client:
            lines = [chat_line(i) for i in range(12)]
            errors = [openai_lines(client, openai_batch(client, lines).error_file_id) for _ in range(2)]
            assert [line["custom_id"] for line in errors[0]] == [line["custom_id"] for line in errors[1]] != []


@pytest.mark.slow
def test_anthropic_item_faults_per_occurrence(tmp_path: Path) -> None:
    knobs = {**INSTANT, "item_error_rate": 0.5, "item_faults_by_occurrence": True}
    with running_emulator(tmp_path / "emulator", **knobs) as emu, anthropic_client(emu) as client:
        requests = [anthropic_request(i) for i in range(12)]
        outcomes = []
        for _ in range(2):  # the very same requests twice: occurrence 0, then occurrence 1
            batch = client.messages.batches.create(requests=requests)
            results = {line.custom_id: line.result.type for line in client.messages.batches.results(batch.id)}
            outcomes.append(results)
        assert outcomes[0] != outcomes[1]
        assert "errored" in outcomes[0].values()


# --- 4. enqueued-token limit per model --------------------------------------------------------------


@pytest.mark.slow
def test_enqueued_token_limit_per_model_counts_max_tokens_and_clears(emulator: EmulatorHandle) -> None:
    emulator.configure(enqueued_token_limit={"gpt-4o-mini": 2500})
    with openai_client(emulator) as client:
        emulator.configure(force_batch_status="stuck")  # stays in_progress until cancelled
        active = openai_batch(client, [chat_line(i, max_tokens=1000) for i in range(2)])
        assert active.status == "in_progress"

        refused = openai_batch(client, [chat_line(9, max_tokens=1000)])
        assert refused.status == "failed"
        [error] = refused.errors.data
        assert error.code == "token_limit_exceeded"
        assert error.message.startswith("Enqueued token limit reached for gpt-4o-mini in organization org-")
        assert "Limit: 2500 enqueued tokens. Please try again once some in_progress batches have been completed." in (
            error.message
        )
        # Input tokens alone fit: it is max_tokens that fills the limit.
        assert openai_batch(client, [chat_line(9)]).status == "completed"
        # Other models have no limit in the object form.
        assert openai_batch(client, [chat_line(9, "gpt-4.1", max_tokens=5000)]).status == "completed"

        client.batches.cancel(active.id)
        assert client.batches.retrieve(active.id).status == "cancelled"
        assert openai_batch(client, [chat_line(9, max_tokens=1000)]).status == "completed"

        # One int applies to every model.
        emulator.configure(enqueued_token_limit=100)
        assert openai_batch(client, [chat_line(9, "gpt-4.1", max_tokens=200)]).status == "failed"


# --- 5. Gemini errors as google.rpc.Status ---------------------------------------------------------


@pytest.mark.slow
def test_gemini_item_errors_are_rpc_statuses(emulator: EmulatorHandle) -> None:
    client = gemini_client(emulator)
    emulator.configure(item_error_rate=0.6)
    requests = [gemini_request(i) for i in range(30)] + [gemini_request(99, config={"max_output_tokens": 0})]
    job = client.batches.create(model=GEMINI_MODEL, src=requests)
    errors = [r.error for r in job.dest.inlined_responses if r.error is not None]
    assert {e.code for e in errors} == {3, 8, 13, 14}  # INVALID_ARGUMENT, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE
    assert "max_output_tokens" in job.dest.inlined_responses[-1].error.message
    raw = httpx.get(f"{emulator.base_url}/v1beta/{job.name}", headers={"x-goog-api-key": "k"}).json()
    raw_errors = [r["error"] for r in raw["response"]["inlinedResponses"]["inlinedResponses"] if "error" in r]
    assert all(set(e) == {"code", "message"} for e in raw_errors)

    emulator.configure(gemini_item_error_status_names=True)
    job = client.batches.create(model=GEMINI_MODEL, src=requests)
    raw = httpx.get(f"{emulator.base_url}/v1beta/{job.name}", headers={"x-goog-api-key": "k"}).json()
    named = {
        (r["error"]["code"], r["error"]["status"])
        for r in raw["response"]["inlinedResponses"]["inlinedResponses"]
        if "error" in r
    }
    assert (3, "INVALID_ARGUMENT") in named and (8, "RESOURCE_EXHAUSTED") in named


@pytest.mark.slow
def test_gemini_failed_batch_carries_an_rpc_status(emulator: EmulatorHandle) -> None:
    client = gemini_client(emulator)
    emulator.configure(enqueued_token_limit={GEMINI_MODEL: 5})
    job = client.batches.create(model=GEMINI_MODEL, src=[gemini_request(i) for i in range(3)])
    assert job.state.value == "JOB_STATE_FAILED"
    assert job.dest is None
    # google-genai maps no error from a Gemini Developer API operation (batches._BatchJob_from_mldev
    # reads only `metadata`), so the operation is read as it is sent.
    raw = httpx.get(f"{emulator.base_url}/v1beta/{job.name}", headers={"x-goog-api-key": "k"}).json()
    assert raw["done"] is True and "response" not in raw
    assert raw["error"]["code"] == 8 and "Enqueued token limit" in raw["error"]["message"]  # RESOURCE_EXHAUSTED
    assert set(raw["error"]) == {"code", "message"}


# --- 6. Gemini: succeeded before results, inlined responses out of order and without keys ------------


@pytest.mark.slow
def test_gemini_succeeded_before_results_appear(emulator: EmulatorHandle, tmp_path: Path) -> None:
    client = gemini_client(emulator)
    emulator.configure(succeeded_before_results_s=1e9)
    from_file = gemini_file_batch(client, tmp_path, [{"key": "k0", "request": gemini_request(0)}])
    inline = client.batches.create(model=GEMINI_MODEL, src=[gemini_request(0)])
    for job in (from_file, inline, client.batches.get(name=from_file.name)):
        assert job.state.value == "JOB_STATE_SUCCEEDED"
        assert job.dest is None
    # Read live: once the lag is over (here: lowered), the results are there.
    emulator.configure(succeeded_before_results_s=0)
    assert client.batches.get(name=from_file.name).dest.file_name is not None
    assert len(client.batches.get(name=inline.name).dest.inlined_responses) == 1


@pytest.mark.slow
def test_gemini_inlined_responses_shuffled_and_without_keys(emulator: EmulatorHandle) -> None:
    client = gemini_client(emulator)
    requests = [{**gemini_request(i), "metadata": {"key": f"k{i}"}} for i in range(20)]
    ordered = client.batches.create(model=GEMINI_MODEL, src=requests)
    assert [r.metadata["key"] for r in ordered.dest.inlined_responses] == [f"k{i}" for i in range(20)]

    emulator.configure(inline_responses_shuffled=True, inline_responses_drop_keys_rate=0.3)
    shuffled = client.batches.create(model=GEMINI_MODEL, src=requests)
    responses = shuffled.dest.inlined_responses
    keys = [(r.metadata or {}).get("key") for r in responses]
    assert None in keys and 0 < keys.count(None) < 20
    present = [k for k in keys if k is not None]
    assert len(set(present)) == len(present) and present != sorted(present, key=lambda k: int(k[1:]))
    # Each response still answers its own request (the text echoes the ticket number).
    by_key = {r.metadata["key"]: r for r in responses if r.metadata and "key" in r.metadata}
    first = {r.metadata["key"]: r for r in ordered.dest.inlined_responses}
    assert all(by_key[k].response.text == first[k].response.text for k in by_key)


# --- 7. Gemini usage of thinking models ------------------------------------------------------------


@pytest.mark.slow
def test_gemini_thinking_models_report_thoughts_apart(emulator: EmulatorHandle) -> None:
    client = gemini_client(emulator)
    plain = client.batches.create(model=GEMINI_MODEL, src=[gemini_request(0)])
    usage = plain.dest.inlined_responses[0].response.usage_metadata
    assert usage.thoughts_token_count is None and usage.cached_content_token_count is None  # the default

    emulator.configure(gemini_thinking_models=["gemini-2.5-*"], gemini_cached_token_fraction=0.5)
    no_budget = gemini_request(1, config={"thinking_config": {"thinking_budget": 0}})
    capped = gemini_request(2, config={"thinking_config": {"thinking_budget": 40}})
    for model in (GEMINI_MODEL, "gemini-2.0-flash-thinking-exp"):
        job = client.batches.create(model=model, src=[gemini_request(0), no_budget, capped])
        thinking, disabled, limited = (r.response.usage_metadata for r in job.dest.inlined_responses)
        assert thinking.thoughts_token_count > 0
        assert thinking.total_token_count == (
            thinking.prompt_token_count + thinking.candidates_token_count + thinking.thoughts_token_count
        )
        if model == GEMINI_MODEL:  # the same answer as without thinking: candidates count it alone
            assert thinking.candidates_token_count == usage.candidates_token_count
        assert thinking.cached_content_token_count == thinking.prompt_token_count // 2
        assert disabled.thoughts_token_count is None
        assert disabled.total_token_count == disabled.prompt_token_count + disabled.candidates_token_count
        assert 0 < limited.thoughts_token_count <= 40


# --- 8. Gemini: strict request files ----------------------------------------------------------------


def test_gemini_allowed_fields_come_from_the_sdk() -> None:
    from batch_assets.providers.gemini.emulator.fields import allowed_fields

    allowed = allowed_fields()
    assert {
        "contents",
        "systemInstruction",
        "generationConfig",
        "safetySettings",
        "tools",
        "toolConfig",
        "cachedContent",
    } <= allowed["generate"]
    assert {
        "temperature",
        "maxOutputTokens",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "thinkingConfig",
    } <= allowed["generationConfig"]
    assert {"content", "taskType", "title", "outputDimensionality"} <= allowed["embed"]
    assert "thinkingConfig" not in allowed["generate"]


@pytest.mark.slow
def test_gemini_request_file_with_a_misplaced_field_fails_the_batch(emulator: EmulatorHandle, tmp_path: Path) -> None:
    client = gemini_client(emulator)
    good = [
        {
            "key": "camel",
            "request": gemini_request(
                0,
                generationConfig={"thinkingConfig": {"thinkingBudget": 0}},
                systemInstruction={"parts": [{"text": "Be brief."}]},
            ),
        },
        {
            "key": "snake",
            "request": gemini_request(
                1,
                generation_config={"thinking_config": {"thinking_budget": 0}, "max_output_tokens": 50},
                system_instruction={"parts": [{"text": "Be brief."}]},
            ),
        },
    ]
    job = gemini_file_batch(client, tmp_path, good)
    assert job.state.value == "JOB_STATE_SUCCEEDED"

    for bad, name, where in [
        (gemini_request(2, thinking_config={"thinking_budget": 0}), "thinking_config", "'request'"),
        (gemini_request(2, generationConfig={"thinkingBudget": 0}), "thinkingBudget", "'request.generationConfig'"),
        (gemini_request(2, generation_config={"thinking_config": {"budget": 1}}), "budget", "thinking_config'"),
        (gemini_request(2, temperature=0.2), "temperature", "'request'"),
    ]:
        job = gemini_file_batch(client, tmp_path, [*good, {"key": "bad", "request": bad}])
        assert job.state.value == "JOB_STATE_FAILED" and job.dest is None
        raw = httpx.get(f"{emulator.base_url}/v1beta/{job.name}", headers={"x-goog-api-key": "k"}).json()
        assert raw["error"]["code"] == 3  # INVALID_ARGUMENT
        message = raw["error"]["message"]
        assert message.startswith("Line 3 of the input file") and f'Unknown name "{name}"' in message
        assert where in message

    embed_path = tmp_path / "embed.jsonl"
    embed_path.write_bytes(
        jsonl(
            [
                {
                    "key": "e",
                    "request": {
                        "content": {"parts": [{"text": "hi"}]},
                        "task_type": "RETRIEVAL_QUERY",
                        "dimensions": 8,
                    },
                }
            ]
        )
    )
    uploaded = client.files.upload(file=embed_path, config=types.UploadFileConfig(mime_type="jsonl"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", genai_errors.ExperimentalWarning)
        job = client.batches.create_embeddings(model="gemini-embedding-001", src={"file_name": uploaded.name})
    assert job.state.value == "JOB_STATE_FAILED"

    emulator.configure(gemini_strict_request_fields=False)
    job = gemini_file_batch(client, tmp_path, [{"key": "bad", "request": gemini_request(2, temperature=0.2)}])
    assert job.state.value == "JOB_STATE_SUCCEEDED"


# --- 9. Anthropic: the rarer stop reasons ----------------------------------------------------------


@pytest.mark.slow
def test_anthropic_rarer_stop_reasons(emulator: EmulatorHandle) -> None:
    with anthropic_client(emulator) as client:
        requests = [anthropic_request(i) for i in range(40)]
        batch = client.messages.batches.create(requests=requests)
        reasons = {line.result.message.stop_reason for line in client.messages.batches.results(batch.id)}
        assert reasons == {"end_turn"}  # the default

        emulator.configure(
            anthropic_context_window_exceeded_rate=0.25, anthropic_pause_turn_rate=0.25, anthropic_refusal_rate=0.25
        )
        batch = client.messages.batches.create(requests=requests)
        assert batch.request_counts.succeeded == 40
        messages = {line.custom_id: line.result.message for line in client.messages.batches.results(batch.id)}
        reasons = {m.stop_reason for m in messages.values()}
        assert reasons == {"end_turn", "model_context_window_exceeded", "pause_turn", "refusal"}
        for message in messages.values():
            if message.stop_reason == "refusal":
                assert message.stop_details is not None and message.stop_details.type == "refusal"
            else:
                assert message.content[0].text and message.usage.output_tokens >= 1


@pytest.mark.slow
def test_gemini_format_classifies_rpc_status_item_errors(emulator: EmulatorHandle, tmp_path: Path) -> None:
    """Real item errors are google.rpc.Status objects with gRPC codes: the Gemini wire format maps
    each code to its HTTP status and name, so RESOURCE_EXHAUSTED (8) is classed as capacity."""
    import duckdb

    from batch_assets.providers import registry

    client = gemini_client(emulator)
    emulator.configure(item_error_rate=0.6)
    job = gemini_file_batch(client, tmp_path, [{"key": f"k{i}", "request": gemini_request(i)} for i in range(30)])
    results_path = tmp_path / "results.jsonl"
    results_path.write_bytes(client.files.download(file=job.dest.file_name))
    fmt = registry.wire_format("gemini", "generateContent")
    columns = "{" + ", ".join(f"'{k}': '{v}'" for k, v in fmt.result_columns.items()) + "}"
    rows = (
        duckdb.connect()
        .execute(
            f"SELECT env.error ->> '$.code' AS code, {fmt.failure_class_sql} AS class FROM ("
            f"  SELECT status_code, {fmt._errors('env')}, env.error FROM ("
            f"    SELECT {fmt.envelope_sql('l')} FROM read_json(?, format='newline_delimited', columns={columns}) l"
            f"  ) env WHERE status_code IS DISTINCT FROM 200"
            f") env",
            [str(results_path)],
        )
        .fetchall()
    )
    classes = {int(code): cls for code, cls in rows}
    assert set(classes) == {3, 8, 13, 14}  # the emulator's part holds: only the classification fails
    assert classes == {3: "validation_error", 8: "rate_or_capacity_error", 13: "internal_error", 14: "internal_error"}


def _gemini_classes(tmp_path: Path, errors: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(status_code, error_code, error_message, class) of Gemini result lines carrying `errors`."""
    import duckdb

    from batch_assets.providers import registry

    path = tmp_path / "errors.jsonl"
    path.write_bytes(jsonl([{"key": f"k{i}", "error": e} for i, e in enumerate(errors)]))
    fmt = registry.wire_format("gemini", "generateContent")
    columns = "{" + ", ".join(f"'{k}': '{v}'" for k, v in fmt.result_columns.items()) + "}"
    return (
        duckdb.connect()
        .execute(
            f"SELECT status_code, error_code, error_message, {fmt.failure_class_sql} FROM ("
            f"  SELECT status_code, {fmt._errors('env')} FROM ("
            f"    SELECT {fmt.envelope_sql('l')} "
            f"    FROM read_json(?, format='newline_delimited', columns={columns}) l) env)",
            [str(path)],
        )
        .fetchall()
    )


def test_gemini_format_classifies_every_grpc_code_and_keeps_http_codes_and_names(tmp_path: Path) -> None:
    expected = {
        1: "provider_canceled",  # a line of a SUCCEEDED batch: the provider canceled that request (issue 43)
        2: "internal_error",
        3: "validation_error",
        4: "internal_error",
        5: "validation_error",
        7: "validation_error",
        8: "rate_or_capacity_error",
        9: "validation_error",
        13: "internal_error",
        14: "internal_error",
        16: "validation_error",
    }
    rows = _gemini_classes(tmp_path, [{"code": c, "message": f"m{c}"} for c in expected])
    assert [(code, cls) for (_, _, _, cls), code in zip(rows, expected, strict=True)] == list(expected.items())
    assert rows[6][:3] == (429, "RESOURCE_EXHAUSTED", "m8") and rows[0][:2] == (499, "CANCELLED")
    # An HTTP-style code, or a status name alone, still classifies.
    rows = _gemini_classes(
        tmp_path,
        [
            {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"},
            {"code": 400, "message": "bad"},
            {"status": "UNAVAILABLE", "message": "x"},
            {"code": 503, "message": "down"},
        ],
    )
    assert [(r[0], r[1], r[3]) for r in rows] == [
        (429, "RESOURCE_EXHAUSTED", "rate_or_capacity_error"),
        (400, "400", "validation_error"),
        (503, "UNAVAILABLE", "internal_error"),
        (503, "503", "internal_error"),
    ]


# --- structured knobs: settings file, CLI flags, admin endpoint -----------------------------------


@pytest.mark.slow
def test_structured_knobs_from_file_flags_and_admin_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from batch_assets.emulator import server
    from batch_assets.emulator.settings import EmulatorSettings

    rule = {"method": "POST", "path": "^/v1/batches$", "count": 1, "mode": "lose"}
    (tmp_path / "settings.json").write_text(json.dumps({"enqueued_token_limit": {"gpt-4o-mini": 10}}))
    started: dict[str, Any] = {}
    monkeypatch.setattr(server, "serve", lambda **kwargs: started.update(kwargs))
    server.main(
        [
            "--state-dir",
            str(tmp_path),
            "--after-processing-faults",
            json.dumps([rule]),
            "--gemini-thinking-models",
            '["gemini-2.5-*"]',
        ]
    )
    assert started["settings"] == EmulatorSettings(
        enqueued_token_limit={"gpt-4o-mini": 10},
        after_processing_faults=[rule],
        gemini_thinking_models=["gemini-2.5-*"],
    )
    for bad in (
        {"enqueued_token_limit": {"m": 0}},
        {"enqueued_token_limit": "many"},
        {"after_processing_faults": [{"path": "("}]},
        {"after_processing_faults": [{**rule, "count": 0}]},
        {"after_processing_faults": [{**rule, "status": 404}]},
        {"gemini_thinking_models": "gemini-*"},
    ):
        with pytest.raises(ValueError):
            EmulatorSettings().replace(**bad)

    with running_emulator(tmp_path / "emulator", **INSTANT) as emu:
        answer = httpx.post(f"{emu.base_url}/_emulator/settings", json={"after_processing_faults": [rule]})
        assert answer.status_code == 200 and answer.json()["after_processing_faults"] == [rule]
        assert httpx.post(f"{emu.base_url}/_emulator/settings", json={"enqueued_token_limit": []}).status_code == 400
