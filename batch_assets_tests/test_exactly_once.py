"""Exactly-once batch creation: a create whose answer was lost (the provider processed it) never
leads to a second batch on any provider path; concurrent submit runs create one batch per shard
(claims with leases); an Anthropic lookup adopts only by the request ids in ended batches' results;
undecided jobs wait (nothing created) until the provider can tell or an operator settles them with
`batch-assets jobs adopt | abandon`.

Everything runs on a real DuckDB file and the official SDKs over HTTP against the emulator; the
lost responses are the emulator's after-processing faults, and conditions are forced (a held
claim, a batch kept running, the emulator's clock moved on), never waited for by sleeping.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

import batch_assets.emulator.clock as emulator_clock
from batch_assets.cli import main as cli_main
from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets
from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.control_db import as_control
from batch_assets.ledger.jobs import (
    JobNotSettled,
    abandon_job,
    claim_intent,
    claim_new_intent,
    release_claim,
    renew_claim,
)
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.resources import EMULATOR_API_KEY, ProvidersResource
from batch_assets.spec.resolve import ResolvedTask, load_all_tasks

from .conftest import DAY1

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Every way a batch is created, and the create call's path on the emulator.
PATHS = {
    "openai": ("ticket_triage", r"^/v1/batches$"),
    "dashscope": ("review_sentiment", r"^/compatible-mode/v1/batches$"),
    "anthropic": ("ticket_summary", r"^/v1/messages/batches$"),
    "gemini_file": ("kb_embeddings", r":asyncBatchEmbedContent$"),
    "gemini_inline": ("triage_gemini", r":batchGenerateContent$"),
}
# Simulated seconds an Anthropic batch waits before running when a test keeps it running.
HELD_S = 3600


@pytest.fixture
def all_seeded(warehouse: Warehouse) -> Warehouse:
    with warehouse.connect() as conn:
        seed_support_tickets(conn, days=1, per_day=60)
        seed_kb_articles(conn, days=1, per_day=10)
        seed_product_reviews(conn, days=1, per_day=20)
    return warehouse


def task_for(path: str, **limits) -> ResolvedTask:
    if path == "gemini_inline":
        base = load_all_tasks()["ticket_triage"]
        spec = base.spec.model_copy(
            update={
                "provider": "gemini",
                "endpoint": "generateContent",
                "model": "gemini-2.5-flash",
                "name": "triage_gemini",
            }
        )
        task = dataclasses.replace(
            base,
            spec=spec,
            limits=dataclasses.replace(
                base.limits,
                max_inline_bytes=20_000_000,
                request_id_pattern="^[A-Za-z0-9_:.-]{1,128}$",
                request_id_max_len=128,
            ),
        )
    else:
        task = load_all_tasks()[PATHS[path][0]]
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, **limits)) if limits else task


def adapter_for(emulator: EmulatorHandle, provider: str):
    return ProvidersResource(emulator_url=emulator.base_url, max_retries=2).adapter(provider)


def prepare(wh: Warehouse, task: ResolvedTask, day: str = DAY1) -> None:
    freeze_manifest(wh, task, day)
    cut_shards(wh, task, day)


def lose_next_create(emulator: EmulatorHandle, path: str, mode: str = "lose", count: int = 1) -> None:
    """The next create call on `path` is processed (the batch IS created), then its answer is lost:
    the connection drops (lose) or a 5xx comes back (error)."""
    emulator.configure(
        after_processing_faults=[
            {"method": "POST", "path": PATHS[path][1], "count": count, "mode": mode, "status": 503}
        ]
    )


def provider_batches(emulator: EmulatorHandle, provider: str) -> list[str]:
    """Every batch id the provider holds (its list, paged through by the SDK)."""
    if provider in ("openai", "dashscope"):
        base = emulator.openai_base_url if provider == "openai" else emulator.dashscope_base_url
        with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=base) as client:
            return [b.id for b in client.batches.list(limit=100)]
    if provider == "anthropic":
        with anthropic.Anthropic(api_key=EMULATOR_API_KEY, base_url=emulator.base_url) as client:
            return [b.id for b in client.messages.batches.list(limit=100)]
    client = genai.Client(api_key=EMULATOR_API_KEY, http_options=genai_types.HttpOptions(base_url=emulator.base_url))
    return [j.name for j in client.batches.list()]


def ledger_jobs(wh: Warehouse, task_id: str | None = None) -> list[dict]:
    with wh.connect() as conn:
        return (
            as_control(conn)
            .execute(
                "SELECT * FROM ledger.provider_job WHERE CAST(? AS VARCHAR) IS NULL OR task_id = ? ORDER BY job_key",
                [task_id, task_id],
            )
            .dicts()
        )


def shard_ids(wh: Warehouse) -> list[str]:
    with wh.connect() as conn:
        return [r[0] for r in as_control(conn).execute("SELECT shard_id FROM ledger.shard ORDER BY shard_no").rows]


def operator_actions(wh: Warehouse) -> list[tuple]:
    with wh.connect() as conn:
        return conn.execute(
            "SELECT action, task_id, job_key, detail FROM ledger.operator_action ORDER BY acted_at"
        ).fetchall()


def move_emulator_clock(monkeypatch, seconds: float) -> None:
    """The emulator's simulated time jumps ahead: batches held running reach their end at once."""
    real_now = emulator_clock.now
    monkeypatch.setattr(emulator_clock, "now", lambda: real_now() + seconds)


