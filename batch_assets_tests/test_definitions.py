"""The Dagster surface: the project's Definitions load cleanly, every task becomes its own
asset group with the six pipeline assets and its report, jobs, a daily schedule for yesterday's
partition, the one provider sensor, and a blocking shards check; lineage runs from the source
tables to the business tables; every asset of a task carries its owners and tags."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import dagster as dg
import pytest

from batch_assets.spec.resolve import load_all_tasks

STAGES = ("manifest", "shards", "submissions", "raw_results", "parsed_results", "applied", "report", "settled")
KINDS = {
    "manifest": {"duckdb", "parquet"},
    "shards": {"duckdb", "json"},
    "submissions": {"openai"},
    "raw_results": {"openai", "duckdb"},
    "parsed_results": {"duckdb"},
    "applied": {"duckdb", "table"},
    "report": {"html"},
    "settled": {"duckdb"},
}
TABLE_OF_STAGE = {
    "manifest": "ledger.manifest_item",
    "shards": "ledger.shard_line",
    "raw_results": "ledger.raw_result",
    "parsed_results": "ledger.parsed_result",
    "applied": "ledger.applied_result",
}
LOAD_STRICT = """
import json
import dagster as dg
from batch_assets.definitions import defs
d = defs()
dg.Definitions.validate_loadable(d)
print(json.dumps(sorted(k.to_user_string() for k in d.resolve_asset_graph().get_all_asset_keys())))
"""


@pytest.fixture(scope="module")
def defs() -> dg.Definitions:
    from batch_assets.definitions import defs as load

    return load()


def key(task: str, stage: str) -> dg.AssetKey:
    return dg.AssetKey([task, stage])


def test_definitions_load_with_deprecation_and_future_warnings_as_errors(tmp_path):
    """In a fresh interpreter, so import-time warnings count too."""
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-W", "error::FutureWarning", "-c", LOAD_STRICT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "BATCH_ASSETS_DATABASE": str(tmp_path / "w.duckdb"), "BATCH_ASSETS_DATA_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    keys = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {f"ticket_triage/{s}" for s in STAGES} <= set(keys)


def test_validate_loadable(defs):
    dg.Definitions.validate_loadable(defs)


def test_ticket_triage_assets_group_and_kinds(defs):
    graph = defs.resolve_asset_graph()
    keys = {k for k in graph.get_all_asset_keys() if k.path[0] == "ticket_triage"}
    assert keys == {key("ticket_triage", s) for s in STAGES}
    for stage in STAGES:
        k = key("ticket_triage", stage)
        spec = defs.resolve_assets_def(k).specs_by_key[k]
        assert spec.group_name == "ticket_triage", stage
        assert set(spec.kinds) == KINDS[stage], stage
        assert spec.description, stage
        assert isinstance(spec.partitions_def, dg.DailyPartitionsDefinition)
    deps = {
        stage: {
            d.asset_key
            for d in defs.resolve_assets_def(key("ticket_triage", stage)).specs_by_key[key("ticket_triage", stage)].deps
        }
        for stage in STAGES
    }
    assert [deps[s] for s in STAGES[1:]] == [{key("ticket_triage", s)} for s in STAGES[:-1]]
    assert deps["manifest"] == {dg.AssetKey(["warehouse", "support_tickets"])}


def test_every_task_folder_is_its_own_asset_group(defs):
    graph = defs.resolve_asset_graph()
    for name in load_all_tasks():
        for stage in STAGES:
            k = key(name, stage)
            assert graph.has(k), k
            assert defs.resolve_assets_def(k).specs_by_key[k].group_name == name
        defs.resolve_job_def(f"{name}__submit")
        defs.resolve_job_def(f"{name}__collect")
        defs.resolve_schedule_def(f"{name}__daily")


def test_jobs_select_the_submit_and_collect_stages(defs):
    submit = defs.resolve_job_def("ticket_triage__submit")
    collect = defs.resolve_job_def("ticket_triage__collect")
    assert set(submit.asset_layer.executable_asset_keys) == {key("ticket_triage", s) for s in STAGES[:3]}
    assert set(collect.asset_layer.executable_asset_keys) == {key("ticket_triage", s) for s in STAGES[3:]}
    # Runs launched from the UI carry the task tag the sensor's runs carry (the partition tag is
    # added by the first asset of the run).
    assert submit.tags["batch_assets/task"] == collect.tags["batch_assets/task"] == "ticket_triage"
    assert isinstance(submit.partitions_def, dg.DailyPartitionsDefinition)
    assert "2026-11-20" in submit.partitions_def.get_partition_keys()
    # A date range runs as one run (every asset loops over the run's partition keys).
    assert defs.resolve_assets_def(key("ticket_triage", "manifest")).backfill_policy == dg.BackfillPolicy.single_run()
    # DuckDB admits one writing process: steps run in the run's process.
    assert submit.executor_def.name == dg.in_process_executor.name


def evaluate_schedule(defs, now: dt.datetime) -> list[dg.RunRequest]:
    schedule = defs.resolve_schedule_def("ticket_triage__daily")
    context = dg.build_schedule_context(scheduled_execution_time=now, repository_def=defs.get_repository_def())
    return list(schedule.evaluate_tick(context).run_requests)


def test_daily_schedule_submits_yesterdays_partition_at_one(defs):
    schedule = defs.resolve_schedule_def("ticket_triage__daily")
    assert schedule.cron_schedule == "0 1 * * *" and schedule.job_name == "ticket_triage__submit"
    assert schedule.execution_timezone in (None, "UTC")
    # Targets the partitioned submit job; stopped until someone starts it.
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert isinstance(defs.resolve_job_def(schedule.job_name).partitions_def, dg.DailyPartitionsDefinition)
    for now, partition in [
        (dt.datetime(2026, 11, 22, 1, 0, tzinfo=dt.UTC), "2026-11-21"),
        (dt.datetime(2026, 12, 1, 1, 0, tzinfo=dt.UTC), "2026-11-30"),
    ]:
        (request,) = evaluate_schedule(defs, now)
        assert request.partition_key == partition
        assert request.tags["batch_assets/partition"] == partition


def test_daily_schedule_evaluates_without_deprecation_warnings(defs):
    (request,) = evaluate_schedule(defs, dt.datetime(2026, 11, 22, 1, 0, tzinfo=dt.UTC))
    assert request.partition_key == "2026-11-21"


def test_provider_sensor_is_present_and_running_by_default(defs):
    sensor = defs.resolve_sensor_def("provider_status_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert 0 < sensor.minimum_interval_seconds <= 300
    assert [s.name for s in defs.sensors] == ["provider_status_sensor"]  # one for all tasks


def test_shards_check_is_blocking_and_reconciliation_checks_applied(defs):
    shards = defs.resolve_assets_def(key("ticket_triage", "shards"))
    checks = sorted((c.name, c.blocking) for c in shards.check_specs)
    assert checks == [
        ("account_active", True),
        ("dry_run_recorded", True),
        ("model_allowed", True),
        ("no_blocked_items", True),
        ("prompt_unchanged", True),
        ("shards_within_limits", True),
        ("within_budget", True),
    ]
    # The gate's results are recorded against each day too (the check's Partitions tab).
    assert all(isinstance(c.partitions_def, dg.DailyPartitionsDefinition) for c in shards.check_specs)
    applied = defs.resolve_assets_def(key("ticket_triage", "applied"))
    assert [c.name for c in applied.check_specs] == ["reconciliation"]
    # Results are recorded per partition (a run over a range of days has one result for the range).
    (recon,) = applied.check_specs
    assert isinstance(recon.partitions_def, dg.DailyPartitionsDefinition)
    assert "range of days" in recon.description and "SPEC" not in recon.description


def test_lineage_runs_from_source_tables_to_business_tables(defs):
    graph = defs.resolve_asset_graph()
    tasks = load_all_tasks()
    for name, task in tasks.items():
        business = dg.AssetKey(["warehouse", task.spec.apply.table])
        assert graph.get(business).parent_keys == {key(name, "applied")}, name
        manifest_parents = graph.get(key(name, "manifest")).parent_keys
        assert manifest_parents and all(k.path[0] == "warehouse" for k in manifest_parents), name
    tickets = dg.AssetKey(["warehouse", "support_tickets"])
    node = graph.get(tickets)
    assert not node.is_materializable and not node.parent_keys  # an external source table
    readers = {k.path[0] for k in node.child_keys}
    assert readers == {n for n, t in tasks.items() if "support_tickets" in t.spec.source.sql}
    spec = defs.resolve_assets_def(tickets).specs_by_key[tickets]
    assert spec.metadata["dagster/table_name"] == "main.support_tickets"
    assert {"duckdb", "table"} <= set(spec.kinds)
    labels = dg.AssetKey(["warehouse", "ticket_labels"])
    spec = defs.resolve_assets_def(labels).specs_by_key[labels]
    assert spec.metadata["dagster/table_name"] == "main.ticket_labels"
    assert spec.group_name == "ticket_triage" and "team:support_ops" in spec.owners
    columns = [c.name for c in spec.metadata["dagster/column_schema"].schema.columns]
    assert columns[:4] == ["ticket_id", "category", "confidence", "reason"] and "output_version" in columns


def test_every_asset_of_a_task_has_its_owners_tags_and_a_rule_stating_description(defs):
    task = load_all_tasks()["ticket_triage"]
    assert task.spec.owners and task.spec.tags
    for stage in STAGES:
        k = key("ticket_triage", stage)
        spec = defs.resolve_assets_def(k).specs_by_key[k]
        assert list(spec.owners) == list(task.spec.owners), stage
        assert spec.tags["batch_assets/task"] == "ticket_triage" and spec.tags["batch_assets/provider"] == "openai"
        assert {k: spec.tags[k] for k in task.spec.tags} == task.spec.tags, stage
        assert len(spec.description) > 80 and "SPEC" not in spec.description, stage
        if stage in TABLE_OF_STAGE:
            assert spec.metadata["dagster/table_name"] == TABLE_OF_STAGE[stage], stage


def test_applied_has_a_freshness_policy_from_the_providers_window(defs):
    applied = key("ticket_triage", "applied")
    policy = defs.resolve_assets_def(applied).specs_by_key[applied].freshness_policy
    assert isinstance(policy, dg.FreshnessPolicy)
    assert policy.fail_window.to_timedelta() == dt.timedelta(hours=54)  # a day + OpenAI's 24 h window + 6 h
    assert policy.warn_window.to_timedelta() == dt.timedelta(hours=26)


def test_resources_are_configurable_and_secrets_come_from_env_vars(monkeypatch):
    from batch_assets.resources import ProvidersResource, WarehouseResource, default_resources

    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")
    resources = default_resources()
    assert isinstance(resources["warehouse"], WarehouseResource)
    assert isinstance(resources["providers"], ProvidersResource)
    assert isinstance(resources["warehouse"], dg.ConfigurableResource)
    assert isinstance(resources["providers"].connections["openai"].api_key, dg.EnvVar)
    assert "sk-not-a-real-key" not in repr(resources["providers"])


def test_source_tables_show_their_columns_from_the_warehouse_and_none_while_it_is_locked(seeded_warehouse, monkeypatch):
    from batch_assets.defs.tables import tables

    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(seeded_warehouse.database))
    specs = {s.key: s for s in tables().resolve_all_asset_specs()}
    schema = specs[key("warehouse", "support_tickets")].metadata["dagster/column_schema"].schema
    assert {"ticket_id", "body"} <= {c.name for c in schema.columns}
    # Held by a writer (another process's run), the warehouse is not waited for: no columns yet.
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb,sys; c=duckdb.connect({str(seeded_warehouse.database)!r}); "
            "print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert held.stdout.readline().strip() == "held"
        specs = {s.key: s for s in tables().resolve_all_asset_specs()}
        assert "dagster/column_schema" not in specs[key("warehouse", "support_tickets")].metadata
    finally:
        held.stdin.close()
        held.wait(timeout=30)


def test_a_bad_executor_setting_names_the_variable(monkeypatch):
    from batch_assets.spec.errors import SettingError
    from batch_assets.spec.settings import executor_name

    assert executor_name({}) == "in_process" and executor_name({"BATCH_ASSETS_EXECUTOR": "multiprocess"})
    with pytest.raises(SettingError, match=r"BATCH_ASSETS_EXECUTOR='celery' is not an executor: use in_process or"):
        executor_name({"BATCH_ASSETS_EXECUTOR": "celery"})


MULTIPROCESS_RUN = """
import json, sys
import dagster as dg

