"""Polling many jobs through the providers' batch listings (`poll_listed`), on the official SDKs
over HTTP against the emulator: a listed batch gives the same snapshot as retrieving it; paging
stops as soon as every wanted batch was seen or the page reaches batches older than the oldest
wanted one (list calls counted from the emulator's request log); `poll_jobs` uses the listing for
a provider with many jobs in the tick and retrieves the jobs the listing did not show."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from batch_assets.bench.sensor import HOLD_S, register_jobs
from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect import poll
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.providers.contract import JobRef, JobState, poll_listed
from batch_assets.resources import ProvidersResource

from .provider_calls import ENDPOINT, adapter_for, create_request, shard_file, wait_terminal

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

# Where each provider's page size for polling by listing is set (DashScope shares OpenAI's adapter).
PAGE_SIZE_SETTING = {
    "openai": "openai.adapter.LIST_PAGE_SIZE",
    "dashscope": "openai.adapter.LIST_PAGE_SIZE",
    "anthropic": "anthropic.adapter.POLL_PAGE_SIZE",
    "gemini": "gemini.adapter.LIST_PAGE_SIZE",
}
NO_DEADLINE = float("inf")


class Calls:
    """The HTTP requests the SDK clients of the adapters it watches send (an httpx request hook on
    each client: counted when sent, so no log line can arrive late)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def watch(self, adapter):
        sdk = adapter._client
        http = sdk._api_client._httpx_client if adapter.name == "gemini" else sdk._client
        hooks = dict(http.event_hooks)
        hooks["request"] = [
            *hooks.get("request", []),
            lambda request: self.sent.append((request.method, request.url.path)),
        ]
        http.event_hooks = hooks
        return adapter

    def lists(self) -> int:
        """Batch list calls (GET …/batches) sent since the last reset."""
        return sum(1 for method, path in self.sent if method == "GET" and path.endswith("/batches"))

    def retrieves(self) -> int:
        return sum(1 for method, path in self.sent if method == "GET" and "/batches/" in path)

    def reset(self) -> None:
        self.sent.clear()


def _create(adapter, emulator, tmp_path, provider: str, tag: str, **knobs: Any) -> str:
    if knobs:
        emulator.configure(**knobs)
    prepared = adapter.prepare_input(shard_file(tmp_path, provider, n=2, tag=tag), f"job-{tag}", ENDPOINT[provider], 0)
    return adapter.create(create_request(provider, f"job-{tag}"), prepared).snapshot.provider_batch_id


def _mixed_batches(adapter, emulator, tmp_path, provider: str) -> dict[str, JobState]:
    """Batches in mixed states (completed, failed with a cause, cancelled, in flight), oldest first:
    batch id -> the state a ledger would hold for it."""
    ids: dict[str, JobState] = {}
    for i in range(2):
        ids[wait_terminal(adapter, _create(adapter, emulator, tmp_path, provider, f"done{i}")).provider_batch_id] = (
            JobState.RUNNING
        )
    failed = wait_terminal(
        adapter, _create(adapter, emulator, tmp_path, provider, "failed", force_batch_status="failed")
    )
    # Anthropic has no failed batch: one whose requests all failed has ended (COMPLETED).
    assert failed.state == (JobState.COMPLETED if provider == "anthropic" else JobState.FAILED)
    ids[failed.provider_batch_id] = JobState.RUNNING
    cancelled = _create(adapter, emulator, tmp_path, provider, "cancelled", queue_delay_s=HOLD_S)
    adapter.cancel(JobRef(cancelled))
    assert wait_terminal(adapter, cancelled).state == JobState.CANCELLED
    ids[cancelled] = JobState.SUBMITTED
    for i in range(3):
        ids[_create(adapter, emulator, tmp_path, provider, f"held{i}", queue_delay_s=HOLD_S)] = JobState.SUBMITTED
    return ids