def cli(capsys, wh: Warehouse, *argv) -> tuple[int, str, str]:
    code = cli_main(["--database", str(wh.database), *argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- a lost create answer, on every provider path ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["lose", "error"])
@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_create_processed_but_unanswered_leaves_one_batch_and_one_job(path, mode, all_seeded, emulator, monkeypatch):
    """lose: processed, then the connection drops; error: processed, then a 5xx. Either way the
    provider has exactly one batch and the ledger exactly one job holding it."""
    wh, task = all_seeded, task_for(path)
    provider = task.spec.provider
    adapter = adapter_for(emulator, provider)
    prepare(wh, task)
    if provider == "anthropic":
        emulator.configure(queue_delay_s=HELD_S)  # the batch keeps running until the clock moves on
    lose_next_create(emulator, path, mode)
    first = submit_pending(wh, task, DAY1, adapter)
    assert emulator.settings.after_processing_faults == [], "the create's answer was not lost"
    (batch_id,) = provider_batches(emulator, provider)
    (job,) = ledger_jobs(wh)
    if provider != "anthropic":
        # The job key travels with the batch: found at once and adopted.
        assert first.submitted == [job["job_key"]] and first.undecided == {}
        assert (job["provider_batch_id"], job["create_outcome"]) == (batch_id, "adopted")
        return
    # Anthropic batches carry no job key: while the one candidate runs, nothing is decided or created.
    assert first.submitted == [] and list(first.undecided) == [job["job_key"]]
    assert first.undecided[job["job_key"]].startswith(f"waiting for candidate batches {batch_id} to end")
    assert (job["state"], job["provider_batch_id"], job["create_outcome"]) == ("CREATED", None, "unknown")
    assert "waiting for candidate batches" in job["create_error"] and "create call:" in job["create_error"]
    assert job["claimed_by"] is None  # released: the next run looks again
    again = submit_pending(wh, task, DAY1, adapter)
    assert list(again.undecided) == [job["job_key"]] and provider_batches(emulator, provider) == [batch_id]
    move_emulator_clock(monkeypatch, 2 * HELD_S)
    settled = submit_pending(wh, task, DAY1, adapter)
    assert settled.recovered == [job["job_key"]] and settled.undecided == {}
    assert provider_batches(emulator, provider) == [batch_id]
    (job,) = ledger_jobs(wh)
    assert (job["provider_batch_id"], job["create_outcome"]) == (batch_id, "adopted")
    assert job["create_error"] == "matched by the request ids in its results"


@pytest.mark.slow
def test_a_create_that_never_reached_the_provider_is_created_again_after_a_confirmed_absence(
    all_seeded, emulator, monkeypatch
):
    """A 503 before processing: the lookup confirms absence (nothing to wait for), so it is created again."""
    import batch_assets.pipeline.send.submit as submit_mod

    wh, task = all_seeded, task_for("anthropic")
    adapter = adapter_for(emulator, "anthropic")
    prepare(wh, task)
    monkeypatch.setattr(submit_mod, "CREATE_BACKOFF_S", 0.0)
    real_create = adapter.create

    def refused_once_then_real(request, prepared):
        adapter.create = real_create
        emulator.configure(fail_next_requests=1, fail_status=503)
        return real_create(request, prepared)

    monkeypatch.setattr(adapter, "create", refused_once_then_real)
    s = submit_pending(wh, task, DAY1, adapter)
    (batch_id,) = provider_batches(emulator, "anthropic")
    (job,) = ledger_jobs(wh)
    assert s.submitted == [job["job_key"]] and job["provider_batch_id"] == batch_id
    assert job["create_outcome"] == "unknown" and "503" in job["create_error"]  # the history stays


# --- Anthropic: candidates told apart by the request ids of their results ---------------------------


@pytest.mark.slow
def test_anthropic_adopts_only_after_every_candidate_ended_and_only_the_one_holding_the_shards_ids(
    all_seeded, emulator, monkeypatch
):
    wh, task = all_seeded, task_for("anthropic")
    adapter = adapter_for(emulator, "anthropic")
    prepare(wh, task)
    with wh.connect() as conn:
        shard_lines = conn.execute("SELECT line_count FROM ledger.shard").fetchone()[0]
    emulator.configure(queue_delay_s=HELD_S)
    # A stranger's batch of the same size, created after the intent, with other request ids.
    stranger_requests = [
        {
            "custom_id": f"stranger-{i}",
            "params": {
                "model": "claude-haiku-4-5",
                "max_tokens": 16,
                "messages": [{"role": "user", "content": f"hi {i}"}],
            },
        }
        for i in range(shard_lines)
    ]
    real_create = adapter.create

    def stranger_first(request, prepared):
        with anthropic.Anthropic(api_key=EMULATOR_API_KEY, base_url=emulator.base_url) as client:
            stranger_first.id = client.messages.batches.create(requests=stranger_requests).id
        lose_next_create(emulator, "anthropic")  # our create is processed, its answer lost
        return real_create(request, prepared)

    monkeypatch.setattr(adapter, "create", stranger_first)
    first = submit_pending(wh, task, DAY1, adapter)
    batches = provider_batches(emulator, "anthropic")
    assert len(batches) == 2
    (ours,) = set(batches) - {stranger_first.id}
    (job,) = ledger_jobs(wh)
    # Both candidates still run: undecided, nothing created.
    why = first.undecided[job["job_key"]]
    assert why.startswith("waiting for candidate batches") and ours in why and stranger_first.id in why
    # The stranger's batch ends first (cancelled): ours still runs, still undecided.
    with anthropic.Anthropic(api_key=EMULATOR_API_KEY, base_url=emulator.base_url) as client:
        client.messages.batches.cancel(stranger_first.id)
        deadline = time.monotonic() + 10
        while client.messages.batches.retrieve(stranger_first.id).processing_status != "ended":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    monkeypatch.setattr(adapter, "create", real_create)
    second = submit_pending(wh, task, DAY1, adapter)
    assert second.undecided[job["job_key"]].startswith(f"waiting for candidate batches {ours} to end")
    assert len(provider_batches(emulator, "anthropic")) == 2
    # Both ended: the one whose results hold the shard's request ids is adopted; nothing else created.
    move_emulator_clock(monkeypatch, 2 * HELD_S)
    third = submit_pending(wh, task, DAY1, adapter)
    assert third.recovered == [job["job_key"]]
    (job,) = ledger_jobs(wh)
    assert (job["provider_batch_id"], job["create_outcome"]) == (ours, "adopted")
    assert sorted(provider_batches(emulator, "anthropic")) == sorted([ours, stranger_first.id])


# --- claims: two submit runs on one partition ----------------------------------------------------------


def test_the_claim_rules(warehouse):
    """Insert-claimed wins once; a live claim keeps others out; its owner may renew and re-claim;
    an expired one is taken over (and its old owner can no longer renew); an abandoned intent is
    never claimed."""
    with warehouse.connect() as conn:
        args = ("t", "s", "openai", "/v1/chat/completions")
        assert claim_new_intent(conn, "s:job1", *args, "a")
        assert not claim_new_intent(conn, "s:job1", *args, "b")  # primary key: b lost
        assert not claim_intent(conn, "s:job1", "b")  # live lease
        assert claim_intent(conn, "s:job1", "a") and renew_claim(conn, "s:job1", "a")
        assert not renew_claim(conn, "s:job1", "b")
        assert claim_intent(conn, "s:job1", "a", lease_s=-1)  # a's lease runs out ...
        assert claim_intent(conn, "s:job1", "b")  # ... b takes over
        assert not renew_claim(conn, "s:job1", "a") and renew_claim(conn, "s:job1", "b")
        release_claim(conn, "s:job1", "a")  # not a's: no effect
        assert conn.execute("SELECT claimed_by FROM ledger.provider_job").fetchone() == ("b",)
        release_claim(conn, "s:job1", "b")
        assert conn.execute("SELECT claimed_by, claim_expires_at FROM ledger.provider_job").fetchone() == (None, None)
        abandon_job(conn, "s:job1", "test")
        assert not claim_intent(conn, "s:job1", "c")
        with pytest.raises(JobNotSettled, match="was abandoned"):
            abandon_job(conn, "s:job1", "again")
        assert conn.execute("SELECT count(*) FROM ledger.status_event").fetchone() == (1,)


def run_submit_process(
    wh: Warehouse, emulator: EmulatorHandle, task_name: str, max_per_shard: int, run_id: str | None = None
) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    argv = [
        sys.executable,
        "-m",
        "batch_assets_tests.submit_process",
        str(wh.database),
        str(wh.data_dir),
        emulator.base_url,
        task_name,
        DAY1,
        str(max_per_shard),
        *([run_id] if run_id else []),
    ]
    return subprocess.Popen(argv, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_shard_another_run_holds_is_skipped_and_taken_over_once_the_lease_expired(seeded_copy, ticket_task, emulator):
    wh = seeded_copy
    task = dataclasses.replace(ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=20))
    prepare(wh, task)
    first_shard = shard_ids(wh)[0]
    held = f"{first_shard}:job1"
    with wh.connect() as conn:  # another submit run is mid-way on the first shard (live lease)
        assert claim_new_intent(
            conn, held, "ticket_triage_20261120", first_shard, "openai", "/v1/chat/completions", "other-run"
        )
    s = finished(run_submit_process(wh, emulator, "ticket_triage", 20))
    assert s["claimed_elsewhere"] == [held] and len(s["submitted"]) == 2 and held not in s["submitted"]
    assert len(provider_batches(emulator, "openai")) == 2
    with wh.connect() as conn:
        held_file = Path(conn.execute("SELECT path FROM ledger.shard WHERE shard_id = ?", [first_shard]).fetchone()[0])
    with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=emulator.openai_base_url) as client:
        uploaded = [f.filename for f in client.files.list() if f.purpose == "batch"]
    assert len(uploaded) == 2 and held_file.name not in uploaded  # the held shard was not even uploaded
    jobs = {j["job_key"]: j for j in ledger_jobs(wh)}
    assert (jobs[held]["provider_batch_id"], jobs[held]["input_file_id"], jobs[held]["claimed_by"]) == (
        None,
        None,
        "other-run",
    )
    # The other run died: its lease runs out; the next run looks the job up (absent) and creates it.
    with wh.connect() as conn:
        assert claim_intent(conn, held, "other-run", lease_s=-1)
    s = finished(run_submit_process(wh, emulator, "ticket_triage", 20))
    assert (s["submitted"], s["claimed_elsewhere"], s["already_submitted"]) == ([held], [], 2)
    batches = provider_batches(emulator, "openai")
    jobs = ledger_jobs(wh)
    assert len(batches) == 3 and sorted(j["provider_batch_id"] for j in jobs) == sorted(batches)
    assert all(j["claimed_by"] is None and j["claim_expires_at"] is None for j in jobs)


