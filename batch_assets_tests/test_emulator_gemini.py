"""The local emulator's Gemini Batch wire format, exercised through the real `google-genai` SDK over HTTP."""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import urllib.error
import urllib.request
import warnings
from base64 import b64encode
from pathlib import Path
from typing import Any, Literal

import jsonschema
import openai
import pydantic
import pytest
from google import genai
from google.genai import errors, types

from batch_assets.emulator.testing import EmulatorHandle, running_emulator

from .conftest import WIRE_EMULATOR as FAST

pytestmark = [pytest.mark.usefixtures("no_emulator_left_running"), pytest.mark.slow]  # starts the emulator
DONE = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}
MODEL, EMBEDDING_MODEL = "gemini-2.5-flash", "gemini-embedding-001"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "shipping", "bug", "other"]},
        "reason": {"type": "string", "minLength": 5, "maxLength": 120},
        "priority": {"type": "integer", "minimum": 1, "maximum": 5},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    },
    "required": ["category", "reason", "priority", "tags"],
    "additionalProperties": False,
}


class Triage(pydantic.BaseModel):
    category: Literal["billing", "shipping", "bug", "other"]
    priority: int
    summary: str
    note: str | None = None


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    return FAST


def sdk(emulator: EmulatorHandle, **options: Any) -> genai.Client:
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=emulator.base_url, **options))


@pytest.fixture
def client(emulator: EmulatorHandle) -> genai.Client:
    return sdk(emulator)


def ticket(i: int, **generation_config: Any) -> dict[str, Any]:
    """An input-file line, spelled as the Gemini docs spell them (snake_case config)."""
    config = {"response_mime_type": "application/json", "response_json_schema": SCHEMA, **generation_config}
    text = f"Ticket {i}: my parcel never arrived and the refund for invoice {i} is late."
    return {"key": f"ticket-{i}", "request": {"contents": [{"parts": [{"text": text}]}], "generation_config": config}}


def upload(client: genai.Client, tmp_path: Path, lines: list[Any], name: str = "input.jsonl") -> types.File:
    path = tmp_path / name
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return client.files.upload(file=path, config=types.UploadFileConfig(display_name=name, mime_type="jsonl"))


def submit(client: genai.Client, tmp_path: Path, lines: list[Any], **config: Any) -> types.BatchJob:
    uploaded = upload(client, tmp_path, lines)
    return client.batches.create(model=MODEL, src=uploaded.name, config={"display_name": "triage", **config})


def create_embeddings(client: genai.Client, **kwargs: Any) -> types.BatchJob:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ExperimentalWarning)  # the SDK marks create_embeddings experimental
        return client.batches.create_embeddings(model=EMBEDDING_MODEL, **kwargs)


def wait(client: genai.Client, name: str, states: set[str] = DONE, timeout: float = 10.0) -> types.BatchJob:
    deadline = time.monotonic() + timeout
    while True:
        job = client.batches.get(name=name)
        if job.state.value in states:
            return job
        assert time.monotonic() < deadline, f"batch stuck in {job.state}"
        time.sleep(0.01)


def results(client: genai.Client, job: types.BatchJob) -> list[dict[str, Any]]:
    return [json.loads(line) for line in client.files.download(file=job.dest.file_name).decode().splitlines()]


