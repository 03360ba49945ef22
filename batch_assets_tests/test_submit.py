"""Stage 3, submissions: one provider batch per shard, intent recorded before the
create call, idempotent re-runs, a crash between create and record finds the batch again instead of
billing twice, and at most N batches in flight per provider."""

from __future__ import annotations

import dataclasses
import time

import httpx
import openai
import pytest

import batch_assets.pipeline.send.submit as submit_mod
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.providers.contract import BatchError, CreateOutcome, CreateResult
from batch_assets.resources import EMULATOR_API_KEY

from .conftest import DAY1, DAY2

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

TASK_ID1 = "ticket_triage_20261120"
LINES = 50  # sendable lines per seeded day (3 card numbers blocked by the policy)


def limited(task, **limits):
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, **limits))


def prepare(wh, task, *days):
    for day in days:
        freeze_manifest(wh, task, day)
        cut_shards(wh, task, day)


def provider_batches(emulator) -> list:
    with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=emulator.openai_base_url) as client:
        return list(client.batches.list(limit=100))


def jobs(wh, task_id: str | None = None) -> list[dict]:
    with wh.connect() as conn:
        cur = conn.execute(
            "SELECT * FROM ledger.provider_job" + (" WHERE task_id = ?" if task_id else "") + " ORDER BY job_key",
            [task_id] if task_id else [],
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


class SimulatedCrash(BaseException):
    """The process dies: not an Exception, so nothing on the way may swallow it."""


def crash_once_after_create(monkeypatch):
    """The process 'dies' right after the provider accepted the batch, before the ledger records it."""
    real = submit_mod.record_created
    state = {"crashed": False}

    def record(conn, job_key, snap, owner):
        if not state["crashed"]:
            state["crashed"] = True
            raise SimulatedCrash(f"simulated crash after creating {snap.provider_batch_id} for {job_key}")
        return real(conn, job_key, snap, owner)

    monkeypatch.setattr(submit_mod, "record_created", record)
    return state


# --- one batch per shard, ids recorded ---------------------------------------------------------------


def test_submit_creates_one_batch_per_shard_and_records_every_id(seeded_copy, ticket_task, adapter, emulator):
    wh, task = seeded_copy, limited(ticket_task, max_requests_per_shard=20)
    prepare(wh, task, DAY1)
    s = submit_pending(wh, task, DAY1, adapter)
    with wh.connect() as conn:
        shards = dict(conn.execute("SELECT shard_id, path FROM ledger.shard WHERE task_id = ?", [TASK_ID1]).fetchall())
        events = conn.execute(
            "SELECT job_key, from_state, to_state FROM ledger.status_event ORDER BY job_key, observed_at"
        ).fetchall()
        status = conn.execute("SELECT status FROM ledger.batch_task WHERE task_id = ?", [TASK_ID1]).fetchone()[0]
    assert len(shards) == 3
    assert sorted(s.submitted) == sorted(f"{sid}:job1" for sid in shards)
    assert (s.recovered, s.waiting_for_capacity, s.already_submitted) == ([], 0, 0)
    batches = {b.id: b for b in provider_batches(emulator)}
    assert len(batches) == 3
    recorded = jobs(wh)
    assert len(recorded) == 3
    with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=emulator.openai_base_url) as client:
        for job in recorded:
            batch = batches[job["provider_batch_id"]]
            assert batch.metadata["batch_assets_job"] == job["job_key"]
            assert batch.metadata["shard_id"] == job["shard_id"] and batch.metadata["task_id"] == TASK_ID1
            assert batch.input_file_id == job["input_file_id"]
            assert batch.endpoint == "/v1/chat/completions" and batch.completion_window == "24h"
            # What the provider holds is byte for byte the shard file.
            with open(shards[job["shard_id"]], "rb") as f:
                assert client.files.content(job["input_file_id"]).read() == f.read()
            assert job["state"] not in ("CREATED",) and job["submitted_at"] is not None
            assert (job["provider"], job["endpoint"], job["task_id"]) == ("openai", "/v1/chat/completions", TASK_ID1)
    # The intent (CREATED) was recorded before the create call, then what the provider said.
    for job in recorded:
        mine = [(f, t) for k, f, t in events if k == job["job_key"]]
        assert mine[0] == (None, "CREATED") and mine[1][0] == "CREATED"
    assert status == "SUBMITTED"
    # submit_pending itself records, with each intent, where the job went (host only, no key) and how
    # its lines were rendered.
    with wh.connect() as conn:
        sent = conn.execute(
            "SELECT DISTINCT endpoint_mode, endpoint_url, request_options FROM ledger.provider_job WHERE task_id = ?",
            [TASK_ID1],
        ).fetchall()
    assert sent == [("emulator", emulator.base_url.rstrip("/"), '{"response_format": "json_schema"}')]


