"""Nothing sensitive or over budget leaves the machine: the sensitive-data gate at freeze (block /
redact / allow), placeholders and their local mapping, restore at apply, prices and cost, budget caps."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from batch_assets.ledger.results import insert_parsed_results
from batch_assets.ledger.transaction import transaction
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.budget import ProjectBudgets, check_budget
from batch_assets.pipeline.govern.cost import partition_gates, request_overhead_tokens
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.policy import PolicySpec, find_sensitive
from batch_assets.policy.model import DetectorActions
from batch_assets.providers.prices import model_price, price_table
from batch_assets.providers.registry import known_providers
from batch_assets.spec.model import BudgetSpec

from .conftest import DAY1
from .profiles import EARLIER_DAYS, ledger_scans

TASK_ID1 = "ticket_triage_20261120"


def q(wh, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        cur = conn.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def with_spec(task, **changes):
    return dataclasses.replace(task, spec=task.spec.model_copy(update=changes))


def source_findings(wh, day: str = DAY1) -> list[tuple[str, str, str]]:
    """(ticket_id, detector, value) of every confirmed finding in the day's source tickets."""
    with wh.connect() as conn:
        conn.execute(
            f"CREATE TEMP TABLE _t AS SELECT row_number() OVER () AS rid, ticket_id, subject, body "
            f"FROM support_tickets WHERE created_date = DATE '{day}'"
        )
        table = find_sensitive(conn, "_t", "rid", ["subject", "body"])
        return conn.execute(
            f"SELECT t.ticket_id, f.detector, f.value FROM {table} f JOIN _t t ON t.rid = f.id"
        ).fetchall()


def prompts(wh) -> dict[str, str]:
    """business_id -> prompt_text of the partition's current manifest Parquet."""
    (uri,) = [r["manifest_uri"] for r in q(wh, "SELECT manifest_uri FROM ledger.batch_task")]
    return {
        r["business_id"]: r["prompt_text"] for r in q(wh, f"SELECT business_id, prompt_text FROM read_parquet('{uri}')")
    }


def shard_text(wh) -> str:
    return "\n".join(Path(r["path"]).read_text(encoding="utf-8") for r in q(wh, "SELECT path FROM ledger.shard"))


def add_ticket(wh, ticket_id: str, body: str, day: str = DAY1) -> None:
    with wh.connect() as conn:
        conn.execute(
            """
            INSERT INTO support_tickets (ticket_id, created_date, created_at, channel, language, customer_name,
                                         customer_email, subject, body)
            SELECT ?, CAST(? AS DATE), created_at, channel, language, customer_name, customer_email, subject, ?
            FROM support_tickets LIMIT 1
        """,
            [ticket_id, day, body],
        )


def test_block_and_redact_on_real_shard_files(seeded_copy, ticket_task):
    wh = seeded_copy
    findings = source_findings(wh)
    kinds = {d for _, d, _ in findings}
    assert {"email", "phone", "card"} <= kinds, kinds  # the seed data has every kind the demo needs
    summary = freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    sent = shard_text(wh)
    # No detected value anywhere in a shard file, the manifest Parquet, the quarantine or the metadata.
    parquet = q(wh, f"SELECT * FROM read_parquet('{summary.manifest_uri}')")
    parquet_text = json.dumps(parquet, default=str)
    quarantine = json.dumps(q(wh, "SELECT * FROM ledger.quarantine"), default=str)
    metadata = json.dumps(summary.pii.as_metadata())
    for _, detector, value in findings:
        for text, where in (
            (sent, "shard"),
            (parquet_text, "manifest"),
            (quarantine, "quarantine"),
            (metadata, "metadata"),
        ):
            assert value not in text, f"a {detector} value is in the {where}"
    # card (block): quarantined with detector and column named; email/phone (redact): sent with placeholders.
    carded = {i for i, d, _ in findings if d == "card"}
    blocked = {
        r["business_id"]: r["reason"]
        for r in q(
            wh,
            """
        SELECT m.business_id, q.reason FROM ledger.quarantine q JOIN ledger.manifest_item m USING (custom_id)
        WHERE q.reason_code = 'blocked_by_policy'""",
        )
    }
    assert set(blocked) == carded and len(carded) == 3
    assert all("card in column body" in r for r in blocked.values())
    redacted = {i for i, d, _ in findings if d in ("email", "phone")} - carded
    lines = {json.loads(line)["custom_id"].split(":")[2]: line for line in sent.splitlines()}
    assert redacted and redacted <= set(lines)
    for bid in redacted:
        assert re.search(r"\[(EMAIL|PHONE)_1\]", lines[bid])
    assert not set(lines) & carded
    assert (summary.pii.redacted_items, summary.pii.blocked_items) == (len(redacted), 3)
    assert summary.pii.by_detector["card"] == {"action": "block", "findings": 3, "items": 3}
    # The values are kept locally, by custom_id, for redacted (not blocked) items only.
    mapping = q(
        wh,
        "SELECT m.business_id, p.placeholder, p.value FROM ledger.pii_mapping p "
        "JOIN ledger.manifest_item m USING (custom_id)",
    )
    assert {r["business_id"] for r in mapping} == redacted
    assert {(i, v) for i, d, v in findings if i in redacted} == {(r["business_id"], r["value"]) for r in mapping}
    with wh.connect() as conn:
        gate = partition_gates(conn, [TASK_ID1])[TASK_ID1]
    assert (gate.pii_redacted, gate.pii_blocked) == (len(redacted), 3)


