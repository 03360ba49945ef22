"""The retry ledger and honest reconciliation: every failed item goes through its class's action
until it is final, and a partition's check passes only when every item is final.

Real DuckDB file, the official OpenAI SDK over HTTP to the emulator, faults drawn per (request,
occurrence) so a retried request can succeed like on the real service.
"""

from __future__ import annotations

import dataclasses

import pytest

from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards, verify_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import FAILED, PASSED, WARN, reconcile, settle
from batch_assets.pipeline.settle.retry_ledger import plan_retries, reopen_for_operator

from .conftest import DAY1, FAST_EMULATOR

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

TASK_ID = "ticket_triage_20261120"
ITEMS, QUARANTINED = 58, 8  # 5 bad lines + 3 card numbers blocked by the policy


def q(wh, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        cur = conn.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def with_retry(task, **changes):
    """The task with retry settings changed (backoff 0 so retries are due at once)."""
    retry = task.spec.retry.model_copy(update={"backoff_s": 0.0, **changes})
    return dataclasses.replace(task, spec=task.spec.model_copy(update={"retry": retry}))


def one_round(wh, task, adapter, wait_for_jobs, day: str = DAY1):
    """What the submit and collect jobs do: cut (first attempt and due retries), submit, wait,
    collect, parse, plan retries, apply, settle. Returns (reconciliation, verdict)."""
    cut_shards(wh, task, day)
    assert verify_shards(wh, task, day)[0] == []
    submit_pending(wh, task, day, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, task, day, adapter)
    parse_results(wh, task, day)
    plan_retries(wh, task, day)
    apply_results(wh, task, day)
    return settle(wh, task.task_id(day), task.spec.retry.max_failed_fraction)


def drive(wh, task, adapter, wait_for_jobs, day: str = DAY1, rounds: int = 8):
    freeze_manifest(wh, task, day)
    for _ in range(rounds):
        rec, verdict = one_round(wh, task, adapter, wait_for_jobs, day)
        if verdict.status != WARN:
            return rec, verdict
    raise AssertionError(f"still pending after {rounds} rounds: {verdict.reasons}")


@pytest.fixture
def emulator_knobs():
    return {**FAST_EMULATOR, "item_faults_by_occurrence": True, "shuffle_output": True}


def test_every_failure_class_gets_its_action_until_every_item_is_final(
    seeded_copy, ticket_task, emulator, adapter, wait_for_jobs
):
    wh = seeded_copy
    emulator.configure(item_error_rate=0.3, truncate_rate=0.15, content_filter_rate=0.1)
    task = with_retry(ticket_task, max_failed_fraction=0.5)
    rec, verdict = drive(wh, task, adapter, wait_for_jobs)

    # The first attempt's outcomes, by class, and what the ledger decided for each.
    first = {
        (r["error_class"], r["action"], r["charged"]): r["n"]
        for r in q(
            wh,
            """
        SELECT error_class, action, charged, count(*) AS n FROM ledger.retry_decision
        WHERE task_id = ? AND attempt = 1 GROUP BY ALL""",
            [TASK_ID],
        )
    }
    classes = {c for c, _, _ in first}
    assert {
        "rate_or_capacity_error",
        "internal_error",
        "validation_error",
        "parse_error",
        "content_policy_error",
    } <= classes, first
    for (cls, action, charged), _ in first.items():
        expected = {
            "rate_or_capacity_error": "retry",
            "internal_error": "retry",
            "parse_error": "retry",
            "validation_error": "await_operator",
            "content_policy_error": "compliance_hold",
        }[cls]
        assert (action, charged) == (expected, True), (cls, action, charged)

    # Retried items were sent again, and many succeeded at a later attempt.
    assert rec.retried > 0 and rec.max_attempt >= 2
    recovered = q(
        wh,
        """SELECT count(*) AS n FROM ledger.applied_result a
                         JOIN ledger.parsed_result p USING (custom_id) WHERE p.attempt > 1 AND p.error_class IS NULL""",
    )
    assert recovered[0]["n"] > 0
    # Nothing is left open, and nothing went over the attempt limit.
    assert (rec.unresolved, rec.in_flight, rec.retry_pending) == (0, 0, 0)
    assert rec.max_attempt <= task.spec.retry.max_attempts
    assert rec.problems() == []
    assert verdict.status == PASSED and rec.final_status == "COMPLETED_WITH_FAILURES"
    # Every final outcome adds up to the items.
    assert (
        rec.applied + rec.stale + rec.quarantined + rec.final_failed_total + rec.compliance_held + rec.operator_canceled
    ) == ITEMS
    # Content-policy refusals are in the compliance queue with the provider's reason, never resent.
    held = q(wh, "SELECT custom_id, attempt, provider_reason FROM ledger.compliance_hold WHERE task_id = ?", [TASK_ID])
    assert len(held) == rec.compliance_held >= first[("content_policy_error", "compliance_hold", True)]
    assert all(h["provider_reason"] for h in held)
    assert not q(
        wh,
        "SELECT 1 FROM ledger.shard_line sl JOIN ledger.compliance_hold h USING (custom_id) "
        "WHERE sl.attempt > h.attempt",
    )
    # Validation errors wait for an operator: final-failed with their class.
    awaiting = q(wh, "SELECT count(*) AS n FROM ledger.retry_decision WHERE action = 'await_operator'")[0]["n"]
    assert (
        rec.final_failed.get("validation_error", 0) == awaiting >= first[("validation_error", "await_operator", True)]
    )
    # Each business row written once.
    (dupes,) = q(wh, "SELECT count(*) - count(DISTINCT ticket_id) AS n FROM ticket_labels")
    assert dupes["n"] == 0 and q(wh, "SELECT count(*) AS n FROM ticket_labels")[0]["n"] == rec.applied


def test_max_attempts_ends_in_final_failed_and_the_check_fails_over_tolerance(
    seeded_copy, ticket_task, emulator, adapter, wait_for_jobs
):
    wh = seeded_copy
    # Every request fails on every attempt (rate 1.0 draws a fault for each occurrence).
    emulator.configure(item_error_rate=1.0)
    task = with_retry(ticket_task, max_attempts=2, actions={"validation_error": "retry"})
    rec, verdict = drive(wh, task, adapter, wait_for_jobs)
    assert rec.max_attempt == 2 and rec.retried == ITEMS - QUARANTINED
    assert rec.final_failed_total == ITEMS - QUARANTINED and rec.applied == 0
    assert rec.unresolved == 0 and rec.problems() == []
    assert verdict.status == FAILED and rec.final_status == "FAILED"
    assert any("final failure(s)" in r and "tolerance" in r for r in verdict.reasons)
    finals = q(wh, "SELECT DISTINCT action, attempt FROM ledger.retry_decision WHERE action = 'final_failed'")
    assert finals == [{"action": "final_failed", "attempt": 2}]


def test_a_batch_failed_as_a_whole_never_passes(seeded_copy, ticket_task, emulator, adapter, wait_for_jobs):
    wh = seeded_copy
    # Rejected at validation for a reason that sending it again will not fix (too many requests).
    emulator.configure(max_requests_per_batch=10)
    rec, verdict = drive(wh, with_retry(ticket_task), adapter, wait_for_jobs)
    assert rec.applied == 0 and rec.unresolved == 0
    assert rec.final_failed == {"validation_error": ITEMS - QUARANTINED}
    assert verdict.status == FAILED and rec.final_status == "FAILED"
    # The provider's own reason is part of the verdict (and so of the check shown in the UI).
    assert any("provider failed batch" in r and "too_many_tasks" in r for r in verdict.reasons), verdict.reasons


def test_a_batch_rejected_for_capacity_is_requeued_without_charging_an_attempt(
    seeded_copy, ticket_task, emulator, adapter, wait_for_jobs
):
    wh = seeded_copy
    emulator.configure(enqueued_token_limit=10)  # the whole batch is over the limit
    task = with_retry(ticket_task, max_attempts=1)  # a charged failure would be final at once
    freeze_manifest(wh, task, DAY1)
    rec, verdict = one_round(wh, task, adapter, wait_for_jobs)
    assert verdict.status == WARN and rec.retry_pending == ITEMS - QUARANTINED
    decisions = q(wh, "SELECT DISTINCT error_class, action, charged, error_class FROM ledger.retry_decision")
    assert decisions == [{"error_class": "rate_or_capacity_error", "action": "requeue", "charged": False}]
    # Capacity frees up: the re-queued items go out as attempt 2 and all succeed.
    emulator.configure(enqueued_token_limit=None)
    rec, verdict = one_round(wh, task, adapter, wait_for_jobs)
    assert verdict.status == PASSED and rec.applied == ITEMS - QUARANTINED and rec.max_attempt == 2
    assert rec.final_status == "COMPLETED"


def test_expired_remainders_are_resent_in_smaller_shards(seeded_copy, ticket_task, emulator, adapter, wait_for_jobs):
    wh = seeded_copy
    emulator.configure(force_batch_status="expired")
    task = with_retry(ticket_task)
    task = dataclasses.replace(task, limits=dataclasses.replace(task.limits, max_requests_per_shard=20))
    rec, verdict = drive(wh, task, adapter, wait_for_jobs)
    assert verdict.status == PASSED and rec.applied == ITEMS - QUARANTINED
    expired = q(
        wh, "SELECT count(*) AS n FROM ledger.retry_decision WHERE error_class = 'expired' AND action = 'retry'"
    )
    assert expired[0]["n"] > 0
    # Only the unfinished items were sent again, in shards half the size of the first attempt's.
    retry_shards = q(wh, "SELECT line_count FROM ledger.shard WHERE attempt = 2")
    assert retry_shards and max(s["line_count"] for s in retry_shards) <= 10
    assert sum(s["line_count"] for s in retry_shards) == expired[0]["n"]


def test_the_check_warns_while_in_flight_and_retries_a_lost_line_as_missing_result(
    seeded_copy, ticket_task, emulator, adapter, wait_for_jobs
):
    wh = seeded_copy
    task = with_retry(ticket_task)
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    submit_pending(wh, task, DAY1, adapter)
    verdict = reconcile(wh, TASK_ID).verdict()
    assert verdict.status == WARN and "in flight" in verdict.reasons[0]
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, task, DAY1, adapter)
    # One answer line is lost between the provider and the ledger: the finished job gave the item no
    # line, so it is a missing_result, retried (issue 43, item 5), never left without an outcome.
    with wh.connect() as conn:
        conn.execute("DELETE FROM ledger.raw_result WHERE custom_id = (SELECT min(custom_id) FROM ledger.raw_result)")
    parse_results(wh, task, DAY1)
    plan_retries(wh, task, DAY1)
    apply_results(wh, task, DAY1)
    rec, verdict = settle(wh, TASK_ID)
    assert verdict.status == WARN and rec.failed == {"missing_result": 1} and rec.retry_pending == 1
    assert rec.unresolved_missing == 0


