"""`batch-assets purge`, `review` and `revoke` over a real warehouse holding one finished partition
of ticket_triage (run on the emulator): happy paths and bad input (one line on stderr, exit 2/1)."""

from __future__ import annotations

import json
import shutil

import pytest

from batch_assets.emulator.testing import running_emulator
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.settle.reconcile import settle
from batch_assets.providers.contract import ClientSettings
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
from batch_assets.resources import EMULATOR_API_KEY

from .cli_calls import assert_one_line_error, run
from .conftest import DAY1, FAST_EMULATOR, _run_partition

TASK_ID = "ticket_triage_20261120"


@pytest.fixture
def finished(tmp_path, _seeded_template, ticket_task, monkeypatch) -> Warehouse:
    """One settled ticket_triage partition; BATCH_ASSETS_DATABASE points at it."""
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    shutil.copy(_seeded_template, wh.database)
    with running_emulator(tmp_path / "emulator", **FAST_EMULATOR) as emu:
        adapter = OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emu.openai_base_url, max_retries=2))
        assert _run_partition(wh, ticket_task, DAY1, adapter).problems() == []
    assert settle(wh, TASK_ID)[1].passed
    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(wh.database))
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(wh.data_dir))
    monkeypatch.delenv("BATCH_ASSETS_DEBUG", raising=False)
    return wh


@pytest.mark.parametrize("command", ["purge", "review", "revoke"])
def test_help_names_the_command(capsys, command):
    code, out, err = run(capsys, command, "--help")
    assert code == 0, err
    assert f"batch-assets {command}" in out


@pytest.mark.slow
def test_purge_dry_run_then_purge_then_again(capsys, finished: Warehouse):
    shards = sorted(finished.data_dir.rglob("*.jsonl"))
    assert shards
    code, out, _ = run(capsys, "purge", "--older-than", "0h", "--dry-run")
    assert code == 0 and "would purge" in out and "would delete shard" in out
    assert sorted(finished.data_dir.rglob("*.jsonl")) == shards  # nothing deleted
    code, out, _ = run(capsys, "purge", "--older-than", "30d")
    assert code == 0 and "purged 0 shard file(s)" in out  # finished just now: inside the window
    code, out, _ = run(capsys, "purge", "--older-than", "0h", "--task", "ticket_triage")
    assert code == 0 and "compressed 1 raw file(s)" in out
    assert list(finished.data_dir.rglob("*.jsonl")) == [] and list(finished.data_dir.rglob("*.jsonl.gz"))
    code, out, _ = run(capsys, "purge", "--older-than", "0h")
    assert code == 0 and "purged 0 shard file(s) and compressed 0 raw file(s)" in out
    code, out, _ = run(capsys, "report", "--format", "json")
    assert json.loads(out)[0]["check"] == "passed"


@pytest.mark.parametrize("age", ["30", "3w", "d30", "-1d", "1.5d"])
def test_purge_refuses_a_bad_age(capsys, age):
    code, _, err = run(capsys, "purge", f"--older-than={age}")
    assert code == 2
    assert_one_line_error(err, "--older-than", "write e.g. 30d or 12h")


@pytest.mark.slow
def test_review_list_approve_reject(capsys, finished: Warehouse):
    code, out, _ = run(capsys, "review", "list", "ticket_triage", "--format", "json")
    items = json.loads(out)
    assert code == 0 and len(items) >= 2 and {i["state"] for i in items} == {"pending"}
    assert {i["task_id"] for i in items} == {TASK_ID}
    keep, drop = items[0]["custom_id"], items[1]["custom_id"]
    code, out, _ = run(capsys, "review", "approve", keep)
    assert code == 0 and "approved 1 item(s)" in out
    code, out, _ = run(capsys, "review", "reject", drop, "--reason", "wrong category")
    assert code == 0 and "rejected 1 item(s)" in out and "revoked 1 answer(s) (removed 1)" in out
    code, out, _ = run(capsys, "review", "reject", drop)
    assert code == 0 and "already decided" in out and "rejected 0 item(s)" in out
    code, out, _ = run(capsys, "review", "list", "--state", "rejected")
    assert code == 0 and drop in out and "wrong category" in out and keep not in out
    code, out, _ = run(capsys, "report", "--format", "json")
    row = json.loads(out)[0]
    assert row["revoked"] == 1 and row["balanced"] is True and row["check"] == "passed"


@pytest.mark.slow
def test_review_bad_input(capsys, finished: Warehouse):
    code, _, err = run(capsys, "review", "approve", "no_such_item")
    assert code == 1
    assert_one_line_error(err, "not review items: no_such_item", "review list")
    code, _, err = run(capsys, "review", "reject")
    assert code == 2 and "CUSTOM_ID" in err
    code, _, err = run(capsys, "review")
    assert code == 2
    assert_one_line_error(err, "list, approve or reject")
    code, _, err = run(capsys, "review", "list", "--state", "maybe")
    assert code == 2
    assert_one_line_error(err, "invalid choice")


@pytest.mark.slow
def test_revoke_twice_changes_nothing(capsys, finished: Warehouse):
    with finished.connect() as conn:
        custom_id, ticket = conn.execute("SELECT custom_id, ticket_id FROM ticket_labels ORDER BY 1 LIMIT 1").fetchone()
        labels = conn.execute("SELECT count(*) FROM ticket_labels").fetchone()[0]
    code, out, _ = run(capsys, "revoke", "--custom-id", custom_id, "--reason", "bad answer", "--yes")
    assert code == 0 and "revoked 1 answer(s) (removed 1); 0 already revoked" in out
    code, out, _ = run(capsys, "revoke", "--custom-id", custom_id, "nope", "--reason", "again")
    assert code == 0 and "revoked 0 answer(s) (none); 1 already revoked; no applied answer for: nope" in out
    code, out, _ = run(capsys, "revoke", "--task", "ticket_triage", "--business-id", ticket, "--reason", "again")
    assert code == 0 and "revoked 0 answer(s) (none); 1 already revoked" in out
    code, out, _ = run(capsys, "revoke", "--task-id", TASK_ID, "--reason", "all of it", "--yes")
    assert code == 0 and f"removed {labels - 1}" in out
    with finished.connect() as conn:
        assert conn.execute("SELECT count(*) FROM ticket_labels").fetchone()[0] == 0
    code, out, _ = run(capsys, "report", "--format", "json")
    row = json.loads(out)[0]
    assert row["revoked"] == labels and row["applied"] == 0 and row["check"] == "passed"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["revoke"], "name what to revoke"),
        (["revoke", "--task", "ticket_triage"], "--task NAME and --business-id B go together"),
        (["revoke", "--business-id", "TK-1"], "--task NAME and --business-id B go together"),
        (["revoke", "--task-id", TASK_ID, "--custom-id", "x"], "one of --task-id T"),
    ],
)
def test_revoke_bad_combinations(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert_one_line_error(err, message)


@pytest.mark.slow
def test_revoke_unknown_items(capsys, finished: Warehouse):
    code, _, err = run(capsys, "revoke", "--custom-id", "nope", "--reason", "x")
    assert code == 1
    assert_one_line_error(err, "no applied answer matches")
    code, _, err = run(capsys, "revoke", "--task", "ticket_triage", "--business-id", "TK-none", "--reason", "x")
    assert code == 1
    assert_one_line_error(err, "no applied answer matches")
