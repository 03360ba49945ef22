"""The providers' own timestamps of a batch, from the wire to the ledger: the emulator returns each
provider's in its own format (OpenAI and DashScope unix seconds, Anthropic and Gemini RFC 3339, and
only the fields the service has), each adapter maps them onto `JobSnapshot`
(created, started, finalizing, ended; None where the provider reports none), and the ledger keeps
them on `provider_job`, never overwriting a known one with NULL. The emulator's clock is held by the
tests (`emulator.clock.now`), so nothing waits on real time."""

from __future__ import annotations

import json
import re
import urllib.request
from datetime import UTC, datetime

import pytest
from anthropic.types.messages import MessageBatch
from google.genai import types as genai_types
from openai.types import Batch

from batch_assets.emulator import clock as emulator_clock
from batch_assets.emulator.testing import running_emulator
from batch_assets.ledger.jobs import insert_job_intent, record_snapshot, record_snapshots, snapshot_columns
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.providers.anthropic.adapter import snapshot_from_batch as anthropic_snapshot
from batch_assets.providers.contract import JobRef, JobSnapshot, JobState
from batch_assets.providers.gemini.adapter import snapshot_from_job
from batch_assets.providers.openai.adapter import snapshot_from_batch as openai_snapshot

from .provider_calls import ENDPOINT, adapter_for, create_request, shard_file

RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
TIMES = ("provider_created_at", "provider_started_at", "provider_finalizing_at", "provider_ended_at")


def at(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, UTC)


def times(snap: JobSnapshot) -> tuple:
    return tuple(getattr(snap, name) for name in TIMES)


# --- adapters: each provider's batch object as recorded from the live service ------------------------