def test_placeholders_stable_and_input_hash_taken_over_the_redacted_text(seeded_copy, ticket_task):
    wh = seeded_copy
    add_ticket(
        wh,
        "PII-1",
        "Mail me at jane.doe@example.com or jane.doe@example.com, or call +86 138 1234 5678. "
        "Second address: bob@example.org",
    )
    freeze_manifest(wh, ticket_task, DAY1)
    (item,) = q(wh, "SELECT custom_id, input_hash FROM ledger.manifest_item WHERE business_id = 'PII-1'")
    assert "Mail me at [EMAIL_1] or [EMAIL_1], or call [PHONE_1]. Second address: [EMAIL_2]" in prompts(wh)["PII-1"]
    # A refreeze of the same source: same text, same hashes, same custom_ids, nothing new.
    again = freeze_manifest(wh, ticket_task, DAY1, refreeze=True)
    assert (again.new_items, again.superseded_items) == (0, 0)
    (same,) = q(
        wh,
        "SELECT custom_id, input_hash FROM ledger.manifest_item WHERE business_id = 'PII-1' AND superseded_at IS NULL",
    )
    assert same == item
    # With the detectors allowed, the text sent is the original one: another hash.
    allow = with_spec(
        ticket_task,
        policy=PolicySpec(
            detectors=DetectorActions(email="allow", phone="allow", card="allow", cn_id="allow", iban="allow")
        ),
    )
    freeze_manifest(wh, allow, DAY1, refreeze=True)
    (plain,) = q(
        wh, "SELECT input_hash FROM ledger.manifest_item WHERE business_id = 'PII-1' AND superseded_at IS NULL"
    )
    assert plain["input_hash"] != item["input_hash"]


def test_a_luhn_invalid_look_alike_is_not_blocked(seeded_copy, ticket_task):
    wh = seeded_copy
    add_ticket(wh, "LOOK-1", "My order number is 4111 1111 1111 1112, please check it.")  # fails Luhn
    add_ticket(wh, "CARD-1", "Charge my card 4111 1111 1111 1111 again.")  # passes Luhn
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    blocked = {
        r["business_id"]
        for r in q(
            wh,
            "SELECT m.business_id FROM ledger.quarantine q "
            "JOIN ledger.manifest_item m USING (custom_id) WHERE reason_code = 'blocked_by_policy'",
        )
    }
    assert "CARD-1" in blocked and "LOOK-1" not in blocked
    sent = shard_text(wh)
    assert "4111 1111 1111 1112" in sent and "4111 1111 1111 1111" not in sent


def test_sensitive_columns_are_redacted_whole(seeded_copy, ticket_task):
    wh = seeded_copy
    task = with_spec(ticket_task, policy=PolicySpec(sensitive_columns=["subject"]))
    freeze_manifest(wh, task, DAY1)
    sent = prompts(wh)
    assert sent and all("Subject: [SUBJECT_1]" in p for p in sent.values())


