"""A partition's bar tells whether it is done: the `settled` asset is materialized (green) only for a
done partition, fails (red) for a canceled or failed one, naming why, and stays empty while work is
under way. Checked through the Dagster instance, after real runs against the emulator."""

from __future__ import annotations

import dagster as dg
import pytest

from batch_assets.components.partitions import daily_partitions
from batch_assets.components.summary_metadata import health
from batch_assets.pipeline.settle.partition_status import DONE, NOT_DONE, UNDER_WAY, partition_status
from batch_assets.pipeline.settle.reconcile import Reconciliation

from .conftest import DAY1, DAY2, FAST_EMULATOR

TASK = "ticket_triage"
SETTLED = dg.AssetKey([TASK, "settled"])


@pytest.fixture
def emulator_knobs():
    return {**FAST_EMULATOR, "force_batch_status": "stuck"}  # DAY1's batch never finishes on its own


def _run(defs, job: str, instance, day: str):
    return defs.resolve_job_def(f"{TASK}__{job}").execute_in_process(
        instance=instance, partition_key=day, raise_on_error=False
    )


def _status(instance) -> dict:
    return instance.get_status_by_partition(SETTLED, [DAY1, DAY2], daily_partitions)


@pytest.mark.slow
def test_green_only_when_done_red_when_canceled_empty_while_in_flight(
    dagster_env, emulator, instance, adapter, wait_for_jobs, capsys
):
    from batch_assets.cli import main
    from batch_assets.definitions import defs as load_defs

    defs = load_defs()
    assert _run(defs, "submit", instance, DAY1).success  # its batch is stuck in progress
    assert _run(defs, "submit", instance, DAY2).success
    assert _run(defs, "collect", instance, DAY1).success  # nothing to collect yet: nothing settled
    assert _status(instance)[DAY1] is None

    assert main(["cancel", f"{TASK}_{DAY1.replace('-', '')}"]) == 0
    wait_for_jobs(dagster_env, adapter)
    canceled = _run(defs, "collect", instance, DAY1)
    done = _run(defs, "collect", instance, DAY2)
    status = _status(instance)
    assert done.success and status[DAY2] == dg.AssetPartitionStatus.MATERIALIZED
    assert not canceled.success and status[DAY1] == dg.AssetPartitionStatus.FAILED
    failure = next(e for e in canceled.all_events if e.event_type_value == "STEP_FAILURE")
    assert "CANCELED" in str(failure.event_specific_data.error) and "--class canceled" in str(
        failure.event_specific_data.error
    )
    # The stage assets are still there for the canceled day; the check warns `canceled`, not passed.
    applied = instance.get_status_by_partition(dg.AssetKey([TASK, "applied"]), [DAY1], daily_partitions)
    assert applied[DAY1] == dg.AssetPartitionStatus.MATERIALIZED
    check = next(e for e in canceled.get_asset_check_evaluations() if e.check_name == "reconciliation")
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert "canceled: canceled by an operator" in check.metadata["verdict"].value

    # On request, the canceled items are sent again; the day then ends done.
    task_id = f"{TASK}_{DAY1.replace('-', '')}"
    capsys.readouterr()
    assert main(["retry", task_id, "--class", "canceled", "--dry-run"]) == 0
    assert "would reopen" in capsys.readouterr().out
    emulator.configure(force_batch_status=None)  # the new batch finishes
    assert main(["retry", task_id, "--class", "canceled"]) == 0
    assert "reopened" in capsys.readouterr().out
    wait_for_jobs(dagster_env, adapter)
    assert _run(defs, "collect", instance, DAY1).success
    assert _status(instance)[DAY1] == dg.AssetPartitionStatus.MATERIALIZED


def _rec(**kw) -> Reconciliation:
    return Reconciliation(task_id="t_20261120", manifest_items=10, **kw)


def test_under_way_while_anything_is_pending():
    rec = _rec(in_flight=3, applied=7, succeeded=7, shard_lines=10, submitted_lines=10)
    assert partition_status(rec, rec.verdict()).state == UNDER_WAY


def test_a_failed_verdict_names_the_providers_reason():
    rec = _rec(unresolved_missing=10, shard_lines=10, batch_failures=["j1: too_many_tasks: over 50,000 lines"])
    status = partition_status(rec, rec.verdict())
    assert status.state == NOT_DONE and status.final_status == "FAILED"
    assert any("too_many_tasks" in r for r in status.reasons)


