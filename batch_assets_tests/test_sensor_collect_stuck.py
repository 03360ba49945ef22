"""The provider status sensor with real ticks and real collect runs on a Dagster instance:
collection follows the ledger's state (a failed collect run is asked for again under a new run key,
at most N times per job, then the error stays visible), results that are not ready yet are not
downloaded, and stuck jobs are marked, reported by the submissions check and cancelled."""

from __future__ import annotations

import logging
import time

import dagster as dg
import openai
import pytest

from batch_assets.ledger.jobs import record_snapshot
from batch_assets.pipeline.collect import ingest
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.providers.contract import JobSnapshot, JobState
from batch_assets.resources import EMULATOR_API_KEY, ProvidersResource, default_resources
from batch_assets.spec.model import StuckSpec
from batch_assets.spec.resolve import TaskLoad

from .conftest import DAY1

TERMINAL = {"completed", "failed", "expired", "cancelled"}
TASK_ID = "ticket_triage_20261120"


@pytest.fixture(scope="module")
def sensor_instance():
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def defs(dagster_env):
    from batch_assets.definitions import defs as load

    return load()  # after dagster_env: the resources point at this test's warehouse and emulator


@pytest.fixture
def no_download_waits(monkeypatch) -> list[float]:
    """Download retries record their backoff instead of sleeping."""
    waits: list[float] = []
    monkeypatch.setattr(ingest, "DOWNLOAD_SLEEP", waits.append)
    return waits


TICK_LOG: list[logging.Handler] = []  # where the ticks' log lines go as well (see the caplog fixture)


def tick(defs, instance) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def("provider_status_sensor")
    context = dg.build_sensor_context(instance=instance, definitions=defs, resources=default_resources())
    for handler in TICK_LOG:
        context.log.addHandler(handler)
    return sensor.evaluate_tick(context)


def run(defs, instance, request: dg.RunRequest, emulator) -> dg.ExecuteInProcessResult:
    """Launch the requested run as the daemon would: its job, partition, tags and run key. The SDK's
    own retries are off, so the project's download retry is the only one (and never sleeps here)."""
    return defs.resolve_job_def(request.job_name).execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        raise_on_error=False,
        asset_selection=list(request.asset_selection) if request.asset_selection else None,
        tags={**request.tags, "dagster/run_key": request.run_key},
        resources={"providers": ProvidersResource(emulator_url=emulator.base_url, max_retries=0)},
    )


def submit_day1(wh, task, adapter) -> str:
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    submit_pending(wh, task, DAY1, adapter)
    with wh.connect() as conn:
        (job_key,) = conn.execute("SELECT job_key FROM ledger.provider_job").fetchone()
    return job_key


def wait_provider_terminal(emulator, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=emulator.openai_base_url) as client:
        while {b.status for b in client.batches.list(limit=100)} - TERMINAL:
            assert time.monotonic() < deadline, "provider batches did not finish"
            time.sleep(0.05)


def job_row(wh, job_key: str) -> dict:
    with wh.connect() as conn:
        cur = conn.execute("SELECT * FROM ledger.provider_job WHERE job_key = ?", [job_key])
        return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def collect_requests(result: dg.SensorResult) -> list[dg.RunRequest]:
    return [r for r in result.run_requests if r.job_name.endswith("__collect")]


class SensorLog(logging.Handler):
    """What the sensor's ticks log (a tick logs to its own logger, which propagates nowhere)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def clear(self) -> None:
        self.records.clear()


@pytest.fixture
def caplog():
    """Overrides pytest's caplog: the tick log lines, by level."""
    handler = SensorLog()
    TICK_LOG.append(handler)
    try:
        yield handler
    finally:
        TICK_LOG.remove(handler)


def warnings(log) -> list[str]:
    return [r.getMessage() for r in log.records if r.levelno == logging.WARNING]


def infos(log) -> list[str]:
    return [r.getMessage() for r in log.records if r.levelno == logging.INFO]


