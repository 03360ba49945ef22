"""`python -m batch_assets.emulator.bench`: the emulator at scale, through the official SDKs.

For each provider it starts a fresh emulator in a subprocess at full simulated speed (every
delay all but zero), builds a batch of `--requests` requests of about 1 KB each, and drives it as
a client would: upload (where the provider has files) -> create -> poll until done -> download
the results to disk. It prints, per provider: the wall time from create to the end of the
download, the slowest single API call (time until its response arrived; a download counts until
its headers, and its transfer time is shown apart), and the emulator process's peak resident
memory (VmHWM from /proc/<pid>/status).

These are measurements for the docs, not assertions: no test depends on them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from batch_assets.ports import free_port

PROVIDERS = ("openai", "dashscope", "anthropic", "gemini")
# The most requests one batch may hold, per provider (the emulator's limits, which follow the
# providers' own: 50,000 for the OpenAI format and Gemini's, 100,000 for Anthropic's).
MAX_REQUESTS = {"openai": 50_000, "dashscope": 50_000, "anthropic": 100_000, "gemini": 50_000}
FULL_SPEED = 1e9  # simulated seconds per real second: every simulated delay is far below a millisecond
_POLL_S = 0.05
_START_TIMEOUT_S = 30.0
_KEY = "bench-key"
T = TypeVar("T")

# About 1 KB per request line once framed: a prompt of ~900 characters.
_WORDS = (
    "batch emulator streams results lines to disk while clients poll for status and download output files "
    "without holding whole files in memory so that large batches stay fast and small "
).split()


def prompt(index: int) -> str:
    words = [_WORDS[(index * 7 + i * 13) % len(_WORDS)] for i in range(140)]
    return f"Request {index}: " + " ".join(words)[:880]


@dataclass
class Calls:
    """The duration of every API call made, by name."""

    times: list[tuple[str, float]] = field(default_factory=list)

    def timed(self, name: str, call: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return call()
        finally:
            self.times.append((name, time.perf_counter() - started))

    def record(self, name: str, seconds: float) -> None:
        self.times.append((name, seconds))

    def slowest(self) -> tuple[str, float]:
        return max(self.times, key=lambda item: item[1])

    def by_name(self) -> dict[str, tuple[int, float]]:
        """name -> (how many calls, the slowest of them in seconds)."""
        summary: dict[str, tuple[int, float]] = {}
        for name, seconds in self.times:
            count, worst = summary.get(name, (0, 0.0))
            summary[name] = (count + 1, max(worst, seconds))
        return summary


@dataclass
class Result:
    provider: str
    requests: int
    wall_s: float  # create -> end of download
    upload_s: float | None
    download_s: float
    slowest_call: tuple[str, float]
    calls: dict[str, tuple[int, float]]
    peak_rss_mib: float
    output_bytes: int
    output_lines: int


# --- the emulator process --------------------------------------------------------------------------


@contextlib.contextmanager
def emulator_process(state_dir: Path, *options: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The emulator in its own process on a free 127.0.0.1 port (its server's command-line `options`
    added); yields the process and its base URL once it listens, and stops it (SIGINT, then kill)."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "batch_assets.emulator.server",
        "--port",
        str(port),
        "--state-dir",
        str(state_dir),
        "--no-log-requests",
        *options,
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                error = process.stderr.read().decode() if process.stderr else ""
                raise RuntimeError(f"the emulator exited at start:\n{error}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the emulator did not start within {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        yield process, f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def peak_rss_mib(pid: int) -> float:
    """VmHWM, the process's peak resident set, in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc status")


# --- one provider each -------------------------------------------------------------------------------


@dataclass
class Run:
    wall_s: float
    upload_s: float | None
    download_s: float
    output: Path


def _stream_to(path: Path, chunks: Iterator[bytes]) -> None:
    with path.open("wb") as out:
        for chunk in chunks:
            out.write(chunk)


