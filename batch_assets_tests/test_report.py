"""The partition report (pipeline.report.partition_report), Dagster-free: its numbers are the reconciliation's, its
times come from the provider jobs and their status events, and the HTML page has two charts."""

from __future__ import annotations

import datetime as dt
import html
import json
import re

import pytest

from batch_assets.pipeline.report.partition_report import (
    build_report,
    cost_figures,
    render_html,
    report_markdown,
    report_numbers,
    report_path,
    write_report,
)
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.spec.failure_classes import FAILURE_CLASSES

from .conftest import DAY1

T0 = dt.datetime(2026, 11, 20, 1, 0, 0)


@pytest.fixture
def finished(seeded_copy, ticket_task, adapter, run_partition):
    """One partition of ticket_triage run to the end against the emulator."""
    rec = run_partition(seeded_copy, ticket_task, DAY1, adapter)
    assert rec.verdict().passed
    return seeded_copy, ticket_task.task_id(DAY1)


@pytest.mark.slow
def test_a_finished_partitions_numbers_are_the_reconciliations(finished, tmp_path):
    wh, task_id = finished
    rec = reconcile(wh, task_id)
    with wh.connect() as conn:
        r = build_report(conn, task_id)
        tokens = conn.execute(
            "SELECT sum(input_tokens), sum(output_tokens) FROM ledger.parsed_result WHERE task_id = ?", [task_id]
        ).fetchone()
    assert r.done and r.verdict.final_status == "COMPLETED" and r.eta_s is None
    # every item counted once, in the reconciliation's terms
    assert sum(r.outcomes().values()) == r.items == rec.manifest_items == 58
    n = report_numbers(r)
    assert (
        (n["items"], n["applied"], n["quarantined"], n["final_failed"], n["unresolved"])
        == (rec.manifest_items, rec.applied, rec.quarantined, rec.final_failed_total, rec.unresolved)
        == (58, 50, 8, 0, 0)
    )
    assert all(n[f"final_failed_{c}"] == rec.final_failed.get(c, 0) for c in FAILURE_CLASSES)
    assert n["completion_rate"] == 1.0 and n["applied_rate"] == pytest.approx(50 / 58)
    assert (n["input_tokens"], n["output_tokens"]) == tokens and n["input_tokens"] > 0
    # Usage kept apart, carried from the lines through parse: gpt-4o-mini reports 0 reasoning and 0 cached tokens.
    with wh.connect() as conn:
        apart = conn.execute(
            "SELECT count(*), count(thinking_tokens), sum(thinking_tokens), sum(cached_input_tokens) "
            "FROM ledger.parsed_result WHERE task_id = ? AND input_tokens IS NOT NULL",
            [task_id],
        ).fetchone()
    assert apart[0] > 0 and apart[1:] == (apart[0], 0, 0)
    assert (n["thinking_tokens"], n["cached_input_tokens"]) == (0, 0)
    # times: one job, from its intent to its end
    (job,) = r.jobs
    assert job.state == "COMPLETED" and job.lines == 50
    assert n["total_time_s"] == pytest.approx((job.terminal_at - job.created_at).total_seconds(), abs=1e-3)
    assert n["queue_time_s"] <= n["total_time_s"]
    assert sum(r.time_in_state_s().values()) == pytest.approx(job.total_s(r.generated_at), abs=1e-3)
    assert all(isinstance(v, int | float) for v in n.values())
    md = report_markdown(r)
    assert "| applied (final) | 50 |" in md and "| **total** | 58 |" in md and "COMPLETED" in md
    # The per-job section says where each job went and which structured-output form its lines used.
    assert job.endpoint.startswith("emulator http://127.0.0.1:") and job.endpoint in md
    assert job.request_options == '{"response_format": "json_schema"}' and job.request_options in md