@pytest.mark.slow
def test_two_concurrent_submit_processes_create_one_batch_per_shard(ledger_backend, seeded_copy, ticket_task, emulator):
    wh = seeded_copy
    task = dataclasses.replace(ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=10))
    prepare(wh, task)
    shards = shard_ids(wh)
    assert len(shards) == 5  # 50 sendable lines (3 card numbers blocked by the policy), 10 a shard
    procs = [run_submit_process(wh, emulator, "ticket_triage", 10, run_id) for run_id in ("run-a", "run-b")]
    a, b = (finished(p) for p in procs)
    created = a["submitted"] + b["submitted"] + a["recovered"] + b["recovered"]
    assert sorted(created) == sorted(f"{s}:job1" for s in shards)  # each shard once, by one of the runs
    batches = provider_batches(emulator, "openai")
    jobs = ledger_jobs(wh)
    assert len(batches) == len(shards) == len(jobs)
    assert sorted(j["provider_batch_id"] for j in jobs) == sorted(batches)
    assert all(j["claimed_by"] is None for j in jobs)
    with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=emulator.openai_base_url) as client:
        for batch in client.batches.list(limit=100):
            assert batch.metadata["batch_assets_job"] in {j["job_key"] for j in jobs}


@pytest.mark.slow
def test_a_run_that_lost_its_claim_before_the_create_creates_nothing(
    seeded_copy, ticket_task, adapter, emulator, monkeypatch
):
    """The lease ran out mid-way (after the upload) and another run took the shard: the renewal
    before the create fails, so this run stops there."""
    wh = seeded_copy
    prepare(wh, ticket_task)
    real_prepare = adapter.prepare_input

    def upload_then_lose_the_claim(shard_path, job_key, endpoint, inline_max_bytes):
        prepared = real_prepare(shard_path, job_key, endpoint, inline_max_bytes)
        with wh.connect() as conn:
            assert claim_intent(conn, job_key, "run-a", lease_s=-1)  # run-a's lease expires ...
            assert claim_intent(conn, job_key, "run-b")  # ... and run-b takes the shard
        return prepared

    monkeypatch.setattr(adapter, "prepare_input", upload_then_lose_the_claim)
    s = submit_pending(wh, ticket_task, DAY1, adapter, run_id="run-a")
    (job,) = ledger_jobs(wh)
    assert (s.submitted, s.claimed_elsewhere) == ([], [job["job_key"]])
    assert provider_batches(emulator, "openai") == []
    assert job["claimed_by"] == "run-b" and job["provider_batch_id"] is None