def _openai_format(base_url: str, work: Path, count: int, calls: Calls, dashscope: bool) -> Run:
    import openai

    model = "qwen-plus" if dashscope else "gpt-4o-mini"
    source = work / "input.jsonl"
    with source.open("w", encoding="utf-8") as out:
        for index in range(count):
            body = {"model": model, "messages": [{"role": "user", "content": prompt(index)}], "max_tokens": 64}
            line = {"custom_id": f"req-{index}", "method": "POST", "url": "/v1/chat/completions", "body": body}
            out.write(json.dumps(line) + "\n")
    prefix = "/compatible-mode/v1" if dashscope else "/v1"
    client = openai.OpenAI(base_url=base_url + prefix, api_key=_KEY, max_retries=0, timeout=120)
    started = time.perf_counter()
    with source.open("rb") as handle:
        uploaded = calls.timed("files.create", lambda: client.files.create(file=handle, purpose="batch"))
    upload_s = time.perf_counter() - started
    started = time.perf_counter()
    batch = calls.timed(
        "batches.create",
        lambda: client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        ),
    )
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        time.sleep(_POLL_S)
        batch = calls.timed("batches.retrieve", functools.partial(client.batches.retrieve, batch.id))
    if batch.status != "completed" or batch.output_file_id is None:
        raise RuntimeError(f"batch ended {batch.status}: {batch.errors}")
    output = work / "output.jsonl"
    download_started = time.perf_counter()
    output_id = batch.output_file_id
    with calls.timed("files.content", lambda: client.files.with_streaming_response.content(output_id)) as response:
        _stream_to(output, response.iter_bytes(1 << 16))
    end = time.perf_counter()
    return Run(end - started, upload_s, end - download_started, output)


def _anthropic(base_url: str, work: Path, count: int, calls: Calls) -> Run:
    import anthropic
    from anthropic.types.messages import MessageBatch

    # A shard file, as the product writes one, sent as the product's Anthropic adapter sends it:
    # its lines as the `requests` array, through the SDK client's own `post` (the core does not
    # import the providers, so the few lines are repeated here).
    shard = work / "shard.jsonl"
    with shard.open("w", encoding="utf-8") as out:
        for index in range(count):
            params = {
                "model": "claude-3-5-haiku-latest",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": prompt(index)}],
            }
            out.write(json.dumps({"custom_id": f"req-{index}", "params": params}) + "\n")
    client = anthropic.Anthropic(base_url=base_url, api_key=_KEY, max_retries=0, timeout=300)
    started = time.perf_counter()
    # Building the body is in the wall time, not in the create call's (it is not the API's answer).
    with tempfile.SpooledTemporaryFile(max_size=8 << 20) as body:
        with shard.open("rb") as lines:
            body.write(b'{"requests":[' + b",".join(line.strip() for line in lines if line.strip()) + b"]}")
        body.seek(0)
        batch = calls.timed(
            "messages.batches.create",
            lambda: client.post(
                "/v1/messages/batches",
                cast_to=MessageBatch,
                content=body,
                options={"headers": {"Content-Type": "application/json"}},
            ),
        )
    while batch.processing_status != "ended":
        time.sleep(_POLL_S)
        batch = calls.timed("messages.batches.retrieve", functools.partial(client.messages.batches.retrieve, batch.id))
    output = work / "results.jsonl"
    download_started = time.perf_counter()
    # The SDK's `results()` decodes every line into models; the raw stream is what a download is.
    http = client._client  # the SDK's own httpx client and headers
    headers = {"x-api-key": _KEY, "anthropic-version": "2023-06-01"}
    assert batch.results_url is not None
    request_started = time.perf_counter()
    with http.stream("GET", batch.results_url, headers=headers) as response:
        calls.record("messages.batches.results", time.perf_counter() - request_started)
        response.raise_for_status()
        _stream_to(output, response.iter_bytes(1 << 16))
    end = time.perf_counter()
    return Run(end - started, None, end - download_started, output)


