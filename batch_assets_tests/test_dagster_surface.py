"""What the Dagster UI shows after real runs of the asset graph against the emulator: every asset
that writes a table names it with its columns and rows, `applied` carries each partition's health,
the reconciliation check is recorded against its partition, the source and business tables are
observed, runs carry the task and partition tags, and the report asset writes its page."""

from __future__ import annotations

import dagster as dg
import pytest

from .conftest import DAY1, DAY2

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

TASK = "ticket_triage"
TABLE_STAGES = {
    "manifest": "ledger.manifest_item",
    "shards": "ledger.shard_line",
    "raw_results": "ledger.raw_result",
    "parsed_results": "ledger.parsed_result",
    "applied": "ledger.applied_result",
}
RANGE_TAGS = {"dagster/asset_partition_range_start": DAY1, "dagster/asset_partition_range_end": DAY2}


def key(stage: str) -> dg.AssetKey:
    return dg.AssetKey([TASK, stage])


def load_defs() -> dg.Definitions:
    from batch_assets.definitions import defs

    return defs()


def meta(event) -> dict:
    return {k: v.value for k, v in event.metadata.items()}


def materializations(result, stage: str) -> dict[str, dict]:
    return {
        e.partition: meta(e.event_specific_data.materialization)
        for e in result.all_events
        if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key == key(stage)
    }


def observations(result, asset_key: dg.AssetKey) -> list[dict]:
    return [
        meta(e.event_specific_data.asset_observation)
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION" and e.asset_key == asset_key
    ]


def run_both_days(d, instance, wait_for_jobs, warehouse, adapter, **collect_kwargs):
    submit = d.resolve_job_def(f"{TASK}__submit").execute_in_process(instance=instance, tags=RANGE_TAGS)
    assert submit.success
    wait_for_jobs(warehouse, adapter)
    collect = d.resolve_job_def(f"{TASK}__collect").execute_in_process(instance=instance, **collect_kwargs)
    assert collect.success
    return submit, collect


SENSOR_TAGS = {"batch_assets/task": TASK, "batch_assets/partition": DAY2, "batch_assets/attempt": "1"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, _seeded_template):
    """Both days submitted in one range run; DAY1 collected in a run launched by hand (no tags), DAY2
    in a run with the tags the provider status sensor gives its runs. One setup for the module."""
    import shutil

    from batch_assets.emulator.testing import running_emulator
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.providers.contract import ClientSettings
    from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
    from batch_assets.resources import EMULATOR_API_KEY

    from .conftest import FAST_EMULATOR, _wait_for_jobs

    root = tmp_path_factory.mktemp("surface")
    wh = Warehouse.at(root / "warehouse.duckdb", root / "data")
    shutil.copy(_seeded_template, wh.database)
    with (
        running_emulator(root / "emulator", **FAST_EMULATOR) as emu,
        pytest.MonkeyPatch.context() as mp,
        dg.instance_for_test() as instance,
    ):
        mp.setenv("BATCH_ASSETS_DATABASE", str(wh.database))
        mp.setenv("BATCH_ASSETS_DATA_DIR", str(wh.data_dir))
        mp.setenv("BATCH_ASSETS_EMULATOR_URL", emu.base_url)
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BATCH_ASSETS_PROVIDER_MODE", "BATCH_ASSETS_OPENAI_MODE"):
            mp.delenv(name, raising=False)
        adapter = OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emu.openai_base_url, max_retries=2))
        d = load_defs()
        submit, collect = run_both_days(d, instance, _wait_for_jobs, wh, adapter, partition_key=DAY1)
        by_sensor = d.resolve_job_def(f"{TASK}__collect").execute_in_process(
            instance=instance, partition_key=DAY2, tags=SENSOR_TAGS
        )
        assert by_sensor.success
        yield d, instance, submit, collect, wh, by_sensor


def test_table_writing_assets_record_table_name_columns_and_rows(runs):
    _, _, submit, collect, wh, _ = runs
    with wh.connect() as conn:
        expected = {
            stage: dict(conn.execute(f"SELECT task_id, count(*) FROM {table} GROUP BY 1").fetchall())
            for stage, table in TABLE_STAGES.items()
        }
    for stage, table in TABLE_STAGES.items():
        result = submit if stage in ("manifest", "shards") else collect
        by_partition = materializations(result, stage)
        days = (DAY1, DAY2) if result is submit else (DAY1,)
        assert set(by_partition) == set(days), stage
        for day in days:
            m = by_partition[day]
            task_id = f"{TASK}_{day.replace('-', '')}"
            assert m["dagster/table_name"] == table, stage
            columns = {c.name for c in m["dagster/column_schema"].columns}
            assert {"task_id", "custom_id"} <= columns, stage
            # the partition's rows, and the task's rows over every partition
            assert m["dagster/partition_row_count"] == expected[stage].get(task_id, 0) > 0, (stage, day)
            # (DAY2 was collected after DAY1's collect run)
            assert m["dagster/row_count"] == sum(
                expected[stage].get(f"{TASK}_{d.replace('-', '')}", 0) for d in days
            ), (stage, day)
    assert materializations(submit, "manifest")[DAY1]["dagster/partition_row_count"] == 58