@pytest.mark.slow
def test_the_html_page_has_the_outcome_and_state_charts(finished, tmp_path):
    wh, task_id = finished
    with wh.connect() as conn:
        r = build_report(conn, task_id)
    path = write_report(r, tmp_path)
    assert path == report_path(tmp_path, task_id) == tmp_path / "reports" / f"{task_id}.html"
    page = path.read_text(encoding="utf-8")
    svgs = re.findall(r"<svg .*?</svg>", page, re.S)
    assert len(svgs) == 2
    outcomes, states = svgs
    assert "Items by outcome" in outcomes and ">50<" in outcomes and ">8<" in outcomes
    assert "Time each provider job spent in each state" in states and "a1_s0000:job1" in states
    assert page == render_html(r) and "<script" not in page
    assert not list(tmp_path.glob("reports/*.tmp"))


@pytest.mark.slow
def test_an_unfinished_partition_shows_what_is_open_and_no_end(seeded_copy, ticket_task, adapter):
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending

    freeze_manifest(seeded_copy, ticket_task, DAY1)
    cut_shards(seeded_copy, ticket_task, DAY1)
    submit_pending(seeded_copy, ticket_task, DAY1, adapter)  # not polled: the ledger says submitted
    task_id = ticket_task.task_id(DAY1)
    with seeded_copy.connect() as conn:
        r = build_report(conn, task_id)
    assert not r.done and r.finished_at is None
    assert r.reconciliation.in_flight == 50 and r.outcomes()["in_flight"] == 50
    assert r.completion_rate == pytest.approx(8 / 58)  # only the quarantined items are final
    assert r.eta_s is None  # no progress reported yet: no rate to extrapolate
    assert "IN PROGRESS" in render_html(r) and "ETA | unknown" in report_markdown(r)


def _ledger_rows(conn, task_id="t_20261120"):
    """A partition with one 10-line job: created 01:00, submitted 01:01, running 01:05, done 01:15."""
    conn.execute(
        """INSERT INTO ledger.batch_task (task_id, task_name, partition_date, item_type, provider, model,
                        endpoint, prompt_version, output_schema_version, status, created_at, updated_at)
                    VALUES (?, 't', DATE '2026-11-20', 'x', 'openai', 'm', '/v1/chat/completions', 'v1', 'v1',
                            'SUBMITTED', ?, ?)""",
        [task_id, T0, T0],
    )
    conn.execute(
        """INSERT INTO ledger.shard (shard_id, task_id, provider, endpoint, model, attempt, shard_no, path,
                        line_count, byte_count, est_tokens, created_at)
                    VALUES ('s0', ?, 'openai', '/v1/chat/completions', 'm', 1, 0, 'x', 10, 1, 1, ?)""",
        [task_id, T0],
    )
    conn.execute(
        """INSERT INTO ledger.provider_job (job_key, task_id, shard_id, provider, endpoint, provider_batch_id,
                        state, request_total, request_completed, request_failed, created_at, submitted_at,
                        state_changed_at, terminal_at)
                    VALUES ('j1', ?, 's0', 'openai', '/v1/chat/completions', 'b1', ?, 10, ?, 0, ?, ?, ?, ?)""",
        [task_id, "RUNNING", 4, T0, T0 + dt.timedelta(minutes=1), T0 + dt.timedelta(minutes=5), None],
    )
    for i in range(10):  # its ten items, sent in the job's shard
        conn.execute(
            """INSERT INTO ledger.manifest_item (custom_id, item_no, task_id, business_id, item_type, input_hash,
                            prompt_version, model, params_json, output_schema_version, manifest_version, frozen_at)
                        VALUES (?, ?, ?, ?, 'x', 'h', 'v1', 'm', '{}', 'v1', 1, ?)""",
            [f"m{i}", i, task_id, f"b{i}", T0],
        )
        conn.execute(
            """INSERT INTO ledger.shard_line (shard_id, line_no, custom_id, item_no, request_id, task_id, attempt,
                            line_bytes, est_tokens) VALUES ('s0', ?, ?, ?, ?, ?, 1, 1, 1)""",
            [i, f"m{i}", i, f"m{i}", task_id],
        )
    for state, minute in [("CREATED", 0), ("VALIDATING", 1), ("VALIDATING", 2), ("RUNNING", 5)]:
        conn.execute(
            "INSERT INTO ledger.status_event (job_key, from_state, to_state, observed_at) VALUES ('j1', NULL, ?, ?)",
            [state, T0 + dt.timedelta(minutes=minute)],
        )