def _fake_answers(wh, task, answers: dict[str, str]) -> None:
    """parsed_result rows as if the provider had answered (custom_id -> output JSON)."""
    values = ", ".join(f"('{cid}', '{out}')" for cid, out in answers.items())
    with wh.connect() as conn, transaction(conn):
        insert_parsed_results(
            conn,
            task.task_id(DAY1),
            f"""
            SELECT custom_id, (SELECT item_no FROM ledger.manifest_item m WHERE m.custom_id = v.custom_id) AS item_no,
                   1 AS attempt, 'job-x' AS job_key, true AS provider_succeeded, NULL AS error_class,
                   NULL AS error_code, NULL AS error_message, 200 AS http_status, output_json, 'stop' AS finish_reason,
                   100 AS input_tokens, 20 AS output_tokens, NULL AS provider_request_id,
                   NULL AS thinking_tokens, NULL AS cached_input_tokens
            FROM (VALUES {values}) AS v(custom_id, output_json)
        """,
            output_schema_version=task.spec.output.version,
            from_line=True,
        )


@pytest.mark.parametrize("restore", [True, False])
def test_restore_on_apply_round_trip(seeded_copy, ticket_task, restore):
    wh = seeded_copy
    add_ticket(wh, "PII-2", "Please change my e-mail from old.me@example.com to new.me@example.com, thanks")
    task = with_spec(ticket_task, policy=PolicySpec(restore_on_apply=restore))
    freeze_manifest(wh, task, DAY1)
    (item,) = q(wh, "SELECT custom_id FROM ledger.manifest_item WHERE business_id = 'PII-2'")
    text = prompts(wh)["PII-2"]
    assert "new.me@example.com" not in text and "[EMAIL_1]" in text
    answer = json.dumps({"category": "account", "confidence": 0.9, "reason": "move [EMAIL_1] to [EMAIL_2]; [EMAIL_9]"})
    _fake_answers(wh, task, {item["custom_id"]: answer.replace("'", "''")})
    assert apply_results(wh, task, DAY1).applied == 1  # the stale guard hashes the redacted text too
    (applied,) = q(wh, "SELECT reason FROM ticket_labels WHERE ticket_id = 'PII-2'")
    if restore:
        mapping = dict(
            (r["placeholder"], r["value"])
            for r in q(wh, "SELECT placeholder, value FROM ledger.pii_mapping WHERE custom_id = ?", [item["custom_id"]])
        )
        assert applied["reason"] == f"move {mapping['[EMAIL_1]']} to {mapping['[EMAIL_2]']}; [EMAIL_9]"
        assert "new.me@example.com" in applied["reason"]
    else:
        assert applied["reason"] == "move [EMAIL_1] to [EMAIL_2]; [EMAIL_9]"


# --- cost -------------------------------------------------------------------------------------


def test_every_provider_has_a_price_table_for_its_demo_models(ticket_task):
    from batch_assets.spec.resolve import load_all_tasks

    for name, task in load_all_tasks().items():
        p = model_price(task.spec.provider, task.spec.model)
        assert p is not None and p.currency == "USD" and p.batch_discount == 0.5, name
    for provider in known_providers():
        assert price_table(provider), provider


