"""The ledger's writers of the control tables (jobs and their events, shards, partitions, account
pauses, dry runs, remote deletions, operator actions) keep the same rules on both backends: the
Warehouse's DuckDB file and a real PostgreSQL. Each scenario runs on each and reads back what it wrote."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from batch_assets.ledger import accounts, dry_runs, jobs, quotas, retention, retries, shards, tasks
from batch_assets.ledger.admission import PRIORITY_RANKS, Candidate, mark_waiting
from batch_assets.ledger.states import TaskStatus
from batch_assets.providers.contract import JobSnapshot, JobState

TASK_ID = "ticket_triage_20261120"


@pytest.fixture
def control(empty_control):
    """The control tables with one frozen partition and its two shards, on each backend."""
    _freeze(empty_control)
    return empty_control


def _freeze(db) -> None:
    tasks.upsert_frozen_task(
        db,
        task_id=TASK_ID,
        task_name="ticket_triage",
        partition_date="2026-11-20",
        item_type="ticket",
        provider="openai",
        model="gpt-4o-mini",
        endpoint="/v1/chat/completions",
        prompt_version="v1",
        output_schema_version="v1",
        manifest_uri="/data/manifest.parquet",
        manifest_version=1,
        total_items=20,
        est_input_tokens=100,
        est_output_tokens=50,
    )
    rows = pa.table(
        {
            "shard_id": [f"{TASK_ID}:s{n}" for n in range(2)],
            "attempt": pa.array([1, 1], pa.int32()),
            "shard_no": pa.array([0, 1], pa.int32()),
            "path": ["/data/s0.jsonl", "/data/s1.jsonl"],
            "line_count": [10, 10],
            "byte_count": [100, 100],
            "est_tokens": [75, 75],
            "sha256": ["a" * 64, None],
        }
    )
    assert (
        shards.insert_shards(
            db, task_id=TASK_ID, provider="openai", endpoint="/v1/chat/completions", model="gpt-4o-mini", rows=rows
        )
        == 2
    )


def _snap(batch: str, state: JobState, raw: str, **kw) -> JobSnapshot:
    return JobSnapshot(batch, raw, state, **kw)


def _job(db, job_key: str) -> dict:
    return db.execute("SELECT * FROM ledger.provider_job WHERE job_key = ?", [job_key]).dicts()[0]


def _events(db, job_key: str) -> list[tuple]:
    return db.execute(
        "SELECT from_state, to_state, raw_status FROM ledger.status_event WHERE job_key = ? ORDER BY observed_at",
        [job_key],
    ).rows


def test_a_job_goes_from_intent_to_terminal_and_stays_there(control):
    db = control
    jobs.insert_job_intent(db, "j0", TASK_ID, f"{TASK_ID}:s0", "openai", "/v1/chat/completions",
                           endpoint_mode="emulator", endpoint_url="http://127.0.0.1:1/v1?key=x",
                           request_options={"b": 1, "a": 2})  # fmt: skip
    jobs.set_input_file(db, "j0", "file-in")
    started = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    assert jobs.record_snapshot(
        db, "j0", _snap("b0", JobState.RUNNING, "in_progress", request_total=10, provider_started_at=started),
        submitted=True,
    )  # fmt: skip
    # A batch of poll results: the job ends; an unknown job key is ignored.
    done = {"j0": _snap("b0", JobState.COMPLETED, "completed", request_total=10, request_completed=10,
                        output_file_id="file-out", results_ready=True),
            "nope": _snap("bx", JobState.FAILED, "failed")}  # fmt: skip
    assert jobs.record_snapshots(db, jobs.snapshot_columns(done)) == [("j0", "RUNNING", "COMPLETED")]
    # A late, reordered observation never moves a terminal job; it only completes what it learns.
    late = {"j0": _snap("b0", JobState.RUNNING, "in_progress", error_file_id="file-err")}
    assert jobs.record_snapshots(db, jobs.snapshot_columns(late)) == []
    job = _job(db, "j0")
    assert (job["state"], job["provider_batch_id"], job["input_file_id"]) == ("COMPLETED", "b0", "file-in")
    assert (job["output_file_id"], job["error_file_id"], job["results_ready"]) == ("file-out", "file-err", True)
    assert job["terminal_seq"] == 1 and job["terminal_at"] is not None and job["submitted_at"] is not None
    assert job["provider_started_at"] == started.replace(tzinfo=None)  # kept when a later answer lacks it
    assert (job["endpoint_url"], job["request_options"]) == ("http://127.0.0.1:1", '{"a": 2, "b": 1}')
    assert _events(db, "j0") == [
        (None, "CREATED", None),
        ("CREATED", "RUNNING", "in_progress"),
        ("RUNNING", "COMPLETED", "completed"),
    ]


def test_collection_and_stuck_marks(control):
    db = control
    jobs.insert_job_intent(db, "j0", TASK_ID, f"{TASK_ID}:s0", "openai", "/v1/chat/completions")
    jobs.request_cancel(db, "j0")
    jobs.count_collect_attempts(db, ["j0"])
    jobs.count_collect_attempts(db, ["j0", "other"])
    jobs.set_collect_error(db, "j0", "x" * 3000)
    jobs.mark_stuck(db, "j0")
    first = _job(db, "j0")["stuck_at"]
    jobs.mark_stuck(db, "j0")
    jobs.set_stuck_action(db, "j0", "cancel_requested")
    job = _job(db, "j0")
    assert (job["cancel_requested"], job["collect_attempts"], len(job["collect_error"])) == (True, 2, 2000)
    assert (job["stuck_at"], job["stuck_action"]) == (first, "cancel_requested")
    jobs.mark_downloaded(db, "j0")
    jobs.mark_collected(db, ["j0"])
    job = _job(db, "j0")
    assert job["collect_error"] is None and job["downloaded_at"] is not None and job["collected_at"] is not None
    jobs.unmark_collected(db, TASK_ID)
    assert _job(db, "j0")["collected_at"] is None


def test_an_operator_adopts_or_abandons_an_undecided_create(control):
    db = control
    for key, n in (("j0", 0), ("j1", 1)):
        assert jobs.claim_new_intent(db, key, TASK_ID, f"{TASK_ID}:s{n}", "openai", "/v1/chat/completions", "run-a")
        jobs.mark_create_unknown(db, key, "timeout")
    with pytest.raises(jobs.JobNotSettled, match="held by submit run run-a"):
        jobs.abandon_job(db, "j0", "gave up")
    jobs.release_claims_of(db, ["run-a"])
    jobs.adopt_job(db, "j0", _snap("b0", JobState.RUNNING, "in_progress"), "found by hand")
    with pytest.raises(jobs.JobNotSettled, match="already recorded for job j0"):
        jobs.adopt_job(db, "j1", _snap("b0", JobState.RUNNING, "in_progress"), "the same batch")
    jobs.abandon_job(db, "j1", "gave up")
    assert [(_job(db, k)["create_outcome"], _job(db, k)["provider_batch_id"]) for k in ("j0", "j1")] == [
        ("adopted", "b0"),
        ("abandoned", None),
    ]
    actions = db.execute("SELECT action, job_key, detail FROM ledger.operator_action ORDER BY acted_at").rows
    assert actions == [("adopt", "j0", "found by hand"), ("abandon", "j1", "gave up")]


def test_partition_shard_pause_dry_run_and_deletion_writers(control):
    db = control
    assert tasks.set_task_status(db, TASK_ID, TaskStatus.SHARDED, only_from=TaskStatus.FROZEN)
    assert not tasks.set_task_status(db, TASK_ID, TaskStatus.SHARDED, only_from=TaskStatus.FROZEN)
    tasks.set_task_currency(db, TASK_ID, "USD")
    assert (tasks.task_row(db, TASK_ID)["status"], tasks.task_row(db, TASK_ID)["currency"]) == ("SHARDED", "USD")
    shards.mark_shards_deferred(db, [f"{TASK_ID}:s1"])
    retention.mark_shard_purged(db, f"{TASK_ID}:s0")
    assert [s["shard_id"] for s in shards.unpurged_shards(db, [TASK_ID])] == [f"{TASK_ID}:s1"]
    assert shards.partition_shards(db, TASK_ID)[1]["deferred_at"] is not None

    pause = {"task_id": TASK_ID, "error_code": "Arrearage", "error_message": None, "job_key": None, "items": 3}
    assert accounts.pause_account(db, "dashscope", **pause, fix="top up")
    assert not accounts.pause_account(db, "dashscope", **pause, fix="top up")  # the first pause stays
    assert [p["provider"] for p in accounts.active_pauses(db)] == ["dashscope"]
    assert accounts.resume_account(db, "dashscope", "ops", "paid")["error_code"] == "Arrearage"
    assert accounts.active_pause(db, "dashscope") is None

    dry_runs.record_dry_run(db, task_name="ticket_triage", prompt_version="v1", prompt_hash=None, task_id=TASK_ID,
                            n=5, sample_hash="h", items=20, cost_estimated=0.5, currency="USD")  # fmt: skip
    assert dry_runs.latest_dry_run(db, "ticket_triage", "v1")["sample_hash"] == "h"
    assert dry_runs.latest_dry_run(db, "ticket_triage", "v2") is None

    jobs.insert_job_intent(db, "j0", TASK_ID, f"{TASK_ID}:s0", "openai", "/v1/chat/completions")
    retention.record_remote_deletion_failure(db, job_key="j0", task_id=TASK_ID, provider="openai", error="503")
    retention.record_remote_deletion(db, job_key="j0", task_id=TASK_ID, provider="openai", deleted=["f1", "f2"])
    job = _job(db, "j0")
    assert (job["remote_delete_attempts"], job["remote_delete_error"]) == (2, None)
    outcomes = db.execute("SELECT outcome, count(*) FROM ledger.remote_file_deletion GROUP BY outcome ORDER BY 1")
    assert outcomes.rows == [("deleted", 2), ("failed", 1)]
    assert [a for (a,) in db.execute("SELECT action FROM ledger.operator_action").rows] == ["resume"]


def test_quota_reads_final_status_and_a_partial_unmark(control):
    db = control
    assert jobs.claim_new_intent(db, "j0", TASK_ID, f"{TASK_ID}:s0", "openai", "/v1/chat/completions", "run-a")
    waiter = Candidate("openai", "default", "gpt-4o-mini", "ticket_triage", f"{TASK_ID}:s1", 75, PRIORITY_RANKS["high"])
    mark_waiting(db, [waiter], "the account's batch limit is reached")
    holdings = quotas.account_holdings(db)
    assert [(h["provider"], h["model"], h["jobs"], h["tokens"]) for h in holdings] == [("openai", "gpt-4o-mini", 1, 75)]
    (waiting,) = quotas.waiting_partitions(db)
    assert (waiting["partition_date"], waiting["shards"], waiting["priority"]) == ("2026-11-20", 1, "high")
    assert (waiting["reason"], waiting["asked_for"]) == ("the account's batch limit is reached", True)

    assert retries.set_final_status(db, TASK_ID, "COMPLETED")
    assert not retries.set_final_status(db, TASK_ID, "COMPLETED")
    assert tasks.task_row(db, TASK_ID)["finished_at"] is not None
    assert retries.set_final_status(db, TASK_ID, None)
    assert tasks.task_row(db, TASK_ID)["finished_at"] is None

    jobs.insert_job_intent(db, "j1", TASK_ID, f"{TASK_ID}:s1", "openai", "/v1/chat/completions")
    jobs.mark_collected(db, ["j0", "j1"])
    jobs.unmark_collected(db, TASK_ID, ["j1"])
    assert [_job(db, k)["collected_at"] is None for k in ("j0", "j1")] == [False, True]
