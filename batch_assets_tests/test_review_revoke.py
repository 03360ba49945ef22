"""Review sampling and revoke over a real DuckDB warehouse after a real pipeline run on the emulator:
sampled answers are applied and wait for review; a rejected answer is revoked; revoking twice
changes nothing; an earlier answer comes back; the reconciliation still balances and passes."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.review import ReviewError, decide, list_review_items
from batch_assets.pipeline.govern.revoke import RevokeError, revoke
from batch_assets.pipeline.settle.reconcile import settle
from batch_assets.spec.model import ReviewSpec
from batch_assets.spec.resolve import TaskSpecError, resolve_task
from batch_assets_tests.conftest import DAY1

RATE = 0.2


@pytest.fixture
def review_task(ticket_task):
    return replace(
        ticket_task,
        spec=ticket_task.spec.model_copy(
            update={"review": ReviewSpec(sample_rate=RATE, always_if="category = 'billing'")}
        ),
    )


def _labels(wh: Warehouse) -> dict[str, dict]:
    with wh.connect() as conn:
        return {r["ticket_id"]: r for r in fetch_dicts(conn, "SELECT * FROM ticket_labels")}


def _picked(custom_id: str) -> bool:
    return int(hashlib.md5(custom_id.encode()).hexdigest()[:8], 16) < RATE * 2**32


@pytest.mark.slow
def test_review_and_revoke_round_trip(
    seeded_copy: Warehouse, review_task, adapter, run_partition, wait_for_jobs
) -> None:
    wh, task, task_id = seeded_copy, review_task, review_task.task_id(DAY1)
    rec = run_partition(wh, task, DAY1, adapter)
    labels = _labels(wh)
    assert rec.applied == len(labels) > 0
    # Sampled set-based, deterministically: the hash of the custom_id under the rate, or the condition.
    expected = {r["custom_id"] for r in labels.values() if _picked(r["custom_id"]) or r["category"] == "billing"}
    items = list_review_items(wh, task.name)
    assert {i["custom_id"] for i in items} == expected and expected
    assert {i["state"] for i in items} == {"pending"}
    assert all(i["sampled_by"] == ("rate" if _picked(i["custom_id"]) else "always_if") for i in items)
    assert list_review_items(wh, task_id) == items and list_review_items(wh, "other_task") == []

    approve, reject = sorted(expected)[:2]
    assert decide(wh, [approve], "approved").decided == 1
    result = decide(wh, [reject], "rejected", reason="wrong category")
    assert result.decided == 1 and result.revoked.by_action == {"removed": 1}
    rejected_key = next(k for k, r in labels.items() if r["custom_id"] == reject)
    assert rejected_key not in _labels(wh)  # no earlier answer: the value is removed
    states = {i["custom_id"]: (i["state"], i["reason"]) for i in list_review_items(wh)}
    assert states[approve] == ("approved", None) and states[reject] == ("rejected", "wrong category")

    # Deciding again, or revoking again, changes nothing.
    again = decide(wh, [reject], "approved")
    assert again.decided == 0 and again.already_decided == [reject]
    twice = revoke(wh, custom_ids=[reject])
    assert twice.revoked == 0 and twice.already_revoked == 1
    with pytest.raises(ReviewError, match="not review items: nope"):
        decide(wh, [approve, "nope"], "rejected")

    rec, verdict = settle(wh, task_id)
    assert verdict.passed, verdict.reasons
    assert rec.revoked == 1 and rec.applied == len(labels) - 1 and not rec.problems()

    # A changed source row gets a new answer over the old one; revoking it brings the old one back.
    key = next(k for k, r in labels.items() if r["custom_id"] not in (reject,))
    before = _labels(wh)[key]
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = ?", [key])
    freeze_manifest(wh, task, DAY1, refreeze=True)
    run_partition(wh, task, DAY1, adapter)
    newer = _labels(wh)[key]
    assert newer["custom_id"] != before["custom_id"]
    summary = revoke(wh, task_name=task.name, business_ids=[key], reason="bad batch")
    assert summary.by_action == {"restored": 1}
    assert _labels(wh)[key] == before
    assert revoke(wh, task_name=task.name, business_ids=[key]).revoked == 0  # the older one stays
    assert _labels(wh)[key] == before
    with wh.connect() as conn:
        rows = fetch_dicts(
            conn, "SELECT custom_id, action, restored_custom_id, reason FROM ledger.revocation ORDER BY revoked_at"
        )
    assert rows[-1] == {
        "custom_id": newer["custom_id"],
        "action": "restored",
        "restored_custom_id": before["custom_id"],
        "reason": "bad batch",
    }
    rec, verdict = settle(wh, task_id)
    assert verdict.passed, verdict.reasons
    assert rec.revoked == 2 and not rec.problems()


@pytest.mark.slow
def test_revoke_a_whole_partition_twice(seeded_copy: Warehouse, ticket_task, adapter, run_partition) -> None:
    wh, task_id = seeded_copy, ticket_task.task_id(DAY1)
    rec = run_partition(wh, ticket_task, DAY1, adapter)
    first = revoke(wh, task_id=task_id, reason="wrong prompt")
    assert first.by_action == {"removed": rec.applied}
    assert _labels(wh) == {}
    second = revoke(wh, task_id=task_id)
    assert second.revoked == 0 and second.already_revoked == rec.applied
    rec, verdict = settle(wh, task_id)
    assert verdict.passed and rec.applied == 0 and rec.revoked == first.revoked
    with pytest.raises(RevokeError, match="no applied answer matches"):
        revoke(wh, custom_ids=["ticket_triage:nope"])


def test_always_if_is_checked_against_the_output_fields(ticket_task) -> None:
    for bad, problem in (
        ("confidnce < 0.5", "confidnce"),
        ("confidence <", "syntax"),
        ("true); DROP TABLE x; SELECT (1", ""),
    ):
        spec = ticket_task.spec.model_copy(update={"review": ReviewSpec(always_if=bad)})
        with pytest.raises(TaskSpecError, match="field 'review.always_if'") as err:
            resolve_task(spec, ticket_task.yaml_path)
        assert problem.lower() in str(err.value).lower() and "Fix: write a SQL condition over: category" in str(
            err.value
        )
    ok = ticket_task.spec.model_copy(update={"review": ReviewSpec(always_if="confidence < 0.5 OR reason IS NULL")})
    assert resolve_task(ok, ticket_task.yaml_path).spec.review.always_if


def test_review_rate_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="sample_rate"):
        ReviewSpec(sample_rate=1.5)


@pytest.mark.slow
def test_revoking_an_answer_over_a_revoked_one_walks_back_to_the_answer_before(
    seeded_copy: Warehouse, ticket_task, adapter, run_partition
) -> None:
    """Three answers for one key, each applied over the one before. The middle one is revoked while
    the newest holds the table (nothing to change then); revoking the newest afterwards puts back
    the first, the nearest earlier answer still standing, instead of emptying the key."""
    wh, task, task_id = seeded_copy, ticket_task, ticket_task.task_id(DAY1)
    run_partition(wh, task, DAY1, adapter)
    key = sorted(_labels(wh))[0]
    answers = [_labels(wh)[key]]
    for edit in (" (edited)", " (edited again)"):
        with wh.connect() as conn:
            conn.execute("UPDATE support_tickets SET body = body || ? WHERE ticket_id = ?", [edit, key])
        freeze_manifest(wh, task, DAY1, refreeze=True)
        run_partition(wh, task, DAY1, adapter)
        answers.append(_labels(wh)[key])
    first, middle, newest = answers
    assert len({a["custom_id"] for a in answers}) == 3

    assert revoke(wh, custom_ids=[middle["custom_id"]]).by_action == {"superseded": 1}
    assert _labels(wh)[key] == newest
    summary = revoke(wh, custom_ids=[newest["custom_id"]], reason="bad batch")
    assert summary.by_action == {"restored": 1}
    assert _labels(wh)[key] == first
    with wh.connect() as conn:
        restored = conn.execute(
            "SELECT restored_custom_id FROM ledger.revocation WHERE custom_id = ?", [newest["custom_id"]]
        ).fetchone()[0]
    assert restored == first["custom_id"]
    # Revoking the first too leaves nothing standing: the key is emptied.
    assert revoke(wh, custom_ids=[first["custom_id"]]).by_action == {"removed": 1}
    assert key not in _labels(wh)
    rec, verdict = settle(wh, task_id)
    assert verdict.passed, verdict.reasons
    # Only the current freeze's answer counts: the earlier two belong to items its refreezes superseded.
    assert rec.revoked == 1 and not rec.problems()