# --- operators settle undecided jobs -------------------------------------------------------------------


@pytest.fixture
def undecided(all_seeded, emulator, monkeypatch):
    """ticket_summary (Anthropic) in 3 shards; the first shard's create answer was lost and its
    batch still runs, so that job is undecided; the others have their batches."""
    monkeypatch.setenv("BATCH_ASSETS_EMULATOR_URL", emulator.base_url)
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    wh, task = all_seeded, task_for("anthropic", max_requests_per_shard=20)
    adapter = adapter_for(emulator, "anthropic")
    prepare(wh, task)
    emulator.configure(queue_delay_s=HELD_S)
    lose_next_create(emulator, "anthropic")
    s = submit_pending(wh, task, DAY1, adapter)
    (job_key,) = s.undecided
    jobs = {j["job_key"]: j for j in ledger_jobs(wh)}
    recorded = {j["provider_batch_id"] for j in jobs.values()} - {None}
    (lost_batch,) = set(provider_batches(emulator, "anthropic")) - recorded
    return dataclasses.make_dataclass("Undecided", ["wh", "task", "adapter", "job_key", "batch_id", "jobs"])(
        wh, task, adapter, job_key, lost_batch, jobs
    )


@pytest.mark.slow
def test_jobs_lists_the_undecided_job_with_its_reason(undecided, capsys):
    code, out, _ = cli(capsys, undecided.wh, "jobs")
    assert code == 0
    (line,) = [x for x in out.splitlines() if x.startswith(undecided.job_key)]
    assert "CREATED" in line and f"undecided: waiting for candidate batches {undecided.batch_id} to end" in line
    code, out, _ = cli(capsys, undecided.wh, "jobs", "--format", "json")
    (row,) = [r for r in json.loads(out) if r["job_key"] == undecided.job_key]
    assert (row["create_outcome"], row["provider_batch_id"], row["claimed_by"]) == ("unknown", None, None)


