"""SIGKILL in the middle of a stage, restart, drive to final: nothing lost, nothing written twice.

A real subprocess (batch_assets_tests.stage_process) runs one stage against the test's warehouse
file and emulator. BATCH_ASSETS_FAULTPOINT names a point in that stage (see
batch_assets.pipeline.faultpoints): on reaching it the process writes a marker file and blocks;
the test waits for the marker and SIGKILLs it, so the kill lands exactly there every time. Then
the stage runs again in a fresh process, the partition is driven round by round to final, and:
every item is final, the reconciliation equations hold, no business row and no applied_result
row is written twice, no result line is counted twice per attempt, and every provider batch is
tracked by exactly one ledger job.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.control_db import as_control
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.ingest import collect_raw_results, download_results, ingest_files
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.faultpoints import ENV as FAULTPOINT_ENV
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import WARN, settle
from batch_assets.pipeline.settle.retry_ledger import plan_retries
from batch_assets.soak import provider_batch_ids
from batch_assets.spec.resolve import ResolvedTask
from batch_assets_tests import ledger_rows

from .conftest import DAY1, FAST_EMULATOR
from .stage_process import LEASE_ENV
from .stage_runs import MARKER_TIMEOUT_S, kill_at, run_stage

ROUNDS = 8
CLAIM_LEASE_S = 3.0  # the killed submit run's claim lease, where submissions are claimed


@pytest.fixture
def emulator_knobs():
    # Duplicated and shuffled output lines, and item faults drawn per occurrence so retries can succeed.
    return {
        **FAST_EMULATOR,
        "item_faults_by_occurrence": True,
        "shuffle_output": True,
        "duplicate_output_lines": 0.15,
        "item_error_rate": 0.1,
        "truncate_rate": 0.05,
    }


def q(wh: Warehouse, sql: str, params=None) -> list[tuple]:
    with wh.connect() as conn:
        return ledger_rows.rows(conn, sql, params)


def _task(ticket_task: ResolvedTask) -> ResolvedTask:
    """Backoff 0 (retries due at once), a tolerance for the injected faults, two batches per attempt."""
    retry = ticket_task.spec.retry.model_copy(update={"backoff_s": 0.0, "max_failed_fraction": 0.5})
    spec = ticket_task.spec.model_copy(update={"retry": retry})
    return dataclasses.replace(
        ticket_task, spec=spec, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=30)
    )


def wait_for_claims_to_expire(wh: Warehouse) -> None:
    """Where submissions are claimed with a lease: wait until the killed run's claim has run out
    (it ran with a lease of CLAIM_LEASE_S), as a restart after a crash would find it."""
    with wh.connect() as conn:
        columns = {
            r[0]
            for r in as_control(conn)
            .execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'ledger' AND table_name = 'provider_job'"
            )
            .rows
        }
    if "claim_expires_at" not in columns:
        return
    deadline = time.monotonic() + CLAIM_LEASE_S + MARKER_TIMEOUT_S
    while q(wh, "SELECT count(*) FROM ledger.provider_job WHERE claim_expires_at > now()::TIMESTAMP")[0][0]:
        assert time.monotonic() < deadline, "the killed run's claim never ran out"
        time.sleep(0.1)


def _after_crash(point: str, wh: Warehouse, task_id: str, emulator: EmulatorHandle, table: str) -> None:
    """What the crash left: the stage's work at the point was not recorded (the point really was
    before the record / inside the transaction)."""
    if point == "submit.created":
        assert q(wh, "SELECT count(*), count(provider_batch_id) FROM ledger.provider_job")[0] == (1, 0)
        assert len(provider_batch_ids(emulator, "openai")) == 1  # created at the provider, unknown to the ledger
    elif point == "download.file_written":
        assert q(wh, "SELECT count(*) FROM ledger.raw_file")[0][0] == 0
        assert any((wh.data_dir / "raw" / task_id).iterdir())  # the file is on disk
    elif point == "ingest.before_commit":
        assert q(wh, "SELECT count(*) FROM ledger.raw_result")[0][0] == 0
        assert q(wh, "SELECT count(*) FROM ledger.raw_file WHERE ingested_at IS NOT NULL")[0][0] == 0
    elif point == "parse.before_commit":
        assert q(wh, "SELECT count(*) FROM ledger.parsed_result")[0][0] == 0
    elif point == "apply.before_commit":
        assert q(wh, "SELECT count(*) FROM ledger.applied_result")[0][0] == 0
        assert q(wh, f"SELECT count(*) FROM main.{table}")[0][0] == 0


def drive_to_final(wh: Warehouse, task: ResolvedTask, adapter, wait_for_jobs):
    for _ in range(ROUNDS):
        cut_shards(wh, task, DAY1)
        submit_pending(wh, task, DAY1, adapter)
        wait_for_jobs(wh, adapter)
        collect_raw_results(wh, task, DAY1, adapter)
        parse_results(wh, task, DAY1)
        plan_retries(wh, task, DAY1)
        apply_results(wh, task, DAY1)
        rec, verdict = settle(wh, task.task_id(DAY1), task.spec.retry.max_failed_fraction)
        if verdict.status != WARN:
            return rec, verdict
    raise AssertionError(f"still pending after {ROUNDS} rounds: {verdict.reasons}")


def assert_exactly_once(wh: Warehouse, task: ResolvedTask, emulator: EmulatorHandle, rec) -> None:
    table, key = task.spec.apply.table, task.spec.apply.key
    assert rec.unresolved == 0 and rec.problems() == [], (rec.unresolved, rec.problems())
    # Business rows: one per key, as many as applied items; applied_result: one row per item.
    assert q(wh, f"SELECT count(*), count(DISTINCT {key}) FROM main.{table}")[0] == (rec.applied, rec.applied)
    assert q(wh, "SELECT count(*) - count(DISTINCT custom_id) FROM ledger.applied_result")[0][0] == 0
    # Result lines: one counted answer per item and attempt (repeats recorded as duplicates), each
    # file line recorded once, each file once, each outcome once per attempt.
    assert (
        q(
            wh,
            "SELECT count(*) FROM (SELECT custom_id, attempt FROM ledger.raw_result WHERE status = 'ok' "
            "GROUP BY ALL HAVING count(*) > 1)",
        )[0][0]
        == 0
    )
    assert q(wh, "SELECT count(*) - count(DISTINCT (file_key, line_no)) FROM ledger.raw_result")[0][0] == 0
    assert q(wh, "SELECT count(*) - count(DISTINCT path) FROM ledger.raw_file")[0][0] == 0
    assert q(wh, "SELECT count(*) - count(DISTINCT (custom_id, attempt)) FROM ledger.parsed_result")[0][0] == 0
    assert rec.duplicate_lines > 0  # the emulator did duplicate lines: they were told apart
    # Every batch the provider holds is tracked by exactly one job.
    ids = provider_batch_ids(emulator, "openai")
    jobs = [
        r[0] for r in q(wh, "SELECT provider_batch_id FROM ledger.provider_job WHERE provider_batch_id IS NOT NULL")
    ]
    assert sorted(ids) == sorted(jobs) and len(set(jobs)) == len(jobs)


STAGES = ["freeze", "cut", "submit", "download", "ingest", "parse", "apply"]


def run_stages_before(stage: str, wh: Warehouse, task: ResolvedTask, adapter, wait_for_jobs) -> None:
    """The stages before the killed one, in process."""
    task_id = task.task_id(DAY1)
    steps = {
        "freeze": lambda: freeze_manifest(wh, task, DAY1),
        "cut": lambda: cut_shards(wh, task, DAY1),
        "submit": lambda: (submit_pending(wh, task, DAY1, adapter), wait_for_jobs(wh, adapter)),
        "download": lambda: download_results(wh, task_id, adapter),
        "ingest": lambda: ingest_files(wh, task_id),
        "parse": lambda: parse_results(wh, task, DAY1),
    }
    for before in STAGES[: STAGES.index(stage)]:
        steps[before]()


POINTS = [
    "submit.created",
    "download.file_written",
    "ingest.before_commit",
    "parse.before_commit",
    "apply.before_commit",
]


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_a_point_then_restart_ends_every_item_exactly_once(
    point, ledger_backend, seeded_copy, ticket_task, emulator, adapter, wait_for_jobs, tmp_path
):
    wh, task = seeded_copy, _task(ticket_task)
    task_id = task.task_id(DAY1)
    stage = point.split(".")[0]
    run_stages_before(stage, wh, task, adapter, wait_for_jobs)

    kill_at(point, wh, task, DAY1, emulator, tmp_path, **{LEASE_ENV: str(CLAIM_LEASE_S)})
    _after_crash(point, wh, task_id, emulator, task.spec.apply.table)
    if stage == "submit":
        wait_for_claims_to_expire(wh)

    # Restart: the same stage in a fresh process, then the rest of the round and further rounds.
    run_stage(stage, wh, task, DAY1, emulator, tmp_path)
    rec, verdict = drive_to_final(wh, task, adapter, wait_for_jobs)
    assert rec.applied > 0 and rec.max_attempt >= 2  # retries happened after the restart
    assert_exactly_once(wh, task, emulator, rec)
    assert verdict.passed, verdict.reasons


def test_faultpoints_are_inert_without_the_variable(monkeypatch, tmp_path):
    from batch_assets.pipeline import faultpoints

    monkeypatch.delenv(FAULTPOINT_ENV, raising=False)
    faultpoints.reached("apply.before_commit")  # returns at once
    monkeypatch.setenv(FAULTPOINT_ENV, f"parse.before_commit={tmp_path / 'm'}")
    faultpoints.reached("apply.before_commit")  # another point: returns at once
    assert not (tmp_path / "m").exists()
    monkeypatch.setenv(FAULTPOINT_ENV, "no-marker")
    with pytest.raises(ValueError, match="<point>=<marker file>"):
        faultpoints.reached("apply.before_commit")


BETWEEN_COMMITS = ["freeze", "cut", "ingest", "parse", "apply"]


@pytest.mark.slow
@pytest.mark.parametrize("ledger_backend", ["distributed"], indirect=True)
@pytest.mark.parametrize("stage", BETWEEN_COMMITS)
def test_sigkill_between_the_file_and_postgres_commits_then_restart_ends_every_item_exactly_once(
    stage, ledger_backend, seeded_copy, ticket_task, emulator, adapter, wait_for_jobs, tmp_path
):
    """`distributed`: the stage's transaction has committed the file's rows, not yet the PostgreSQL
    ledger's, when the process dies; the restarted stage and the rounds after it still end every
    item exactly once."""
    wh, task = seeded_copy, _task(ticket_task)
    run_stages_before(stage, wh, task, adapter, wait_for_jobs)

    kill_at(f"{stage}.between_commits", wh, task, DAY1, emulator, tmp_path)
    run_stage(stage, wh, task, DAY1, emulator, tmp_path)
    rec, verdict = drive_to_final(wh, task, adapter, wait_for_jobs)
    assert rec.applied > 0
    assert_exactly_once(wh, task, emulator, rec)
    assert verdict.passed, verdict.reasons