# --- state-driven collection ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_failed_collect_run_is_requested_again_under_a_new_run_key_and_the_partition_ends_collected(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, no_download_waits, caplog
):
    wh = dagster_env
    job_key = submit_day1(wh, ticket_task, adapter)
    wait_provider_terminal(emulator)

    (first,) = collect_requests(tick(defs, sensor_instance))
    assert first.job_name == "ticket_triage__collect" and first.partition_key == DAY1
    assert first.tags["batch_assets/task"] == "ticket_triage" and first.tags["batch_assets/partition"] == DAY1
    assert first.tags["batch_assets/attempt"] == "1"

    # The output file download answers 503 on every try of the run: the run fails, the job is kept.
    emulator.configure(fail_next_requests=ingest.DOWNLOAD_BACKOFF.attempts, fail_status=503)
    failed = run(defs, sensor_instance, first, emulator)
    assert not failed.success
    assert len(no_download_waits) == ingest.DOWNLOAD_BACKOFF.attempts - 1  # retried with backoff, not slept
    assert no_download_waits == sorted(no_download_waits)
    row = job_row(wh, job_key)
    assert row["downloaded_at"] is None and row["collect_attempts"] == 1
    assert "503" in row["collect_error"] and "download failed" in row["collect_error"]
    runs = sensor_instance.get_runs(
        filters=dg.RunsFilter(job_name="ticket_triage__collect", tags={"batch_assets/partition": DAY1})
    )
    assert [r.status for r in runs] == [dg.DagsterRunStatus.FAILURE]

    # The next tick asks again, under a new run key, and says why at WARNING.
    caplog.clear()
    (second,) = collect_requests(tick(defs, sensor_instance))
    assert second.partition_key == DAY1 and second.run_key != first.run_key
    (retry_warning,) = [w for w in warnings(caplog) if "requested again" in w]
    assert job_key in retry_warning and "not downloaded" in retry_warning and "503" in retry_warning
    assert any("collect requests 1" in m for m in infos(caplog))

    # A one-off 429 on the download is absorbed by the retry; the run collects the partition.
    emulator.configure(fail_next_requests=1, fail_status=429)
    ok = run(defs, sensor_instance, second, emulator)
    assert ok.success
    row = job_row(wh, job_key)
    assert row["downloaded_at"] is not None and row["collect_error"] is None and row["collect_attempts"] == 2
    r = reconcile(wh, TASK_ID)
    assert r.problems() == [] and r.succeeded == r.applied == 50
    assert collect_requests(tick(defs, sensor_instance)) == []


@pytest.mark.slow
def test_every_unfinished_collection_step_is_requested_from_the_ledger_state(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, no_download_waits
):
    """Downloaded but not ingested, ingested but not parsed, parsed but not applied: each asks for a run."""
    from batch_assets.pipeline.collect.ingest import download_results, ingest_files
    from batch_assets.pipeline.collect.parse import parse_results

    wh = dagster_env
    submit_day1(wh, ticket_task, adapter)
    wait_provider_terminal(emulator)
    tick(defs, sensor_instance)  # records the terminal state
    keys = []
    for step in (
        lambda: download_results(wh, TASK_ID, adapter),
        lambda: ingest_files(wh, TASK_ID),
        lambda: parse_results(wh, ticket_task, DAY1),
    ):
        step()
        (request,) = collect_requests(tick(defs, sensor_instance))
        assert request.partition_key == DAY1
        keys.append(request.run_key)
    assert len(set(keys)) == 1, "no collect run started: the same run key each time"
    assert run(defs, sensor_instance, request, emulator).success
    assert collect_requests(tick(defs, sensor_instance)) == []
    assert reconcile(wh, TASK_ID).applied == 50