def submit_job():
    from batch_assets.definitions import defs
    return defs().resolve_job_def("ticket_triage__submit")

if __name__ == "__main__":
    sys.path.insert(0, ".")
    from run_multiprocess import submit_job as job
    with dg.instance_for_test() as instance:
        result = dg.execute_job(
            dg.reconstructable(job), instance=instance, tags={"dagster/partition": "2026-11-20"},
            asset_selection=[dg.AssetKey(["ticket_triage", "manifest"])],
        )
        workers = [e for e in result.all_events if e.event_type_value == "STEP_WORKER_STARTED"]
        print(json.dumps({"success": result.success, "workers": len(workers)}))
"""


@pytest.mark.slow
def test_the_multiprocess_executor_runs_each_step_in_its_own_process(seeded_warehouse, tmp_path):
    (tmp_path / "run_multiprocess.py").write_text(MULTIPROCESS_RUN)
    proc = subprocess.run(
        [sys.executable, "run_multiprocess.py"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={
            **os.environ,
            "BATCH_ASSETS_EXECUTOR": "multiprocess",
            "BATCH_ASSETS_DATABASE": str(seeded_warehouse.database),
            "BATCH_ASSETS_DATA_DIR": str(seeded_warehouse.data_dir),
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"success": True, "workers": 1}
    with seeded_warehouse.connect() as conn:
        assert conn.execute("SELECT total_items FROM ledger.batch_task").fetchone()[0] > 0