@pytest.mark.slow
def test_jobs_adopt_records_the_batch_refusing_wrong_ones(undecided, emulator, capsys):
    wh, job_key = undecided.wh, undecided.job_key
    other_job, other_batch = next((k, j["provider_batch_id"]) for k, j in undecided.jobs.items() if k != job_key)
    with anthropic.Anthropic(api_key=EMULATOR_API_KEY, base_url=emulator.base_url) as client:
        one_request = client.messages.batches.create(
            requests=[
                {
                    "custom_id": "x",
                    "params": {
                        "model": "claude-haiku-4-5",
                        "max_tokens": 8,
                        "messages": [{"role": "user", "content": "hi"}],
                    },
                }
            ]
        ).id
    refusals = [
        (("jobs", "adopt", job_key, other_batch), f"batch {other_batch} is already recorded for job {other_job}"),
        (
            ("jobs", "adopt", job_key, one_request),
            f"batch {one_request} holds 1 requests but the shard of {job_key} has 20",
        ),
        (("jobs", "adopt", "nosuch:job1", undecided.batch_id), "no provider job 'nosuch:job1'"),
        (("jobs", "adopt", other_job, undecided.batch_id), f"job {other_job} already has provider batch {other_batch}"),
    ]
    for argv, message in refusals:
        code, out, err = cli(capsys, wh, *argv)
        assert (code, out) == (1, "") and len(err.strip().splitlines()) == 1 and message in err, err
    # A submit run holding the job (live lease): the operator waits for it.
    with wh.connect() as conn:
        assert claim_intent(conn, job_key, "run-x")
    code, _, err = cli(capsys, wh, "jobs", "adopt", job_key, undecided.batch_id)
    assert code == 1 and "is held by submit run run-x" in err and len(err.strip().splitlines()) == 1
    with wh.connect() as conn:
        assert claim_intent(conn, job_key, "run-x", lease_s=-1)
    code, out, err = cli(capsys, wh, "jobs", "adopt", job_key, undecided.batch_id)
    assert code == 0 and out.startswith(f"{job_key}: adopted batch {undecided.batch_id}"), err
    job = {j["job_key"]: j for j in ledger_jobs(wh)}[job_key]
    assert (job["provider_batch_id"], job["create_outcome"], job["claimed_by"]) == (undecided.batch_id, "adopted", None)
    assert job["submitted_at"] is not None and job["state"] != "CREATED" and job["request_total"] == 20
    (action,) = operator_actions(wh)
    assert action[:3] == ("adopt", undecided.task.task_id(DAY1), job_key) and undecided.batch_id in action[3]
    # Settled: the next submit run creates nothing.
    before = len(provider_batches(emulator, "anthropic"))
    s = submit_pending(wh, undecided.task, DAY1, undecided.adapter)
    assert (s.submitted, s.undecided, s.already_submitted) == ([], {}, 3)
    assert len(provider_batches(emulator, "anthropic")) == before


