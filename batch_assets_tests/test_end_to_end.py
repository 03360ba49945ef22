"""The real Dagster asset graph end to end: a date-range backfill of the submit job,
the provider sensor handing finished partitions to collect runs, asset checks passing with the
reconciliation numbers, results in the business table; and the blocking shards check gating
submission."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import openai
import pytest

from batch_assets.components.partitions import daily_partitions
from batch_assets.resources import EMULATOR_API_KEY, default_resources

from .conftest import DAY1, DAY2

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

SUBMIT_KEYS = [dg.AssetKey(["ticket_triage", s]) for s in ("manifest", "shards", "submissions")]
COLLECT_KEYS = [dg.AssetKey(["ticket_triage", s]) for s in ("raw_results", "parsed_results", "applied")]
RANGE_TAGS = {"dagster/asset_partition_range_start": DAY1, "dagster/asset_partition_range_end": DAY2}


@pytest.fixture(scope="module")
def e2e_instance():
    """One Dagster instance for the module (each takes seconds to create); runs have their own ids."""
    with dg.instance_for_test() as inst:
        yield inst


def load_defs() -> dg.Definitions:
    from batch_assets.definitions import defs

    return defs()  # after `dagster_env`: resources point at this test's warehouse and emulator


def checks(result) -> dict[str, list]:
    out: dict[str, list] = {}
    for ev in result.get_asset_check_evaluations():
        out.setdefault(ev.check_name, []).append(ev)
    return out


def materialized(result, key: dg.AssetKey) -> set[str]:
    return {
        e.partition for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key == key
    }


def provider_batch_count(emulator) -> int:
    with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=emulator.openai_base_url) as client:
        return len(list(client.batches.list(limit=100)))


def test_backfill_sensor_collect_and_checks_end_to_end(ledger_backend, dagster_env, emulator, e2e_instance):
    instance = e2e_instance
    wh, d = dagster_env, load_defs()
    submit_job = d.resolve_job_def("ticket_triage__submit")
    collect_job = d.resolve_job_def("ticket_triage__collect")

    # A date-range backfill in ONE run: the assets' backfill policy is single_run and every asset loops
    # over the run's partition keys (see test_definitions); the range is DAY1..DAY2.
    keys = daily_partitions.get_partition_keys_in_range(dg.PartitionKeyRange(DAY1, DAY2))
    assert keys == [DAY1, DAY2]
    backfill = submit_job.execute_in_process(instance=instance, tags=RANGE_TAGS)
    assert backfill.success
    for key in SUBMIT_KEYS:
        assert materialized(backfill, key) == {DAY1, DAY2}, key
    shard_checks = checks(backfill)["shards_within_limits"]
    assert shard_checks and all(ev.passed for ev in shard_checks)
    assert provider_batch_count(emulator) == 2

    # The sensor hands each finished partition to one collect run; run them as the daemon would.
    sensor = d.resolve_sensor_def("provider_status_sensor")
    cursor, collected, deadline = None, [], time.monotonic() + 30
    while len(collected) < 2:
        assert time.monotonic() < deadline, f"only {collected} were requested"
        result = sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, cursor=cursor, definitions=d, resources=default_resources())
        )
        cursor = result.cursor
        for request in result.run_requests:
            assert (
                request.job_name == collect_job.name and request.tags["batch_assets/partition"] == request.partition_key
            )
            run = collect_job.execute_in_process(
                instance=instance,
                partition_key=request.partition_key,
                tags={**request.tags, "dagster/run_key": request.run_key},
            )
            assert run.success
            assert {k: materialized(run, k) for k in COLLECT_KEYS} == {k: {request.partition_key} for k in COLLECT_KEYS}
            (recon,) = checks(run)["reconciliation"]
            assert recon.passed
            meta = {k: v.value for k, v in recon.metadata.items()}
            assert meta["verdict"].endswith("passed: every item final, all equations hold")
            assert (meta["unresolved"], meta["final_status"]) == (0, "COMPLETED")
            assert (meta["manifest_items"], meta["quarantined"], meta["shard_lines"]) == (58, 8, 50)
            assert (meta["succeeded"], meta["applied"], meta["missing"], meta["failed_total"]) == (50, 50, 0, 0)
            collected.append(request.partition_key)
        time.sleep(0.1)
    assert sorted(collected) == [DAY1, DAY2]
    assert (
        sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, cursor=cursor, definitions=d, resources=default_resources())
        ).run_requests
        == []
    )

    # The business table holds every usable answer of both days, once.
    with wh.connect() as conn:
        per_task = dict(conn.execute("SELECT task_id, count(*) FROM ticket_labels GROUP BY 1").fetchall())
        distinct = conn.execute("SELECT count(DISTINCT (ticket_id, output_version)) FROM ticket_labels").fetchone()[0]
        bad = conn.execute(
            "SELECT count(*) FROM ticket_labels WHERE category NOT IN ('billing', 'technical', "
            "'account') OR confidence NOT BETWEEN 0 AND 1"
        ).fetchone()[0]
    assert per_task == {"ticket_triage_20261120": 50, "ticket_triage_20261121": 50}
    assert distinct == 100 and bad == 0
    applied = dg.AssetKey(["ticket_triage", "applied"])
    assert {DAY1, DAY2} <= instance.get_materialized_partitions(applied)

    # Re-running a partition's submit job reuses the frozen manifest and submits nothing new.
    again = submit_job.execute_in_process(instance=instance, partition_key=DAY1)
    assert again.success and provider_batch_count(emulator) == 2
    manifest_meta = {
        k: v.value for k, v in again.asset_materializations_for_node("ticket_triage__manifest")[0].metadata.items()
    }
    assert manifest_meta["reused"] is True and manifest_meta["new_items"] == 0
    submit_meta = {
        k: v.value for k, v in again.asset_materializations_for_node("ticket_triage__submissions")[0].metadata.items()
    }
    assert (submit_meta["submitted"], submit_meta["already_submitted"]) == (0, 1)


def test_a_failing_shards_check_blocks_submission(dagster_env, emulator, e2e_instance):
    instance = e2e_instance
    wh, d = dagster_env, load_defs()
    submit_job = d.resolve_job_def("ticket_triage__submit")
    cut = submit_job.execute_in_process(
        instance=instance, partition_key=DAY1, asset_selection=SUBMIT_KEYS[:2]
    )  # manifest + shards only
    assert cut.success and provider_batch_count(emulator) == 0
    with wh.connect() as conn:
        (path,) = conn.execute("SELECT path FROM ledger.shard").fetchone()
    Path(path).write_bytes(Path(path).read_bytes().replace(b"gpt-4o-mini", b"gpt-4o-maxi", 1))  # tampered

    run = submit_job.execute_in_process(instance=instance, partition_key=DAY1, raise_on_error=False)
    (check,) = checks(run)["shards_within_limits"]
    assert not check.passed
    assert "sha256 mismatch" in check.metadata["problems"].value
    assert not materialized(run, SUBMIT_KEYS[2]), "submissions ran although the blocking check failed"
    assert provider_batch_count(emulator) == 0
    with wh.connect() as conn:
        assert conn.execute("SELECT count(*) FROM ledger.provider_job").fetchone()[0] == 0
