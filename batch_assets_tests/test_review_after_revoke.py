"""A revoked answer leaves the review queue and cannot be approved (through the pipeline functions and
`batch-assets review`), over a real warehouse after a real pipeline run on the emulator; long review
listings are cut at --limit and say how many there are."""

from __future__ import annotations

from dataclasses import replace

import pytest

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.govern.review import ReviewError, count_review_items, decide, list_review_items
from batch_assets.pipeline.govern.revoke import revoke
from batch_assets.spec.model import ReviewSpec

from .cli_calls import assert_one_line_error, run
from .conftest import DAY1

pytestmark = pytest.mark.slow


@pytest.fixture
def reviewed(seeded_copy: Warehouse, ticket_task, adapter, run_partition, monkeypatch) -> tuple[Warehouse, str]:
    """One applied ticket_triage partition whose every answer waits for review; the CLI points at it."""
    task = replace(ticket_task, spec=ticket_task.spec.model_copy(update={"review": ReviewSpec(sample_rate=1.0)}))
    assert run_partition(seeded_copy, task, DAY1, adapter).applied > 3
    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(seeded_copy.database))
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(seeded_copy.data_dir))
    return seeded_copy, task.task_id(DAY1)


def test_a_revoked_answer_leaves_the_queue_and_approving_it_is_refused(reviewed):
    wh, task_id = reviewed
    pending = [i["custom_id"] for i in list_review_items(wh, task_id, "pending")]
    gone, kept = pending[:2], pending[2]
    assert revoke(wh, custom_ids=gone, reason="wrong prompt version").revoked == 2

    assert {i["custom_id"] for i in list_review_items(wh, task_id, "pending")} == set(pending) - set(gone)
    revoked = {i["custom_id"]: i["reason"] for i in list_review_items(wh, task_id, "revoked")}
    assert revoked == dict.fromkeys(gone, "wrong prompt version")
    with pytest.raises(ReviewError, match=f"answer revoked, cannot be approved: {gone[0]}; nothing decided"):
        decide(wh, [kept, gone[0]], "approved")
    assert {i["custom_id"]: i["state"] for i in list_review_items(wh, task_id)}[kept] == "pending"  # nothing decided
    rejected = decide(wh, [gone[1]], "rejected")  # already out of the queue: left as it was
    assert rejected.decided == 0 and rejected.already_decided == [gone[1]] and rejected.revoked is None


def test_an_answer_revoked_while_its_review_item_still_reads_pending_counts_as_revoked(reviewed):
    """Warehouses revoked before review items were closed on revoke keep them pending: the
    revocation decides."""
    wh, task_id = reviewed
    one = list_review_items(wh, task_id, "pending")[0]["custom_id"]
    revoke(wh, custom_ids=[one])
    with wh.connect() as conn:
        conn.execute("UPDATE ledger.review_item SET state = 'pending', decided_at = NULL WHERE custom_id = ?", [one])
    assert one not in {i["custom_id"] for i in list_review_items(wh, task_id, "pending")}
    with pytest.raises(ReviewError, match="answer revoked"):
        decide(wh, [one], "approved")


def test_review_approve_of_a_revoked_answer_fails_in_one_line(capsys, reviewed):
    wh, task_id = reviewed
    one = list_review_items(wh, task_id, "pending")[0]["custom_id"]
    code, _, err = run(capsys, "revoke", "--custom-id", one, "--reason", "bad answer", "--yes")
    assert code == 0, err
    code, out, err = run(capsys, "review", "approve", one)
    assert code == 1 and out == ""
    assert_one_line_error(err, f"answer revoked, cannot be approved: {one}", "review list --state revoked")
    code, out, _ = run(capsys, "review", "list", "--state", "revoked", "--format", "json")
    assert code == 0 and one in out and "bad answer" in out


def test_review_list_stops_at_its_limit_and_says_how_many_there_are(capsys, reviewed):
    wh, task_id = reviewed
    total = count_review_items(wh, task_id)
    assert total == len(list_review_items(wh, task_id)) > 3
    code, out, err = run(capsys, "review", "list", task_id, "--limit", "2")
    assert code == 0 and len([line for line in out.splitlines() if task_id in line]) == 2
    assert err.strip() == f"2 of {total:,} review item(s); --limit N shows more, --limit 0 all"
    code, out, err = run(capsys, "review", "list", task_id, "--limit", "0", "--format", "csv")
    assert (
        code == 0
        and len(out.strip().splitlines()) == total + 1
        and err.strip() == f"{total:,} of {total:,} review item(s)"
    )
    code, _, err = run(capsys, "review", "list", "--limit", "-1")
    assert code == 2
    assert_one_line_error(err, "--limit must be 0 (no limit) or more")


def test_revoke_asks_for_a_reason_and_a_confirmation(capsys, reviewed, monkeypatch):
    wh, task_id = reviewed
    with wh.connect() as conn:
        labels = conn.execute("SELECT count(*) FROM ticket_labels").fetchone()[0]
    code, _, err = run(capsys, "revoke", "--task-id", task_id)
    assert code == 2
    assert_one_line_error(err, "name why with --reason R")
    code, _, err = run(capsys, "revoke", "--task-id", task_id, "--reason", "prompt v1")  # no terminal
    assert code == 1
    assert_one_line_error(err, f"would revoke {labels:,} applied answer(s)", "add --yes to confirm (nothing revoked)")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    code, _, err = run(capsys, "revoke", "--task-id", task_id, "--reason", "prompt v1")
    assert code == 1
    assert_one_line_error(err, "not confirmed: nothing revoked")
    with wh.connect() as conn:
        assert conn.execute("SELECT count(*) FROM ticket_labels").fetchone()[0] == labels
        assert conn.execute("SELECT count(*) FROM ledger.revocation").fetchone()[0] == 0
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "y")
    code, out, _ = run(capsys, "revoke", "--task-id", task_id, "--reason", "prompt v1")
    assert code == 0 and f"revoked {labels} answer(s)" in out
    assert asked == [f"revoke {labels:,} applied answer(s) (0 already revoked)? [y/N] "]
    with wh.connect() as conn:
        assert conn.execute("SELECT count(*) FROM ticket_labels").fetchone()[0] == 0
        assert conn.execute("SELECT DISTINCT reason FROM ledger.revocation").fetchall() == [("prompt v1",)]