def test_queue_run_total_time_in_state_and_eta_from_the_ledger(warehouse):
    with warehouse.connect() as conn:
        _ledger_rows(conn)
        now = T0 + dt.timedelta(minutes=9)
        r = build_report(conn, "t_20261120", now=now)
        # 4 of 10 requests done in the 4 minutes since it was seen running: 6 more take 6 minutes
        assert (r.queue_time_s, r.run_time_s, r.total_time_s) == (240.0, 240.0, 540.0)
        assert r.time_in_state_s() == {"CREATED": 60.0, "VALIDATING": 240.0, "RUNNING": 240.0}
        assert r.eta_s == pytest.approx(360.0)
        n = report_numbers(r)
        assert (n["time_in_created_s"], n["time_in_validating_s"], n["time_in_running_s"]) == (60.0, 240.0, 240.0)
        assert n["eta_s"] == pytest.approx(360.0)
        conn.execute(
            "UPDATE ledger.provider_job SET state = 'COMPLETED', request_completed = 10, terminal_at = ?",
            [T0 + dt.timedelta(minutes=15)],
        )
        conn.execute(
            "INSERT INTO ledger.status_event (job_key, from_state, to_state, observed_at) "
            "VALUES ('j1', 'RUNNING', 'COMPLETED', ?)",
            [T0 + dt.timedelta(minutes=15)],
        )
        r = build_report(conn, "t_20261120", now=T0 + dt.timedelta(hours=2))
        (job,) = r.jobs
        assert (job.queue_s(r.generated_at), job.run_s(r.generated_at), job.total_s(r.generated_at)) == (
            240.0,
            600.0,
            900.0,
        )
        assert r.time_in_state_s()["RUNNING"] == 600.0  # the terminal state adds no time


def test_an_abandoned_intent_ends_when_it_was_abandoned_and_is_not_counted_as_remaining(warehouse):
    """An intent an operator gave up (`jobs abandon`) has no batch and never will: the report shows it
    as abandoned, its time stops at the abandonment, and the ETA does not wait for its lines (its
    shard is counted once, as waiting, until the next submit run sends it under a new job key)."""
    from batch_assets.ledger.jobs import abandon_job, claim_new_intent

    with warehouse.connect() as conn:
        _ledger_rows(conn)
        conn.execute(
            """INSERT INTO ledger.shard (shard_id, task_id, provider, endpoint, model, attempt, shard_no, path,
                            line_count, byte_count, est_tokens, created_at)
                        VALUES ('s1', 't_20261120', 'openai', '/v1/chat/completions', 'm', 1, 1, 'x', 6, 1, 1, ?)""",
            [T0],
        )
        assert claim_new_intent(
            conn, "s1:job1", "t_20261120", "s1", "openai", "/v1/chat/completions", owner="a-run-that-died", lease_s=-1
        )
        abandon_job(conn, "s1:job1", "the provider has no such batch")
        abandoned_at = conn.execute("SELECT acted_at FROM ledger.operator_action WHERE action = 'abandon'").fetchone()[
            0
        ]
        now = abandoned_at + dt.timedelta(hours=3)
        r = build_report(conn, "t_20261120", now=now)
        job = next(j for j in r.jobs if j.job_key == "s1:job1")
        assert job.state == "ABANDONED" and job.terminal_at == abandoned_at
        assert job.total_s(now) == (abandoned_at - job.created_at).total_seconds()  # not the 3 hours since
        assert all(end <= abandoned_at for _, _, end in job.segments)
        assert r.waiting_lines == 6
        # j1: 4 of 10 done in the 4 minutes since it ran (1 a minute); left: its 6 and the 6 waiting, not 6 more
        assert r.eta_s == pytest.approx(12 / (4 / (now - (T0 + dt.timedelta(minutes=5))).total_seconds()))
        assert "ABANDONED" in render_html(r) and "s1:job1" in report_markdown(r)


