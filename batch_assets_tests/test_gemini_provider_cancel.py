"""A Gemini request the service canceled on its own (issue 43, item 6): retried, not lost.

Inside a SUCCEEDED batch, a request's line can carry the per-request error `{code: 1}` (CANCELLED)
though nobody canceled anything: seen in real traffic. Who canceled decides. An operator's cancel is
final; this system's own stuck-job cancel re-sends what did not run; the provider's cancel of one
request is a retryable failure of its own class, `provider_canceled`, charged as an attempt.
The emulator's `gemini_item_cancelled_rate` answers requests so. Official `google-genai` SDK over
HTTP against the emulator, real DuckDB file.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from google import genai
from google.genai import types

from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.retry_ledger import plan_retries
from batch_assets.providers.registry import provider_limits
from batch_assets.resources import ProvidersResource

DAY = "2026-11-20"
DONE = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


@pytest.fixture
def emulator_knobs(emulator_knobs: dict[str, Any]) -> dict[str, Any]:
    return {**emulator_knobs, "gemini_item_cancelled_rate": 0.25, "item_faults_by_occurrence": True}


@pytest.fixture
def gemini_task(ticket_task):
    """The ticket triage task on Gemini generateContent, retries due at once."""
    spec = ticket_task.spec.model_copy(
        update={
            "provider": "gemini",
            "endpoint": "generateContent",
            "model": "gemini-2.5-flash",
            "name": "triage_gemini",
            "retry": ticket_task.spec.retry.model_copy(update={"backoff_s": 0.0}),
        }
    )
    return dataclasses.replace(ticket_task, spec=spec, limits=provider_limits("gemini").with_overrides(spec.limits))


@pytest.mark.slow
def test_the_emulator_cancels_single_requests_of_a_succeeded_batch(emulator: EmulatorHandle, tmp_path) -> None:
    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=emulator.base_url))
    path = tmp_path / "in.jsonl"
    lines = [{"key": f"k{i}", "request": {"contents": [{"parts": [{"text": f"Ticket {i}"}]}]}} for i in range(40)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    uploaded = client.files.upload(file=path, config=types.UploadFileConfig(mime_type="jsonl"))
    job = client.batches.create(model="gemini-2.5-flash", src=uploaded.name)
    while job.state.value not in DONE:
        job = client.batches.get(name=job.name)
    out = [json.loads(x) for x in client.files.download(file=job.dest.file_name).decode().splitlines()]
    cancelled = [line for line in out if "error" in line]
    assert job.state.value == "JOB_STATE_SUCCEEDED" and len(out) == 40 and cancelled
    assert all(line["error"] == {"code": 1, "message": "The operation was cancelled."} for line in cancelled)


def _round(wh: Warehouse, task, adapter, wait_for_jobs) -> None:
    cut_shards(wh, task, DAY)
    submit_pending(wh, task, DAY, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, task, DAY, adapter)
    parse_results(wh, task, DAY)
    plan_retries(wh, task, DAY)
    apply_results(wh, task, DAY)


@pytest.mark.slow
def test_a_request_the_provider_canceled_is_retried_as_provider_canceled(
    seeded_copy: Warehouse, gemini_task, emulator: EmulatorHandle, wait_for_jobs
) -> None:
    wh = seeded_copy
    adapter = ProvidersResource(emulator_url=emulator.base_url, max_retries=2).adapter("gemini")
    freeze_manifest(wh, gemini_task, DAY)
    _round(wh, gemini_task, adapter, wait_for_jobs)
    with wh.connect() as conn:
        first = fetch_dicts(
            conn,
            """SELECT p.custom_id, p.error_class, p.error_code, d.action, d.charged
               FROM ledger.parsed_result p JOIN ledger.retry_decision d USING (custom_id, attempt)
               WHERE p.attempt = 1 AND p.error_class IS NOT NULL""",
        )
    assert first and {(r["error_class"], r["error_code"], r["action"], r["charged"]) for r in first} == {
        ("provider_canceled", "CANCELLED", "retry", True)
    }
    _round(wh, gemini_task, adapter, wait_for_jobs)
    with wh.connect() as conn:
        applied = {r[0] for r in conn.execute("SELECT custom_id FROM ledger.applied_result").fetchall()}
    # Resent with fresh draws: most of the canceled requests are answered on their second attempt.
    assert len({r["custom_id"] for r in first} & applied) > len(first) // 2
