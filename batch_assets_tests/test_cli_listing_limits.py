"""Long listings: `jobs` shows at most --limit jobs (50 in a table by default, the newest, still oldest
first; all as json or csv) and says on stderr how many of how many; its table fits the terminal, and
--wide keeps every column."""

from __future__ import annotations

import json
import re

import pytest

from batch_assets.ledger.warehouse import Warehouse

from .cli_calls import assert_one_line_error, run

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def five_jobs(tmp_path) -> Warehouse:
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    with wh.connect() as conn:
        conn.execute(
            """INSERT INTO ledger.batch_task (task_id, task_name, partition_date, item_type, provider, model,
                   endpoint, prompt_version, output_schema_version, status, created_at, updated_at)
               VALUES ('ticket_triage_20261120', 'ticket_triage', DATE '2026-11-20', 'ticket', 'openai',
                   'gpt-4o-mini', '/v1/chat/completions', 'p1', 'o1', 'SUBMITTED', now()::TIMESTAMP,
                   now()::TIMESTAMP)"""
        )
        for n in range(1, 6):
            conn.execute(
                """INSERT INTO ledger.provider_job (job_key, task_id, shard_id, provider, endpoint, provider_batch_id,
                       raw_status, state, request_total, created_at, state_changed_at, submitted_at)
                   VALUES (?, 'ticket_triage_20261120', ?, 'openai', '/v1/chat/completions', ?, 'in_progress',
                       'IN_PROGRESS', 60, TIMESTAMP '2026-11-20 00:00:00' + INTERVAL (?) MINUTE,
                       now()::TIMESTAMP, now()::TIMESTAMP)""",
                [f"job{n}", f"s{n}", f"batch_{n}", n],
            )
    return wh


def test_limit_keeps_the_newest_jobs_and_says_how_many_of_how_many(capsys, five_jobs):
    code, out, err = run(capsys, "--database", five_jobs.database, "jobs", "--limit", "2")
    assert code == 0
    assert "job4" in out and "job5" in out and "job3" not in out
    assert out.index("job4") < out.index("job5")  # still oldest first
    assert err.strip() == "2 of 5 job(s) (the newest); --limit N shows more, --limit 0 all"


def test_json_lists_every_job_unless_limited(capsys, five_jobs):
    code, out, err = run(capsys, "--database", five_jobs.database, "jobs", "--format", "json")
    assert code == 0 and [j["job_key"] for j in json.loads(out)] == [f"job{n}" for n in range(1, 6)]
    assert err.strip() == "5 of 5 job(s)"
    code, out, err = run(capsys, "--database", five_jobs.database, "jobs", "--format", "json", "--limit", "1")
    assert [j["job_key"] for j in json.loads(out)] == ["job5"] and err.startswith("1 of 5 job(s)")
    code, out, _ = run(capsys, "--database", five_jobs.database, "jobs", "--limit", "0")
    assert code == 0 and all(f"job{n}" in out for n in range(1, 6))


def test_a_negative_limit_is_a_usage_error(capsys, five_jobs):
    code, out, err = run(capsys, "--database", five_jobs.database, "jobs", "--limit", "-1")
    assert code == 2 and out == ""
    assert_one_line_error(err, "--limit must be 0 (no limit) or more")


def test_the_jobs_table_fits_the_terminal_unless_wide(capsys, five_jobs, monkeypatch):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich treats stdout as a terminal
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "--database", five_jobs.database, "jobs")
    text = ANSI.sub("", out)
    assert code == 0 and max(len(line) for line in text.splitlines()) <= 80
    assert "not shown:" in text and "--wide shows them" in text
    code, out, _ = run(capsys, "--database", five_jobs.database, "jobs", "--wide")
    text = ANSI.sub("", out)
    assert code == 0 and "not shown" not in text and "remote" in text and "batch_id" in text