@pytest.mark.slow
def test_jobs_abandon_sends_the_shard_again_under_a_new_job_key(undecided, emulator, capsys):
    wh, job_key = undecided.wh, undecided.job_key
    code, out, err = cli(capsys, wh, "jobs", "abandon", job_key, "--reason", "checked the console: no such batch")
    assert code == 0 and out.startswith(f"{job_key}: abandoned (checked the console: no such batch)"), err
    (action,) = operator_actions(wh)
    assert action == ("abandon", undecided.task.task_id(DAY1), job_key, "checked the console: no such batch")
    code, _, err = cli(capsys, wh, "jobs", "abandon", job_key)
    assert code == 1 and f"job {job_key} was abandoned" in err and len(err.strip().splitlines()) == 1
    code, out, _ = cli(capsys, wh, "jobs")
    assert "abandoned (the shard goes again under a new job key)" in out
    before = set(provider_batches(emulator, "anthropic"))
    s = submit_pending(wh, undecided.task, DAY1, undecided.adapter)
    new_key = job_key.replace(":job1", ":job2")
    assert (s.submitted, s.undecided, s.already_submitted) == ([new_key], {}, 2)
    (new_batch,) = set(provider_batches(emulator, "anthropic")) - before
    jobs = {j["job_key"]: j for j in ledger_jobs(wh)}
    assert jobs[new_key]["provider_batch_id"] == new_batch and jobs[new_key]["shard_id"] == jobs[job_key]["shard_id"]
    assert (jobs[job_key]["create_outcome"], jobs[job_key]["provider_batch_id"]) == ("abandoned", None)
    # And only once.
    again = submit_pending(wh, undecided.task, DAY1, undecided.adapter)
    assert (again.submitted, again.already_submitted) == ([], 3)
    assert len(provider_batches(emulator, "anthropic")) == len(before) + 1
    # A job with a batch cannot be abandoned.
    code, _, err = cli(capsys, wh, "jobs", "abandon", new_key)
    assert code == 1 and f"job {new_key} has provider batch {new_batch}" in err


