"""Every demo task, one per provider, through the real Dagster graph: the submit job for a
partition, a sensor tick that hands the finished partition to a collect run, the checks, and the
business table."""

from __future__ import annotations

import os
import time

import dagster as dg
import pytest

from batch_assets.demo import seed_kb_articles, seed_product_reviews
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.resources import default_resources
from batch_assets.spec.resolve import load_all_tasks

from .conftest import DAY1

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

TASKS = sorted(load_all_tasks())


@pytest.fixture(scope="module")
def module_instance():
    with dg.instance_for_test() as inst:
        yield inst


@pytest.mark.parametrize("task_name", TASKS)
def test_task_runs_through_dagster(task_name: str, dagster_env: Warehouse, module_instance) -> None:
    wh = dagster_env
    with wh.connect() as conn:
        seed_kb_articles(conn, days=1, per_day=10)
        seed_product_reviews(conn, days=1, per_day=20)
    from batch_assets.definitions import defs

    d = defs()
    task = load_all_tasks()[task_name]
    submit = d.resolve_job_def(f"{task_name}__submit").execute_in_process(partition_key=DAY1, instance=module_instance)
    assert {e.check_name: e.passed for e in submit.get_asset_check_evaluations()} == {
        "shards_within_limits": True,
        "within_budget": True,
        "model_allowed": True,
        "prompt_unchanged": True,
        "dry_run_recorded": True,
        "no_blocked_items": True,
        "account_active": True,
        "no_stuck_jobs": True,
    }
    # The freeze read the task's source again (a pure query), and the manifest asset says so.
    (frozen,) = submit.asset_materializations_for_node(f"{task_name}__manifest")
    assert frozen.metadata["source_read"].value == "view"
    with wh.connect() as conn:  # every job records where it went: the emulator, by host only
        endpoints = set(
            conn.execute(
                "SELECT endpoint_mode, endpoint_url FROM ledger.provider_job WHERE task_id = ?", [task.task_id(DAY1)]
            ).fetchall()
        )
    assert endpoints == {("emulator", os.environ["BATCH_ASSETS_EMULATOR_URL"])}

    sensor = d.resolve_sensor_def("provider_status_sensor")
    cursor, collected = None, []
    deadline = time.monotonic() + 30
    while not collected:
        tick = sensor.evaluate_tick(
            dg.build_sensor_context(
                instance=module_instance, cursor=cursor, definitions=d, resources=default_resources()
            )
        )
        cursor = tick.cursor
        for request in tick.run_requests:
            assert request.partition_key == DAY1 and request.tags["batch_assets/task"] == task_name
            assert request.job_name == f"{task_name}__collect" and request.tags["batch_assets/partition"] == DAY1
            collected.append(
                d.resolve_job_def(request.job_name).execute_in_process(
                    partition_key=request.partition_key,
                    instance=module_instance,
                    tags={**request.tags, "dagster/run_key": request.run_key},
                )
            )
        assert time.monotonic() < deadline, "the sensor never saw the batch finish"
        time.sleep(0.1)

    (result,) = collected
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "reconciliation" and check.passed, check.metadata["problems"]
    applied = check.metadata["applied"].value
    assert applied > 0
    with wh.connect() as conn:
        rows = conn.execute(
            f"SELECT count(*) FROM {task.spec.apply.table} WHERE task_id = ?", [task.task_id(DAY1)]
        ).fetchone()[0]
    assert rows == applied
