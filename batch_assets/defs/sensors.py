"""The provider status sensor: one for all tasks.

Each tick polls the non-terminal provider jobs (bounded time), records every transition in the
ledger, requests one collect run (raw_results -> parsed_results -> applied) per task partition
with newly terminal jobs, and a submissions run for partitions whose shards wait for capacity. The cursor is the ledger's terminal sequence number already handed out;
Dagster stores it only after the tick's runs are launched, and run keys are deterministic.
"""


import json

import dagster as dg

from batch_assets.components.task_assets import collect_asset_keys
from batch_assets.pipeline.poll import collect_requests_after, partitions_waiting_to_submit, poll_jobs
from batch_assets.pipeline.retry import pending_retries
from batch_assets.resources import ProvidersResource, WarehouseResource
from batch_assets.spec.resolve import load_all_tasks

POLL_BUDGET_S = 20.0


@dg.sensor(
    name="provider_status_sensor",
    target=dg.AssetSelection.all(),
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Polls provider batches, records state transitions, requests collection of finished partitions.",
)
def provider_status_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource,
                           providers: ProvidersResource) -> dg.SensorResult:
    wh = warehouse.warehouse()
    cursor = json.loads(context.cursor) if context.cursor else {}
    polled = poll_jobs(wh, providers.adapter, budget_s=POLL_BUDGET_S)
    for job_key, old, new in polled.transitions:
        context.log.info(f"{job_key}: {old} -> {new}")
    for job_key, err in polled.errors.items():
        context.log.warning(f"{job_key}: poll failed, retried next tick: {err}")
    for job_key in polled.stuck:
        context.log.warning(f"{job_key}: no progress for a long time; consider cancelling it (batch-assets cancel)")
    requests, high_water = collect_requests_after(wh, int(cursor.get("terminal_seq", 0)))
    run_requests = [
        dg.RunRequest(run_key=r.run_key, partition_key=r.partition_date, asset_selection=collect_asset_keys(r.task_name),
                      tags={"batch_assets/task": r.task_name, "batch_assets/jobs": ",".join(r.job_keys)[:1000]})
        for r in requests
    ]
    # Shards held back by a provider's concurrent-job cap go out once that provider has room; the
    # run key changes only when a job has finished since, so a waiting partition is asked for once.
    for task_name, day, shards in partitions_waiting_to_submit(wh):
        run_requests.append(dg.RunRequest(
            run_key=f"submit:{task_name}:{day}:{high_water}", partition_key=day,
            asset_selection=[dg.AssetKey([task_name, "submissions"])],
            tags={"batch_assets/task": task_name, "batch_assets/waiting_shards": str(shards)}))
    # Retries the retry ledger decided on go out once their backoff has passed (tasks with
    # automatic retries); the run key changes with what is due, so each wave is asked for once.
    automatic = {name for name, task in load_all_tasks().items() if task.spec.retry.automatic}
    for row in pending_retries(wh):
        if row["due"] and row["task_name"] in automatic:
            run_requests.append(dg.RunRequest(
                run_key=f"retry:{row['task_name']}:{row['partition_date']}:a{row['next_attempt']}:{row['due']}",
                partition_key=row["partition_date"], asset_selection=[dg.AssetKey([row["task_name"], "submissions"])],
                tags={"batch_assets/task": row["task_name"], "batch_assets/retries_due": str(row["due"]),
                      "batch_assets/attempt": str(row["next_attempt"])}))
    return dg.SensorResult(run_requests=run_requests, cursor=json.dumps({"terminal_seq": high_water}))
