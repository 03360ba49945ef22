"""Re-parse (issue 43, item 11): after an output-schema fix, `batch-assets reparse` parses the kept raw
results of the items that failed to parse again, calls no provider, applies each answer that now
parses exactly once (under the stale-input guard), leaves what still fails as it is, and a second
re-parse changes nothing. A real DuckDB warehouse and the emulator's real result lines; the parse
runs first under a schema too strict for them (category without "account"), the fix is the task's
own schema."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from batch_assets.cli import main
from batch_assets.emulator.testing import running_emulator
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.reparse import reparse_partition, reparse_results
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import reconcile, settle
from batch_assets.pipeline.settle.retry_ledger import due_retries_sql, plan_retries
from batch_assets.providers.contract import ClientSettings
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
from batch_assets.resources import EMULATOR_API_KEY
from batch_assets.spec.resolve import ResolvedTask

from .conftest import DAY1, FAST_EMULATOR

pytestmark = pytest.mark.slow  # the emulator answers the partition once per module

TASK_ID = "ticket_triage_20261120"
LINES = 50  # result lines of the seeded day (58 items, 8 quarantined)


def strict(task: ResolvedTask, backoff_s: float | None = None) -> ResolvedTask:
    """The task with a schema its answers about accounts fail (the bug the fix removes)."""
    schema = json.loads(json.dumps(task.output_schema))
    schema["properties"]["category"]["enum"] = ["billing", "technical"]
    spec = task.spec
    if backoff_s is not None:
        spec = spec.model_copy(update={"retry": spec.retry.model_copy(update={"backoff_s": backoff_s})})
    return dataclasses.replace(task, output_schema=schema, spec=spec)


def q(wh: Warehouse, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        return fetch_dicts(conn, sql, params or [])


def one(wh: Warehouse, sql: str, params=None):
    with wh.connect() as conn:
        return conn.execute(sql, params or []).fetchone()[0]


@pytest.fixture(scope="module")
def collected(tmp_path_factory, _seeded_template, ticket_task) -> Path:
    """A warehouse whose seeded day was sent to the emulator and its results collected, not parsed."""
    root = tmp_path_factory.mktemp("reparse_collected")
    wh = Warehouse.at(root / "warehouse.duckdb", root / "data")
    shutil.copy(_seeded_template, wh.database)
    with running_emulator(root / "emulator", **FAST_EMULATOR) as emu:
        adapter = OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emu.openai_base_url, max_retries=2))
        freeze_manifest(wh, ticket_task, DAY1)
        cut_shards(wh, ticket_task, DAY1)
        submit_pending(wh, ticket_task, DAY1, adapter)
        from .conftest import _wait_for_jobs

        _wait_for_jobs(wh, adapter)
        collect_raw_results(wh, ticket_task, DAY1, adapter)
    return wh.database


@pytest.fixture
def failed(tmp_path, collected, ticket_task) -> Warehouse:
    """The collected partition parsed under the strict schema, applied, its retries planned, settled:
    the answers about accounts failed to parse and wait for a re-ask."""
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", collected.parent / "data")
    shutil.copy(collected, wh.database)
    broken = strict(ticket_task)
    parse_results(wh, broken, DAY1)
    apply_results(wh, broken, DAY1)
    plan_retries(wh, broken, DAY1)
    settle(wh, TASK_ID)
    return wh


def parse_errors(wh: Warehouse) -> list[str]:
    return [
        r["custom_id"]
        for r in q(
            wh,
            "SELECT custom_id FROM ledger.parsed_result WHERE task_id = ? AND error_class = 'parse_error' ORDER BY 1",
            [TASK_ID],
        )
    ]


def ledger_state(wh: Warehouse) -> dict:
    tables = ("parsed_result", "retry_decision", "applied_result", "parse_generation", "parsed_result_superseded")
    state = {t: q(wh, f"SELECT * EXCLUDE (task_id) FROM ledger.{t} ORDER BY ALL") for t in tables}
    state["ticket_labels"] = q(wh, "SELECT * FROM ticket_labels ORDER BY ALL")
    return state


def test_the_strict_schema_fails_the_answers_about_accounts(failed):
    failing = parse_errors(failed)
    assert 0 < len(failing) < LINES
    rows = q(failed, "SELECT error_code, error_message FROM ledger.parsed_result WHERE error_class = 'parse_error'")
    assert {r["error_code"] for r in rows} == {"schema_mismatch"}
    assert all("answer.category: not one of" in r["error_message"] for r in rows)
    assert one(failed, "SELECT count(*) FROM ticket_labels") == LINES - len(failing)
    actions = {r["action"] for r in q(failed, "SELECT action FROM ledger.retry_decision")}
    assert actions == {"retry"}  # one re-ask (retry.parse_retries): it would be sent again


def test_a_dry_run_counts_and_writes_nothing(failed, ticket_task):
    before = ledger_state(failed)
    s = reparse_results(failed, ticket_task, DAY1, dry_run=True)
    assert (s.candidates, s.now_usable, s.still_failed, s.unchanged) == (len(parse_errors(failed)),) * 2 + ({}, 0)
    assert s.generation is None and s.dry_run
    assert ledger_state(failed) == before


def test_reparse_after_the_fix_applies_each_answer_once_without_resending(failed, ticket_task):
    failing = parse_errors(failed)
    old_rows = {
        r["custom_id"]: r for r in q(failed, "SELECT * FROM ledger.parsed_result WHERE error_class IS NOT NULL")
    }
    old_decisions = {r["custom_id"]: r for r in q(failed, "SELECT * FROM ledger.retry_decision")}
    lines_before = one(failed, "SELECT count(*) FROM ledger.shard_line")
    jobs_before = one(failed, "SELECT count(*) FROM ledger.provider_job")
    # No emulator runs here: a re-parse that called a provider would fail to connect.
    run = reparse_partition(failed, ticket_task, DAY1)
    s = run.reparse
    assert (s.generation, s.candidates, s.now_usable, s.still_failed, s.unchanged) == (
        1,
        len(failing),
        len(failing),
        {},
        0,
    )
    assert (run.applied, run.stale, run.decided) == (len(failing), 0, {})
    assert (run.check, run.final_status) == ("passed", "COMPLETED")

    # Every answer written once; nothing sent, no new attempt, no retry left due.
    assert one(failed, "SELECT count(*) FROM ticket_labels") == LINES
    assert one(failed, "SELECT count(DISTINCT custom_id) FROM ticket_labels") == LINES
    assert one(failed, "SELECT count(*) FROM ledger.applied_result WHERE outcome = 'applied'") == LINES
    assert one(failed, "SELECT count(*) FROM ledger.shard_line") == lines_before
    assert one(failed, "SELECT count(*) FROM ledger.provider_job") == jobs_before
    assert one(failed, f"SELECT count(*) FROM ({due_retries_sql(repr(TASK_ID))})") == 0
    labels = {r["custom_id"]: r["category"] for r in q(failed, "SELECT custom_id, category FROM ticket_labels")}
    assert {labels[c] for c in failing} == {"account"}

    # The new outcomes are generation 1; the replaced rows and their decisions are kept.
    now = {r["custom_id"]: r for r in q(failed, "SELECT * FROM ledger.parsed_result WHERE custom_id IN ?", [failing])}
    assert {(r["parse_generation"], r["error_class"], r["provider_succeeded"]) for r in now.values()} == {
        (1, None, True)
    }
    assert all(json.loads(r["output_json"])["category"] == "account" for r in now.values())
    assert one(failed, "SELECT count(*) FROM ledger.parsed_result WHERE parse_generation = 0") == LINES - len(failing)
    kept = q(failed, "SELECT * FROM ledger.parsed_result_superseded ORDER BY custom_id")
    assert [r["custom_id"] for r in kept] == failing
    for r in kept:
        assert (r["parse_generation"], r["superseded_by"], r["attempt"]) == (0, 1, 1)
        assert json.loads(r["parsed_row"])["error_message"] == old_rows[r["custom_id"]]["error_message"]
        assert json.loads(r["retry_decision"])["action"] == old_decisions[r["custom_id"]]["action"] == "retry"
    assert one(failed, "SELECT count(*) FROM ledger.retry_decision") == 0
    (gen,) = q(failed, "SELECT * FROM ledger.parse_generation")
    assert (gen["generation"], gen["classes"], gen["candidates"], gen["changed"], gen["now_usable"]) == (
        1,
        "parse_error",
        len(failing),
        len(failing),
        len(failing),
    )
    assert gen["output_schema_hash"] == ticket_task.output_schema_hash
    r = reconcile(failed, TASK_ID)
    assert r.problems() == [] and (r.applied, r.failed_to_parse, r.succeeded) == (LINES, 0, LINES)


def test_reparsing_twice_changes_nothing(failed, ticket_task):
    reparse_partition(failed, ticket_task, DAY1)
    after_first = ledger_state(failed)
    again = reparse_partition(failed, ticket_task, DAY1)
    assert (again.reparse.generation, again.reparse.candidates, again.applied, again.decided) == (None, 0, 0, {})
    assert ledger_state(failed) == after_first


def test_what_still_fails_stays_as_it_is(failed, ticket_task):
    """A fix that is not enough for some answers: those fail still (with the new schema's message, so
    decided again, alike), the others are applied; parsed again unchanged, nothing is written."""
    failing = parse_errors(failed)
    # Answers about accounts with a short reason pass; the others fail on the reason's length now.
    account_reasons = {
        r["custom_id"]: len(json.loads(r["content"])["reason"])
        for r in q(
            failed,
            "SELECT custom_id, body ->> '$.choices[0].message.content' AS content FROM ledger.raw_result "
            "WHERE custom_id IN ?",
            [failing],
        )
    }
    cut = sorted(account_reasons.values())[len(account_reasons) // 2]
    schema = json.loads(json.dumps(ticket_task.output_schema))
    schema["properties"]["reason"]["maxLength"] = cut
    still_broken = dataclasses.replace(ticket_task, output_schema=schema)
    passing = sorted(c for c, n in account_reasons.items() if n <= cut)
    stays = sorted(c for c, n in account_reasons.items() if n > cut)
    assert passing and stays
    decisions_before = {
        r["custom_id"]: r for r in q(failed, "SELECT * FROM ledger.retry_decision WHERE custom_id IN ?", [stays])
    }

    run = reparse_partition(failed, still_broken, DAY1)
    s = run.reparse
    # The ones that still fail now fail on reason's length: a changed outcome, decided again.
    assert (s.now_usable, sum(s.still_failed.values())) == (len(passing), len(stays))
    assert s.still_failed == {"parse_error": len(stays)}
    assert run.applied == len(passing) and run.decided == {"retry": len(stays)}
    rows = {r["custom_id"]: r for r in q(failed, "SELECT * FROM ledger.parsed_result WHERE custom_id IN ?", [stays])}
    assert all("answer.reason" in r["error_message"] and r["parse_generation"] == 1 for r in rows.values())
    after = {r["custom_id"]: r for r in q(failed, "SELECT * FROM ledger.retry_decision WHERE custom_id IN ?", [stays])}
    assert {c: d["action"] for c, d in after.items()} == {c: d["action"] for c, d in decisions_before.items()}
    assert one(failed, "SELECT count(*) FROM ticket_labels WHERE custom_id IN ?", [stays]) == 0

    # Parsed again under the same schema: those are unchanged now, and nothing is written.
    before = ledger_state(failed)
    again = reparse_partition(failed, still_broken, DAY1)
    assert (again.reparse.candidates, again.reparse.unchanged, again.reparse.generation) == (
        len(stays),
        len(stays),
        None,
    )
    assert ledger_state(failed) == before


def test_an_item_sent_again_is_left_to_its_new_attempt(tmp_path, collected, ticket_task):
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", collected.parent / "data")
    shutil.copy(collected, wh.database)
    broken = strict(ticket_task, backoff_s=0)  # the re-ask is due at once
    parse_results(wh, broken, DAY1)
    apply_results(wh, broken, DAY1)
    plan_retries(wh, broken, DAY1)
    failing = parse_errors(wh)
    assert cut_shards(wh, broken, DAY1).lines == len(failing)  # attempt 2 cut (not sent)
    s = reparse_results(wh, ticket_task, DAY1)
    assert (s.candidates, s.sent_again, s.generation) == (0, len(failing), None)


def test_the_stale_input_guard_holds_for_a_reparsed_answer(failed, ticket_task):
    failing = parse_errors(failed)
    (ticket,) = [
        r["business_id"]
        for r in q(failed, "SELECT business_id FROM ledger.manifest_item WHERE custom_id = ?", [failing[0]])
    ]
    with failed.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = body || ' (edited since)' WHERE ticket_id = ?", [ticket])
    run = reparse_partition(failed, ticket_task, DAY1)
    assert (run.applied, run.stale) == (len(failing) - 1, 1)
    outcome = one(failed, "SELECT outcome FROM ledger.applied_result WHERE custom_id = ?", [failing[0]])
    assert outcome == "stale" and one(failed, "SELECT count(*) FROM ticket_labels WHERE ticket_id = ?", [ticket]) == 0


def test_the_command_line_dry_run_reparse_and_report(capsys, monkeypatch, failed):
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(failed.data_dir))
    monkeypatch.delenv("BATCH_ASSETS_DEBUG", raising=False)
    n = len(parse_errors(failed))
    db = str(failed.database)

    assert main(["--database", db, "reparse", TASK_ID, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and f"would re-parse {n} result(s) failed with parse_error, {n} now parse" in out
    assert "nothing written" in out and one(failed, "SELECT count(*) FROM ledger.parse_generation") == 0

    assert main(["--database", db, "reparse", TASK_ID, "--class", "parse_error"]) == 0
    out, _ = capsys.readouterr()
    assert f"parse generation 1: {n} result(s) failed with parse_error, {n} now parse" in out
    assert f"applied {n}, stale 0" in out and "final status COMPLETED" in out

    assert main(["--database", db, "reparse", TASK_ID]) == 0
    out, _ = capsys.readouterr()
    assert "nothing changed: 0 result(s)" in out and "applied 0, stale 0" in out

    assert main(["--database", db, "report", "--format", "json", "--task", TASK_ID]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["reparsed"], row["parse_generations"], row["applied"], row["balanced"]) == (n, 1, LINES, True)
    assert main(["--database", db, "report", "--task", TASK_ID]) == 0
    assert f"REPARSED {TASK_ID}: {n} outcome(s) from 1 re-parse(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["reparse", "nosuch_20261120"], 1, "no batch task 'nosuch_20261120'; known tasks: ticket_triage"),
        (["reparse", TASK_ID, "--class", "content_policy_error"], 2, "invalid choice: 'content_policy_error'"),
        (["reparse", TASK_ID, "--class", "nonsense"], 2, "invalid choice: 'nonsense'"),
    ],
)
def test_the_command_line_refusals(capsys, failed, argv, code, message):
    assert main(["--database", str(failed.database), *argv]) == code
    _, err = capsys.readouterr()
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