def test_price_math_with_batch_discount_and_thinking_tokens():
    p = model_price("openai", "gpt-4o-mini")  # 0.15 in / 0.60 out per 1M, batch 50 % off
    assert p.cost(1_000_000, 0) == pytest.approx(0.075)
    assert p.cost(2000, 500) == pytest.approx((2000 * 0.15 + 500 * 0.60) / 1e6 * 0.5)
    with duckdb.connect() as conn:
        assert conn.execute(f"SELECT {p.cost_sql('2000', '500')}").fetchone()[0] == pytest.approx(p.cost(2000, 500))
        # Cached input tokens (part of the input) at the cached-input price (0.075); a NULL count is none cached.
        assert p.cost(2000, 500, 1500) == pytest.approx((500 * 0.15 + 1500 * 0.075 + 500 * 0.60) / 1e6 * 0.5)
        assert conn.execute(f"SELECT {p.cost_sql('2000', '500', '1500')}").fetchone()[0] == pytest.approx(
            p.cost(2000, 500, 1500)
        )
        assert conn.execute(f"SELECT {p.cost_sql('2000', '500', 'NULL')}").fetchone()[0] == pytest.approx(
            p.cost(2000, 500)
        )
    # Gemini's thinking tokens are billed as output: its wire format adds thoughtsTokenCount to output_tokens.
    from batch_assets.providers.gemini.formats import _output_tokens_sql

    body = json.dumps(
        {"usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 100, "thoughtsTokenCount": 400}}
    )
    with duckdb.connect() as conn:
        out = conn.execute(f"SELECT {_output_tokens_sql('r')} FROM (SELECT '{body}'::JSON AS body) r").fetchone()[0]
    g = model_price("gemini", "gemini-2.5-flash")  # 0.30 in / 2.50 out
    assert out == 500 and g.cost(1000, out) == pytest.approx((1000 * 0.30 + 500 * 2.50) / 1e6 * 0.5)


def test_estimated_cost_per_item_at_freeze(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    p = model_price("openai", "gpt-4o-mini")
    overhead = request_overhead_tokens(ticket_task)  # the system prompt and the chat framing
    assert 40 < overhead < 70
    rows = q(wh, "SELECT est_input_tokens, est_cost FROM ledger.manifest_item")
    assert rows and all(r["est_cost"] == pytest.approx(p.cost(r["est_input_tokens"] + overhead, 200)) for r in rows)


@pytest.mark.slow
def test_cost_estimate_against_the_emulator_usage(seeded_copy, ticket_task, adapter, run_partition):
    """A demo-like run of one partition: pii counts and cost in the report JSON; the input estimate
    within 25 % of the provider's (emulator's) input usage, the cost estimate an upper bound."""
    wh = seeded_copy
    rec = run_partition(wh, ticket_task, DAY1, adapter)
    assert rec.problems() == []
    overhead = request_overhead_tokens(ticket_task)
    (row,) = q(
        wh,
        f"""
        SELECT sum(m.est_input_tokens + {overhead}) AS est_in, sum(p.input_tokens) AS in_tok,
               sum(p.output_tokens) AS out_tok,
               sum(p.cost) AS cost, sum(m.est_cost) AS est_cost
        FROM ledger.parsed_result p JOIN ledger.manifest_item m USING (custom_id)""",
    )
    print("estimate vs emulator usage:", row)
    assert abs(row["est_in"] - row["in_tok"]) / row["in_tok"] < 0.05, row
    assert row["est_cost"] >= row["cost"] > 0
    import contextlib
    import io

    from batch_assets.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["--database", str(wh.database), "report", "--format", "json"]) == 0
    (rep,) = json.loads(buf.getvalue())
    assert rep["pii_blocked"] == 3 and rep["pii_redacted"] > 0 and rep["currency"] == "USD"
    assert rep["cost_actual"] == pytest.approx(row["cost"], abs=1e-6)
    assert rep["cost_estimated"] == pytest.approx(row["est_cost"], abs=1e-6)


# --- budgets ------------------------------------------------------------------------------------


def test_a_budget_cap_refuses_with_the_numbers_and_an_override_is_recorded(seeded_copy, ticket_task):
    wh = seeded_copy
    task = with_spec(ticket_task, budget=BudgetSpec(max_cost_per_partition=0.001))
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    v = check_budget(wh, task, DAY1, budgets=ProjectBudgets())
    assert not v.passed and v.estimate > 0.001 and v.pending == v.estimate and v.spent_today == 0
    assert re.search(r"partition estimate 0\.\d{4} USD > budget.max_cost_per_partition 0\.0010 USD", v.refusals[0])
    daily = check_budget(wh, ticket_task, DAY1, budgets=ProjectBudgets(per_model_per_day={"gpt-4o-mini": 0.002}))
    assert not daily.passed and "per_model_per_day cap 0.0020 USD" in daily.refusals[0]
    assert check_budget(wh, ticket_task, DAY1, budgets=ProjectBudgets(per_day=10.0)).passed
    ok = check_budget(wh, task, DAY1, override_reason="quarter-end run, approved by finance", budgets=ProjectBudgets())
    assert ok.passed and ok.overridden == "quarter-end run, approved by finance"
    (action,) = q(wh, "SELECT action, task_id, detail FROM ledger.operator_action")
    assert action["action"] == "budget_override" and action["task_id"] == TASK_ID1
    assert action["detail"].startswith("quarter-end run, approved by finance | overrode: partition estimate")
    assert check_budget(wh, task, DAY1, budgets=ProjectBudgets()).passed  # the recorded override holds


@pytest.mark.slow
def test_the_budget_counts_todays_jobs_of_every_partition_from_their_shards_alone(
    seeded_copy, ticket_task, adapter, tmp_path
):
    """Spent today counts the lines of every partition with a job created today, summed per shard at
    cut (shard.est_cost): the check reads no line or item of any partition (DuckDB's profile), so it
    does not grow with the ledger's history and needs no other partition's store."""
    from batch_assets.ledger.history import copy_partition_rows
    from batch_assets.pipeline.govern.budget import _figures
    from batch_assets.pipeline.send.submit import submit_pending

    from .conftest import DAY2

    wh, model = seeded_copy, ticket_task.spec.model
    day2 = ticket_task.task_id(DAY2)
    for day in (DAY1, DAY2):
        freeze_manifest(wh, ticket_task, day)
        cut_shards(wh, ticket_task, day)
    submit_pending(wh, ticket_task, DAY1, adapter)  # DAY1's jobs are created today
    with wh.connect() as conn:
        day1_cost = conn.execute(
            """SELECT sum(m.est_cost) FROM ledger.shard_line sl
                                    JOIN ledger.manifest_item m USING (custom_id) WHERE sl.task_id = ?""",
            [TASK_ID1],
        ).fetchone()[0]
        figures = _figures(conn, day2, model)
        assert figures[0] == figures[1] > 0 and day1_cost > 0
        assert figures[2] == pytest.approx(day1_cost) and figures[3] == pytest.approx(day1_cost)
        copy_partition_rows(conn, DAY1, EARLIER_DAYS)  # earlier days' partitions, their jobs created then
        found = {}
        scans = ledger_scans(conn, lambda: found.update(f=_figures(conn, day2, model)), tmp_path / "profile.json")
    assert found["f"] == pytest.approx(figures)
    assert not scans.get("shard_line") and not scans.get("manifest_item"), scans


def test_a_shard_whose_job_was_abandoned_counts_as_pending_again(seeded_copy, ticket_task):
    """An abandoned intent's shard goes again under a new job key on the next submit run, so the
    budget counts it in what this submission adds; a shard with a live intent does not."""
    from batch_assets.ledger.jobs import abandon_job, claim_new_intent
    from batch_assets.pipeline.send.submit import job_key_for

    wh = seeded_copy
    task = dataclasses.replace(ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=10))
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    with wh.connect() as conn:
        (abandoned, abandoned_cost), (live, live_cost) = conn.execute(
            """
            SELECT sl.shard_id, sum(m.est_cost) FROM ledger.shard_line sl JOIN ledger.manifest_item m USING (custom_id)
            JOIN ledger.shard s USING (shard_id) WHERE sl.task_id = ? GROUP BY sl.shard_id, s.shard_no
            ORDER BY s.shard_no LIMIT 2""",
            [TASK_ID1],
        ).fetchall()
        for shard_id in (abandoned, live):
            assert claim_new_intent(
                conn,
                job_key_for(shard_id),
                TASK_ID1,
                shard_id,
                "openai",
                task.spec.endpoint,
                owner="a-run-that-died",
                lease_s=-1,
            )  # its lease already ran out
        abandon_job(conn, job_key_for(abandoned), "the provider has no such batch")
    v = check_budget(wh, task, DAY1, budgets=ProjectBudgets())
    assert abandoned_cost > 0 and live_cost > 0
    assert v.pending == pytest.approx(v.estimate - live_cost)  # the abandoned shard's lines are pending again
    # Both intents were made today: spent today counts both (an abandoned batch may exist and bill).
    assert v.spent_today == pytest.approx(abandoned_cost + live_cost)


