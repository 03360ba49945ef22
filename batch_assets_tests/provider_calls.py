"""Driving each provider adapter against the emulator, shared by the provider test modules:
adapter-level calls (a shard file, a create request, waiting for a terminal state) and the
pipeline per provider (one task a provider over one day; the `all_seeded` fixture in conftest.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.providers.contract import JOB_KEY_METADATA, TERMINAL_STATES, CreateRequest, JobRef, JobState
from batch_assets.resources import ProvidersResource
from batch_assets.spec.resolve import ResolvedTask

MODEL = {
    "openai": "gpt-4o-mini",
    "dashscope": "qwen-plus",
    "anthropic": "claude-haiku-4-5",
    "gemini": "gemini-2.5-flash",
}
ENDPOINT = {
    "openai": "/v1/chat/completions",
    "dashscope": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "gemini": "generateContent",
}


def adapter_for(emulator: EmulatorHandle, provider: str, max_retries: int = 2):
    """The provider's adapter on its official SDK, pointed at the emulator."""
    return ProvidersResource(emulator_url=emulator.base_url, max_retries=max_retries).adapter(provider)


# --- adapter-level calls ----------------------------------------------------------------------------


def shard_file(tmp_path: Path, provider: str, n: int = 2, tag: str = "") -> Path:
    """A shard file of `n` requests in the provider's wire format (ids r<tag>0, r<tag>1, ...)."""
    lines = []
    for i in range(n):
        rid = f"r{tag}{i}"
        if provider in ("openai", "dashscope"):
            line = {
                "custom_id": rid,
                "method": "POST",
                "url": ENDPOINT[provider],
                "body": {"model": MODEL[provider], "messages": [{"role": "user", "content": f"hello {i}"}]},
            }
        elif provider == "anthropic":
            line = {
                "custom_id": rid,
                "params": {
                    "model": MODEL[provider],
                    "max_tokens": 16,
                    "messages": [{"role": "user", "content": f"hello {i}"}],
                },
            }
        else:
            line = {"key": rid, "request": {"contents": [{"role": "user", "parts": [{"text": f"hello {i}"}]}]}}
        lines.append(json.dumps(line))
    path = tmp_path / f"{provider}{tag}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def create_request(provider: str, job_key: str, line_count: int = 2) -> CreateRequest:
    """A create request for a shard of `line_count` lines under `job_key`."""
    return CreateRequest(
        job_key=job_key,
        endpoint=ENDPOINT[provider],
        model=MODEL[provider],
        completion_window="24h",
        line_count=line_count,
        metadata={JOB_KEY_METADATA: job_key, "task_id": "t", "shard_id": "s"},
    )


def wait_terminal(adapter, batch_id: str, timeout_s: float = 20.0):
    """Poll the batch until its state is terminal (or fail the test); returns the last snapshot."""
    deadline = time.monotonic() + timeout_s
    previous = JobState.SUBMITTED
    while True:
        snap = adapter.poll(JobRef(batch_id), previous)
        if snap.terminal:
            return snap
        previous = snap.state
        assert time.monotonic() < deadline, f"{batch_id} still {snap.raw_status}"
        time.sleep(0.03)


# --- the pipeline, one task a provider ---------------------------------------------------------------

DAY = "2026-11-20"
TASK_OF = {
    "openai": "ticket_triage",
    "anthropic": "ticket_summary",
    "gemini": "kb_embeddings",
    "dashscope": "review_sentiment",
}


def run_to_terminal(wh: Warehouse, task: ResolvedTask, adapter, timeout: float = 30.0) -> list[dict]:
    """Freeze -> shards -> submit, poll to terminal; returns the job rows with their status events."""
    freeze_manifest(wh, task, DAY)
    cut_shards(wh, task, DAY)
    submit_pending(wh, task, DAY, adapter)
    task_id = task.task_id(DAY)
    deadline = time.monotonic() + timeout
    while True:
        poll_jobs(wh, lambda _p: adapter, task_id=task_id)
        with wh.connect() as conn:
            jobs = fetch_dicts(conn, "SELECT * FROM ledger.provider_job WHERE task_id = ?", [task_id])
        if all(j["state"] in TERMINAL_STATES for j in jobs):
            return jobs
        assert time.monotonic() < deadline, f"jobs not terminal: {[(j['job_key'], j['state']) for j in jobs]}"
        time.sleep(0.05)


def collect_and_reconcile(wh: Warehouse, task: ResolvedTask, adapter):
    """Collect, parse and apply the day's finished jobs; returns the reconciliation."""
    collect_raw_results(wh, task, DAY, adapter)
    parse_results(wh, task, DAY)
    apply_results(wh, task, DAY)
    assert_only_real_file_ids(wh)
    return reconcile(wh, task.task_id(DAY))


def assert_only_real_file_ids(wh: Warehouse) -> None:
    """The ledger holds real provider file ids or NULL, never a local path or pseudo id."""
    with wh.connect() as conn:
        ids = conn.execute("""
            SELECT input_file_id AS id FROM ledger.provider_job
            UNION ALL SELECT output_file_id FROM ledger.provider_job
            UNION ALL SELECT error_file_id FROM ledger.provider_job
            UNION ALL SELECT provider_file_id FROM ledger.raw_file
        """).fetchall()
    bad = [
        i
        for (i,) in ids
        if i is not None and (i.startswith(("local:", "inline:")) or "/" in i and not i.startswith("files/"))
    ]
    assert bad == []
