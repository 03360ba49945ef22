"""Every provider adapter, on its official SDK, through the pipeline against the emulator over HTTP.

Per provider: a task is frozen, sharded, submitted, polled through its states to a terminal state,
downloaded, parsed, applied and reconciled; failed / expired / cancelled batches end every item in
the right class; a crash between create and record finds the batch again; ids that a provider
forbids are mapped and map back.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.providers.contract import JobRef
from batch_assets.spec.resolve import load_all_tasks

from .provider_calls import DAY, TASK_OF, adapter_for, collect_and_reconcile, run_to_terminal

pytestmark = pytest.mark.slow  # starts the emulator or Dagster


@pytest.mark.parametrize("provider", sorted(TASK_OF))
def test_provider_runs_a_task_end_to_end(provider: str, all_seeded: Warehouse, emulator: EmulatorHandle) -> None:
    task = load_all_tasks()[TASK_OF[provider]]
    adapter = adapter_for(emulator, provider)
    jobs = run_to_terminal(all_seeded, task, adapter)
    assert [j["state"] for j in jobs] == ["COMPLETED"]
    if provider == "anthropic":  # no upload, and results come from the batch's results stream
        assert (jobs[0]["input_file_id"], jobs[0]["output_file_id"]) == (None, None)
    else:
        assert jobs[0]["input_file_id"] and jobs[0]["output_file_id"]
    with all_seeded.connect() as conn:
        states = [
            r[0]
            for r in conn.execute(
                "SELECT to_state FROM ledger.status_event WHERE job_key = ? ORDER BY observed_at", [jobs[0]["job_key"]]
            ).fetchall()
        ]
    assert states[0] == "CREATED" and states[-1] == "COMPLETED"
    recon = collect_and_reconcile(all_seeded, task, adapter)
    assert recon.problems() == []
    assert recon.succeeded == recon.shard_lines > 0 and recon.applied == recon.succeeded
    with all_seeded.connect() as conn:
        table = task.spec.apply.table
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == recon.applied
        if task.spec.output.kind == "embedding":
            dims = conn.execute(f"SELECT DISTINCT len(embedding) FROM {table}").fetchall()
            assert dims == [(task.spec.output.dimensions,)]


@pytest.mark.parametrize(
    ("provider", "forced", "state", "item_class"),
    [
        ("openai", "failed", "FAILED", "rate_or_capacity_error"),  # the emulator fails it with token_limit_exceeded
        ("openai", "expired", "EXPIRED", "expired"),
        ("dashscope", "expired", "EXPIRED", "expired"),
        (
            "gemini",
            "failed",
            "FAILED",
            "internal_error",
        ),  # forced failures are google.rpc INTERNAL: the service's fault
        ("gemini", "expired", "EXPIRED", "expired"),
        ("anthropic", "expired", "COMPLETED", "expired"),  # Anthropic: ended with some requests expired
    ],
)
def test_terminal_failure_states_account_for_every_item(provider, forced, state, item_class, all_seeded, emulator):
    task = load_all_tasks()[TASK_OF[provider]]
    adapter = adapter_for(emulator, provider)
    emulator.configure(force_batch_status=forced, queue_delay_s=0.05)
    jobs = run_to_terminal(all_seeded, task, adapter)
    assert [j["state"] for j in jobs] == [state]
    recon = collect_and_reconcile(all_seeded, task, adapter)
    assert recon.problems() == []
    outcomes = {
        item_class: getattr(recon, item_class)
        if item_class in ("expired", "canceled")
        else recon.failed.get(item_class, 0)
    }
    assert outcomes[item_class] > 0
    assert recon.missing == 0


@pytest.mark.parametrize("provider", sorted(TASK_OF))
def test_cancel_ends_the_batch_and_collects_partial_output(provider, all_seeded, emulator):
    task = load_all_tasks()[TASK_OF[provider]]
    adapter = adapter_for(emulator, provider)
    emulator.configure(force_batch_status="stuck", queue_delay_s=0.01)
    freeze_manifest(all_seeded, task, DAY)
    cut_shards(all_seeded, task, DAY)
    submit_pending(all_seeded, task, DAY, adapter)
    with all_seeded.connect() as conn:
        batch_id = conn.execute(
            "SELECT provider_batch_id FROM ledger.provider_job WHERE task_id = ?", [task.task_id(DAY)]
        ).fetchone()[0]
    assert adapter.cancel(JobRef(batch_id)).cancel_requested or provider == "gemini"
    jobs = run_to_terminal(all_seeded, task, adapter)
    assert [j["state"] for j in jobs] == ["CANCELLED"]
    recon = collect_and_reconcile(all_seeded, task, adapter)
    assert recon.problems() == []
    assert recon.canceled > 0 and recon.missing == 0


@pytest.mark.parametrize("provider", sorted(TASK_OF))
def test_crash_between_create_and_record_finds_the_batch(provider, all_seeded, emulator, monkeypatch):
    """The create call succeeds but recording it fails (a crash): the next run adopts the batch."""
    import batch_assets.pipeline.send.submit as submit_mod

    task = load_all_tasks()[TASK_OF[provider]]
    adapter = adapter_for(emulator, provider)
    freeze_manifest(all_seeded, task, DAY)
    cut_shards(all_seeded, task, DAY)
    real_record = submit_mod.record_created

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("process killed after create")

    monkeypatch.setattr(submit_mod, "record_created", crash)
    with pytest.raises(KeyboardInterrupt):
        submit_pending(all_seeded, task, DAY, adapter)
    monkeypatch.setattr(submit_mod, "record_created", real_record)
    if provider == "anthropic":
        # Its batches carry no job key: only the request ids in an ended batch's results tell.
        _wait_provider_batches_ended(emulator)
    summary = submit_pending(all_seeded, task, DAY, adapter)
    assert summary.submitted == [] and len(summary.recovered) == 1
    assert _count_provider_batches(emulator, provider) == 1


def _wait_provider_batches_ended(emulator: EmulatorHandle, timeout_s: float = 20.0) -> None:
    import anthropic

    deadline = time.monotonic() + timeout_s
    with anthropic.Anthropic(api_key="k", base_url=emulator.base_url) as client:
        while any(b.processing_status != "ended" for b in client.messages.batches.list()):
            assert time.monotonic() < deadline, "Anthropic batches did not end"
            time.sleep(0.05)


def _count_provider_batches(emulator: EmulatorHandle, provider: str) -> int:
    if provider in ("openai", "dashscope"):
        import openai

        base = emulator.openai_base_url if provider == "openai" else emulator.dashscope_base_url
        return sum(1 for _ in openai.OpenAI(api_key="k", base_url=base).batches.list())
    if provider == "anthropic":
        import anthropic

        return sum(1 for _ in anthropic.Anthropic(api_key="k", base_url=emulator.base_url).messages.batches.list())
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=emulator.base_url))
    return sum(1 for _ in client.batches.list())


def test_ids_a_provider_forbids_are_mapped_and_map_back(all_seeded, emulator):
    """Business ids with ':' and '/' and long enough that custom_id passes 64 characters, on Anthropic
    ([a-zA-Z0-9_-]{1,64}): each line goes out under a safe id and every result comes back to its item."""
    with all_seeded.connect() as conn:
        conn.execute(
            "UPDATE support_tickets SET ticket_id = ticket_id || ':legacy/crm-export-batch-2026-11-20-region-emea'"
        )
    task = load_all_tasks()["ticket_summary"]
    adapter = adapter_for(emulator, "anthropic")
    run_to_terminal(all_seeded, task, adapter)
    with all_seeded.connect() as conn:
        lines = fetch_dicts(conn, "SELECT custom_id, request_id FROM ledger.shard_line")
    assert lines and all(
        len(r["custom_id"]) > 64 and r["request_id"].startswith("bx_") and len(r["request_id"]) <= 64 for r in lines
    )
    assert len({r["request_id"] for r in lines}) == len(lines)
    recon = collect_and_reconcile(all_seeded, task, adapter)
    assert recon.problems() == [] and recon.succeeded + recon.failed_total == len(lines)
    assert recon.orphan_lines == 0
    with all_seeded.connect() as conn:
        unmatched = conn.execute("""
            SELECT count(*) FROM ticket_summaries s JOIN ledger.manifest_item m USING (custom_id)
            WHERE s.ticket_id <> m.business_id""").fetchone()[0]
    assert unmatched == 0


def test_gemini_small_shards_go_inline_and_large_ones_by_file(all_seeded, emulator):
    """Gemini generateContent: shards under the inline limit are sent inline, others uploaded."""
    base = load_all_tasks()["ticket_triage"]
    spec = base.spec.model_copy(
        update={
            "provider": "gemini",
            "endpoint": "generateContent",
            "model": "gemini-2.5-flash",
            "name": "triage_gemini",
        }
    )
    inline_task = replace(
        base,
        spec=spec,
        limits=replace(
            base.limits,
            max_inline_bytes=20_000_000,
            request_id_pattern="^[A-Za-z0-9_:.-]{1,128}$",
            request_id_max_len=128,
        ),
    )
    adapter = adapter_for(emulator, "gemini")
    run_to_terminal(all_seeded, inline_task, adapter)
    with all_seeded.connect() as conn:
        file_id = conn.execute("SELECT input_file_id FROM ledger.provider_job").fetchone()[0]
    assert file_id is None  # inline: nothing uploaded, and no pseudo file id recorded
    recon = collect_and_reconcile(all_seeded, inline_task, adapter)
    assert recon.problems() == [] and recon.applied > 0


def test_shards_held_back_by_the_job_cap_are_asked_for_when_capacity_frees(all_seeded, emulator):
    from batch_assets.pipeline.collect.poll import partitions_waiting_to_submit

    base = load_all_tasks()["ticket_triage"]
    task = replace(base, limits=replace(base.limits, max_concurrent_jobs=1, max_requests_per_shard=20))
    adapter = adapter_for(emulator, "openai")
    freeze_manifest(all_seeded, task, DAY)
    cut_shards(all_seeded, task, DAY)
    first = submit_pending(all_seeded, task, DAY, adapter)
    assert len(first.submitted) == 1 and first.waiting_for_capacity >= 1
    # openai/limits.yaml allows more concurrent jobs than this task's override: the partition is due
    # again, and each submissions run sends one more shard until none waits.
    assert [(w.task_name, w.partition_date, w.shards) for w in partitions_waiting_to_submit(all_seeded)] == [
        ("ticket_triage", DAY, first.waiting_for_capacity)
    ]
    sent = 1
    while partitions_waiting_to_submit(all_seeded):
        run_to_terminal(all_seeded, task, adapter)  # polls until the batch in flight is terminal, then submits one
        sent += 1
        assert sent < 10
    with all_seeded.connect() as conn:
        jobs = conn.execute("SELECT count(*) FROM ledger.provider_job WHERE provider_batch_id IS NOT NULL").fetchone()[
            0
        ]
        shards = conn.execute("SELECT count(*) FROM ledger.shard").fetchone()[0]
    assert jobs == shards == first.waiting_for_capacity + 1