def test_applied_carries_each_partitions_health_and_the_check_names_its_partition(runs):
    _, _, _, collect, _, _ = runs
    m = materializations(collect, "applied")[DAY1]
    assert (m["task_id"], m["items"], m["applied"], m["final_failed"], m["in_flight"], m["unresolved"]) == (
        f"{TASK}_20261120",
        58,
        50,
        0,
        0,
        0,
    )
    assert m["applied_rate"] == pytest.approx(50 / 58) and m["failure_rate"] == 0.0
    assert m["final_status"] == "COMPLETED"
    (check,) = collect.get_asset_check_evaluations()
    assert check.check_name == "reconciliation" and check.passed
    assert check.partition == DAY1  # recorded against the day (a partitioned check)
    cm = meta(check)
    assert (cm["partition"], cm["task_id"]) == (DAY1, f"{TASK}_20261120")


def test_source_and_business_tables_are_observed_with_rows_and_columns(runs):
    _, _, submit, collect, wh, _ = runs
    with wh.connect() as conn:
        tickets = conn.execute("SELECT count(*) FROM support_tickets").fetchone()[0]
        labels = conn.execute("SELECT count(*) FROM ticket_labels WHERE task_id = ?", [f"{TASK}_20261120"]).fetchone()[
            0
        ]
    (source,) = observations(submit, dg.AssetKey(["warehouse", "support_tickets"]))
    assert source["dagster/table_name"] == "main.support_tickets" and source["dagster/row_count"] == tickets
    assert "body" in {c.name for c in source["dagster/column_schema"].columns}
    (business,) = observations(collect, dg.AssetKey(["warehouse", "ticket_labels"]))
    assert business["dagster/table_name"] == "main.ticket_labels" and business["dagster/row_count"] == labels == 50
    assert business["written_by"] == f"{TASK}_20261120" and business["rows_of_these_partitions"] == 50
    assert {"ticket_id", "category", "output_version"} <= {c.name for c in business["dagster/column_schema"].columns}


def test_runs_carry_task_and_partition_tags_whoever_launches_them(runs):
    _, instance, submit, collect, _, _ = runs
    tags = {r: instance.get_run_by_id(r.run_id).tags for r in (submit, collect)}
    assert tags[collect]["batch_assets/task"] == TASK and tags[collect]["batch_assets/partition"] == DAY1
    assert tags[submit]["batch_assets/task"] == TASK
    assert tags[submit]["batch_assets/partition"] == f"{DAY1}...{DAY2}"


def test_the_report_asset_shows_the_partitions_figures_and_writes_its_page(runs):
    _, _, _, collect, wh, _ = runs
    m = materializations(collect, "report")[DAY1]
    assert (m["task_id"], m["status"], m["items"], m["applied"], m["unresolved"]) == (
        f"{TASK}_20261120",
        "COMPLETED",
        58,
        50,
        0,
    )
    assert m["completion_rate"] == 1.0 and m["input_tokens"] > 0 and m["total_time_s"] > 0
    assert "| applied (final) | 50 |" in m["report"]
    page = wh.data_dir / "reports" / f"{TASK}_20261120.html"
    assert m["report_path"] == str(page) and page.read_text(encoding="utf-8").count("<svg") == 2


def test_a_collect_run_over_a_range_gives_each_day_its_own_numbers(dagster_env, adapter, instance, wait_for_jobs):
    d = load_defs()
    _, collect = run_both_days(d, instance, wait_for_jobs, dagster_env, adapter, tags=RANGE_TAGS)
    applied = materializations(collect, "applied")
    assert {day: m["task_id"] for day, m in applied.items()} == {DAY1: f"{TASK}_20261120", DAY2: f"{TASK}_20261121"}
    report = materializations(collect, "report")
    assert {day: m["task_id"] for day, m in report.items()} == {DAY1: f"{TASK}_20261120", DAY2: f"{TASK}_20261121"}
    (check,) = collect.get_asset_check_evaluations()
    assert check.passed and check.partition is None  # one result for the range, which it names
    cm = meta(check)
    assert cm["partition"] == f"{DAY1}...{DAY2}" and cm["task_id"] == f"{TASK}_20261120, {TASK}_20261121"
    assert instance.get_run_by_id(collect.run_id).tags["batch_assets/partition"] == f"{DAY1}...{DAY2}"


def test_sensor_requested_collect_runs_keep_the_sensors_tags(runs):
    """The run tags the assets add never overwrite tags a run already has."""
    _, instance, _, _, _, by_sensor = runs
    tags = instance.get_run_by_id(by_sensor.run_id).tags
    assert {k: tags[k] for k in SENSOR_TAGS} == SENSOR_TAGS


def test_the_report_of_a_day_nothing_was_frozen_for_says_so(dagster_env, instance):
    report = load_defs().resolve_assets_def(key("report"))
    result = dg.materialize([report], partition_key=DAY1, instance=instance)  # resources bound by the definitions
    assert result.success
    m = materializations(result, "report")[DAY1]
    assert (m["task_id"], m["status"]) == (f"{TASK}_20261120", "no manifest frozen yet")
    assert not (dagster_env.data_dir / "reports").exists()
