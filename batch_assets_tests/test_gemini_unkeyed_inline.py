"""A Gemini inline job whose responses come back without their keys (seen in real traffic:
googleapis/python-genai#1909): the keyed answers are applied by key, the unkeyed ones are never
matched by position; their requests are `unmatched_result`, re-queued without charging an attempt
and sent again as a file, and the partition ends with every item applied once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.pipeline.settle.retry_ledger import plan_retries
from batch_assets.providers.limits import LimitAboveProvider
from batch_assets.providers.registry import provider_limits
from batch_assets.resources import ProvidersResource
from batch_assets.spec.model import LimitsSpec

from .conftest import DAY1

INLINE_BYTES = 20_000_000


def test_a_gemini_task_may_opt_in_to_inline_up_to_the_services_limit_only():
    limits = provider_limits("gemini")
    assert limits.max_inline_bytes == 0  # files unless a task opts in
    assert limits.with_overrides(LimitsSpec(max_inline_bytes=INLINE_BYTES)).max_inline_bytes == INLINE_BYTES
    with pytest.raises(LimitAboveProvider, match=r"limits.max_inline_bytes: 20971521 is above the provider's 20971520"):
        limits.with_overrides(LimitsSpec(max_inline_bytes=20_971_521))
    with pytest.raises(LimitAboveProvider, match="limits.max_inline_bytes"):  # OpenAI takes files only
        provider_limits("openai").with_overrides(LimitsSpec(max_inline_bytes=1))


@pytest.fixture
def inline_task(ticket_task):
    spec = ticket_task.spec.model_copy(
        update={
            "provider": "gemini",
            "endpoint": "generateContent",
            "model": "gemini-2.5-flash",
            "name": "triage_gemini",
            "retry": ticket_task.spec.retry.model_copy(update={"backoff_s": 0}),
        }
    )
    limits = replace(
        provider_limits("gemini").with_overrides(LimitsSpec(max_inline_bytes=INLINE_BYTES)),
        max_requests_per_shard=ticket_task.limits.max_requests_per_shard,
    )
    return replace(ticket_task, spec=spec, limits=limits)


def _round(wh: Warehouse, task, adapter, wait_for_jobs) -> None:
    cut_shards(wh, task, DAY1)
    submit_pending(wh, task, DAY1, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, task, DAY1, adapter)
    parse_results(wh, task, DAY1)
    apply_results(wh, task, DAY1)
    plan_retries(wh, task, DAY1)


@pytest.mark.slow
def test_unkeyed_inline_answers_are_resent_as_a_file_without_charging_an_attempt(
    seeded_copy: Warehouse, inline_task, emulator, wait_for_jobs
) -> None:
    from batch_assets.pipeline.freeze.manifest import freeze_manifest

    wh, task, task_id = seeded_copy, inline_task, inline_task.task_id(DAY1)
    adapter = ProvidersResource(emulator_url=emulator.base_url, max_retries=2).adapter("gemini")
    emulator.configure(inline_responses_drop_keys_rate=0.3)
    freeze_manifest(wh, task, DAY1)
    _round(wh, task, adapter, wait_for_jobs)
    with wh.connect() as conn:
        [first] = fetch_dicts(conn, "SELECT job_key, input_file_id, state FROM ledger.provider_job")
        unmatched = conn.execute("SELECT sum(unmatched_lines) FROM ledger.raw_file").fetchone()[0]
        decisions = fetch_dicts(
            conn, "SELECT action, charged, reason, count(*) AS n FROM ledger.retry_decision GROUP BY ALL"
        )
        applied_first = conn.execute("SELECT count(*) FROM ledger.applied_result").fetchone()[0]
    assert first["input_file_id"] is None and first["state"] == "COMPLETED"  # sent inline
    assert unmatched > 0 and applied_first > 0  # the keyed answers landed by key
    assert decisions == [
        {
            "action": "requeue",
            "charged": False,
            "reason": "answered without its request key; re-queued as a file without charging an attempt "
            "(unmatched_response)",
            "n": unmatched,
        }
    ]

    emulator.configure(inline_responses_drop_keys_rate=0.3)  # would strike again, were it inline
    _round(wh, task, adapter, wait_for_jobs)
    with wh.connect() as conn:
        resent = fetch_dicts(
            conn, "SELECT input_file_id FROM ledger.provider_job WHERE job_key <> ?", [first["job_key"]]
        )
        attempts = dict(conn.execute("SELECT attempt, count(*) FROM ledger.shard_line GROUP BY 1").fetchall())
        twice = conn.execute(
            "SELECT count(*) FROM (SELECT ticket_id FROM ticket_labels GROUP BY 1 HAVING count(*) > 1)"
        ).fetchone()[0]
    assert resent and all(j["input_file_id"] for j in resent)  # as a file: no key can get lost
    assert attempts[2] == unmatched and set(attempts) == {1, 2}
    rec = reconcile(wh, task_id)
    assert rec.problems() == [] and rec.in_flight == rec.retry_pending == rec.missing == 0 and twice == 0
    assert rec.applied == applied_first + unmatched