@pytest.mark.slow
def test_collection_is_given_up_after_the_bound_and_the_error_stays_visible(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, no_download_waits, monkeypatch, caplog, capsys
):
    from batch_assets.cli import main as cli_main
    from batch_assets.defs import sensors

    monkeypatch.setattr(sensors, "COLLECT_MAX_TRIES", 2)
    wh = dagster_env
    job_key = submit_day1(wh, ticket_task, adapter)
    wait_provider_terminal(emulator)
    keys = []
    for _ in range(2):
        (request,) = collect_requests(tick(defs, sensor_instance))
        keys.append(request.run_key)
        emulator.configure(fail_next_requests=1000, fail_status=500)  # every download fails
        assert not run(defs, sensor_instance, request, emulator).success
    assert len(set(keys)) == 2
    caplog.clear()
    assert collect_requests(tick(defs, sensor_instance)) == []  # the bound: no third run
    (gave_up,) = [w for w in warnings(caplog) if "no longer requested" in w]
    assert job_key in gave_up and "after 2 collect runs" in gave_up and "500" in gave_up
    row = job_row(wh, job_key)
    assert row["collect_attempts"] == 2 and row["downloaded_at"] is None
    assert row["collect_error"].startswith("gave up after 2 collect tries: not downloaded; last error: download failed")
    emulator.configure(fail_next_requests=0)

    capsys.readouterr()
    assert cli_main(["--database", str(wh.database), "jobs", "--format", "json"]) == 0
    import json

    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["collect_attempts"] == 2 and listed["collect_error"].startswith("gave up after 2")
    assert cli_main(["--database", str(wh.database), "jobs"]) == 0
    table = capsys.readouterr().out
    assert "collect_error" in table.splitlines()[0] and "gave up after 2" in table


@pytest.mark.slow
def test_a_job_reported_done_before_its_results_exist_is_not_downloaded_until_they_do(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, no_download_waits, monkeypatch, caplog
):
    from batch_assets.defs import sensors

    wh = dagster_env
    job_key = submit_day1(wh, ticket_task, adapter)
    wait_provider_terminal(emulator)
    batch_id = job_row(wh, job_key)["provider_batch_id"]
    # The provider says completed, but names no results file yet.
    with wh.connect() as conn:
        record_snapshot(
            conn, job_key, JobSnapshot(batch_id, "completed", JobState.COMPLETED, 50, 50, 0, results_ready=False)
        )
    row = job_row(wh, job_key)
    assert row["state"] == "COMPLETED" and row["results_ready"] is False and row["output_file_id"] is None

    # While the provider cannot be asked (every call fails), nothing is requested or downloaded; past
    # the wait for results the job is flagged.
    monkeypatch.setattr(sensors, "RESULTS_WAIT_S", 0.0)
    emulator.configure(fail_next_requests=1000, fail_status=500)
    result = tick(defs, sensor_instance)
    assert collect_requests(result) == []
    assert any(job_key in w and "results are not ready yet" in w for w in warnings(caplog))
    row = job_row(wh, job_key)
    assert row["results_ready"] is False and "results not ready" in row["collect_error"]
    # A collect run started by hand does not download it either.
    manual = defs.resolve_job_def("ticket_triage__collect").execute_in_process(
        instance=sensor_instance,
        partition_key=DAY1,
        resources={"providers": ProvidersResource(emulator_url=emulator.base_url, max_retries=0)},
    )
    assert manual.success
    row = job_row(wh, job_key)
    assert row["downloaded_at"] is None and row["collect_attempts"] == 0
    emulator.configure(fail_next_requests=0)

    # The next poll sees the results file: the job is requested, collected, and its flag cleared.
    (request,) = collect_requests(tick(defs, sensor_instance))
    row = job_row(wh, job_key)
    assert row["results_ready"] is True and row["output_file_id"] is not None
    assert run(defs, sensor_instance, request, emulator).success
    row = job_row(wh, job_key)
    assert row["downloaded_at"] is not None and row["collect_error"] is None
    assert reconcile(wh, TASK_ID).applied == 50


# --- stuck jobs -------------------------------------------------------------------------------------


