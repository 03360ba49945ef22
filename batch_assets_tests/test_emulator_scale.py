"""The emulator at scale: results written by a background worker, never in an API call; files
streamed in and out. Functional checks only: nothing here measures time (the numbers come from
`python -m batch_assets.emulator.bench`)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from batch_assets.emulator.clock import Timeline
from batch_assets.emulator.testing import EmulatorHandle, running_emulator
from batch_assets.emulator.worker import write_lines
from batch_assets.providers.anthropic.emulator.requests import parse_create, read_create
from batch_assets.providers.openai.emulator.batches import KIND as OPENAI_BATCHES

from .conftest import WIRE_EMULATOR

pytestmark = pytest.mark.usefixtures("no_emulator_left_running")

# Every batch goes through the worker, and the simulated clock ends it within milliseconds.
BACKGROUND = {
    **WIRE_EMULATOR,
    "background_min_bytes": 0,
    "queue_delay_s": 0.0,
    "seconds_per_request": 0.0001,
    "finalize_delay_s": 0.001,
}


def chat_line(i: int) -> dict[str, Any]:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"Ticket {i}: where is my parcel?"}]}
    return {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}


def jsonl(lines: list[Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def openai_client(emu: EmulatorHandle) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=emu.openai_base_url)


def submit(client: openai.OpenAI, lines: list[Any]) -> Any:
    uploaded = client.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch")
    return client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")


def poll(read: Any, done: Any, timeout: float = 60.0) -> Any:
    """Call `read()` until `done(value)`; the timeout only guards against a hang."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"still {value!r}"
        time.sleep(0.01)


def sleep_past(instant: float) -> None:
    """Let the simulated clock pass `instant` (a real unix time), so the batch has ended on it."""
    while time.time() <= instant:
        time.sleep(0.005)


# --- the writer ---------------------------------------------------------------------------------