def _gemini(base_url: str, work: Path, count: int, calls: Calls) -> Run:
    from google import genai
    from google.genai import types

    source = work / "input.jsonl"
    with source.open("w", encoding="utf-8") as out:
        for index in range(count):
            request = {
                "contents": [{"role": "user", "parts": [{"text": prompt(index)}]}],
                "generationConfig": {"maxOutputTokens": 64},
            }
            out.write(json.dumps({"key": f"req-{index}", "request": request}) + "\n")
    client = genai.Client(api_key=_KEY, http_options=types.HttpOptions(base_url=base_url, timeout=300_000))
    started = time.perf_counter()
    uploaded = calls.timed(
        "files.upload",
        lambda: client.files.upload(file=str(source), config=types.UploadFileConfig(mime_type="application/jsonl")),
    )
    upload_s = time.perf_counter() - started
    started = time.perf_counter()
    assert uploaded.name is not None
    name = uploaded.name
    batch = calls.timed("batches.create", lambda: client.batches.create(model="gemini-2.0-flash", src=name))
    done = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}
    while (
        batch.state is None
        or batch.state.name not in done
        or (batch.state.name == "JOB_STATE_SUCCEEDED" and (batch.dest is None or batch.dest.file_name is None))
    ):
        time.sleep(_POLL_S)
        assert batch.name is not None
        batch = calls.timed("batches.get", functools.partial(client.batches.get, name=batch.name))
    if batch.state.name != "JOB_STATE_SUCCEEDED" or batch.dest is None or batch.dest.file_name is None:
        raise RuntimeError(f"batch ended {batch.state}: {batch.error}")
    output = work / "output.jsonl"
    download_started = time.perf_counter()
    # The SDK's `files.download` returns the whole file as bytes; stream it instead, as a
    # client that keeps memory flat would, from the documented download address.
    file_id = batch.dest.file_name.removeprefix("files/")
    url = f"{base_url}/download/v1beta/files/{file_id}:download?alt=media"
    import httpx

    with httpx.Client(timeout=300) as http:
        request_started = time.perf_counter()
        with http.stream("GET", url, headers={"x-goog-api-key": _KEY}) as response:
            calls.record("files.download", time.perf_counter() - request_started)
            response.raise_for_status()
            _stream_to(output, response.iter_bytes(1 << 16))
    end = time.perf_counter()
    return Run(end - started, upload_s, end - download_started, output)


def bench(provider: str, count: int) -> Result:
    with tempfile.TemporaryDirectory(prefix=f"emulator-bench-{provider}-") as tmp:
        work = Path(tmp)
        calls = Calls()
        with emulator_process(
            work / "state",
            "--speed",
            str(FULL_SPEED),
            "--max-requests-per-batch",
            str(max(count, MAX_REQUESTS["openai"])),
        ) as (process, base_url):
            if provider in ("openai", "dashscope"):
                run = _openai_format(base_url, work, count, calls, dashscope=provider == "dashscope")
            elif provider == "anthropic":
                run = _anthropic(base_url, work, count, calls)
            elif provider == "gemini":
                run = _gemini(base_url, work, count, calls)
            else:
                raise ValueError(f"unknown provider {provider!r}")
            peak = peak_rss_mib(process.pid)
        with run.output.open("rb") as handle:
            lines = sum(1 for _ in handle)
        return Result(
            provider=provider,
            requests=count,
            wall_s=run.wall_s,
            upload_s=run.upload_s,
            download_s=run.download_s,
            slowest_call=calls.slowest(),
            calls=calls.by_name(),
            peak_rss_mib=peak,
            output_bytes=run.output.stat().st_size,
            output_lines=lines,
        )


def _format(result: Result) -> str:
    name, seconds = result.slowest_call
    upload = f"{result.upload_s:.2f} s" if result.upload_s is not None else "-"
    return (
        f"{result.provider:<10} {result.requests:>7} req  create->download {result.wall_s:6.2f} s  "
        f"slowest call {seconds:5.2f} s ({name})  upload {upload}  download {result.download_s:.2f} s  "
        f"peak RSS {result.peak_rss_mib:6.1f} MiB  output {result.output_bytes / 1e6:.1f} MB / "
        f"{result.output_lines} lines\n    calls: "
        + ", ".join(f"{name} x{count} (max {worst:.2f} s)" for name, (count, worst) in result.calls.items())
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m batch_assets.emulator.bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests per batch (default: each provider's maximum: 50,000; Anthropic 100,000)",
    )
    parser.add_argument("--provider", choices=(*PROVIDERS, "all"), default="all")
    parser.add_argument("--json", action="store_true", help="print one JSON object per provider")
    args = parser.parse_args(argv)
    providers = PROVIDERS if args.provider == "all" else (args.provider,)
    for provider in providers:
        count = args.requests if args.requests is not None else MAX_REQUESTS[provider]
        count = min(count, MAX_REQUESTS[provider])
        result = bench(provider, count)
        if args.json:
            print(json.dumps(result.__dict__), flush=True)
        else:
            print(_format(result), flush=True)


if __name__ == "__main__":
    main()