def with_stuck(monkeypatch, ticket_task, **stuck) -> None:
    """The sensor sees ticket_triage with this `stuck:` section in its defs.yaml."""
    from batch_assets.defs import sensors

    task = ticket_task.__class__(
        **{**ticket_task.__dict__, "spec": ticket_task.spec.model_copy(update={"stuck": StuckSpec(**stuck)})}
    )
    monkeypatch.setattr(sensors, "load_tasks", lambda: TaskLoad({"ticket_triage": task}))


def stuck_check(defs, instance):
    """Execute the submissions asset's stuck-jobs check on its own (a check-only subset of the task's
    submit job, as the UI's "Execute" on the check does)."""
    check_key = dg.AssetCheckKey(dg.AssetKey(["ticket_triage", "submissions"]), "no_stuck_jobs")
    job = defs.resolve_job_def("ticket_triage__submit").get_subset(
        asset_selection=set(), asset_check_selection={check_key}
    )
    result = job.execute_in_process(instance=instance, partition_key=DAY1)
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == "no_stuck_jobs"
    return evaluation


@pytest.mark.slow
def test_a_stuck_job_is_marked_warned_by_the_check_then_cancelled(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, monkeypatch, caplog
):
    with_stuck(monkeypatch, ticket_task, sla={"VALIDATING": 0, "RUNNING": 0}, act_after=0)
    wh = dagster_env
    emulator.configure(force_batch_status="stuck")
    job_key = submit_day1(wh, ticket_task, adapter)

    assert stuck_check(defs, sensor_instance).passed
    result = tick(defs, sensor_instance)
    row = job_row(wh, job_key)
    assert row["stuck_at"] is not None and row["stuck_action"] is None and not row["cancel_requested"]
    assert any(job_key in w and "stuck in" in w and "over its SLA" in w for w in warnings(caplog))
    assert any("stuck 1 (newly 1, cancelled 0)" in m for m in infos(caplog))
    assert collect_requests(result) == []

    check = stuck_check(defs, sensor_instance)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    meta = {k: v.value for k, v in check.metadata.items()}
    assert meta["job_keys"] == job_key and meta["stuck_count"] == 1
    assert meta["stuck_jobs"].startswith(f"{job_key}: {row['state']} for ")

    # Stuck for its SLA again (0 s here): the next tick cancels it through the adapter.
    caplog.clear()
    tick(defs, sensor_instance)
    row = job_row(wh, job_key)
    assert row["stuck_action"] == "cancel_requested" and row["cancel_requested"]
    assert any(job_key in w and "cancel requested" in w for w in warnings(caplog))
    # Once the provider has cancelled it, it is collected like any ended job, and the check passes.
    deadline = time.monotonic() + 15
    while job_row(wh, job_key)["state"] != "CANCELLED":
        assert time.monotonic() < deadline, "the stuck job was not cancelled"
        result = tick(defs, sensor_instance)
        time.sleep(0.05)
    assert job_row(wh, job_key)["stuck_action"] == "cancel_requested"  # cancelled once, by this system
    assert [r.partition_key for r in collect_requests(tick(defs, sensor_instance))] == [DAY1]
    assert stuck_check(defs, sensor_instance).passed


@pytest.mark.slow
def test_notify_policy_only_marks_and_logs(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, monkeypatch, caplog
):
    with_stuck(monkeypatch, ticket_task, sla={"VALIDATING": 0, "RUNNING": 0}, policy="notify", act_after=0)
    wh = dagster_env
    emulator.configure(force_batch_status="stuck")
    job_key = submit_day1(wh, ticket_task, adapter)
    for _ in range(3):
        tick(defs, sensor_instance)
    row = job_row(wh, job_key)
    assert row["stuck_at"] is not None and row["stuck_action"] == "notified" and not row["cancel_requested"]
    assert row["state"] not in ("CANCELLED",)
    assert sum("over its SLA" in w for w in warnings(caplog)) == 1  # flagged once
    assert not stuck_check(defs, sensor_instance).passed