OPENAI_COMPLETED = {  # provider-wire-contracts.md, OpenAI §1: a completed batch
    "id": "batch_abc123",
    "object": "batch",
    "endpoint": "/v1/chat/completions",
    "errors": None,
    "input_file_id": "file-abc123",
    "completion_window": "24h",
    "status": "completed",
    "output_file_id": "file-out456",
    "error_file_id": "file-err789",
    "created_at": 1711471533,
    "in_progress_at": 1711471538,
    "expires_at": 1711557933,
    "finalizing_at": 1711493133,
    "completed_at": 1711493163,
    "failed_at": None,
    "expired_at": None,
    "cancelling_at": None,
    "cancelled_at": None,
    "request_counts": {"total": 100, "completed": 95, "failed": 5},
    "metadata": {"k": "v"},
}
OPENAI_FAILED = {  # failed at validation: never in progress
    "id": "batch_bad1",
    "object": "batch",
    "endpoint": "/v1/chat/completions",
    "errors": {"object": "list", "data": [{"code": "invalid_json_line", "line": 1, "message": "bad", "param": None}]},
    "input_file_id": "file-abc123",
    "completion_window": "24h",
    "status": "failed",
    "output_file_id": None,
    "error_file_id": None,
    "created_at": 1711471533,
    "failed_at": 1711471540,
    "request_counts": {"total": 0, "completed": 0, "failed": 0},
    "metadata": None,
}
DASHSCOPE_VALIDATING = {  # DashScope's create answer (provider_samples/dashscope_batch_objects.jsonl)
    "id": "batch_xxx",
    "object": "batch",
    "endpoint": "/v1/chat/completions",
    "errors": None,
    "input_file_id": "file-batch-xxx",
    "completion_window": "24h",
    "status": "validating",
    "output_file_id": None,
    "error_file_id": None,
    "created_at": 1742367779,
    "in_progress_at": None,
    "expires_at": None,
    "finalizing_at": None,
    "completed_at": None,
    "failed_at": None,
    "expired_at": None,
    "cancelling_at": None,
    "cancelled_at": None,
    "request_counts": {"total": 0, "completed": 0, "failed": 0},
    "metadata": {"ds_name": "job", "ds_description": "d"},
}
ANTHROPIC_ENDED = {  # provider_samples/anthropic_batch_objects.jsonl
    "id": "msgbatch_01MxdL3LT4Dizo9t3j6FY9Ap",
    "type": "message_batch",
    "processing_status": "ended",
    "request_counts": {"processing": 0, "succeeded": 3, "errored": 0, "canceled": 0, "expired": 0},
    "ended_at": "2025-01-12T05:59:59.064695+00:00",
    "created_at": "2025-01-12T05:59:14.154311+00:00",
    "expires_at": "2025-01-13T05:59:14.154311+00:00",
    "archived_at": None,
    "cancel_initiated_at": None,
    "results_url": "https://api.anthropic.com/v1/messages/batches/msgbatch_01MxdL3LT4Dizo9t3j6FY9Ap/results",
}
ANTHROPIC_CANCELING = {
    "id": "msgbatch_015Myz5Wcm1Ua9o4n8qaw5zt",
    "type": "message_batch",
    "processing_status": "canceling",
    "request_counts": {"processing": 3, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
    "ended_at": None,
    "created_at": "2025-04-11T17:18:57.044758+00:00",
    "expires_at": "2025-04-12T17:18:57.044758+00:00",
    "archived_at": None,
    "cancel_initiated_at": "2025-04-11T17:18:57.342817+00:00",
    "results_url": None,
}


def test_openai_maps_created_in_progress_finalizing_and_the_end_its_status_names():
    snap = openai_snapshot(Batch.model_validate(OPENAI_COMPLETED))
    assert times(snap) == (at(1711471533), at(1711471538), at(1711493133), at(1711493163))
    failed = openai_snapshot(Batch.model_validate(OPENAI_FAILED))
    assert times(failed) == (at(1711471533), None, None, at(1711471540))  # ended when validation failed
    cancelled = openai_snapshot(
        Batch.model_validate(
            {**OPENAI_COMPLETED, "status": "cancelled", "completed_at": None, "cancelled_at": 1711490000}
        )
    )
    assert cancelled.provider_ended_at == at(1711490000)
    expired = openai_snapshot(
        Batch.model_validate({**OPENAI_COMPLETED, "status": "expired", "completed_at": None, "expired_at": 1711557933})
    )
    assert expired.provider_ended_at == at(1711557933)
    assert all(t.tzinfo is UTC for t in times(snap))


def test_dashscope_maps_the_openai_compatible_fields():
    snap = openai_snapshot(Batch.model_validate(DASHSCOPE_VALIDATING))  # the DashScope adapter's own mapping
    assert times(snap) == (at(1742367779), None, None, None)


def test_anthropic_maps_created_and_ended_and_reports_no_start():
    snap = anthropic_snapshot(MessageBatch.model_validate(ANTHROPIC_ENDED))
    assert times(snap) == (
        datetime(2025, 1, 12, 5, 59, 14, 154311, UTC),
        None,  # a batch is in progress from its creation: Anthropic reports no start of its own
        None,
        datetime(2025, 1, 12, 5, 59, 59, 64695, UTC),
    )
    canceling = anthropic_snapshot(MessageBatch.model_validate(ANTHROPIC_CANCELING))
    assert canceling.provider_ended_at is None  # cancel_initiated_at is not its end
    assert all(t is None or t.utcoffset().total_seconds() == 0 for t in times(snap))


def test_gemini_maps_create_and_end_time_and_a_start_only_where_the_service_gives_one():
    job = genai_types.BatchJob(
        name="batches/b1",
        state="JOB_STATE_SUCCEEDED",
        create_time="2025-12-03T17:23:06.004734302Z",
        update_time="2025-12-03T17:24:41.850709619Z",
        end_time="2025-12-03T17:24:41.850709659Z",
    )
    assert times(snapshot_from_job(job, JobState.RUNNING)) == (
        datetime(2025, 12, 3, 17, 23, 6, 4734, UTC),
        None,  # the Gemini API has no start time (updateTime is the last change, not the start)
        None,
        datetime(2025, 12, 3, 17, 24, 41, 850709, UTC),
    )
    vertex = genai_types.BatchJob(
        name="batches/b2",
        state="JOB_STATE_RUNNING",
        create_time="2025-12-03T17:23:06Z",
        start_time="2025-12-03T17:23:16Z",
    )
    assert times(snapshot_from_job(vertex, JobState.SUBMITTED))[:2] == (
        datetime(2025, 12, 3, 17, 23, 6, tzinfo=UTC),
        datetime(2025, 12, 3, 17, 23, 16, tzinfo=UTC),
    )


# --- the emulator: each provider's timestamps in its wire format, on a held clock --------------------

T0 = 1_790_000_000.25  # the held clock at create (an instant with a fraction: truncation shows)
QUEUE_S, PER_REQUEST_S, FINALIZE_S = 30.0, 5.0, 4.0  # 2 requests: running at +30, finalizing +40, done +44
KNOBS = {
    "queue_delay_s": QUEUE_S,
    "seconds_per_request": PER_REQUEST_S,
    "finalize_delay_s": FINALIZE_S,
    "cancel_delay_s": 1.0,
    "log_requests": False,
}


def _wire(emu, provider: str, batch_id: str) -> dict:
    """The batch object exactly as the emulator sends it."""
    path, headers = {
        "openai": (f"/v1/batches/{batch_id}", {"Authorization": "Bearer k"}),
        "dashscope": (f"/compatible-mode/v1/batches/{batch_id}", {"Authorization": "Bearer k"}),
        "anthropic": (f"/v1/messages/batches/{batch_id}", {"x-api-key": "k", "anthropic-version": "2023-06-01"}),
        "gemini": (f"/v1beta/{batch_id}", {"x-goog-api-key": "k"}),
    }[provider]
    with urllib.request.urlopen(urllib.request.Request(emu.base_url + path, headers=headers), timeout=10) as r:
        return json.loads(r.read())


def _rfc3339(unix: float) -> str:
    return at(unix).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _assert_wire(provider: str, wire: dict, phase: str) -> None:
    """The wire fields of the batch in `phase` (queued, running, finalizing, done) against the clock."""
    started, finalizing, done = T0 + QUEUE_S, T0 + QUEUE_S + 2 * PER_REQUEST_S, T0 + QUEUE_S + 2 * PER_REQUEST_S + 4
    reached = {"queued": 0, "running": 1, "finalizing": 2, "done": 3}[phase]
    if provider in ("openai", "dashscope"):  # unix seconds (integers), null until reached
        assert wire["created_at"] == int(T0) and isinstance(wire["created_at"], int)
        assert wire["in_progress_at"] == (int(started) if reached >= 1 else None)
        assert wire["finalizing_at"] == (int(finalizing) if reached >= 2 else None)
        assert wire["completed_at"] == (int(done) if reached >= 3 else None)
        assert wire["failed_at"] is wire["expired_at"] is wire["cancelled_at"] is None
    elif provider == "anthropic":  # RFC 3339; no start or finalizing field at all
        assert wire["created_at"] == _rfc3339(T0) and RFC3339_Z.match(wire["created_at"])
        assert wire["ended_at"] == (_rfc3339(done) if reached >= 3 else None)
        assert not {"in_progress_at", "started_at", "finalizing_at"} & set(wire)
    else:  # Gemini API operation: metadata.createTime / updateTime / endTime, no startTime
        meta = wire["metadata"]
        assert meta["createTime"] == _rfc3339(T0) and RFC3339_Z.match(meta["createTime"])
        assert "startTime" not in meta and "startTime" not in wire
        assert meta.get("endTime") == (_rfc3339(done) if reached >= 3 else None)


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "dashscope", "anthropic", "gemini"])
def test_the_emulator_reports_each_providers_timestamps_and_the_adapter_maps_them(provider, tmp_path, monkeypatch):
    held = {"now": T0}
    monkeypatch.setattr(emulator_clock, "now", lambda: held["now"])
    with running_emulator(tmp_path / "emulator", **KNOBS) as emu:
        adapter = adapter_for(emu, provider)
        path = shard_file(tmp_path, provider, n=2)
        prepared = adapter.prepare_input(path, "job-t", ENDPOINT[provider], inline_max_bytes=0)
        created = adapter.create(create_request(provider, "job-t", 2), prepared).snapshot
        batch_id = created.provider_batch_id
        seen = {"created": created}
        _assert_wire(provider, _wire(emu, provider, batch_id), "queued")
        previous = created.state
        for phase, advance in (("running", QUEUE_S + 1), ("finalizing", 2 * PER_REQUEST_S), ("done", FINALIZE_S)):
            held["now"] += advance
            _assert_wire(provider, _wire(emu, provider, batch_id), phase)
            seen[phase] = adapter.poll(JobRef(batch_id), previous)
            previous = seen[phase].state
    done = seen["done"]
    assert done.terminal
    ended = T0 + QUEUE_S + 2 * PER_REQUEST_S + FINALIZE_S
    if provider in ("openai", "dashscope"):
        assert times(created) == (at(int(T0)), None, None, None)
        assert times(seen["running"])[:2] == (at(int(T0)), at(int(T0 + QUEUE_S)))
        assert times(done) == (at(int(T0)), at(int(T0 + QUEUE_S)), at(int(ended - FINALIZE_S)), at(int(ended)))
    else:  # Anthropic and the Gemini API report when a batch was created and when it ended, no start
        assert times(created) == (at(T0), None, None, None)
        assert times(seen["running"]) == (at(T0), None, None, None)
        assert times(done) == (at(T0), None, None, at(ended))


