"""OpenAI's 400 `invalid_prompt` on a result line (issue 43, item 9): a content-policy refusal, held.

OpenAI screens prompts against its usage policy and answers a flagged one 400 `invalid_prompt`,
type invalid_request_error, "Invalid prompt: your prompt was flagged as potentially violating our
usage policy" (openai/codex#7250). The emulator's `openai_invalid_prompt_rate` answers requests so;
the adapter must class them content_policy_error (compliance hold, never resent), not validation.
Official `openai` SDK over HTTP against the emulator, real DuckDB file.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.settle.retry_ledger import plan_retries

DAY = "2026-11-20"


@pytest.fixture
def emulator_knobs(emulator_knobs: dict[str, Any]) -> dict[str, Any]:
    return {**emulator_knobs, "openai_invalid_prompt_rate": 0.25, "shuffle_output": False}


def _line(i: int) -> dict[str, Any]:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"Ticket {i}"}], "max_tokens": 20}
    return {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}


@pytest.mark.slow
def test_the_emulator_answers_flagged_prompts_400_invalid_prompt(emulator: EmulatorHandle, tmp_path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(_line(i)) + "\n" for i in range(40)), encoding="utf-8")
    with openai.OpenAI(api_key="k", base_url=emulator.openai_base_url) as client:
        uploaded = client.files.create(file=path.open("rb"), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        while batch.status not in ("completed", "failed", "expired", "cancelled"):
            batch = client.batches.retrieve(batch.id)
        errors = [json.loads(x) for x in client.files.content(batch.error_file_id).text.splitlines()]
    assert batch.status == "completed" and batch.request_counts.failed == len(errors) > 0
    for line in errors:
        assert line["response"]["status_code"] == 400 and line["error"] is None
        error = line["response"]["body"]["error"]
        assert error["code"] == "invalid_prompt" and error["type"] == "invalid_request_error"
        assert error["message"].startswith("Invalid prompt: your prompt was flagged as potentially violating")


@pytest.mark.slow
def test_an_invalid_prompt_line_is_held_for_compliance_not_awaiting_an_operator(
    seeded_copy: Warehouse, ticket_task, emulator: EmulatorHandle, adapter, run_partition
) -> None:
    run_partition(seeded_copy, ticket_task, DAY, adapter)
    plan_retries(seeded_copy, ticket_task, DAY)
    with seeded_copy.connect() as conn:
        rows = fetch_dicts(
            conn,
            """SELECT p.error_class, d.action, count(*) AS n
               FROM ledger.parsed_result p JOIN ledger.retry_decision d USING (custom_id, attempt)
               WHERE p.error_code = 'invalid_prompt' GROUP BY ALL""",
        )
        holds = conn.execute("SELECT count(*) FROM ledger.compliance_hold WHERE provider_code = 'invalid_prompt'")
        held = holds.fetchone()[0]
    assert [(r["error_class"], r["action"]) for r in rows] == [("content_policy_error", "compliance_hold")]
    assert held == rows[0]["n"] > 0