@pytest.mark.slow
def test_the_default_slas_do_not_flag_a_fresh_job(defs, sensor_instance, dagster_env, ticket_task, adapter, emulator):
    wh = dagster_env
    emulator.configure(force_batch_status="stuck")
    job_key = submit_day1(wh, ticket_task, adapter)
    tick(defs, sensor_instance)
    assert job_row(wh, job_key)["stuck_at"] is None


@pytest.mark.slow
def test_a_collect_run_in_progress_is_not_requested_twice(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, caplog
):
    from batch_assets.pipeline.collect.collect_runs import start_collect_run

    wh = dagster_env
    submit_day1(wh, ticket_task, adapter)
    wait_provider_terminal(emulator)
    (first,) = collect_requests(tick(defs, sensor_instance))
    # The launched run has started (it counted its try) and is still going: no second run.
    started = sensor_instance.create_run_for_job(
        defs.resolve_job_def("ticket_triage__collect"),
        tags={**first.tags, "dagster/partition": DAY1},
        status=dg.DagsterRunStatus.STARTED,
    )
    start_collect_run(wh, TASK_ID)
    assert collect_requests(tick(defs, sensor_instance)) == []
    assert any("a collect run is in progress" in m for m in infos(caplog))
    # It ended without collecting (a crash): the next tick asks again, under a new key.
    sensor_instance.report_run_failed(started)
    (again,) = collect_requests(tick(defs, sensor_instance))
    assert again.run_key != first.run_key


@pytest.mark.slow
@pytest.mark.parametrize(
    "launch_tags",
    [
        {"dagster/partition": DAY1},  # "Materialize" of one day in the UI
        {"dagster/asset_partition_range_start": "2026-11-19", "dagster/asset_partition_range_end": "2026-11-21"},
    ],
    ids=["one-day", "backfill-range"],
)
def test_a_ui_materialization_of_the_partition_is_seen_at_launch(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, launch_tags
):
    """Launched from the UI as an asset run (no job of ours, none of our tags yet): the sensor sees it
    by the partition tags Dagster sets at launch and its asset selection, and does not start a second."""
    submit_day1(dagster_env, ticket_task, adapter)
    wait_provider_terminal(emulator)
    assert collect_requests(tick(defs, sensor_instance))
    queued = sensor_instance.create_run_for_job(
        defs.resolve_implicit_global_asset_job_def(),
        asset_selection=frozenset({dg.AssetKey(["ticket_triage", "applied"])}),
        tags=launch_tags,
        status=dg.DagsterRunStatus.STARTED,
    )
    try:
        assert collect_requests(tick(defs, sensor_instance)) == []
    finally:
        sensor_instance.report_run_canceled(queued)
    assert collect_requests(tick(defs, sensor_instance))


# --- stuck configuration ----------------------------------------------------------------------------


def test_stuck_slas_default_per_provider_and_are_overridden_per_task(ticket_task):
    from pydantic import ValidationError

    from batch_assets.formatting import parse_duration
    from batch_assets.pipeline.collect.stuck import resolve_policy
    from batch_assets.providers.registry import provider_limits

    openai_limits, gemini_limits = provider_limits("openai"), provider_limits("gemini")
    base = resolve_policy(openai_limits.completion_window, openai_limits.stuck)
    assert dict(base.sla_s) == {"VALIDATING": 3600, "SUBMITTED": 86400, "RUNNING": 86400 + 86400, "FINALIZING": 7200}
    assert base.policy == "cancel_and_retry" and base.act_after_for("RUNNING") == 172800  # the SLA again
    gemini = resolve_policy(gemini_limits.completion_window, gemini_limits.stuck)
    assert gemini.sla_for("RUNNING") == 86400 + 48 * 3600  # its 48 h window

    task = StuckSpec(sla={"RUNNING": "30m", "VALIDATING": 90}, policy="notify", act_after="2h")
    layered = resolve_policy(openai_limits.completion_window, openai_limits.stuck, task)
    assert (layered.sla_for("RUNNING"), layered.sla_for("VALIDATING"), layered.sla_for("FINALIZING")) == (
        1800,
        90,
        7200,
    )
    assert layered.policy == "notify" and layered.act_after_for("RUNNING") == 7200
    assert [parse_duration(v) for v in ("45s", "2d", 12, "1.5h")] == [45, 172800, 12, 5400]
    with pytest.raises(ValidationError, match="not a duration"):
        StuckSpec(sla={"RUNNING": "soon"})
    with pytest.raises(ValidationError):
        StuckSpec(sla={"CREATED": "1h"})
    with pytest.raises(ValidationError):
        StuckSpec(policy="ignore")
    assert ticket_task.spec.stuck == StuckSpec()  # the demo tasks keep the provider defaults