@pytest.mark.slow
def test_the_submissions_asset_says_which_shards_another_run_holds(dagster_env, emulator, instance):
    """Through Dagster: the shard held by another submit run is skipped and named in the metadata."""
    import dagster as dg

    from batch_assets.definitions import defs

    wh, d = dagster_env, defs()
    submit_job = d.resolve_job_def("ticket_triage__submit")
    keys = [dg.AssetKey(["ticket_triage", s]) for s in ("manifest", "shards")]
    assert submit_job.execute_in_process(instance=instance, partition_key=DAY1, asset_selection=keys).success
    (shard_id,) = shard_ids(wh)
    with wh.connect() as conn:
        assert claim_new_intent(
            conn, f"{shard_id}:job1", "ticket_triage_20261120", shard_id, "openai", "/v1/chat/completions", "other-run"
        )
    run = submit_job.execute_in_process(instance=instance, partition_key=DAY1)
    meta = {
        k: v.value for k, v in run.asset_materializations_for_node("ticket_triage__submissions")[0].metadata.items()
    }
    assert (meta["submitted"], meta["claimed_elsewhere"], meta["claimed_elsewhere_jobs"]) == (0, 1, f"{shard_id}:job1")
    assert (meta["undecided"], meta["undecided_jobs"]) == (0, "none")
    assert provider_batches(emulator, "openai") == []


@pytest.mark.slow
def test_jobs_adopt_refuses_a_batch_tagged_with_another_job_key(
    seeded_copy, ticket_task, emulator, capsys, monkeypatch
):
    monkeypatch.setenv("BATCH_ASSETS_EMULATOR_URL", emulator.base_url)
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    wh = seeded_copy
    prepare(wh, ticket_task)
    (shard_id,) = shard_ids(wh)
    job_key = f"{shard_id}:job1"
    with wh.connect() as conn:  # an intent a crashed run left behind (its lease already over)
        assert claim_new_intent(
            conn,
            job_key,
            "ticket_triage_20261120",
            shard_id,
            "openai",
            "/v1/chat/completions",
            "crashed-run",
            lease_s=-1,
        )
        path = conn.execute("SELECT path FROM ledger.shard").fetchone()[0]
    with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=emulator.openai_base_url) as client:
        with open(path, "rb") as f:
            file_id = client.files.create(file=("shard.jsonl", f), purpose="batch").id

        def batch(tag: str) -> str:
            return client.batches.create(
                input_file_id=file_id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata={"batch_assets_job": tag},
            ).id

        theirs, ours = batch("ticket_triage_20261121_a1_s0000:job1"), batch(job_key)
    code, _, err = cli(capsys, wh, "jobs", "adopt", job_key, theirs)
    assert code == 1 and f"carries job key ticket_triage_20261121_a1_s0000:job1: not the batch of {job_key}" in err
    code, out, err = cli(capsys, wh, "jobs", "adopt", job_key, ours)
    assert code == 0, err
    (job,) = ledger_jobs(wh)
    assert (job["provider_batch_id"], job["create_outcome"]) == (ours, "adopted")