def test_cost_is_none_until_the_ledger_has_costs_then_summed(warehouse):
    with warehouse.connect() as conn:
        _ledger_rows(conn)
        assert cost_figures(conn, "t_20261120") is None
        r = build_report(conn, "t_20261120", now=T0 + dt.timedelta(minutes=9))
        assert r.cost is None and "estimated_cost" not in report_numbers(r)
        assert "not recorded in the ledger" in report_markdown(r)
        # the columns another change adds: estimated cost per item, actual cost per attempt, currency
        conn.execute("ALTER TABLE ledger.manifest_item ADD COLUMN IF NOT EXISTS est_cost DOUBLE")
        conn.execute("ALTER TABLE ledger.parsed_result ADD COLUMN IF NOT EXISTS cost DOUBLE")
        conn.execute("ALTER TABLE ledger.batch_task ADD COLUMN IF NOT EXISTS currency VARCHAR")
        conn.execute("UPDATE ledger.batch_task SET currency = 'USD'")
        for i, cost in enumerate((0.25, 0.5)):
            conn.execute(
                """INSERT INTO ledger.manifest_item (custom_id, item_no, task_id, business_id, item_type, input_hash,
                                prompt_version, model, params_json, output_schema_version, manifest_version, frozen_at,
                                est_cost) VALUES (?, ?, 't_20261120', ?, 'x', 'h', 'v1', 'm', '{}', 'v1', 1, ?, ?)""",
                [f"c{i}", 100 + i, f"b{i}", T0, cost],
            )
        conn.execute(
            """INSERT INTO ledger.parsed_result (custom_id, item_no, attempt, task_id, job_key, provider_succeeded,
                            output_schema_version, parsed_at, cost)
               VALUES ('c0', 100, 1, 't_20261120', 'j1', true, 'v1', ?, 0.2)""",
            [T0],
        )
        cost = cost_figures(conn, "t_20261120")
        assert (cost.estimated, cost.actual, cost.currency) == (0.75, 0.2, "USD")
        n = report_numbers(build_report(conn, "t_20261120", now=T0 + dt.timedelta(minutes=9)))
        assert (n["estimated_cost"], n["actual_cost"]) == (0.75, 0.2)


def _job(conn, job_key, shard_id, attempt, created, started, ended, task_id="t_20261120"):
    """A completed retry-wave job on its own shard, with the provider's own times (minutes after T0)."""
    minute = lambda m: T0 + dt.timedelta(minutes=m)  # noqa: E731
    conn.execute(
        """INSERT INTO ledger.shard (shard_id, task_id, provider, endpoint, model, attempt, shard_no, path,
                        line_count, byte_count, est_tokens, created_at)
                    VALUES (?, ?, 'openai', '/v1/chat/completions', 'm', ?, 9, 'x', 3, 1, 1, ?)""",
        [shard_id, task_id, attempt, minute(created)],
    )
    conn.execute(
        """INSERT INTO ledger.provider_job (job_key, task_id, shard_id, provider, endpoint, provider_batch_id, state,
                        request_total, request_completed, request_failed, created_at, submitted_at,
                        state_changed_at, terminal_at, provider_created_at, provider_started_at, provider_ended_at)
                    VALUES (?, ?, ?, 'openai', '/v1/chat/completions', ?, 'COMPLETED', 3, 3, 0, ?, ?, ?, ?, ?, ?, ?)""",
        [job_key, task_id, shard_id, "b_" + job_key, minute(created), minute(created), minute(ended + 5)]
        + [minute(ended + 5), minute(created), minute(started), minute(ended)],
    )