@pytest.mark.slow
def test_a_provider_batch_failure_is_logged_with_its_reason(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, caplog
):
    wh = dagster_env
    emulator.configure(enqueued_token_limit=1)  # the batch is refused for its tokens
    job_key = submit_day1(wh, ticket_task, adapter)
    wait_provider_terminal(emulator)
    result = tick(defs, sensor_instance)
    (failure,) = [w for w in warnings(caplog) if "provider batch ended" in w]
    assert failure.startswith(f"{job_key}: provider batch ended FAILED (failed): token_limit_exceeded: ")
    assert any("transitions 1, collect requests 1" in m for m in infos(caplog))
    assert [r.partition_key for r in collect_requests(result)] == [DAY1]  # its items get their outcome


@pytest.mark.slow
def test_a_revoke_gets_a_collect_run_that_refreshes_the_business_tables_row_count(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, caplog
):
    from batch_assets.pipeline.govern.revoke import revoke

    wh = dagster_env
    submit_day1(wh, ticket_task, adapter)
    wait_provider_terminal(emulator)
    (collect,) = collect_requests(tick(defs, sensor_instance))
    assert run(defs, sensor_instance, collect, emulator).success
    with wh.connect() as conn:
        before = conn.execute("SELECT count(*) FROM ticket_labels").fetchone()[0]
        gone = [r[0] for r in conn.execute("SELECT custom_id FROM ledger.applied_result LIMIT 3").fetchall()]
    assert revoke(wh, custom_ids=gone, reason="wrong labels").revoked == 3

    sensor = defs.resolve_sensor_def("provider_status_sensor")
    context = dg.build_sensor_context(instance=sensor_instance, definitions=defs, resources=default_resources())
    context.log.addHandler(caplog)
    result = sensor.evaluate_tick(context)
    (refresh,) = collect_requests(result)
    assert refresh.partition_key == DAY1 and refresh.run_key.startswith(f"revoked:ticket_triage:{DAY1}:")
    assert f"requested ticket_triage__collect {DAY1}: revoked: 3 answer(s) of {TASK_ID} taken back" in infos(caplog)

    refreshed = run(defs, sensor_instance, refresh, emulator)
    assert refreshed.success
    (table,) = [
        e.event_specific_data.asset_observation
        for e in refreshed.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
        and e.event_specific_data.asset_observation.asset_key == dg.AssetKey(["warehouse", "ticket_labels"])
    ]
    assert table.metadata["dagster/row_count"].value == before - 3
    applied = sensor_instance.get_latest_materialization_event(dg.AssetKey(["ticket_triage", "applied"]))
    assert applied.run_id == refreshed.run_id

    # The next tick, from the cursor the last one left, asks for nothing more.
    again = dg.build_sensor_context(
        instance=sensor_instance, cursor=result.cursor, definitions=defs, resources=default_resources()
    )
    assert not [r for r in collect_requests(sensor.evaluate_tick(again)) if r.run_key.startswith("revoked:")]
