"""An empty day (the source had no rows for it) ends final with a visible verdict: the sensor asks for
one collect run for it (it has no provider job to wait for), the reconciliation check says
`empty_source` (WARN by default), `settled` is materialized (nothing is pending) and the final
status EMPTY shows in `batch-assets report`; under `empty_source: fail` the settled run fails.
Through real Dagster runs of the project's definitions."""

from __future__ import annotations

import dataclasses
import json

import dagster as dg
import pytest

from batch_assets.components.partitions import daily_partitions
from batch_assets.pipeline.settle.partition_status import partitions_to_settle
from batch_assets.pipeline.settle.reconcile import EMPTY, FAILED, PASSED, WARN, Reconciliation
from batch_assets.resources import default_resources

TASK = "ticket_triage"
EMPTY_DAY = "2026-11-23"  # the seeded days are 2026-11-20 and 2026-11-21
TASK_ID = f"{TASK}_{EMPTY_DAY.replace('-', '')}"
SETTLED = dg.AssetKey([TASK, "settled"])


def _load_defs(monkeypatch, empty_source: str | None = None) -> dg.Definitions:
    """The project's definitions; with `empty_source`, ticket_triage's setting replaced by it."""
    from batch_assets.components import batch_task
    from batch_assets.definitions import defs

    if empty_source is not None:
        load = batch_task.load_task_folder

        def with_setting(path):
            task = load(path)
            if getattr(task, "spec", None) is None or task.spec.name != TASK:
                return task
            return dataclasses.replace(task, spec=task.spec.model_copy(update={"empty_source": empty_source}))

        monkeypatch.setattr(batch_task, "load_task_folder", with_setting)
    return defs()


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def("provider_status_sensor")
    ctx = dg.build_sensor_context(instance=instance, definitions=defs, resources=default_resources())
    return sensor.evaluate_tick(ctx)


def _settle_requests(result: dg.SensorResult) -> list[dg.RunRequest]:
    return [r for r in result.run_requests or [] if r.partition_key == EMPTY_DAY]


def _submit_then_collect_from_a_tick(defs, instance):
    submit = defs.resolve_job_def(f"{TASK}__submit").execute_in_process(instance=instance, partition_key=EMPTY_DAY)
    assert submit.success
    (request,) = _settle_requests(_tick(defs, instance))
    assert request.job_name == f"{TASK}__collect" and request.run_key.startswith(f"settle:{TASK}:{EMPTY_DAY}:")
    assert "no rows" in request.tags["batch_assets/settle"]
    collect = defs.resolve_job_def(request.job_name).execute_in_process(
        instance=instance, partition_key=EMPTY_DAY, tags=request.tags, raise_on_error=False
    )
    return collect


def _check(result) -> dg.AssetCheckEvaluation:
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "reconciliation"]
    return evaluation


def _settled_status(instance):
    return instance.get_status_by_partition(SETTLED, [EMPTY_DAY], daily_partitions)[EMPTY_DAY]


@pytest.mark.slow
def test_an_empty_day_settles_with_a_warning_and_shows_empty(dagster_env, instance, monkeypatch, capsys):
    from batch_assets.cli import main

    defs = _load_defs(monkeypatch)
    collect = _submit_then_collect_from_a_tick(defs, instance)
    assert collect.success
    check = _check(collect)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert "empty_source" in check.description
    assert _settled_status(instance) == dg.AssetPartitionStatus.MATERIALIZED

    # 0 items cost 0, not "unknown".
    manifest = instance.get_latest_materialization_event(dg.AssetKey([TASK, "manifest"])).asset_materialization
    assert manifest.metadata["cost_estimated"].value == 0

    # Final: recorded EMPTY, not asked for again, and `report` shows it.
    with dagster_env.connect(read_only=True) as conn:
        assert conn.execute("SELECT final_status FROM ledger.batch_task WHERE task_id = ?", [TASK_ID]).fetchone() == (
            EMPTY,
        )
        assert partitions_to_settle(conn) == []
    assert _settle_requests(_tick(defs, instance)) == []
    capsys.readouterr()
    assert main(["report", "--task", TASK_ID, "--format", "json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["status"] == EMPTY and record["check"] == WARN
    assert any("empty_source" in p for p in record["problems"])


@pytest.mark.slow
def test_an_empty_day_fails_its_partition_under_fail(dagster_env, instance, monkeypatch):
    defs = _load_defs(monkeypatch, empty_source="fail")
    collect = _submit_then_collect_from_a_tick(defs, instance)
    assert not collect.success
    check = _check(collect)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert _settled_status(instance) == dg.AssetPartitionStatus.FAILED
    failure = next(e for e in collect.all_events if e.event_type_value == "STEP_FAILURE")
    error = str(failure.event_specific_data.error)
    assert "EMPTY" in error and "empty_source" in error


@pytest.mark.parametrize(("setting", "status"), [("ok", PASSED), ("warn", WARN), ("fail", FAILED)])
def test_the_empty_source_verdict_follows_the_setting(setting, status):
    verdict = Reconciliation(TASK_ID, empty_source=setting).verdict()
    assert (verdict.status, verdict.final_status) == (status, EMPTY)
    assert verdict.reasons[0].startswith("empty_source:")


def test_a_partition_not_frozen_is_not_empty():
    verdict = Reconciliation(TASK_ID, frozen=False).verdict()
    assert verdict.status == WARN and verdict.final_status is None


def test_a_day_whose_rows_were_all_rejected_is_not_empty():
    verdict = Reconciliation(TASK_ID, source_rejects=3).verdict()
    assert verdict.passed and verdict.final_status == "COMPLETED"