def test_done_when_every_item_is_final():
    rec = _rec(applied=10, succeeded=10, shard_lines=10, submitted_lines=10, answered_lines=10, parsed_from_lines=10)
    verdict = rec.verdict()
    assert verdict.passed, verdict.reasons
    assert partition_status(rec, verdict).state == DONE


def test_collecting_when_every_batch_ended_and_only_its_results_are_left():
    rec = _rec(collecting=10, missing=10, shard_lines=10, submitted_lines=10)  # its lines have no outcome yet
    verdict = rec.verdict()
    assert (verdict.status, verdict.final_status, verdict.label) == ("collecting", None, "COLLECTING")
    status = partition_status(rec, verdict)
    assert status.state == UNDER_WAY and status.line().startswith("t_20261120: collecting: 10 item(s) being collected")
    assert health(rec)["final_status"] == "collecting"
    # With other work pending too, it is under way as before (a warn), naming both.
    mixed = _rec(collecting=4, in_flight=6, missing=10, shard_lines=10, submitted_lines=10)
    assert mixed.verdict().status == "warn" and "4 being collected" in mixed.verdict().reasons[0]


def _materialized(result, stage: str) -> dict[str, dict]:
    return {
        e.partition: {k: v.value for k, v in e.event_specific_data.materialization.metadata.items()}
        for e in result.all_events
        if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key == dg.AssetKey([TASK, stage])
    }


@pytest.mark.slow
def test_a_batch_that_ended_but_is_not_collected_reports_collecting_everywhere_and_settled_does_not_fail_it(
    dagster_env, emulator, adapter, instance, ticket_task, wait_for_jobs, capsys
):
    import json

    from batch_assets.definitions import defs as load_defs
    from batch_assets.pipeline.collect.ingest import collect_raw_results
    from batch_assets.pipeline.collect.parse import parse_results
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending
    from batch_assets.pipeline.settle.apply import apply_results
    from batch_assets.pipeline.settle.reconcile import reconcile

    from .cli_calls import run

    wh, task_id = dagster_env, ticket_task.task_id(DAY1)
    emulator.configure(force_batch_status=None)  # this batch finishes
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    submit_pending(wh, ticket_task, DAY1, adapter)
    wait_for_jobs(wh, adapter)  # the poll records the batch's terminal snapshot; no collect run yet
    rec = reconcile(wh, task_id)
    assert rec.collecting == 50 and rec.in_flight == rec.unresolved_missing == 0
    assert rec.verdict().status == "collecting"

    code, out, _ = run(capsys, "report", "--task", TASK)
    assert code == 0 and f"NOT DONE {task_id}: collecting: 50 item(s) being collected" in out
    assert "failed" not in out and "got no outcome" not in out
    code, out, err = run(capsys, "report", "--format", "json", "--html")
    [row] = json.loads(out)
    assert (row["check"], row["status"], row["collecting"], row["in_flight"]) == ("collecting", None, 50, 0)
    page = (wh.data_dir / "reports" / f"{task_id}.html").read_text(encoding="utf-8")
    assert "COLLECTING: " in page and "batch finished, results being collected" in page and "FAILED" not in page

    defs = load_defs()
    assets = [defs.resolve_assets_def(dg.AssetKey([TASK, s])) for s in ("applied", "report", "settled")]
    result = dg.materialize(assets, partition_key=DAY1, instance=instance)
    assert result.success  # under way: not failed
    assert _materialized(result, "applied")[DAY1]["final_status"] == "collecting"
    assert _materialized(result, "report")[DAY1]["status"] == "collecting"
    assert DAY1 not in _materialized(result, "settled") and _status(instance)[DAY1] is None
    (check,) = result.get_asset_check_evaluations()
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert f"{task_id}: collecting: 50 item(s) being collected" in check.metadata["verdict"].value
    assert check.metadata["collecting"].value == 50

    collect_raw_results(wh, ticket_task, DAY1, adapter)
    parse_results(wh, ticket_task, DAY1)
    apply_results(wh, ticket_task, DAY1)
    assert reconcile(wh, task_id).verdict().passed
    assert dg.materialize(assets, partition_key=DAY1, instance=instance).success
    assert _status(instance)[DAY1] == dg.AssetPartitionStatus.MATERIALIZED
