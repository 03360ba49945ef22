"""Intents left behind by a submit run that ended without creating its batch (failed, cancelled,
killed): the sensor releases the claims of runs Dagster reports finished instead of waiting out the
lease, and asks for a submit run of the partition, which looks each intent up by its job key and
creates only what the provider lacks — nothing twice, nothing abandoned."""

from __future__ import annotations

import dagster as dg
import pytest

from batch_assets.ledger.jobs import claim_new_intent
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import job_key_for, submit_pending

from .conftest import DAY1
from .sensor_ticks import limited, tick

pytestmark = pytest.mark.slow  # starts the emulator or Dagster


def _failed_run_id(instance: dg.DagsterInstance) -> str:
    """A real Dagster run that failed (as a submit run killed mid-way ends up, once marked)."""

    @dg.asset
    def boom() -> None:
        raise RuntimeError("the run worker died")

    result = dg.materialize([boom], instance=instance, raise_on_error=False)
    assert not result.success
    return result.run_id


def _intents(wh) -> list[tuple]:
    with wh.connect() as conn:
        return conn.execute(
            "SELECT job_key, claimed_by, provider_batch_id FROM ledger.provider_job ORDER BY job_key"
        ).fetchall()


def test_a_finished_runs_claim_is_released_and_the_partition_resubmitted_once(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator
):
    wh, task = dagster_env, limited(ticket_task, 30)
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    with wh.connect() as conn:
        shard_id = conn.execute("SELECT shard_id FROM ledger.shard ORDER BY shard_no LIMIT 1").fetchone()[0]
        shards = conn.execute("SELECT count(*) FROM ledger.shard").fetchone()[0]
    dead = _failed_run_id(sensor_instance)
    with wh.connect() as conn:  # the run claimed its first intent, then died before the create call
        assert claim_new_intent(
            conn, job_key_for(shard_id), task.task_id(DAY1), shard_id, "openai", task.spec.endpoint, owner=dead
        )

    result = tick(defs, sensor_instance, None)
    assert _intents(wh) == [(job_key_for(shard_id), None, None)]  # released, not left for 15 minutes
    (request,) = [r for r in result.run_requests if r.job_name == "ticket_triage__submit"]
    assert request.partition_key == DAY1 and request.run_key.startswith("resume:ticket_triage:2026-11-20:")
    assert request.asset_selection == [dg.AssetKey(["ticket_triage", "submissions"])]
    assert request.tags["batch_assets/orphaned_intents"] == "1"
    # Asked once: the next tick asks under the same run key (Dagster launches a run key once).
    assert [
        r.run_key
        for r in tick(defs, sensor_instance, result.cursor).run_requests
        if r.job_name == "ticket_triage__submit"
    ] == [request.run_key]

    # The submit run takes the intent up (looked up first: absent, so created) and the other shards.
    summary = submit_pending(wh, task, DAY1, adapter)
    assert summary.claimed_elsewhere == []
    rows = _intents(wh)
    assert len(rows) == shards and all(batch for _key, _owner, batch in rows)
    assert len({batch for _key, _owner, batch in rows}) == shards  # one batch per shard, none twice
    assert not [r for r in tick(defs, sensor_instance, None).run_requests if r.job_name == "ticket_triage__submit"]


def test_a_live_claim_is_left_alone(defs, sensor_instance, dagster_env, ticket_task):
    wh = dagster_env
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    with wh.connect() as conn:
        shard_id = conn.execute("SELECT shard_id FROM ledger.shard ORDER BY shard_no LIMIT 1").fetchone()[0]
        assert claim_new_intent(
            conn,
            job_key_for(shard_id),
            ticket_task.task_id(DAY1),
            shard_id,
            "openai",
            ticket_task.spec.endpoint,
            owner="a-submit-run-still-going",
        )
    result = tick(defs, sensor_instance, None)
    assert _intents(wh) == [(job_key_for(shard_id), "a-submit-run-still-going", None)]
    assert not [r for r in result.run_requests if r.job_name == "ticket_triage__submit"]