@pytest.mark.slow
def test_the_budget_check_blocks_submission_in_dagster(dagster_env, emulator, monkeypatch, tmp_path):
    import batch_assets.pipeline.govern.budget as budget

    caps = tmp_path / "budgets.yaml"
    caps.write_text("currency: USD\nper_day: 0.001\n", encoding="utf-8")
    monkeypatch.setattr(budget, "BUDGETS_FILE", caps)
    from batch_assets.definitions import defs

    job = defs().resolve_job_def("ticket_triage__submit")
    with dg.instance_for_test() as instance:
        run = job.execute_in_process(instance=instance, partition_key=DAY1, raise_on_error=False)
        evals = {e.check_name: e for e in run.get_asset_check_evaluations()}
        check = evals["within_budget"]
        assert not check.passed
        meta = {k: v.value for k, v in check.metadata.items()}
        assert meta["cap_per_day"] == 0.001 and meta["estimate"] > 0.001 and meta["spent_today"] == 0
        assert "per_day cap 0.0010 USD" in meta["refusals"]
        with dagster_env.connect() as conn:
            assert conn.execute("SELECT count(*) FROM ledger.provider_job").fetchone()[0] == 0
        override = {"ops": {"ticket_triage__shards": {"config": {"budget_override": "load test, approved"}}}}
        again = job.execute_in_process(instance=instance, partition_key=DAY1, run_config=override)
        assert again.success
        with dagster_env.connect() as conn:
            assert conn.execute("SELECT count(*) FROM ledger.provider_job").fetchone()[0] > 0
            (detail,) = conn.execute(
                "SELECT detail FROM ledger.operator_action WHERE action = 'budget_override'"
            ).fetchone()
        assert detail.startswith("load test, approved | overrode: all models today")


