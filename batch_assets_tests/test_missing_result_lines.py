"""Items of a finished job that got no result line at all (issue 43, item 5).

The emulator's `missing_output_lines` drops requests of a completed batch from both results files, as
a real OpenAI batch reported completed can. Once the job is final and its files are read, each such
item is a `missing_result` failure: retried within the normal attempt budget, final-failed after it,
never left without an outcome. Official `openai` SDK over HTTP against the emulator, real DuckDB file.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import openai
import pytest

from batch_assets.cli import main as cli_main
from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.collect.collect_runs import pending_jobs
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import WARN, settle
from batch_assets.pipeline.settle.retry_ledger import plan_retries

DAY = "2026-11-20"
KNOBS = {
    "queue_delay_s": 0.02,
    "seconds_per_request": 0.0005,
    "finalize_delay_s": 0.02,
    "cancel_delay_s": 0.02,
    "log_requests": False,
}


@pytest.fixture
def emulator_knobs() -> dict[str, Any]:
    return KNOBS


def _task(task, **retry_changes):
    """The task with retries due at once (backoff 0) and `retry_changes`."""
    retry = task.spec.retry.model_copy(update={"backoff_s": 0.0, **retry_changes})
    return dataclasses.replace(task, spec=task.spec.model_copy(update={"retry": retry}))


def _round(wh: Warehouse, task, adapter, wait_for_jobs):
    cut_shards(wh, task, DAY)
    submit_pending(wh, task, DAY, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, task, DAY, adapter)
    parse_results(wh, task, DAY)
    plan_retries(wh, task, DAY)
    apply_results(wh, task, DAY)
    return settle(wh, task.task_id(DAY), task.spec.retry.max_failed_fraction)


def _drive(wh: Warehouse, task, adapter, wait_for_jobs, rounds: int = 6):
    freeze_manifest(wh, task, DAY)
    for _ in range(rounds):
        rec, verdict = _round(wh, task, adapter, wait_for_jobs)
        if verdict.status != WARN:
            return rec, verdict
    raise AssertionError(f"still pending after {rounds} rounds: {verdict.reasons}")


def _rows(wh: Warehouse, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        return fetch_dicts(conn, sql, params or [])


@pytest.mark.slow
def test_emulator_drops_lines_of_a_completed_batch_but_never_all(emulator: EmulatorHandle) -> None:
    emulator.configure(missing_output_lines=1.0)
    lines = [
        {
            "custom_id": f"r-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"Where is parcel {i}?"}]},
        }
        for i in range(3)
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with openai.OpenAI(api_key="sk-test", base_url=emulator.openai_base_url) as client:
        uploaded = client.files.create(file=("in.jsonl", data), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        deadline = time.monotonic() + 10
        while batch.status not in ("completed", "failed", "expired", "cancelled"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
            batch = client.batches.retrieve(batch.id)
        assert batch.status == "completed" and batch.request_counts.completed == 3
        texts = [client.files.content(f).text for f in (batch.output_file_id, batch.error_file_id) if f]
    # Every request is reported done; only one of them has a line (a completed batch keeps a file).
    assert len("".join(texts).splitlines()) == 1


@pytest.mark.slow
def test_line_less_items_are_missing_results_retried_until_they_succeed(
    seeded_copy: Warehouse, ticket_task, emulator: EmulatorHandle, adapter, wait_for_jobs
) -> None:
    wh, task = seeded_copy, _task(ticket_task)
    emulator.configure(missing_output_lines=0.25)
    freeze_manifest(wh, task, DAY)
    _round(wh, task, adapter, wait_for_jobs)
    missing = _rows(
        wh,
        "SELECT p.custom_id, p.error_code, p.from_line, d.action, d.charged, d.next_attempt "
        "FROM ledger.parsed_result p JOIN ledger.retry_decision d USING (custom_id, attempt) "
        "WHERE p.error_class = 'missing_result'",
    )
    assert missing, "a quarter of the lines dropped, none filed as missing_result"
    assert {(r["error_code"], r["from_line"], r["action"], r["charged"], r["next_attempt"]) for r in missing} == {
        ("missing_result", False, "retry", True, 2)
    }
    # Every frozen, sent item has an outcome for its first attempt; the job counts as collected.
    unaccounted = _rows(
        wh,
        "SELECT sl.custom_id FROM ledger.shard_line sl ANTI JOIN ledger.parsed_result p USING (custom_id, attempt)",
    )
    assert unaccounted == []
    assert pending_jobs(wh, task.task_id(DAY)) == []

    emulator.configure(missing_output_lines=0.0)
    for _ in range(3):
        rec, verdict = _round(wh, task, adapter, wait_for_jobs)
        if verdict.status != WARN:
            break
    assert rec.final_failed.get("missing_result", 0) == 0
    retried = _rows(
        wh,
        "SELECT count(*) AS n FROM ledger.parsed_result WHERE attempt = 2 AND error_class IS NULL "
        "AND custom_id IN (SELECT custom_id FROM ledger.parsed_result WHERE error_class = 'missing_result')",
    )
    assert retried[0]["n"] == len(missing)


@pytest.mark.slow
def test_a_missing_result_past_the_attempt_budget_is_final_failed_and_reported(
    seeded_copy: Warehouse, ticket_task, emulator: EmulatorHandle, adapter, wait_for_jobs, capsys
) -> None:
    wh, task = seeded_copy, _task(ticket_task, max_attempts=1, max_failed_fraction=1.0)
    emulator.configure(missing_output_lines=0.25)
    rec, _verdict = _drive(wh, task, adapter, wait_for_jobs)
    missing = _rows(wh, "SELECT custom_id FROM ledger.parsed_result WHERE error_class = 'missing_result'")
    assert missing and rec.final_failed == {"missing_result": len(missing)}
    decisions = _rows(wh, "SELECT error_class, action, count(*) AS n FROM ledger.retry_decision GROUP BY ALL")
    assert decisions == [{"error_class": "missing_result", "action": "final_failed", "n": len(missing)}]

    # The report's final_failed object names the class, and an operator may retry it by name.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BATCH_ASSETS_DATABASE", str(wh.database))
        mp.setenv("BATCH_ASSETS_DATA_DIR", str(wh.data_dir))
        assert cli_main(["report", "--task", task.task_id(DAY), "--format", "json"]) == 0
        [found] = json.loads(capsys.readouterr().out)
        assert cli_main(["retry", task.task_id(DAY), "--class", "missing_result", "--dry-run"]) == 0
        assert str(len(missing)) in capsys.readouterr().out
    assert found["final_failed"]["missing_result"] == len(missing)