def test_resubmitting_submits_nothing_new(seeded_copy, ticket_task, adapter, emulator):
    wh, task = seeded_copy, limited(ticket_task, max_requests_per_shard=20)
    prepare(wh, task, DAY1)
    submit_pending(wh, task, DAY1, adapter)
    before = {j["job_key"]: j["provider_batch_id"] for j in jobs(wh)}
    again = submit_pending(wh, task, DAY1, adapter)
    assert (again.submitted, again.recovered, again.already_submitted) == ([], [], 3)
    assert len(provider_batches(emulator)) == 3
    assert {j["job_key"]: j["provider_batch_id"] for j in jobs(wh)} == before


def test_transient_provider_errors_are_retried_without_duplicates(seeded_copy, ticket_task, adapter, emulator):
    wh = seeded_copy
    prepare(wh, ticket_task, DAY1)
    emulator.configure(fail_next_requests=1, fail_status=503)
    s = submit_pending(wh, ticket_task, DAY1, adapter)
    assert len(s.submitted) == 1
    assert emulator.settings.fail_next_requests == 0  # the failure really happened
    assert len(provider_batches(emulator)) == 1


def fault_on_create(monkeypatch, adapter, emulator, status: int) -> None:
    """The next API call after the shard's upload (the create) answers HTTP `status`."""
    real_prepare = adapter.prepare_input

    def prepare_then_fault(*args, **kwargs):
        prepared = real_prepare(*args, **kwargs)
        emulator.configure(fail_next_requests=1, fail_status=status)
        return prepared

    monkeypatch.setattr(adapter, "prepare_input", prepare_then_fault)


@pytest.mark.parametrize("status", [503, 429])
def test_a_create_without_answer_is_looked_up_then_tried_again_once(
    seeded_copy, ticket_task, adapter, emulator, monkeypatch, status
):
    wh = seeded_copy
    prepare(wh, ticket_task, DAY1)
    monkeypatch.setattr(submit_mod, "CREATE_BACKOFF_S", 0.0)
    fault_on_create(monkeypatch, adapter, emulator, status)
    s = submit_pending(wh, ticket_task, DAY1, adapter)
    assert len(s.submitted) == 1 and emulator.settings.fail_next_requests == 0
    (batch,) = provider_batches(emulator)
    assert jobs(wh)[0]["provider_batch_id"] == batch.id


def test_a_create_whose_answer_was_lost_is_found_and_adopted_not_created_twice(
    seeded_copy, ticket_task, adapter, emulator, monkeypatch
):
    wh = seeded_copy
    prepare(wh, ticket_task, DAY1)
    real_create = adapter.create

    def answer_lost(request, prepared):
        real_create(request, prepared)  # the provider creates the batch ...
        return CreateResult(CreateOutcome.UNKNOWN, status_code=504, error=BatchError("gateway_timeout", "lost"))

    monkeypatch.setattr(adapter, "create", answer_lost)
    s = submit_pending(wh, ticket_task, DAY1, adapter)
    assert len(s.submitted) == 1
    (batch,) = provider_batches(emulator)  # ... once
    assert jobs(wh)[0]["provider_batch_id"] == batch.id