@pytest.mark.parametrize("provider", ["openai", "dashscope", "anthropic", "gemini"])
def test_a_listed_batch_gives_the_same_snapshot_as_retrieving_it(provider, emulator, tmp_path):
    calls = Calls()
    adapter = calls.watch(adapter_for(emulator, provider))
    wanted = _mixed_batches(adapter, emulator, tmp_path, provider)
    jobs = [(JobRef(bid), previous) for bid, previous in wanted.items()]
    calls.reset()
    listed = poll_listed(adapter, jobs, created_after_unix=0, deadline=NO_DEADLINE)
    # 7 batches: one page; Gemini reads the failed batch's operation once more for its error.
    assert (calls.lists(), calls.retrieves()) == (1, 1 if provider == "gemini" else 0)
    retrieved = {bid: adapter.poll(JobRef(bid), previous) for bid, previous in wanted.items()}
    assert set(listed) == set(wanted)
    for bid, snap in retrieved.items():
        for f in dataclasses.fields(snap):
            assert getattr(listed[bid], f.name) == getattr(snap, f.name), f"{provider} {bid} {f.name}"
    assert sorted(s.state.value for s in retrieved.values() if s.terminal) == [
        "CANCELLED",
        "COMPLETED",
        "COMPLETED",
        "COMPLETED" if provider == "anthropic" else "FAILED",
    ]
    assert sum(not s.terminal for s in retrieved.values()) == 3
    if provider != "anthropic":
        failed = next(s for s in listed.values() if s.state == JobState.FAILED)
        assert failed.errors and failed.errors[0].message  # Gemini's from the raw operation, read again


@pytest.mark.parametrize("provider", ["openai", "dashscope", "anthropic", "gemini"])
def test_paging_stops_once_every_wanted_batch_was_seen_or_older_batches_begin(
    provider, emulator, tmp_path, monkeypatch
):
    monkeypatch.setattr(f"batch_assets.providers.{PAGE_SIZE_SETTING[provider]}", 2)
    calls = Calls()
    adapter = calls.watch(adapter_for(emulator, provider))
    ids = [_create(adapter, emulator, tmp_path, provider, f"b{i}", queue_delay_s=HOLD_S) for i in range(7)]
    newest = [(JobRef(bid), JobState.SUBMITTED) for bid in ids[-3:]]
    calls.reset()
    assert set(poll_listed(adapter, newest, 0, NO_DEADLINE)) == set(ids[-3:])
    assert calls.lists() == 2  # pages of 2, newest first: the 3 newest are on the first two of 4
    # A batch the listing cannot show (created before the cutoff) is not paged for: the first
    # page already reaches older batches.
    calls.reset()
    found = poll_listed(adapter, [(JobRef(ids[0]), JobState.SUBMITTED), *newest], time.time() + 3600, NO_DEADLINE)
    assert set(found) == set(ids[-2:]) and calls.lists() == 1
    # A passed deadline ends the walk after the first page.
    calls.reset()
    assert set(poll_listed(adapter, newest, 0, deadline=time.monotonic() - 1)) == set(ids[-2:])
    assert calls.lists() == 1


def test_gemini_listing_keeps_the_previous_state_of_a_batch_listed_as_unspecified(emulator, tmp_path):
    adapter = adapter_for(emulator, "gemini")
    ids = [_create(adapter, emulator, tmp_path, "gemini", f"h{i}", queue_delay_s=HOLD_S) for i in range(3)]
    emulator.configure(unspecified_state_reads=2)  # the first two batches listed answer UNSPECIFIED
    listed = poll_listed(adapter, [(JobRef(bid), JobState.RUNNING) for bid in ids], 0, NO_DEADLINE)
    assert emulator.settings.unspecified_state_reads == 0
    assert sorted((s.raw_status, s.state.value) for s in listed.values()) == [
        ("JOB_STATE_PENDING", "SUBMITTED"),
        ("JOB_STATE_UNSPECIFIED", "RUNNING"),
        ("JOB_STATE_UNSPECIFIED", "RUNNING"),
    ]


# --- poll_jobs: listing above the threshold, retrieving what it did not show ---------------------------

PER_PROVIDER = 8


