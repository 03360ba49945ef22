"""One gate decides whether lines may be sent (`may_send`), and every sender passes it: the
submissions asset, `batch-assets retry`, and anything else that calls submit_pending.

Real DuckDB file, the official OpenAI SDK over HTTP to the emulator.
"""

from __future__ import annotations

import pytest

import batch_assets.pipeline.govern.budget as budget
from batch_assets.cli import main
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.send_gate import (
    BUDGET_CHECK,
    SENSITIVE_CHECK,
    SendRefused,
    may_send,
)
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.retry_ledger import plan_retries

from .conftest import DAY1, FAST_EMULATOR

pytestmark = pytest.mark.slow
TASK_ID = "ticket_triage_20261120"


@pytest.fixture
def emulator_knobs():
    return {**FAST_EMULATOR, "item_faults_by_occurrence": True}


def jobs(wh) -> int:
    with wh.connect() as conn:
        return conn.execute("SELECT count(*) FROM ledger.provider_job").fetchone()[0]


def cap_today(monkeypatch, tmp_path, text: str) -> None:
    caps = tmp_path / "budgets.yaml"
    caps.write_text(f"currency: USD\n{text}\n", encoding="utf-8")
    monkeypatch.setattr(budget, "BUDGETS_FILE", caps)


def test_cli_retry_is_refused_over_a_per_model_day_cap_and_sends_nothing(
    dagster_env, ticket_task, emulator, adapter, wait_for_jobs, capsys, monkeypatch, tmp_path
):
    wh = dagster_env
    emulator.configure(item_error_rate=0.3)  # internal errors: retry decisions
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    submit_pending(wh, ticket_task, DAY1, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, ticket_task, DAY1, adapter)
    parse_results(wh, ticket_task, DAY1)
    plan_retries(wh, ticket_task, DAY1)
    with wh.connect() as conn:  # the retries' backoff has passed
        due = conn.execute(
            "UPDATE ledger.retry_decision SET not_before = now()::TIMESTAMP - INTERVAL 1 HOUR "
            "WHERE task_id = ? AND action = 'retry'",
            [TASK_ID],
        ).fetchone()[0]
    assert due > 0
    # Today's jobs already spent more than the model's day cap.
    cap_today(monkeypatch, tmp_path, "per_model_per_day:\n  gpt-4o-mini: 0.000001")
    before = jobs(wh)

    code = main(["retry", TASK_ID])
    out, err = capsys.readouterr()

    assert code != 0
    assert f"{TASK_ID}: {BUDGET_CHECK} failed; nothing submitted" in err and "per_model_per_day" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert jobs(wh) == before  # no batch created

    code = main(["retry", TASK_ID, "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0 and f"{TASK_ID}: would be refused: {BUDGET_CHECK} failed" in out


def test_submit_pending_refuses_a_line_of_a_blocked_item(seeded_copy, ticket_task, adapter):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    assert may_send(wh, ticket_task, DAY1) == []
    with wh.connect() as conn:  # as if the policy had blocked an item after its line was cut
        conn.execute(
            "INSERT INTO ledger.quarantine (custom_id, task_id, reason_code, reason, recorded_at, item_no) "
            "SELECT custom_id, task_id, 'blocked_by_policy', 'blocked by the task policy: card in column body', "
            "now()::TIMESTAMP, item_no FROM ledger.shard_line WHERE task_id = ? ORDER BY line_no LIMIT 1",
            [TASK_ID],
        )

    with pytest.raises(SendRefused) as refused:
        submit_pending(wh, ticket_task, DAY1, adapter)

    [verdict] = refused.value.refusals
    assert verdict.check == SENSITIVE_CHECK and verdict.figures == {"blocked_lines": 1}
    assert "card" not in str(refused.value)  # the reason names ids and counts, never a value
    assert jobs(wh) == 0


def test_submit_pending_refuses_over_budget_whoever_calls_it(seeded_copy, ticket_task, adapter, monkeypatch, tmp_path):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    cap_today(monkeypatch, tmp_path, "per_day: 0.000001")

    with pytest.raises(SendRefused) as refused:
        submit_pending(wh, ticket_task, DAY1, adapter)

    assert [v.check for v in refused.value.refusals] == [BUDGET_CHECK]
    assert jobs(wh) == 0