def test_an_operator_retry_reopens_final_validation_errors(seeded_copy, ticket_task, emulator, adapter, wait_for_jobs):
    wh = seeded_copy
    emulator.configure(item_error_rate=0.3)
    task = with_retry(ticket_task, max_failed_fraction=0.5)
    rec, _ = drive(wh, task, adapter, wait_for_jobs)
    invalid = rec.final_failed.get("validation_error", 0)
    assert invalid > 0
    assert reopen_for_operator(wh, TASK_ID, ("validation_error",), dry_run=True) == {"validation_error": invalid}
    assert reconcile(wh, TASK_ID).final_failed.get("validation_error") == invalid  # dry run changed nothing
    emulator.configure(item_error_rate=0.0)  # "after a fix"
    assert reopen_for_operator(wh, TASK_ID, ("validation_error",)) == {"validation_error": invalid}
    assert reconcile(wh, TASK_ID).final_status is None  # pending again
    rec, verdict = one_round(wh, task, adapter, wait_for_jobs)
    assert rec.final_failed.get("validation_error", 0) == 0 and verdict.status == PASSED
    assert q(wh, "SELECT action FROM ledger.operator_action") == [{"action": "retry"}]


def test_pending_retries_are_found_per_partition_without_reading_the_ledgers_history(
    seeded_copy, ticket_task, emulator, adapter, wait_for_jobs, tmp_path
):
    """A retry is pending while its attempt is the item's latest line. With nine other partitions
    (their resends all cut) in the ledger, the search yields exactly the open ones, and its scans of
    shard_line yield only the open partition's lines (DuckDB's profile: row counts), not every line
    of the ledger (the sensor runs it every tick)."""
    from batch_assets.ledger.history import copy_partition_rows
    from batch_assets.pipeline.settle.retry_ledger import pending_retries, pending_retries_conn

    from .profiles import EARLIER_DAYS, ledger_scans

    wh = seeded_copy
    emulator.configure(item_error_rate=0.3)
    rec, verdict = drive(wh, with_retry(ticket_task, max_failed_fraction=0.5), adapter, wait_for_jobs)
    assert rec.retried > 0 and pending_retries(wh) == []
    with wh.connect() as conn:
        copy_partition_rows(conn, DAY1, EARLIER_DAYS)  # earlier partitions, every resend cut
        # Two items' resends are taken back in this partition: their attempt-1 decisions are open again.
        reopened = [
            r[0]
            for r in conn.execute(
                """
            SELECT d.custom_id FROM ledger.retry_decision d JOIN ledger.shard_line sl
              ON sl.custom_id = d.custom_id AND sl.attempt = 2
            WHERE d.task_id = ? AND d.attempt = 1 AND d.action = 'retry' ORDER BY 1 LIMIT 2""",
                [TASK_ID],
            ).fetchall()
        ]
        assert len(reopened) == 2
        conn.execute(
            "DELETE FROM ledger.shard_line WHERE attempt > 1 AND custom_id IN (SELECT unnest(?::VARCHAR[]))", [reopened]
        )
        own_lines = conn.execute("SELECT count(*) FROM ledger.shard_line WHERE task_id = ?", [TASK_ID]).fetchone()[0]
        all_lines = conn.execute("SELECT count(*) FROM ledger.shard_line").fetchone()[0]
        scans = ledger_scans(conn, lambda: pending_retries_conn(conn), tmp_path / "profile.json")
    assert [(r["task_id"], r["pending"], r["due"], r["next_attempt"]) for r in pending_retries(wh)] == [
        (TASK_ID, 2, 2, 2)
    ]
    # its last statement: the open partition's lines (the later-lines scan before it reads attempt > 1 only)
    assert scans["shard_line"] and sum(scans["shard_line"]) <= own_lines < all_lines // 5, (scans, own_lines)