@pytest.fixture
def fleet(tmp_path, emulator) -> Warehouse:
    emulator.configure(queue_delay_s=HOLD_S)  # every batch stays in flight
    wh = Warehouse(database=tmp_path / "warehouse.duckdb", data_dir=tmp_path / "data")
    with wh.connect() as conn:
        seed_support_tickets(conn, days=1, per_day=60)
        seed_kb_articles(conn, days=1, per_day=10)
        seed_product_reviews(conn, days=1, per_day=20)
    shares, _real = register_jobs(wh, emulator.base_url, 4 * PER_PROVIDER)
    assert set(shares.values()) == {PER_PROVIDER}
    return wh


def _poll_times(wh: Warehouse) -> dict[str, Any]:
    with wh.connect() as conn:
        return dict(conn.execute("SELECT job_key, last_polled_at FROM ledger.provider_job").fetchall())


def test_poll_jobs_lists_a_provider_with_many_jobs_and_retrieves_what_the_listing_missed(fleet, emulator, monkeypatch):
    calls = Calls()
    providers = ProvidersResource(emulator_url=emulator.base_url, max_retries=2)

    def adapter_for(name: str):
        return calls.watch(providers.adapter(name))

    before = _poll_times(fleet)
    # Below the threshold: one retrieve per job, no listing.
    calls.reset()
    result = poll_jobs(fleet, adapter_for)
    assert (result.polled, result.listed, calls.lists(), calls.retrieves(), result.errors) == (
        4 * PER_PROVIDER,
        0,
        0,
        4 * PER_PROVIDER,
        {},
    )
    # At the threshold: every job from its provider's listing (one page each), none retrieved.
    monkeypatch.setattr(poll, "BULK_POLL_MIN_JOBS", PER_PROVIDER)
    calls.reset()
    result = poll_jobs(fleet, adapter_for)
    assert (result.polled, result.listed, calls.lists(), calls.retrieves(), result.errors) == (
        4 * PER_PROVIDER,
        4 * PER_PROVIDER,
        4,
        0,
        {},
    )
    after_listing = _poll_times(fleet)
    assert all(after_listing[k] > before[k] for k in before if before[k] is not None)
    assert all(v is not None for v in after_listing.values())
    # Listings that stop at their first page (pages of 2; every batch older than the cutoff):
    # the 2 newest jobs of each provider come from the listing, the rest are retrieved, all recorded.
    for setting in set(PAGE_SIZE_SETTING.values()):
        monkeypatch.setattr(f"batch_assets.providers.{setting}", 2)
    monkeypatch.setattr(poll, "LIST_CLOCK_SKEW_S", -86_400)
    calls.reset()
    result = poll_jobs(fleet, adapter_for)
    assert (result.polled, result.listed, calls.lists(), calls.retrieves(), result.errors) == (
        4 * PER_PROVIDER,
        4 * 2,
        4,
        4 * (PER_PROVIDER - 2),
        {},
    )
    assert all(t > after_listing[k] for k, t in _poll_times(fleet).items())


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_failed_listing_falls_back_to_one_retrieve_per_job(provider, fleet, emulator, monkeypatch):
    calls = Calls()
    providers = ProvidersResource(emulator_url=emulator.base_url, max_retries=2)
    monkeypatch.setattr(poll, "BULK_POLL_MIN_JOBS", PER_PROVIDER)
    with fleet.connect() as conn:  # one provider's jobs (one task each): its listing is the first request
        (task_id,) = conn.execute(
            "SELECT DISTINCT task_id FROM ledger.provider_job WHERE provider = ?", [provider]
        ).fetchone()
    emulator.configure(fail_next_requests=1, fail_status=400)
    result = poll_jobs(fleet, lambda name: calls.watch(providers.adapter(name)), task_id=task_id)
    assert list(result.listing_errors) == [provider] and "400" in result.listing_errors[provider]
    assert (result.polled, result.listed, calls.lists(), calls.retrieves(), result.errors) == (
        PER_PROVIDER,
        0,
        1,
        PER_PROVIDER,
        {},
    )
    with fleet.connect() as conn:
        assert conn.execute(
            "SELECT count(*) FROM ledger.provider_job WHERE task_id = ? AND last_polled_at IS NULL", [task_id]
        ).fetchone() == (0,)