def test_a_refused_create_fails_the_run_naming_shard_job_and_error(
    seeded_copy, ticket_task, adapter, emulator, monkeypatch
):
    wh = seeded_copy
    prepare(wh, ticket_task, DAY1)
    fault_on_create(monkeypatch, adapter, emulator, 400)
    with pytest.raises(
        submit_mod.SubmissionRefused,
        match=r"openai refused the batch for shard \S+ \(job \S+:job1\): HTTP 400 \{'code'",
    ):
        submit_pending(wh, ticket_task, DAY1, adapter)
    assert provider_batches(emulator) == []
    assert [j["state"] for j in jobs(wh)] == ["CREATED"]


# --- crash recovery ----------------------------------------------------------------------------------


def test_crash_between_create_and_record_finds_the_batch_instead_of_creating_another(
    seeded_copy, ticket_task, adapter, emulator, monkeypatch, wait_for_jobs
):
    wh, task = seeded_copy, limited(ticket_task, max_requests_per_shard=20)
    prepare(wh, task, DAY1)
    crash = crash_once_after_create(monkeypatch)
    with pytest.raises(SimulatedCrash, match="simulated crash"):
        submit_pending(wh, task, DAY1, adapter)
    assert crash["crashed"]
    (orphan,) = provider_batches(emulator)  # the provider has it ...
    (intent,) = jobs(wh)  # ... the ledger only the intent
    assert (intent["state"], intent["provider_batch_id"]) == ("CREATED", None)
    assert intent["input_file_id"] == orphan.input_file_id
    assert orphan.metadata["batch_assets_job"] == intent["job_key"]

    s = submit_pending(wh, task, DAY1, adapter)  # the restarted run
    assert s.recovered == [intent["job_key"]]
    assert len(s.submitted) == 2  # the two shards never reached
    batches = provider_batches(emulator)
    assert len(batches) == 3, "a crashed submission was created a second time (duplicate billing)"
    recorded = {j["job_key"]: j for j in jobs(wh)}
    assert recorded[intent["job_key"]]["provider_batch_id"] == orphan.id
    assert len({j["provider_batch_id"] for j in recorded.values()}) == 3
    # The recovered job is tracked like any other.
    wait_for_jobs(wh, adapter)
    assert all(j["state"] == "COMPLETED" for j in jobs(wh))


def test_create_calls_that_never_reach_the_provider_create_exactly_one_batch(
    seeded_copy, ticket_task, adapter, emulator, monkeypatch
):
    """The network is down for every create: each try ends UNKNOWN, the batch is looked for (absent),
    tried again a bounded number of times, then the run fails; the next run creates it once."""
    wh = seeded_copy
    prepare(wh, ticket_task, DAY1)
    monkeypatch.setattr(submit_mod, "CREATE_BACKOFF_S", 0.0)
    real_client = adapter._client
    calls = {"create": 0}

    class NetworkDownForCreate:
        """The real client, except that creating a batch never reaches the provider."""

        def __init__(self, client):
            self._real = client

        def with_options(self, **kwargs):
            return NetworkDownForCreate(self._real.with_options(**kwargs))

        def __getattr__(self, name):
            if name == "batches":
                return self
            return getattr(self._real, name)

        def create(self, **kwargs):
            calls["create"] += 1
            raise openai.APIConnectionError(request=httpx.Request("POST", emulator.openai_base_url + "/batches"))

        def list(self, **kwargs):
            return self._real.batches.list(**kwargs)

    monkeypatch.setattr(adapter, "_client", NetworkDownForCreate(real_client))
    with pytest.raises(submit_mod.SubmissionUnresolved, match="no such batch was found"):
        submit_pending(wh, ticket_task, DAY1, adapter)
    assert calls["create"] == adapter.settings.max_retries + 1
    assert provider_batches(emulator) == []
    assert [j["state"] for j in jobs(wh)] == ["CREATED"]
    monkeypatch.setattr(adapter, "_client", real_client)
    s = submit_pending(wh, ticket_task, DAY1, adapter)
    assert len(s.submitted) == 1 and s.recovered == []
    (batch,) = provider_batches(emulator)
    assert jobs(wh)[0]["provider_batch_id"] == batch.id