def test_times_come_from_the_providers_timestamps_and_retry_gaps_count_as_neither_queue_nor_run(warehouse):
    """j1 (created 01:00) was queued at the provider 01:01-01:03, ran 01:03-01:07 (finalizing from
    01:06); the sensor saw it running only at 01:05 and ended at 01:15. A retry wave 23 minutes later:
    j2 queued 01:30-01:31, ran -01:33; j3 beside it queued 01:30-01:32, ran -01:35."""
    minute = lambda m: T0 + dt.timedelta(minutes=m)  # noqa: E731
    with warehouse.connect() as conn:
        _ledger_rows(conn)
        conn.execute(
            """UPDATE ledger.provider_job SET state = 'COMPLETED', request_completed = 10, terminal_at = ?,
                      provider_created_at = ?, provider_started_at = ?, provider_finalizing_at = ?,
                      provider_ended_at = ? WHERE job_key = 'j1'""",
            [minute(15), minute(1), minute(3), minute(6), minute(7)],
        )
        conn.execute(
            "INSERT INTO ledger.status_event (job_key, from_state, to_state, observed_at) "
            "VALUES ('j1', 'RUNNING', 'COMPLETED', ?)",
            [minute(15)],
        )
        _job(conn, "j2", "s1", 2, created=30, started=31, ended=33)
        _job(conn, "j3", "s2", 2, created=30, started=32, ended=35)
        r = build_report(conn, "t_20261120", now=T0 + dt.timedelta(hours=3))
        j1, j2, j3 = r.jobs
        now = r.generated_at
        assert (j1.queue_s(now), j1.run_s(now), j1.total_s(now)) == (120.0, 240.0, 420.0)  # not 4 and 10 minutes
        assert (j2.queue_s(now), j2.run_s(now)) == (60.0, 120.0) and (j3.queue_s(now), j3.run_s(now)) == (120.0, 180.0)
        # The partition: the union of its jobs' intervals. Queued 01:01-01:03 and 01:30-01:31 (from 01:31
        # j2 ran while j3 waited: that minute is run time); ran 01:03-01:07 and 01:31-01:35.
        assert (r.queue_time_s, r.run_time_s) == (180.0, 480.0)
        assert j1.segments == (
            ("CREATED", minute(0), minute(1)),
            ("VALIDATING", minute(1), minute(3)),
            ("RUNNING", minute(3), minute(6)),
            ("FINALIZING", minute(6), minute(7)),
        )
        assert sum((e - s for _, s, e in j1.segments), dt.timedelta()) == dt.timedelta(seconds=j1.total_s(now))
        assert r.time_in_state_s() == {
            "CREATED": 60.0,
            "VALIDATING": 120.0,
            "SUBMITTED": 180.0,
            "RUNNING": 480.0,
            "FINALIZING": 60.0,
        }
        n = report_numbers(r)
        assert (n["queue_time_s"], n["run_time_s"]) == (180.0, 480.0)
        assert "| queue (a batch waiting at the provider, none running) | 3m 00s |" in report_markdown(r)
        assert "<td>run (a batch running at the provider)</td><td>8m 00s" in render_html(r)


def test_a_job_the_provider_reports_no_times_for_is_timed_by_what_the_ledger_saw(warehouse):
    with warehouse.connect() as conn:
        _ledger_rows(conn)
        r = build_report(conn, "t_20261120", now=T0 + dt.timedelta(minutes=9))
        (job,) = r.jobs
        assert (job.queued_at, job.started_at) == (T0 + dt.timedelta(minutes=1), T0 + dt.timedelta(minutes=5))


def test_the_html_page_names_a_failed_jobs_reason_as_the_reconciliation_check_does(warehouse):
    with warehouse.connect() as conn:
        _ledger_rows(conn)
        errors = [{"code": "token_limit_exceeded", "message": "Enqueued token limit reached for m <in org>"}]
        conn.execute(
            "UPDATE ledger.provider_job SET state = 'FAILED', terminal_at = ?, provider_errors = ? "
            "WHERE job_key = 'j1'",
            [T0 + dt.timedelta(minutes=6), json.dumps(errors)],
        )
        r = build_report(conn, "t_20261120", now=T0 + dt.timedelta(minutes=9))
    (job,) = r.jobs
    reason = "token_limit_exceeded: Enqueued token limit reached for m <in org>"
    assert job.reason == reason and r.reconciliation.batch_failures == [f"j1: {reason}"]
    page = render_html(r)
    assert "<td>FAILED</td>" in page and f"<td>{html.escape(reason)}</td>" in page
    assert f"| {reason} |" in report_markdown(r)