class RecordingSink(io.BytesIO):
    """A sink that notes how many lines it held at each write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: Any) -> int:
        self.writes += 1
        return super().write(data)


def test_write_lines_writes_each_line_as_it_comes_without_gathering_them() -> None:
    sink = RecordingSink()
    seen_before: list[int] = []

    def lines() -> Iterator[str]:
        for i in range(20_000):
            seen_before.append(sink.getvalue().count(b"\n") if i % 5000 == 0 else -1)
            yield json.dumps({"custom_id": f"req-{i}", "n": i})

    written = write_lines(sink, lines())
    # When line i was made, every earlier line was already in the sink: nothing waits in memory.
    assert [n for n in seen_before if n >= 0] == [0, 5000, 10_000, 15_000]
    assert sink.writes == 20_000 and written == len(sink.getvalue())
    assert sink.getvalue().splitlines()[-1] == b'{"custom_id": "req-19999", "n": 19999}'


# --- results off the request path ---------------------------------------------------------------


@pytest.mark.slow
def test_openai_retrieve_never_writes_results_it_shows_the_batch_unfinished_until_the_worker_has(
    tmp_path: Path,
) -> None:
    with running_emulator(tmp_path, **BACKGROUND) as emu, openai_client(emu) as client:
        emu.worker.pause()
        created = submit(client, [chat_line(i) for i in range(40)])
        assert created.status == "validating"
        # The input is not read yet: however long that takes, the batch validates.
        assert client.batches.retrieve(created.id).status == "validating"

        emu.worker.pause(after=1)  # read the input, then hold before writing the results
        record = emu.app.state.store.get(OPENAI_BATCHES, created.id)
        poll(lambda: record.get("validated"), bool)
        sleep_past(Timeline.from_dict(record["timeline"]).done)
        # The clock says done; the results are not written, so every answer says finalizing.
        for _ in range(3):
            batch = client.batches.retrieve(created.id)
            assert batch.status == "finalizing" and batch.output_file_id is None and batch.completed_at is None
            assert batch.request_counts.completed == 40
        assert record["staged"] is None and not record["finalized"]
        listed = next(b for b in client.batches.list() if b.id == created.id)
        assert listed.status == "finalizing"

        emu.worker.resume()
        batch = poll(lambda: client.batches.retrieve(created.id), lambda b: b.status == "completed")
        lines = client.files.content(batch.output_file_id).text.splitlines()
    assert sorted(json.loads(line)["custom_id"] for line in lines) == sorted(f"req-{i}" for i in range(40))


@pytest.mark.slow
def test_a_cancel_while_the_results_are_pending_writes_the_cancelled_ending(tmp_path: Path) -> None:
    knobs = {**BACKGROUND, "seconds_per_request": 1.0, "force_batch_status": "stuck"}
    with running_emulator(tmp_path, **knobs) as emu, openai_client(emu) as client:
        created = submit(client, [chat_line(i) for i in range(5)])
        poll(lambda: client.batches.retrieve(created.id).status, lambda s: s == "in_progress")
        emu.worker.pause()
        assert emu.worker.wait_held(timeout=30)  # a job in hand would write the ending the cancel moves to
        assert client.batches.cancel(created.id).status == "cancelling"
        record = emu.app.state.store.get(OPENAI_BATCHES, created.id)
        sleep_past(record["cancel_requested_at"] + Timeline.from_dict(record["timeline"]).cancel_delay)
        assert client.batches.retrieve(created.id).status == "cancelling"  # results not written yet
        emu.worker.resume()
        batch = poll(lambda: client.batches.retrieve(created.id), lambda b: b.status == "cancelled")
        errors = [json.loads(line) for line in client.files.content(batch.error_file_id).text.splitlines()]
    assert batch.output_file_id is None
    assert {line["error"]["code"] for line in errors} == {"batch_cancelled"} and len(errors) == 5


@pytest.mark.slow
def test_unfinished_work_resumes_after_a_restart(tmp_path: Path) -> None:
    with running_emulator(tmp_path, **BACKGROUND) as emu, openai_client(emu) as client:
        emu.worker.pause()  # the input is never read by this emulator
        created = submit(client, [chat_line(i) for i in range(12)])
        assert client.batches.retrieve(created.id).status == "validating"
    with running_emulator(tmp_path, **BACKGROUND) as emu, openai_client(emu) as client:
        batch = poll(lambda: client.batches.retrieve(created.id), lambda b: b.status == "completed")
        lines = client.files.content(batch.output_file_id).text.splitlines()
    assert len(lines) == 12


@pytest.mark.slow
def test_anthropic_shows_its_batch_in_progress_until_the_worker_wrote_the_results(tmp_path: Path) -> None:
    with running_emulator(tmp_path, **BACKGROUND) as emu:
        emu.worker.pause()
        client = anthropic.Anthropic(api_key="k", base_url=emu.base_url)
        requests = [
            {
                "custom_id": f"req-{i}",
                "params": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 50,
                    "messages": [{"role": "user", "content": f"Hi {i}"}],
                },
            }
            for i in range(10)
        ]
        message_batch = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        record = emu.app.state.store.get("anthropic_batches", message_batch.id)
        sleep_past(Timeline.from_dict(record["timeline"]).done)
        batch = client.messages.batches.retrieve(message_batch.id)
        assert batch.processing_status == "in_progress" and batch.results_url is None
        with pytest.raises(anthropic.AnthropicError, match="Has it finished processing"):
            client.messages.batches.results(message_batch.id)  # no results_url yet
        emu.worker.resume()
        ended = poll(
            lambda: client.messages.batches.retrieve(message_batch.id), lambda b: b.processing_status == "ended"
        )
        results = list(client.messages.batches.results(ended.id))
    assert sorted(r.custom_id for r in results) == sorted(f"req-{i}" for i in range(10))


def _anthropic_request(i: int, **params: Any) -> dict[str, Any]:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": [{"role": "user", "content": f"Hi {i}"}]}
    return {"custom_id": f"req-{i}", "params": {**body, **params}}


@pytest.mark.slow
def test_anthropic_create_refuses_a_bad_body_itself_and_leaves_bad_requests_to_the_worker(tmp_path: Path) -> None:
    with running_emulator(tmp_path, **BACKGROUND) as emu:
        emu.worker.pause()  # nothing runs in the background: what create answers, it decided alone
        client = anthropic.Anthropic(api_key="k", base_url=emu.base_url, max_retries=0)
        good = [_anthropic_request(i) for i in range(10)]
        for bad, message in (
            ({"custom_id": "req 1"}, "requests.10.custom_id: String should match pattern"),
            ({"custom_id": "req-1"}, "requests.10.custom_id: Duplicate custom_id 'req-1'"),
            ({"params": {"model": "m", "max_tokens": 0, "messages": []}}, "requests.10.params.max_tokens"),
        ):
            with pytest.raises(anthropic.BadRequestError, match=message):
                client.messages.batches.create(requests=[*good, {**_anthropic_request(10), **bad}])
        assert client.messages.batches.list().data == []
        assert not any((tmp_path / "blobs").iterdir())  # a refused body is not kept
        # A request the Messages API itself would refuse is accepted here and ends `errored`.
        system_turn = _anthropic_request(10, messages=[{"role": "system", "content": "Be brief."}])
        created = client.messages.batches.create(requests=[*good, system_turn])  # type: ignore[list-item]
        assert created.processing_status == "in_progress" and created.request_counts.processing == 11
        emu.worker.resume()
        ended = poll(lambda: client.messages.batches.retrieve(created.id), lambda b: b.processing_status == "ended")
        results = {r.custom_id: r.result for r in client.messages.batches.results(ended.id)}
    assert (ended.request_counts.succeeded, ended.request_counts.errored) == (10, 1)
    errored = results["req-10"]
    assert errored.type == "errored" and errored.error.error.type == "invalid_request_error"
    assert 'Unexpected role "system"' in errored.error.error.message
    assert all(results[f"req-{i}"].type == "succeeded" for i in range(10))


@pytest.mark.slow
def test_an_anthropic_body_the_worker_never_read_is_read_after_a_restart(tmp_path: Path) -> None:
    with running_emulator(tmp_path, **BACKGROUND) as emu:
        emu.worker.pause()  # the body is checked and kept, never read again by this emulator
        client = anthropic.Anthropic(api_key="k", base_url=emu.base_url)
        created = client.messages.batches.create(requests=[_anthropic_request(i) for i in range(12)])  # type: ignore[misc]
    with running_emulator(tmp_path, **BACKGROUND) as emu:
        client = anthropic.Anthropic(api_key="k", base_url=emu.base_url)
        ended = poll(lambda: client.messages.batches.retrieve(created.id), lambda b: b.processing_status == "ended")
        custom_ids = sorted(r.custom_id for r in client.messages.batches.results(ended.id))
    assert ended.request_counts.succeeded == 12 and custom_ids == sorted(f"req-{i}" for i in range(12))
    assert not any(name.endswith(".body.json") for name in (p.name for p in (tmp_path / "blobs").iterdir()))


@pytest.mark.slow
def test_gemini_shows_its_batch_running_until_the_worker_wrote_the_results(tmp_path: Path) -> None:
    with running_emulator(tmp_path, **BACKGROUND) as emu:
        emu.worker.pause()
        gemini = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=emu.base_url))
        path = tmp_path / "gemini.jsonl"
        path.write_bytes(
            jsonl([{"key": f"k{i}", "request": {"contents": [{"parts": [{"text": f"Hi {i}"}]}]}} for i in range(10)])
        )
        uploaded = gemini.files.upload(file=path, config=types.UploadFileConfig(mime_type="jsonl"))
        job = gemini.batches.create(model="gemini-2.5-flash", src=uploaded.name)
        assert job.state is not None and job.state.name == "JOB_STATE_PENDING"  # its input is not read yet
        emu.worker.pause(after=1)  # read the input, then hold before writing the results
        record = emu.app.state.store.get("gemini_batches", job.name.removeprefix("batches/"))
        poll(lambda: record.get("validated"), bool)
        sleep_past(Timeline.from_dict(record["timeline"]).done)
        job = gemini.batches.get(name=job.name)
        assert job.state.name == "JOB_STATE_RUNNING" and job.dest is None
        emu.worker.resume()
        job = poll(lambda: gemini.batches.get(name=job.name), lambda j: j.state.name == "JOB_STATE_SUCCEEDED")
        lines = gemini.files.download(file=job.dest.file_name).decode().splitlines()
    assert [json.loads(line)["key"] for line in lines] == [f"k{i}" for i in range(10)]


# --- large files --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_20000_line_batch_round_trips_through_the_worker(tmp_path: Path) -> None:
    # The default `background_min_bytes` (1 MiB) sends a file this size to the worker.
    knobs = {**WIRE_EMULATOR, "queue_delay_s": 0.0, "seconds_per_request": 0.0, "finalize_delay_s": 0.0}
    with running_emulator(tmp_path, **knobs) as emu, openai_client(emu) as client:
        data = jsonl([chat_line(i) for i in range(20_000)])
        assert len(data) > emu.settings.background_min_bytes
        created = client.batches.create(
            input_file_id=client.files.create(file=("big.jsonl", data), purpose="batch").id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        assert created.status == "validating"  # the create call read nothing
        batch = poll(lambda: client.batches.retrieve(created.id), lambda b: b.status == "completed", timeout=300)
        with client.files.with_streaming_response.content(batch.output_file_id) as response:
            assert int(response.headers["content-length"]) == client.files.retrieve(batch.output_file_id).bytes
            custom_ids = {json.loads(line)["custom_id"] for line in response.iter_lines()}
    assert batch.request_counts.completed == 20_000 and custom_ids == {f"req-{i}" for i in range(20_000)}


# --- the Anthropic create body, read a request at a time ----------------------------------------


def _read(body: bytes, max_requests: int = 100_000) -> list[tuple[str, dict[str, Any]]]:
    taken: list[tuple[str, dict[str, Any]]] = []
    read_create(io.BytesIO(body), lambda custom_id, params: taken.append((custom_id, params)), max_requests)
    return taken


def _message(i: int) -> dict[str, Any]:
    return {
        "custom_id": f"r{i}",
        "params": {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * i}]},
    }


def test_read_create_matches_parse_create_and_its_errors() -> None:
    body = {"requests": [_message(i) for i in range(3000)]}
    raw = json.dumps(body, indent=1).encode()  # spread over several pieces, with whitespace
    assert _read(raw) == parse_create(body)
    assert _read(json.dumps({"other": [1, 2.5, None], **body}).encode()) == parse_create(body)
    for bad, message in (
        (b"[]", "body: Input should be a valid dictionary"),
        (b"{}", "requests: Field required"),
        (b'{"requests": 3}', "requests: Input should be a valid list"),
        (b'{"requests": []}', "at least 1 item"),
        (b'{"requests": [1]}', "requests.0: Input should be a valid dictionary"),
        (b'{"requests": [{"custom_id": "a"', "invalid JSON"),
        (json.dumps({"requests": [_message(1), _message(1)]}).encode(), "Duplicate custom_id"),
    ):
        with pytest.raises(Exception, match=message):
            _read(bad)
    too_many = json.dumps({"requests": [1, *[_message(i) for i in range(3)]]}).encode()
    with pytest.raises(Exception, match="at most 2 items after validation, not 4"):
        _read(too_many, max_requests=2)