@pytest.fixture
def timezone(request, monkeypatch):
    """Run the test with the process (and so DuckDB's) local time zone set to `request.param`."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    "timezone",
    [
        "UTC",
        pytest.param("Asia/Shanghai"),
    ],
    indirect=True,
)
def test_crash_recovery_still_finds_the_batch_after_newer_batches(
    timezone, seeded_copy, ticket_task, adapter, emulator, monkeypatch
):
    wh = seeded_copy
    prepare(wh, ticket_task, DAY1, DAY2)
    crash_once_after_create(monkeypatch)
    with pytest.raises(SimulatedCrash):
        submit_pending(wh, ticket_task, DAY1, adapter)
    submit_pending(wh, ticket_task, DAY2, adapter)  # a newer batch, listed first
    s = submit_pending(wh, ticket_task, DAY1, adapter)
    assert len(provider_batches(emulator)) == 2, "the crashed DAY1 submission was created twice"
    assert len(s.recovered) == 1 and s.submitted == []


# --- capacity ----------------------------------------------------------------------------------------


def test_at_most_max_concurrent_jobs_in_flight_the_rest_wait(
    seeded_copy, ticket_task, adapter, emulator, wait_for_jobs
):
    wh, task = seeded_copy, limited(ticket_task, max_requests_per_shard=20, max_concurrent_jobs=1)
    prepare(wh, task, DAY1, DAY2)
    first = submit_pending(wh, task, DAY1, adapter)
    assert (len(first.submitted), first.waiting_for_capacity) == (1, 2)
    assert len(provider_batches(emulator)) == 1
    assert sum(j["provider_batch_id"] is not None for j in jobs(wh)) == 1
    # The limit is per provider, across partitions: DAY2 waits too while DAY1's batch is in flight.
    other = submit_pending(wh, task, DAY2, adapter)
    assert (other.submitted, other.waiting_for_capacity) == ([], 3)
    assert len(provider_batches(emulator)) == 1
    # Once the batch in flight is terminal, the next shard goes.
    wait_for_jobs(wh, adapter)
    second = submit_pending(wh, task, DAY1, adapter)
    assert (len(second.submitted), second.waiting_for_capacity, second.already_submitted) == (1, 1, 1)
    assert len(provider_batches(emulator)) == 2
    # Every shard eventually goes, exactly once.
    wait_for_jobs(wh, adapter)
    third = submit_pending(wh, task, DAY1, adapter)
    assert (len(third.submitted), third.waiting_for_capacity, third.already_submitted) == (1, 0, 2)
    wait_for_jobs(wh, adapter)
    assert submit_pending(wh, task, DAY1, adapter).submitted == []
    assert len(provider_batches(emulator)) == 3
    assert [j["state"] for j in jobs(wh, TASK_ID1)] == ["COMPLETED"] * 3


def test_enqueued_tokens_are_limited_per_model_across_batches_the_rest_wait(
    seeded_copy, ticket_task, adapter, emulator, wait_for_jobs
):
    """The enqueued-token limit is per provider and model across every queued batch (OpenAI's
    per-organization limit), not per shard: a shard that would go over it waits for room."""
    wh = seeded_copy
    probe = limited(ticket_task, max_requests_per_shard=30)
    prepare(wh, probe, DAY1)
    with wh.connect() as conn:
        sizes = [r[0] for r in conn.execute("SELECT est_tokens FROM ledger.shard ORDER BY shard_no").fetchall()]
    assert len(sizes) == 2
    # Room for either shard alone, not for both at once.
    task = limited(ticket_task, max_requests_per_shard=30, max_enqueued_tokens=max(sizes) + 1)
    first = submit_pending(wh, task, DAY1, adapter)
    assert (len(first.submitted), first.waiting_for_capacity) == (1, 1)
    assert len(provider_batches(emulator)) == 1
    wait_for_jobs(wh, adapter)
    second = submit_pending(wh, task, DAY1, adapter)
    assert (len(second.submitted), second.waiting_for_capacity, second.already_submitted) == (1, 0, 1)
    assert len(provider_batches(emulator)) == 2