def raw(
    emulator: EmulatorHandle,
    method: str,
    path_or_url: str,
    *,
    key: str | None = "k",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP call; returns status, lower-cased headers and body, errors included."""
    url = path_or_url if path_or_url.startswith("http") else emulator.base_url + path_or_url
    all_headers = {**({"x-goog-api-key": key} if key else {}), **(headers or {})}
    request = urllib.request.Request(url, data=body, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def operation(emulator: EmulatorHandle, name: str, version: str = "v1") -> dict[str, Any]:
    status, _, body = raw(emulator, "GET", f"/{version}/{name}")
    assert status == 200, body
    return json.loads(body)


def text_of(response: dict[str, Any]) -> str:
    return response["candidates"][0]["content"]["parts"][0]["text"]


# --- lifecycle and answers ------------------------------------------------------------------------


def test_file_batch_runs_pending_running_succeeded_and_answers_conform(tmp_path: Path) -> None:
    knobs = {**FAST, "queue_delay_s": 0.2, "seconds_per_request": 0.02}
    with running_emulator(tmp_path / "emulator", **knobs) as emu:
        client = sdk(emu)
        created = submit(client, tmp_path, [ticket(i) for i in range(12)])
        assert created.state == types.JobState.JOB_STATE_PENDING and not created.done
        assert created.name.startswith("batches/") and created.display_name == "triage"
        assert created.model == f"models/{MODEL}" and created.dest is None
        pending = operation(emu, created.name)["metadata"]
        assert pending["batchStats"] == {"requestCount": "12", "pendingRequestCount": "12"}
        seen = [created.state.value]
        while seen[-1] not in DONE:
            job = client.batches.get(name=created.name)
            if job.state.value != seen[-1]:
                seen.append(job.state.value)
            time.sleep(0.005)
        lines = results(client, job)
        output = client.files.get(name=job.dest.file_name)
        done = operation(emu, created.name, "v1beta")
        status, _, documented = raw(emu, "GET", f"/download/v1beta/{job.dest.file_name}:download?alt=media")
        downloaded = client.files.download(file=job.dest.file_name)
    assert seen == ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]
    assert job.done and job.create_time <= job.update_time == job.end_time
    assert job.dest.file_name == f"files/batch-{job.name.removeprefix('batches/')}"
    assert output.source == types.FileSource.GENERATED and output.download_uri.startswith(emu.base_url)
    assert status == 200 and documented == downloaded
    metadata = done["metadata"]
    assert metadata["@type"].endswith(".GenerateContentBatch") and metadata["state"] == "BATCH_STATE_SUCCEEDED"
    assert metadata["batchStats"] == {"requestCount": "12", "successfulRequestCount": "12"}
    assert metadata["inputConfig"]["fileName"].startswith("files/") and "endTime" in metadata
    assert done["done"] is True and done["response"]["responsesFile"] == metadata["output"]["responsesFile"]
    # Results come back in input order, whatever the OpenAI-style shuffle_output knob says.
    assert [line["key"] for line in lines] == [f"ticket-{i}" for i in range(12)]
    for line in lines:
        assert set(line) == {"key", "response"}
        response = line["response"]
        assert set(response) == {"candidates", "usageMetadata", "modelVersion", "responseId"}
        assert response["modelVersion"] == MODEL and response["candidates"][0]["finishReason"] == "STOP"
        usage = response["usageMetadata"]
        assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
        answer = json.loads(text_of(response))
        jsonschema.validate(answer, SCHEMA)
        assert re.search(r"ticket|parcel|never|arrived|refund|invoice|late", answer["reason"])


def test_inline_batch_on_v1beta_returns_inlined_responses_in_order(emulator: EmulatorHandle) -> None:
    client = sdk(emulator, api_version="v1beta")
    requests: list[Any] = [
        {
            "contents": f"Ticket {i}: the invoice was charged twice.",
            "config": {
                "system_instruction": "Classify the ticket.",
                "response_mime_type": "application/json",
                "response_schema": Triage,  # sent as Gemini's OpenAPI-style responseSchema
            },
            "metadata": {"key": f"k{i}"},
        }
        for i in range(3)
    ]
    requests.append({"contents": "Summarize the refund policy in two sentences."})  # no metadata, no schema
    requests.append(
        types.InlinedRequest(
            contents="Describe the bug.",
            config=types.GenerateContentConfig(max_output_tokens=3, candidate_count=2),
            metadata={"key": "capped"},
        )
    )
    job = wait(client, client.batches.create(model=MODEL, src=requests).name)
    assert job.state == types.JobState.JOB_STATE_SUCCEEDED and job.dest.file_name is None
    inlined = job.dest.inlined_responses
    assert [r.metadata for r in inlined] == [{"key": "k0"}, {"key": "k1"}, {"key": "k2"}, None, {"key": "capped"}]
    for answer in inlined[:3]:
        Triage.model_validate_json(answer.response.text)
        assert answer.response.candidates[0].finish_reason == types.FinishReason.STOP
    assert inlined[3].response.text.count(".") == 2  # "in two sentences" is honoured
    capped = inlined[4].response
    assert len(capped.candidates) == 2
    assert {c.finish_reason for c in capped.candidates} == {types.FinishReason.MAX_TOKENS}
    assert capped.usage_metadata.candidates_token_count <= 6
    raw_op = operation(emulator, job.name, "v1beta")
    assert "inputConfig" not in raw_op["metadata"]
    assert raw_op["response"]["inlinedResponses"] == raw_op["metadata"]["output"]["inlinedResponses"]


def test_embedding_batches_give_unit_vectors_of_the_requested_size(
    emulator: EmulatorHandle, client: genai.Client, tmp_path: Path
) -> None:
    def line(key: str, text: str, **extra: Any) -> dict[str, Any]:
        return {"key": key, "request": {"content": {"parts": [{"text": text}]}, **extra}}

    lines = [
        line("a", "hello world", output_dimensionality=64),
        line("b", "hello world", outputDimensionality=64, taskType="RETRIEVAL_QUERY"),
        line("c", "hello world"),
        line("d", "hello world", output_dimensionality=64),
        line("bad", "hello world", output_dimensionality=5000),
    ]
    uploaded = upload(client, tmp_path, lines, "embed.jsonl")
    from_file = wait(client, create_embeddings(client, src={"file_name": uploaded.name}).name)
    inline = create_embeddings(
        client,
        src={"inlined_requests": {"contents": ["hello world", "other text"], "config": {"output_dimensionality": 64}}},
        config={"display_name": "inline-embeddings"},
    )
    assert inline.display_name == "inline-embeddings"
    inline = wait(client, inline.name)
    assert from_file.state == inline.state == types.JobState.JOB_STATE_SUCCEEDED
    by_key = {row["key"]: row for row in results(client, from_file)}
    vectors = {key: row["response"]["embedding"]["values"] for key, row in by_key.items() if "response" in row}
    assert {len(v) for k, v in vectors.items() if k != "c"} == {64} and len(vectors["c"]) == 3072
    for vector in vectors.values():
        assert math.isclose(math.hypot(*vector), 1.0, abs_tol=1e-5)
    assert vectors["a"] == vectors["d"] != vectors["b"]  # deterministic; the task type matters
    assert int(by_key["a"]["response"]["tokenCount"]) > 0
    bad = by_key["bad"]["error"]
    assert bad["code"] == 3 and "status" not in bad and "output_dimensionality" in bad["message"]  # INVALID_ARGUMENT
    embedded = inline.dest.inlined_embed_content_responses
    assert [len(r.response.embedding.values) for r in embedded] == [64, 64]
    assert embedded[0].response.embedding.values == vectors["a"]
    assert operation(emulator, inline.name)["metadata"]["@type"].endswith(".EmbedContentBatch")


# --- per-item outcomes ------------------------------------------------------------------------------


def test_item_errors_safety_blocks_and_truncation(
    emulator: EmulatorHandle, client: genai.Client, tmp_path: Path
) -> None:
    emulator.configure(item_error_rate=0.4, content_filter_rate=0.2, truncate_rate=0.3)
    empty = {"key": "empty", "request": {"contents": []}}
    bad_tokens = ticket(99, max_output_tokens=0)
    lines = [ticket(i) for i in range(40)] + [empty, bad_tokens]
    job = wait(client, submit(client, tmp_path, lines).name)
    assert job.state == types.JobState.JOB_STATE_SUCCEEDED
    output = results(client, job)
    assert [line["key"] for line in output] == [line["key"] for line in lines]
    errors_ = [line for line in output if "error" in line]
    # google.rpc.Status objects: gRPC codes RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE, INVALID_ARGUMENT.
    assert {e["error"]["code"] for e in errors_} == {8, 13, 14, 3}
    assert all(set(e["error"]) == {"code", "message"} for e in errors_)
    by_key = {line["key"]: line for line in output}
    assert "contents is not specified" in by_key["empty"]["error"]["message"]
    assert "max_output_tokens" in by_key["ticket-99"]["error"]["message"]
    reasons = {line["response"]["candidates"][0]["finishReason"] for line in output if "response" in line}
    assert reasons == {"STOP", "MAX_TOKENS", "SAFETY"}
    for line in output:
        if "response" not in line:
            continue
        candidate = line["response"]["candidates"][0]
        if candidate["finishReason"] == "SAFETY":
            assert "content" not in candidate and any(r.get("blocked") for r in candidate["safetyRatings"])
        elif candidate["finishReason"] == "MAX_TOKENS":
            with pytest.raises(json.JSONDecodeError):
                json.loads(candidate["content"]["parts"][0]["text"])
    stats = operation(emulator, job.name)["metadata"]["batchStats"]
    assert stats == {
        "requestCount": str(len(lines)),
        "successfulRequestCount": str(len(lines) - len(errors_)),
        "failedRequestCount": str(len(errors_)),
    }


# --- terminal states other than succeeded ------------------------------------------------------------


def test_cancel_ends_cancelled_without_results(emulator: EmulatorHandle, client: genai.Client, tmp_path: Path) -> None:
    emulator.configure(seconds_per_request=0.05, cancel_delay_s=0.3)
    created = submit(client, tmp_path, [ticket(i) for i in range(60)])
    wait(client, created.name, {"JOB_STATE_RUNNING"})
    client.batches.cancel(name=created.name)
    assert client.batches.get(name=created.name).state == types.JobState.JOB_STATE_RUNNING  # cancel in flight
    job = wait(client, created.name)
    assert job.state == types.JobState.JOB_STATE_CANCELLED and job.done and job.dest is None
    stats = operation(emulator, created.name)["metadata"]["batchStats"]
    assert stats["requestCount"] == "60" and int(stats["pendingRequestCount"]) > 0
    client.batches.cancel(name=created.name)  # idempotent
    finished = wait(client, submit(client, tmp_path, [ticket(0)]).name)
    with pytest.raises(errors.ClientError) as refused:
        client.batches.cancel(name=finished.name)
    assert (refused.value.code, refused.value.status) == (400, "FAILED_PRECONDITION")


def test_expiry_leaves_no_results_and_forced_statuses_apply_once(
    emulator: EmulatorHandle, client: genai.Client, tmp_path: Path
) -> None:
    emulator.configure(seconds_per_request=0.02, completion_window_s=0.3)
    expired = wait(client, submit(client, tmp_path, [ticket(i) for i in range(40)]).name)
    assert expired.state == types.JobState.JOB_STATE_EXPIRED and expired.dest is None and expired.end_time
    emulator.configure(seconds_per_request=0.001, completion_window_s=None, force_batch_status="expired")
    forced = wait(client, submit(client, tmp_path, [ticket(i) for i in range(10)]).name)
    assert forced.state == types.JobState.JOB_STATE_EXPIRED
    stats = operation(emulator, forced.name)["metadata"]["batchStats"]
    assert stats == {"requestCount": "10", "successfulRequestCount": "5", "pendingRequestCount": "5"}
    emulator.configure(force_batch_status="failed")
    failed = wait(client, submit(client, tmp_path, [ticket(0)]).name)
    normal = wait(client, submit(client, tmp_path, [ticket(0)]).name)
    assert failed.state == types.JobState.JOB_STATE_FAILED and failed.dest is None
    assert normal.state == types.JobState.JOB_STATE_SUCCEEDED
    assert operation(emulator, failed.name)["error"]["message"]
    emulator.configure(force_batch_status="stuck")
    stuck = wait(client, submit(client, tmp_path, [ticket(0)]).name, {"JOB_STATE_RUNNING"})
    time.sleep(0.1)
    assert client.batches.get(name=stuck.name).state == types.JobState.JOB_STATE_RUNNING
    client.batches.cancel(name=stuck.name)
    assert wait(client, stuck.name).state == types.JobState.JOB_STATE_CANCELLED


ONE_LINE = json.dumps(ticket(0)).encode() + b"\n"


@pytest.mark.parametrize(
    ("content", "knobs", "message"),
    [
        (b"\n", {}, "empty"),
        (ONE_LINE + b"{not json\n", {}, "Line 2"),
        (b'{"key": "x", "contents": []}\n', {}, "Line 1"),
        (ONE_LINE * 2, {"max_requests_per_batch": 1}, "at most 1"),
        (ONE_LINE, {"enqueued_token_limit": 1}, "Enqueued token limit"),
    ],
)
def test_unreadable_or_oversized_input_fails_the_batch(
    emulator: EmulatorHandle, client: genai.Client, tmp_path: Path, content: bytes, knobs: dict[str, Any], message: str
) -> None:
    emulator.configure(**knobs)
    path = tmp_path / "input.jsonl"
    path.write_bytes(content)
    uploaded = client.files.upload(file=path, config={"mime_type": "jsonl"})
    created = client.batches.create(model=MODEL, src=uploaded.name)
    assert created.state == types.JobState.JOB_STATE_PENDING and created.display_name
    job = wait(client, created.name)
    assert job.state == types.JobState.JOB_STATE_FAILED and job.dest is None
    assert message in operation(emulator, job.name)["error"]["message"]


# --- listing, deleting, errors, retries ----------------------------------------------------------------


def test_list_pages_newest_first_and_delete(emulator: EmulatorHandle, client: genai.Client, tmp_path: Path) -> None:
    uploaded = upload(client, tmp_path, [ticket(0)])
    names = [client.batches.create(model=MODEL, src=uploaded.name).name for _ in range(5)]
    assert [job.name for job in client.batches.list(config={"page_size": 2})] == names[::-1]
    first_page = json.loads(raw(emulator, "GET", "/v1/batches?pageSize=2")[2])
    assert len(first_page["operations"]) == 2 and first_page["nextPageToken"]
    deleted = client.batches.delete(name=names[2])
    assert deleted.error is None
    with pytest.raises(errors.ClientError) as gone:
        client.batches.get(name=names[2])
    assert (gone.value.code, gone.value.status) == (404, "NOT_FOUND")
    assert [job.name for job in client.batches.list(config={"page_size": 3})] == [names[4], names[3], *names[:2][::-1]]
    second = upload(client, tmp_path, [ticket(1)], "second.jsonl")
    listed = [f for f in client.files.list(config={"page_size": 1})]  # batches' results files are listed too
    assert [f.name for f in listed if f.source == types.FileSource.UPLOADED] == [second.name, uploaded.name]
    client.files.delete(name=second.name)
    with pytest.raises(errors.ClientError) as missing:
        client.files.get(name=second.name)
    # Like the real API, an unknown file is "permission denied", not "not found".
    assert (missing.value.code, missing.value.status) == (403, "PERMISSION_DENIED")


def test_http_errors_use_the_google_error_body(emulator: EmulatorHandle, client: genai.Client) -> None:
    with pytest.raises(errors.ClientError) as missing:
        client.batches.get(name="batches/nope")
    assert (missing.value.code, missing.value.status) == (404, "NOT_FOUND") and missing.value.message
    with pytest.raises(errors.ClientError) as bad_name:
        client.batches.create(model=MODEL, src="files/Not_A_Valid_Id")
    assert (bad_name.value.code, bad_name.value.status) == (400, "INVALID_ARGUMENT")
    with pytest.raises(errors.ClientError) as no_file:
        client.batches.create(model=MODEL, src="files/missing")
    assert no_file.value.code == 403
    with pytest.raises(errors.ClientError) as wrong_model:
        client.batches.create(model=EMBEDDING_MODEL, src=[{"contents": "hi"}])
    assert wrong_model.value.code == 404 and "batchGenerateContent" in wrong_model.value.message
    with pytest.raises(errors.ClientError) as too_big:
        client.batches.create(model=MODEL, src=[{"contents": "x" * (21 * 1024 * 1024)}])
    assert too_big.value.code == 400 and "20971520" in too_big.value.message
    both = json.dumps({"batch": {"inputConfig": {"fileName": "files/a", "requests": {"requests": []}}}}).encode()
    status, _, body = raw(emulator, "POST", f"/v1beta/models/{MODEL}:batchGenerateContent", body=both)
    assert status == 400 and json.loads(body)["error"]["status"] == "INVALID_ARGUMENT"
    status, _, body = raw(emulator, "GET", "/v1beta/batches", key=None)
    assert status == 403 and set(json.loads(body)["error"]) == {"code", "message", "status"}
    assert raw(emulator, "GET", "/v1/batches/nope:unknownVerb")[0] == 404


def test_injected_429_is_surfaced_and_retried_when_configured(emulator: EmulatorHandle, client: genai.Client) -> None:
    emulator.configure(fail_next_requests=1)
    with pytest.raises(errors.ClientError) as limited:  # the SDK does not retry by default
        list(client.batches.list())
    assert (limited.value.code, limited.value.status) == (429, "RESOURCE_EXHAUSTED")
    emulator.configure(fail_next_requests=2)
    retry = types.HttpRetryOptions(attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)
    assert list(sdk(emulator, retry_options=retry).batches.list()) == []
    assert emulator.settings.fail_next_requests == 0
    emulator.configure(fail_next_requests=1, fail_status=503)
    with pytest.raises(errors.ServerError) as unavailable:
        client.files.get(name="files/whatever")
    assert (unavailable.value.code, unavailable.value.status) == (503, "UNAVAILABLE")


# --- uploads ---------------------------------------------------------------------------------------


def test_resumable_upload_url_is_absolute_and_needs_no_key(
    emulator: EmulatorHandle, client: genai.Client, tmp_path: Path
) -> None:
    start_headers = {
        "X-Goog-Upload-Protocol": "resumable",
        "X-Goog-Upload-Command": "start",
        "X-Goog-Upload-Header-Content-Length": "10",
        "X-Goog-Upload-Header-Content-Type": "jsonl",
        "Content-Type": "application/json",
    }
    start = json.dumps({"file": {"display_name": "by hand", "name": "files/my-input"}}).encode()
    assert raw(emulator, "POST", "/upload/v1beta/files", key=None, headers=start_headers, body=start)[0] == 403
    status, headers, _ = raw(emulator, "POST", "/upload/v1beta/files", headers=start_headers, body=start)
    url = headers["x-goog-upload-url"]
    assert status == 200 and url.startswith(f"{emulator.base_url}/upload/v1beta/files?")

    def chunk(command: str, offset: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
        chunk_headers = {"X-Goog-Upload-Command": command, "X-Goog-Upload-Offset": str(offset)}
        return raw(emulator, "POST", url, key=None, headers=chunk_headers, body=data)

    status, headers, _ = chunk("upload", 0, b"01234")
    assert status == 200 and headers["x-goog-upload-status"] == "active"
    status, headers, _ = chunk("upload", 3, b"56789")  # wrong offset: refused, and final so the SDK stops
    assert status == 400 and headers["x-goog-upload-status"] == "final"
    status, headers, body = chunk("upload, finalize", 5, b"56789")
    file = json.loads(body)["file"]
    assert status == 200 and headers["x-goog-upload-status"] == "final"
    assert file["name"] == "files/my-input" and file["sizeBytes"] == "10" and file["displayName"] == "by hand"
    assert file["uri"] == f"{emulator.base_url}/v1beta/files/my-input" and file["state"] == "ACTIVE"
    assert chunk("upload, finalize", 10, b"")[0] == 404  # the session is closed
    # Through the SDK, a file over the SDK's 8 MiB chunk size goes up in two chunks.
    big = tmp_path / "big.jsonl"
    line = json.dumps(ticket(0)) + "\n"
    big.write_text(line * (9 * 1024 * 1024 // len(line) + 1))
    uploaded = client.files.upload(file=big, config=types.UploadFileConfig(mime_type="jsonl"))
    assert uploaded.size_bytes == big.stat().st_size and uploaded.source == types.FileSource.UPLOADED
    digest = hashlib.sha256(big.read_bytes()).hexdigest()
    stored = json.loads(raw(emulator, "GET", f"/v1/{uploaded.name}")[2])
    assert stored["sha256Hash"] == b64encode(digest.encode()).decode()
    with pytest.raises(ValueError, match="uploaded files can't be downloaded"):
        client.files.download(file=uploaded)


# --- living next to OpenAI, persistence ------------------------------------------------------------------


def test_openai_and_gemini_share_the_v1_paths(emulator: EmulatorHandle, client: genai.Client, tmp_path: Path) -> None:
    gemini_job = submit(client, tmp_path, [ticket(0)])
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body}
    with openai.OpenAI(api_key="sk-test", base_url=emulator.openai_base_url) as oai:
        uploaded = oai.files.create(file=("input.jsonl", json.dumps(line).encode() + b"\n"), purpose="batch")
        openai_batch = oai.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert oai.batches.retrieve(openai_batch.id).id == openai_batch.id
        assert [b.id for b in oai.batches.list()] == [openai_batch.id]
        # (purpose=batch: a fast batch may already have written its output file, purpose batch_output)
        assert [f.id for f in oai.files.list(purpose="batch")] == [uploaded.id]
        with pytest.raises(openai.NotFoundError):
            oai.batches.retrieve(gemini_job.name.removeprefix("batches/"))
    assert [job.name for job in client.batches.list()] == [gemini_job.name]
    assert all(f.name.startswith("files/") for f in client.files.list())
    with pytest.raises(errors.ClientError):
        client.batches.get(name=f"batches/{openai_batch.id}")
    # Without credentials the id shape picks the provider whose "no key" answer comes back.
    status, _, body = raw(emulator, "GET", f"/v1/{gemini_job.name}", key=None)
    assert status == 403 and json.loads(body)["error"]["status"] == "PERMISSION_DENIED"
    status, _, body = raw(emulator, "GET", f"/v1/batches/{openai_batch.id}", key=None)
    assert status == 401 and "type" in json.loads(body)["error"]


def test_state_survives_a_restart(tmp_path: Path) -> None:
    state, slow = tmp_path / "emulator", {**FAST, "seconds_per_request": 0.01}
    with running_emulator(state, **slow) as emu:
        client = sdk(emu)
        finished = wait(client, submit(client, tmp_path, [ticket(i) for i in range(5)]).name)
        output = client.files.download(file=finished.dest.file_name)
        unfinished = submit(client, tmp_path, [ticket(i) for i in range(40)])
        inline = client.batches.create(model=MODEL, src=[{"contents": "hi", "metadata": {"key": "k"}}])
    with running_emulator(state, **slow) as emu:
        client = sdk(emu)
        again = client.batches.get(name=finished.name)
        assert again.model_dump(exclude={"sdk_http_response"}) == finished.model_dump(exclude={"sdk_http_response"})
        assert client.files.download(file=finished.dest.file_name) == output
        assert wait(client, unfinished.name).state == types.JobState.JOB_STATE_SUCCEEDED
        assert wait(client, inline.name).dest.inlined_responses[0].metadata == {"key": "k"}
        assert {job.name for job in client.batches.list()} == {finished.name, unfinished.name, inline.name}
