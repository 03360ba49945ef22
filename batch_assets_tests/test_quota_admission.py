"""Scarce provider quota is shared through the ledger, never counted in memory: concurrent submitters
in separate processes never hold more batches or enqueued tokens of one account than its limits,
urgent work goes first, low priority ages and is not starved, the creation cap holds across
submitters, and a submitter killed after its admission gives its place back when its claim expires."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from batch_assets.demo import seed_support_tickets
from batch_assets.ledger.admission import PRIORITY_RANKS, Candidate, usage
from batch_assets.ledger.control_db import as_control
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets_tests import ledger_rows

from .conftest import FAST_EMULATOR
from .stage_runs import kill_once_reached

# Shared by this module and its submitter processes: the tasks (one provider account and model), and
# a ProvidersResource whose account has small limits.
DEFS = textwrap.dedent(
    """
    import dataclasses
    from batch_assets.resources import ProviderConnection, ProvidersResource
    from batch_assets.spec.resolve import load_all_tasks

    def make_task(name, priority="normal", shard=25):
        base = load_all_tasks()["ticket_triage"]
        spec = base.spec.model_copy(update={"name": name, "priority": priority})
        limits = dataclasses.replace(base.limits, max_requests_per_shard=shard)
        return dataclasses.replace(base, spec=spec, limits=limits)

    def adapter(url, jobs, tokens=None, creates=None):
        conn = ProviderConnection(max_concurrent_jobs=jobs, max_enqueued_tokens=tokens, max_creates_per_minute=creates)
        return ProvidersResource(emulator_url=url, max_retries=2, connections={"openai": conn}).adapter("openai")
    """
)
SUBMITTER = DEFS + textwrap.dedent(
    """
    import sys
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.pipeline.send.submit import submit_pending

    db, data, url, name, day, jobs, tokens, creates = sys.argv[1:9]
    wh = dataclasses.replace(Warehouse.at(db, data), lock_timeout_s=120)
    ad = adapter(url, int(jobs), int(tokens) or None, int(creates) or None)
    print(submit_pending(wh, make_task(name), day, ad, run_id=f"proc-{name}-{day}"))
    """
)
ns: dict = {}
exec(DEFS, ns)  # noqa: S102 - the same definitions the submitter processes run
make_task, make_adapter = ns["make_task"], ns["adapter"]

TASKS = ("quota_a", "quota_b", "quota_c", "quota_d")
DAYS = ("2026-11-20", "2026-11-21")
HELD = {**FAST_EMULATOR, "queue_delay_s": 3600.0}  # batches stay queued: the count at a round's end is its peak


@pytest.fixture
def emulator_knobs():
    return HELD


def _prepare(wh: Warehouse, names=TASKS, days=DAYS, per_day=50, shard=25) -> None:
    with wh.connect() as conn:
        seed_support_tickets(conn, days=len(days), per_day=per_day)
    for name in names:
        for day in days:
            _cut(wh, make_task(name, shard=shard), day)


def _cut(wh: Warehouse, task, day: str) -> None:
    freeze_manifest(wh, task, day)
    cut_shards(wh, task, day)


def _submitters(wh: Warehouse, url: str, pairs, jobs: int, tokens: int = 0, creates: int = 0) -> list:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SUBMITTER, str(wh.database), str(wh.data_dir), url, name, day]
            + [str(jobs), str(tokens), str(creates)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, day in pairs
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    return procs


def _active_at_emulator(emulator) -> list:
    import openai

    client = openai.OpenAI(base_url=emulator.openai_base_url, api_key="emulator-no-key")
    return [b for b in client.batches.list(limit=100) if b.status in ("validating", "in_progress")]


def _ledger(wh: Warehouse) -> dict:
    with wh.connect() as conn:
        c = Candidate("openai", "default", make_task("quota_a").spec.model, "quota_a", "-", 0, 1)
        u = usage(conn, c)
        ((shards, with_job),) = ledger_rows.rows(
            conn,
            "SELECT count(*), count(*) FILTER (WHERE shard_id IN (SELECT shard_id FROM ledger.provider_job "
            "WHERE provider_batch_id IS NOT NULL)) FROM ledger.shard",
        )
        shard_tokens = ledger_rows.scalar(conn, "SELECT max(est_tokens) FROM ledger.shard")
    return {
        "reserved": u.jobs,
        "tokens": u.tokens,
        "shards": shards,
        "submitted": with_job,
        "per_shard": shard_tokens,
    }


def _end_every_batch(wh: Warehouse, emulator, adapter) -> None:
    import openai

    client = openai.OpenAI(base_url=emulator.openai_base_url, api_key="emulator-no-key")
    for b in _active_at_emulator(emulator):
        client.batches.cancel(b.id)
    for _ in range(500):
        poll_jobs(wh, lambda _provider: adapter)
        if _ledger(wh)["reserved"] == 0:
            return
    raise AssertionError("the canceled batches did not end")


@pytest.mark.slow
def test_eight_processes_never_exceed_the_accounts_limits_and_all_get_submitted(warehouse, emulator):
    _prepare(warehouse)
    per_shard = _ledger(warehouse)["per_shard"]
    jobs, tokens = 3, int(per_shard * 2.5)  # the token limit binds at 2 batches, the job limit at 3
    ad = make_adapter(emulator.base_url, jobs, tokens)
    pairs = [(n, d) for n in TASKS for d in DAYS]
    for _round in range(20):
        _submitters(warehouse, emulator.base_url, pairs, jobs, tokens)
        state, active = _ledger(warehouse), _active_at_emulator(emulator)
        assert len(active) <= jobs and state["tokens"] <= tokens
        assert state["reserved"] == len(active)  # reservations are what is in flight, nothing leaked
        if state["submitted"] == state["shards"]:
            break
        assert active, "a round admitted nothing although the account was empty"
        _end_every_batch(warehouse, emulator, ad)
    assert state["submitted"] == state["shards"] == len(pairs) * 2


@pytest.mark.slow
def test_an_urgent_partition_goes_before_a_waiting_backfill_which_still_completes(warehouse, emulator):
    days = tuple(f"2026-11-{d}" for d in range(20, 31))
    _prepare(warehouse, names=("quota_a",), days=days, shard=50)  # one shard per day
    urgent = make_task("quota_u", priority="urgent", shard=50)
    _cut(warehouse, urgent, days[0])
    ad = make_adapter(emulator.base_url, 1)
    backfill = make_task("quota_a", priority="low", shard=50)
    first = submit_pending(warehouse, backfill, days[0], ad)
    assert len(first.submitted) == 1
    for day in days[1:]:  # the backfill waits for the one place
        assert submit_pending(warehouse, backfill, day, ad).waiting_for_capacity == 1
    assert submit_pending(warehouse, urgent, days[0], ad).waiting_for_capacity == 1
    _end_every_batch(warehouse, emulator, ad)
    # Room for one: the backfill's runs come first, yet the urgent partition is admitted.
    for day in days[1:]:
        summary = submit_pending(warehouse, backfill, day, ad)
        assert not summary.submitted and "quota_u" in " ".join(summary.waiting_for_quota.values())
    assert len(submit_pending(warehouse, urgent, days[0], ad).submitted) == 1
    # Ageing: the backfill has waited long enough to outrank fresh high-priority work.
    _end_every_batch(warehouse, emulator, ad)
    high = make_task("quota_h", priority="high", shard=50)
    freeze_manifest(warehouse, high, days[0])
    cut_shards(warehouse, high, days[0])
    with warehouse.connect() as conn:
        conn.execute(
            "UPDATE ledger.shard SET deferred_at = deferred_at - INTERVAL 3 HOUR WHERE deferred_at IS NOT NULL"
        )
    assert submit_pending(warehouse, high, days[0], ad).waiting_for_capacity == 1
    submitted = []
    for day in days[1:]:
        submitted += submit_pending(warehouse, backfill, day, ad).submitted
        _end_every_batch(warehouse, emulator, ad)
    assert len(submitted) == len(days) - 1  # every backfill day went out, one at a time


@pytest.mark.slow
def test_the_creation_cap_holds_across_two_concurrent_submitters(ledger_backend, warehouse, emulator):
    _prepare(warehouse, names=("quota_a", "quota_b"), days=DAYS[:1], per_day=75)  # 3 shards each
    _submitters(warehouse, emulator.base_url, [("quota_a", DAYS[0]), ("quota_b", DAYS[0])], 50, 0, 2)
    assert len(_active_at_emulator(emulator)) == 2
    with warehouse.connect() as conn:
        reasons = [
            r[0] for r in ledger_rows.rows(conn, "SELECT wait_reason FROM ledger.shard WHERE wait_reason IS NOT NULL")
        ]
    assert len(reasons) == 4 and all("cap 2/min" in r or "waiting behind" in r for r in reasons)


@pytest.mark.slow
def test_a_submitter_killed_after_admission_gives_its_place_back_when_its_claim_expires(
    ledger_backend, warehouse, emulator, tmp_path
):
    _prepare(warehouse, names=("quota_a", "quota_b"), days=DAYS[:1])
    marker = tmp_path / "admitted.pid"
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "BATCH_ASSETS_FAULTPOINT": f"submit.admitted={marker}",
    }
    args = [str(warehouse.database), str(warehouse.data_dir), emulator.base_url, "quota_a", DAYS[0], "1", "0", "0"]
    proc = subprocess.Popen([sys.executable, "-c", SUBMITTER, *args], env=env)
    kill_once_reached(proc, marker, "submit.admitted")  # blocked at the point once admitted: then killed
    ad = make_adapter(emulator.base_url, 1)
    assert _ledger(warehouse)["reserved"] == 1  # the killed submitter's claim still holds the place
    assert submit_pending(warehouse, make_task("quota_b"), DAYS[0], ad).waiting_for_capacity == 2  # both its shards
    with warehouse.connect() as conn:  # its lease runs out
        as_control(conn).execute(
            "UPDATE ledger.provider_job SET claim_expires_at = now()::TIMESTAMP - INTERVAL '1 second'"
        )
    assert _ledger(warehouse)["reserved"] == 0
    assert len(submit_pending(warehouse, make_task("quota_b"), DAYS[0], ad).submitted) == 1


def test_a_task_limit_above_the_providers_is_refused():
    from batch_assets.providers.registry import provider_limits
    from batch_assets.spec.model import LimitsSpec

    limits = provider_limits("openai")
    with pytest.raises(
        ValueError, match=r"limits.max_concurrent_jobs: 999 is above the provider's \d+; a task may only lower"
    ):
        limits.with_overrides(LimitsSpec(max_concurrent_jobs=999))
    assert limits.with_overrides(LimitsSpec(max_concurrent_jobs=2)).max_concurrent_jobs == 2


def test_priorities_rank_in_order():
    assert sorted(PRIORITY_RANKS, key=PRIORITY_RANKS.get) == ["low", "normal", "high", "urgent"]
    assert dataclasses.is_dataclass(Candidate)


def test_a_connection_sets_its_accounts_limits_and_a_task_may_only_lower_them():
    from batch_assets.pipeline.send.submit import quota_limits
    from batch_assets.resources import ProviderConnection, ProvidersResource

    conn = ProviderConnection(
        account="team-a", max_concurrent_jobs=4, max_enqueued_tokens=9000, max_creates_per_minute=6
    )
    settings = ProvidersResource(connections={"openai": conn}).settings_for("openai")
    assert (settings.account, settings.account_max_concurrent_jobs) == ("team-a", 4)
    task = make_task("quota_a")
    limits = quota_limits(task, settings)
    assert (limits.max_jobs, limits.max_tokens, limits.max_creates_per_minute) == (4, 9000, 6)
    assert limits.task_max_jobs is None  # the task does not lower it
    lowered = dataclasses.replace(task, limits=dataclasses.replace(task.limits, max_concurrent_jobs=2))
    assert quota_limits(lowered, settings).task_max_jobs == 2
    raised = dataclasses.replace(task, limits=dataclasses.replace(task.limits, max_concurrent_jobs=40))
    assert quota_limits(raised, settings).task_max_jobs is None  # never above the account's


def test_an_account_without_its_own_limits_uses_the_providers():
    from batch_assets.pipeline.send.submit import quota_limits
    from batch_assets.providers.registry import provider_limits
    from batch_assets.resources import ProvidersResource

    settings = ProvidersResource().settings_for("openai")
    limits = quota_limits(make_task("quota_a"), settings)
    assert settings.account == "default"
    assert limits.max_jobs == provider_limits("openai").max_concurrent_jobs


def _waiting_now(wh: Warehouse, jobs: int, creates: int | None = None) -> list:
    from batch_assets.ledger.admission import QuotaLimits
    from batch_assets.pipeline.collect.poll import partitions_waiting_to_submit

    limits = QuotaLimits(max_jobs=jobs, max_tokens=10**9, max_creates_per_minute=creates)
    return partitions_waiting_to_submit(wh, limits_of=lambda _provider, _account: limits)


@pytest.mark.slow
def test_quotas_lists_the_accounts_use_and_who_waits_and_the_sensor_asks_when_room_frees(
    warehouse, emulator, capsys, monkeypatch
):
    import json

    from .cli_calls import run

    _prepare(warehouse, names=("quota_a",), days=DAYS[:1])  # 2 shards
    ad = make_adapter(emulator.base_url, 1)
    assert submit_pending(warehouse, make_task("quota_a"), DAYS[0], ad).waiting_for_capacity == 1
    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(warehouse.database))
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(warehouse.data_dir))
    monkeypatch.setenv("OPENAI_MAX_CONCURRENT_JOBS", "1")
    code, out, err = run(capsys, "quotas", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    (openai,) = [a for a in doc["accounts"] if a["provider"] == "openai"]
    assert (openai["account"], openai["batches_in_use"], openai["max_concurrent_jobs"]) == ("default", 1, 1)
    assert openai["model_enqueued_tokens"] > 0
    (waiting,) = doc["waiting"]
    assert (waiting["task_name"], waiting["partition_date"], waiting["shards"]) == ("quota_a", DAYS[0], 1)
    assert waiting["priority"] == "normal" and "1 of 1 concurrent batches in use" in waiting["reason"]
    code, out, _ = run(capsys, "quotas")
    assert code == 0 and "waiting for quota: 1 shard(s) of 1 partition(s)" in out and "quota_a" in out
    code, out, _ = run(capsys, "report", "--format", "json")
    (rep,) = json.loads(out)
    assert rep["check"] == "warn" and "waiting for quota: 1 shard(s), 15 item(s)" in " ".join(rep["problems"])
    assert _waiting_now(warehouse, jobs=1) == []  # the account is full: no submit run is asked for
    _end_every_batch(warehouse, emulator, ad)
    (due,) = _waiting_now(warehouse, jobs=1)
    assert (due.task_name, due.shards, due.rate_capped) == ("quota_a", 1, False)
    monkeypatch.setenv("OPENAI_MAX_CONCURRENT_JOBS", "zero")
    code, _, err = run(capsys, "quotas")
    assert code != 0 and "OPENAI_MAX_CONCURRENT_JOBS='zero'" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_partition_waiting_for_the_creation_cap_is_due_again_once_the_minute_has_passed(warehouse, emulator):
    _prepare(warehouse, names=("quota_a",), days=DAYS[:1])  # 2 shards
    ad = make_adapter(emulator.base_url, 50, creates=1)
    summary = submit_pending(warehouse, make_task("quota_a"), DAYS[0], ad)
    assert len(summary.submitted) == 1 and "cap 1/min" in " ".join(summary.waiting_for_quota.values())
    assert _waiting_now(warehouse, jobs=50, creates=1) == []  # the minute's one creation is spent
    with warehouse.connect() as conn:
        conn.execute("UPDATE ledger.provider_job SET created_at = created_at - INTERVAL 2 MINUTE")
    (due,) = _waiting_now(warehouse, jobs=50, creates=1)
    assert due.rate_capped  # the sensor asks again each minute, not only when a batch ends
    assert len(submit_pending(warehouse, make_task("quota_a"), DAYS[0], ad).submitted) == 1
    assert _waiting_now(warehouse, jobs=50, creates=1) == []


@pytest.mark.slow
def test_a_partitions_own_earlier_waiter_is_tried_first_so_its_queue_never_stalls(warehouse, emulator):
    """Regression (make soak stalled): a later waiter of the partition tried first waited behind its
    own earlier one, and the rest of the run then waited without the earlier one ever being tried."""
    _prepare(warehouse, names=("quota_a",), days=DAYS[:1])  # 2 shards
    with warehouse.connect() as conn:
        conn.execute(
            "UPDATE ledger.shard SET wait_account = 'default', wait_priority = 1, wait_seen_at = now()::TIMESTAMP, "
            "deferred_at = now()::TIMESTAMP - CASE WHEN shard_no = 0 THEN INTERVAL 5 MINUTE ELSE INTERVAL 10 MINUTE END"
        )
        earlier = conn.execute("SELECT shard_id FROM ledger.shard WHERE shard_no = 1").fetchone()[0]
    summary = submit_pending(warehouse, make_task("quota_a"), DAYS[0], make_adapter(emulator.base_url, 1))
    with warehouse.connect() as conn:
        sent = [r[0] for r in conn.execute("SELECT shard_id FROM ledger.provider_job").fetchall()]
    assert len(summary.submitted) == 1 and sent == [earlier]