def test_a_redacted_item_keeps_its_other_texts_verbatim(seeded_copy, ticket_task):
    """Only the texts with something masked are rewritten: the other column of a redacted item (and
    every text of an untouched one) reaches the prompt exactly as the source holds it."""
    wh = seeded_copy
    add_ticket(wh, "TK-MIXED-1", "Please write to jane.doe@example.com about the refund.")
    add_ticket(wh, "TK-PLAIN-1", "Nothing sensitive in here at all.")
    with wh.connect() as conn:
        conn.execute(
            "UPDATE support_tickets SET subject = 'Refund request, second try' "
            "WHERE ticket_id IN ('TK-MIXED-1', 'TK-PLAIN-1')"
        )
    freeze_manifest(wh, ticket_task, DAY1)
    mixed, plain = prompts(wh)["TK-MIXED-1"], prompts(wh)["TK-PLAIN-1"]
    assert "Subject: Refund request, second try" in mixed and "Subject: Refund request, second try" in plain
    assert "Please write to [EMAIL_1] about the refund." in mixed and "jane.doe@example.com" not in mixed
    assert "Nothing sensitive in here at all." in plain


def test_the_gate_scans_each_id_once_and_leaves_repeated_ids_out(seeded_copy, ticket_task):
    """The scan is keyed by business id and told its ids are unique: an id the source holds twice
    (one in the seeded day) is set aside for the freeze to reject and never scanned (an address in
    one of its rows is no redacted item), with a NULL id beside it (hash(NULL) is a value: counted
    with the ids it would hide the repeat)."""
    from batch_assets.pipeline.freeze.source import drop_source, load_source

    wh = seeded_copy
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) "
            "VALUES (NULL, DATE '2026-11-20', 's', 'b', 'en')"
        )
        dup = conn.execute(
            "SELECT ticket_id FROM support_tickets WHERE created_date = ?::DATE AND ticket_id IS NOT NULL "
            "GROUP BY 1 HAVING count(*) > 1",
            [DAY1],
        ).fetchall()
        assert len(dup) == 1

        def gate() -> tuple:
            counts = load_source(conn, ticket_task, DAY1)
            repeated = conn.execute("SELECT __bid FROM _gate_repeated").fetchall()
            drop_source(conn)
            return counts.redacted_items, repeated

        redacted, repeated = gate()
        conn.execute(
            "UPDATE support_tickets SET body = body || ' Write to ann.lee@example.com.' "
            "WHERE rowid = (SELECT min(rowid) FROM support_tickets WHERE ticket_id = ?)",
            [dup[0][0]],
        )
        assert gate() == (redacted, dup) and repeated == dup