# --- the ledger keeps them ---------------------------------------------------------------------------


def _stored(conn, job_key: str) -> tuple:
    return conn.execute(f"SELECT {', '.join(TIMES)} FROM ledger.provider_job WHERE job_key = ?", [job_key]).fetchone()


def naive(unix: float) -> datetime:
    """A ledger TIMESTAMP: UTC wall clock."""
    return at(unix).replace(tzinfo=None)


def test_record_snapshot_keeps_each_provider_time_and_never_overwrites_one_with_null(warehouse: Warehouse):
    with warehouse.connect() as conn:
        insert_job_intent(conn, "t_1:job1", "t", "t_1", "openai", "/v1/chat/completions")
        record_snapshot(
            conn, "t_1:job1", JobSnapshot("b1", "validating", JobState.VALIDATING, provider_created_at=at(100))
        )
        assert _stored(conn, "t_1:job1") == (naive(100), None, None, None)
        # A later answer that leaves a time out (a listing page, a partial object) keeps the known one.
        record_snapshot(
            conn, "t_1:job1", JobSnapshot("b1", "in_progress", JobState.RUNNING, provider_started_at=at(130))
        )
        assert _stored(conn, "t_1:job1") == (naive(100), naive(130), None, None)
        record_snapshot(
            conn,
            "t_1:job1",
            JobSnapshot(
                "b1", "completed", JobState.COMPLETED, provider_finalizing_at=at(140), provider_ended_at=at(144)
            ),
        )
        assert _stored(conn, "t_1:job1") == (naive(100), naive(130), naive(140), naive(144))
        # Terminal: a later poll neither moves nor erases a time; one it learns only now is taken.
        record_snapshot(conn, "t_1:job1", JobSnapshot("b1", "completed", JobState.COMPLETED))
        assert _stored(conn, "t_1:job1") == (naive(100), naive(130), naive(140), naive(144))


def test_record_snapshots_in_one_write_keeps_them_the_same_way(warehouse: Warehouse):
    with warehouse.connect() as conn:
        for key in ("t_1:job1", "t_1:job2"):
            insert_job_intent(conn, key, "t", "t_1", "openai", "/v1/chat/completions")
        record_snapshots(
            conn,
            snapshot_columns(
                {
                    "t_1:job1": JobSnapshot("b1", "in_progress", JobState.RUNNING, provider_created_at=at(100)),
                    "t_1:job2": JobSnapshot(
                        "b2", "completed", JobState.COMPLETED, provider_created_at=at(200), provider_ended_at=at(260)
                    ),
                }
            ),
        )
        record_snapshots(  # the listing's next page says nothing of the times
            conn,
            snapshot_columns(
                {
                    "t_1:job1": JobSnapshot("b1", "in_progress", JobState.RUNNING, provider_started_at=at(120)),
                    "t_1:job2": JobSnapshot("b2", "completed", JobState.COMPLETED),
                }
            ),
        )
        assert _stored(conn, "t_1:job1") == (naive(100), naive(120), None, None)
        assert _stored(conn, "t_1:job2") == (naive(200), None, None, naive(260))
