"""The `batch-assets` command line: every subcommand parses only its own flags, read commands render
table/json/csv through one renderer, and every error is one line on stderr (exit 2 usage, 1 runtime).

Most tests call `main([...])` in process against a real DuckDB file holding one finished partition;
a few run the real console entry point (`python -m batch_assets.cli`) in a child process.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batch_assets.cli.errors import CliError
from batch_assets.cli.output import Field, render
from batch_assets.emulator.testing import running_emulator
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.providers.contract import ClientSettings, JobRef, JobState
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
from batch_assets.resources import EMULATOR_API_KEY

from .cli_calls import TASK_ID, assert_one_line_error, run
from .conftest import DAY1, FAST_EMULATOR

COMMANDS = ("demo", "dev", "emulator", "bench", "seed", "jobs", "report", "export", "sql", "retry", "cancel", "dry-run")
PROJECT_ROOT = Path(__file__).resolve().parents[1]
JOB_FIELDS = [
    "job_key",
    "task_id",
    "provider",
    "endpoint_mode",
    "endpoint_url",
    "request_options",
    "provider_batch_id",
    "state",
    "raw_status",
    "request_total",
    "request_completed",
    "request_failed",
    "cancel_requested",
    "submitted_at",
    "terminal_at",
    "create_outcome",
    "create_error",
    "claimed_by",
    "claim_expires_at",
    "note",
    "stuck",
    "stuck_at",
    "collect_attempts",
    "collect_error",
    "remote_files",
    "remote_delete_error",
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR", "BATCH_ASSETS_DEBUG"):
        monkeypatch.delenv(name, raising=False)


# --- parsing -----------------------------------------------------------------------------------------


def test_top_level_help_names_every_command(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "batch-assets" in out
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_has_a_help_that_names_it(capsys, command):
    code, out, err = run(capsys, command, "--help")
    assert code == 0, err
    assert f"batch-assets {command}" in out


def test_emulator_and_bench_help_are_their_own_programs_help(capsys):
    assert run(capsys, "emulator", "--help")[1].count("--state-dir") >= 1
    assert "--items" in run(capsys, "bench", "--help")[1]


def test_help_imports_neither_dagster_nor_duckdb():
    code = (
        "import contextlib, io, sys\nfrom batch_assets.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help']); main(['report', '--help'])\n"
        "print(sorted(m for m in ('dagster', 'duckdb', 'openai') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture
def no_benchmark(monkeypatch):
    """Fails the test if anything starts the benchmark."""
    import batch_assets.bench
    import batch_assets.bench.runner

    def refuse(*args, **kwargs):
        raise AssertionError("the benchmark was started")

    monkeypatch.setattr(batch_assets.bench, "main", refuse)
    monkeypatch.setattr(batch_assets.bench.runner, "run_benchmark", refuse)


@pytest.mark.slow
def test_the_word_bench_as_a_flag_value_does_not_start_the_benchmark(
    capsys, finished_db, tmp_path, monkeypatch, no_benchmark
):
    # `--task bench` is the jobs command's own filter (no task of that name here).
    code, out, err = run(capsys, "--database", finished_db, "jobs", "--task", "bench")
    assert code == 1 and out == ""  # no task of that name: an error listing the known tasks
    assert "no batch task matches 'bench'" in err and TASK_ID in err and "Traceback" not in err
    # A warehouse file named `bench`: jobs lists its jobs.
    monkeypatch.chdir(tmp_path)
    shutil.copy(finished_db, tmp_path / "bench")
    code, out, err = run(capsys, "--database", "bench", "jobs")
    assert code == 0, err
    assert f"{TASK_ID}_a1_s0000:job1" in out and "COMPLETED" in out


def test_emulator_and_bench_get_every_word_after_their_name(capsys, monkeypatch):
    import batch_assets.bench

    seen = []
    monkeypatch.setattr(batch_assets.bench, "main", lambda argv: seen.append(argv) or 0)
    assert run(capsys, "--database", "x.duckdb", "bench", "--items", "5", "--database", "y", "jobs")[0] == 0
    assert seen == [["--items", "5", "--database", "y", "jobs"]]
    # The emulator's own parser rejects its own bad flag value (nothing is served).
    code, _, err = run(capsys, "emulator", "--port", "not-a-port")
    assert code == 2 and "batch-assets emulator" in err


@pytest.mark.slow
def test_common_options_work_before_and_after_the_command(capsys, finished_db):
    assert run(capsys, "jobs", "--database", finished_db)[0] == 0
    assert run(capsys, "--database", finished_db, "jobs")[0] == 0


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["nosuch"], "invalid choice: 'nosuch'"),
        (["jobs", "--bogus"], "unrecognized arguments: --bogus"),
        (["jobs", "--format", "xml"], "invalid choice: 'xml'"),
        (["report", "--format"], "expected one argument"),
        (["dev", "--ui-port", "70000"], "outside 1-65535"),
        ([], "required: COMMAND"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert_one_line_error(err, "error:", expected, "--help")


# --- read commands in every format ---------------------------------------------------------------------


@pytest.mark.slow
def test_jobs_as_table_json_and_csv(capsys, finished_db):
    code, table, _ = run(capsys, "--database", finished_db, "jobs")
    assert code == 0
    header = table.splitlines()[0].split()
    assert header == [
        "job_key",
        "provider",
        "mode",
        "batch_id",
        "state",
        "raw",
        "total",
        "done",
        "failed",
        "submitted",
        "terminal",
        "note",
        "stuck",
        "collect_error",
        "remote",
    ]
    assert "COMPLETED" in table.splitlines()[2]

    code, out, _ = run(capsys, "--database", finished_db, "jobs", "--format", "json", "--task", "ticket_triage")
    assert code == 0
    jobs = json.loads(out)
    assert [list(j) for j in jobs] == [JOB_FIELDS]
    assert jobs[0]["task_id"] == TASK_ID and jobs[0]["state"] == "COMPLETED" and jobs[0]["request_total"] == 50
    assert jobs[0]["cancel_requested"] is False and jobs[0]["terminal_at"].startswith("20")
    # Where the job went and the structured-output form its lines used, recorded by submit_pending.
    assert (jobs[0]["endpoint_mode"], jobs[0]["request_options"]) == ("emulator", {"response_format": "json_schema"})
    assert jobs[0]["endpoint_url"].startswith("http://127.0.0.1:")
    # Collected with the task's retention on: the provider-side files are gone.
    assert (jobs[0]["remote_files"], jobs[0]["remote_delete_error"]) == ("deleted", None)

    code, out, _ = run(capsys, "--database", finished_db, "jobs", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert out.splitlines()[0] == ",".join(JOB_FIELDS)
    assert len(rows) == 1 and rows[0]["request_completed"] == "50" and rows[0]["cancel_requested"] == "false"
    assert json.loads(rows[0]["request_options"]) == {"response_format": "json_schema"}


@pytest.mark.slow
def test_report_table_is_the_reconciliation_table(capsys, finished_db):
    from batch_assets.pipeline.report.partition_tables import reconciliation_table
    from batch_assets.pipeline.settle.reconcile import reconcile

    code, out, _ = run(capsys, "--database", finished_db, "report")
    assert code == 0
    table = reconciliation_table([reconcile(Warehouse.at(finished_db), TASK_ID)]) + "\n"
    assert out.startswith(table)
    gate = out[len(table) :].split("\n")  # then sensitive data and cost per partition
    assert gate[1].split() == [
        "task_id",
        "pii_redacted",
        "pii_blocked",
        "cost_est",
        "cost_actual",
        "currency",
        "thinking_tokens",
        "cached_input_tokens",
    ]
    assert gate[3].split()[0] == TASK_ID and gate[3].split()[-3:] == ["USD", "0", "0"]


@pytest.mark.slow
def test_report_html_writes_each_partitions_page_and_names_it(capsys, finished_db, tmp_path, monkeypatch):
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(tmp_path))
    page = tmp_path / "reports" / f"{TASK_ID}.html"
    code, out, _ = run(capsys, "--database", finished_db, "report", "--html")
    assert code == 0 and out.splitlines()[-1] == f"report: {page}"
    assert page.read_text(encoding="utf-8").count("<svg") == 2
    code, out, err = run(capsys, "--database", finished_db, "report", "--format", "json", "--html")
    assert code == 0 and [r["task_id"] for r in json.loads(out)] == [TASK_ID]  # stdout stays JSON
    assert f"report: {page}" in err


@pytest.mark.slow
def test_report_json_has_one_object_per_partition_with_every_outcome(capsys, finished_db):
    code, out, _ = run(capsys, "--database", finished_db, "report", "--format", "json")
    assert code == 0
    [row] = json.loads(out)
    assert row["task_id"] == TASK_ID and row["balanced"] is True and row["problems"] == []
    assert (row["items"], row["rejected"], row["quarantined"], row["applied"], row["stale"]) == (58, 2, 8, 50, 0)
    assert row["final_failed"] == {
        c: 0
        for c in (
            "validation_error",
            "rate_or_capacity_error",
            "content_policy_error",
            "internal_error",
            "parse_error",
            "expired",
            "canceled",
            "provider_canceled",
            "missing_result",
            "unmatched_result",
            "account_error",
        )
    }
    assert (row["retried"], row["max_attempt"], row["in_flight"], row["retry_pending"], row["unresolved"]) == (
        0,
        1,
        0,
        0,
        0,
    )
    assert (row["canceled"], row["compliance_held"], row["check"]) == (0, 0, "passed")

    code, out, _ = run(capsys, "--database", finished_db, "report", "--format", "csv", "--task", TASK_ID)
    assert code == 0
    [csv_row] = list(csv.DictReader(io.StringIO(out)))
    assert csv_row["balanced"] == "true" and csv_row["items"] == "58" and csv_row["final_failed_parse_error"] == "0"
    assert "final_failed" not in csv_row


@pytest.mark.slow
def test_an_unbalanced_report_exits_0_names_it_and_keeps_stdout_parseable(capsys, finished_db, tmp_path):
    db = tmp_path / "warehouse.duckdb"
    shutil.copy(finished_db, db)
    import duckdb

    with duckdb.connect(str(db)) as conn:
        conn.execute(
            "DELETE FROM ledger.applied_result WHERE custom_id = (SELECT min(custom_id) FROM ledger.applied_result)"
        )
    code, out, _ = run(capsys, "--database", db, "report")
    assert code == 0
    assert f"NOT DONE {TASK_ID}: failed: unbalanced: applied 49" in out
    code, out, err = run(capsys, "--database", db, "report", "--format", "json")
    assert code == 0
    [row] = json.loads(out)
    assert row["balanced"] is False and row["applied"] == 49 and row["problems"] and row["check"] == "failed"
    assert f"NOT DONE {TASK_ID}: failed: unbalanced: applied 49" in err


def test_the_renderer_writes_every_format_from_one_field_list():
    fields = [
        Field("name"),
        Field("n", header="count"),
        Field("ok", cell=lambda v: "yes" if v else "NO"),
        Field("note", in_table=False),
    ]
    records = [{"name": "a", "n": 1, "ok": True, "note": None}, {"name": "b", "n": None, "ok": False, "note": "x,y"}]
    out = io.StringIO()
    render(records, fields, "table", out)
    assert out.getvalue().splitlines()[0].split() == ["name", "count", "ok"]
    assert out.getvalue().splitlines()[3].split() == ["b", "NO"]
    out = io.StringIO()
    render(records, fields, "json", out)
    assert json.loads(out.getvalue()) == records
    out = io.StringIO()
    render(records, fields, "csv", out)
    assert out.getvalue() == 'name,n,ok,note\na,1,true,\nb,,false,"x,y"\n'


# --- runtime errors: one line, exit 1 ------------------------------------------------------------------


def test_a_missing_warehouse_is_one_line_with_the_fix(capsys, tmp_path):
    missing = tmp_path / "nowhere" / "warehouse.duckdb"
    for command in (
        ["jobs"],
        ["report", "--format", "json"],
        ["sql", "SELECT 1"],
        ["export", TASK_ID, "--out", "x"],
        ["cancel", TASK_ID],
    ):
        code, out, err = run(capsys, "--database", missing, *command)
        assert code == 1 and out == ""
        assert_one_line_error(err, f"no warehouse at {missing}", "batch-assets demo", "BATCH_ASSETS_DATABASE")
    assert not missing.parent.exists()


def test_the_real_console_entry_point_prints_no_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "BATCH_ASSETS_DATABASE": str(tmp_path / "none.duckdb")}
    env.pop("BATCH_ASSETS_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "batch_assets.cli", "jobs", "--task", "bench"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert_one_line_error(done.stderr, "no warehouse at", "batch-assets demo")


def test_a_warehouse_without_ledger_tables(capsys, tmp_path):
    import duckdb

    db = tmp_path / "empty.duckdb"
    duckdb.connect(str(db)).close()
    code, _, err = run(capsys, "--database", db, "report")
    assert code == 1
    assert_one_line_error(err, "holds no batch work yet", "batch-assets demo")


@pytest.mark.slow
def test_unknown_tasks(capsys, finished_db):
    code, out, err = run(capsys, "--database", finished_db, "report", "--task", "nosuch", "--format", "json")
    assert (code, out) == (1, "")
    assert_one_line_error(err, "no batch task matches 'nosuch'", f"known tasks: ticket_triage ({TASK_ID})")
    code, _, err = run(capsys, "--database", finished_db, "export", "ticket_triage", "--out", "x.csv")
    assert code == 1
    assert_one_line_error(err, "no batch task 'ticket_triage'", TASK_ID)
    code, _, err = run(capsys, "--database", finished_db, "cancel", "nosuch")
    assert code == 1
    assert_one_line_error(err, "no provider job or task_id 'nosuch'", "batch-assets jobs")


@pytest.mark.slow
@pytest.mark.parametrize(
    "query, expected",
    [
        ("SELEC 1", "SQL error: Parser Error: syntax error"),
        ("SELECT * FROM no_such_table", "SQL error: Catalog Error"),
        ("DELETE FROM support_tickets", "read-only"),
    ],
)
def test_sql_errors_are_one_line(capsys, finished_db, query, expected):
    code, out, err = run(capsys, "--database", finished_db, "sql", query)
    assert code == 1 and out == ""
    assert_one_line_error(err, "batch-assets sql:", expected)


@pytest.mark.slow
def test_sql_prints_rows_and_says_when_it_cut_them(capsys, finished_db):
    code, out, err = run(
        capsys, "--database", finished_db, "sql", "SELECT range AS n, NULL AS x FROM range(5)", "--limit", "2"
    )
    assert code == 0
    assert out.splitlines()[2].split() == ["0", "NULL"] and len(out.splitlines()) == 4
    assert "first 2 rows" in err


@pytest.mark.slow
def test_a_locked_warehouse_is_one_line(capsys, finished_db, tmp_path):
    db = tmp_path / "warehouse.duckdb"
    shutil.copy(finished_db, db)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time\nc = duckdb.connect(sys.argv[1])\nprint('ok', flush=True)\ntime.sleep(60)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ok"
        started = time.monotonic()
        code, _, err = run(capsys, "--database", db, "--lock-timeout", "0.3", "jobs")
        assert time.monotonic() - started < 20
        assert code == 1
        assert_one_line_error(err, "is locked by process", "--lock-timeout")
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_an_unexpected_error_is_one_line_unless_debugging(capsys, finished_db, monkeypatch):
    import batch_assets.cli.report

    def boom(rec):
        raise RuntimeError("something broke\nsecond line")

    monkeypatch.setattr(batch_assets.cli.report, "record", boom)
    code, _, err = run(capsys, "--database", finished_db, "report")
    assert code == 1
    assert_one_line_error(err, "unexpected error: RuntimeError: something broke", "--debug", "BATCH_ASSETS_DEBUG=1")
    code, _, err = run(capsys, "--database", finished_db, "report", "--debug")
    assert code == 1 and "Traceback" in err and "RuntimeError" in err
    monkeypatch.setenv("BATCH_ASSETS_DEBUG", "1")
    assert "Traceback" in run(capsys, "--database", finished_db, "report")[2]


# --- dev -----------------------------------------------------------------------------------------------


@pytest.fixture
def nothing_starts(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"started a process: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "call", refuse)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("taken_flag, name", [("--ui-port", "Dagster UI"), ("--emulator-port", "emulator")])
def test_dev_with_a_taken_port_names_it_and_starts_nothing(capsys, tmp_path, nothing_starts, taken_flag, name):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        ports = {"--ui-port": _free_port(), "--emulator-port": _free_port(), taken_flag: taken}
        code, out, err = run(capsys, "dev", "--data-dir", tmp_path / "data", *(x for kv in ports.items() for x in kv))
    assert code == 1 and out == ""
    assert_one_line_error(err, f"port {taken} ({name}) already in use", taken_flag, "nothing was started")
    assert not (tmp_path / "data").exists()


def test_dev_refuses_one_port_for_both(capsys, nothing_starts):
    code, _, err = run(capsys, "dev", "--ui-port", "4000", "--emulator-port", "4000")
    assert code == 2
    assert_one_line_error(err, "both 4000")


# --- cancel --------------------------------------------------------------------------------------------

SLOW_EMULATOR = {**FAST_EMULATOR, "queue_delay_s": 60.0}


def _submit(wh: Warehouse, task, adapter, per_shard: int | None = None) -> None:
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending

    if per_shard:
        task = dataclasses.replace(task, limits=dataclasses.replace(task.limits, max_requests_per_shard=per_shard))
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    submit_pending(wh, task, DAY1, adapter)


def _ledger_jobs(wh: Warehouse) -> dict[str, tuple]:
    with wh.connect(read_only=True) as conn:
        return {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT job_key, cancel_requested, terminal_at FROM ledger.provider_job ORDER BY job_key"
            ).fetchall()
        }


@pytest.fixture
def cli_emulator(tmp_path, monkeypatch):
    """Starts an emulator with the given knobs and points the CLI's provider clients at it."""
    import contextlib

    with contextlib.ExitStack() as stack:

        def start(**knobs):
            emu = stack.enter_context(running_emulator(tmp_path / "emulator", **knobs))
            monkeypatch.setenv("BATCH_ASSETS_EMULATOR_URL", emu.base_url)
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)
            return OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emu.openai_base_url, max_retries=0))

        yield start


@pytest.mark.slow
def test_cancel_goes_on_after_an_error_on_one_job(capsys, seeded_copy, ticket_task, cli_emulator):
    wh = seeded_copy
    _submit(wh, ticket_task, cli_emulator(**SLOW_EMULATOR), per_shard=20)
    jobs = sorted(_ledger_jobs(wh))
    assert len(jobs) == 3
    with wh.connect() as conn:  # the provider has never heard of this one
        conn.execute("UPDATE ledger.provider_job SET provider_batch_id = 'batch_unknown' WHERE job_key = ?", [jobs[1]])
    code, out, err = run(capsys, "--database", wh.database, "cancel", TASK_ID)
    assert code == 1
    assert out.splitlines() == [
        f"{jobs[0]}: cancel requested (cancelling)",
        f"{jobs[2]}: cancel requested (cancelling)",
    ]
    assert err.splitlines()[0].startswith(f"{jobs[1]}: cancel failed: provider API error: NotFoundError")
    assert "1 of 3 job(s) went wrong" in err and "Traceback" not in err
    ledger = _ledger_jobs(wh)
    assert [ledger[j][0] for j in jobs] == [True, False, True]


@pytest.mark.slow
def test_cancel_reports_a_batch_finished_since_the_last_poll(capsys, seeded_copy, ticket_task, cli_emulator):
    wh = seeded_copy
    adapter = cli_emulator(**FAST_EMULATOR)
    _submit(wh, ticket_task, adapter)
    [(job_key, (cancel_requested, terminal_at))] = _ledger_jobs(wh).items()
    assert terminal_at is None
    with wh.connect(read_only=True) as conn:
        batch_id = conn.execute("SELECT provider_batch_id FROM ledger.provider_job").fetchone()[0]
    deadline = time.monotonic() + 20
    while not adapter.poll(
        JobRef(batch_id), JobState.SUBMITTED
    ).terminal:  # finished at the provider, not yet polled into the ledger
        assert time.monotonic() < deadline
        time.sleep(0.05)
    code, out, err = run(capsys, "--database", wh.database, "cancel", job_key)
    assert (code, err) == (0, "")
    assert out.strip() == f"{job_key}: already completed, nothing to cancel (the next poll collects it)"
    assert _ledger_jobs(wh)[job_key] == (False, None)


@pytest.mark.slow
def test_cancel_says_when_the_provider_cancelled_but_the_ledger_was_not_updated(
    capsys, seeded_copy, ticket_task, cli_emulator, monkeypatch
):
    import batch_assets.ledger.jobs

    wh = seeded_copy
    _submit(wh, ticket_task, cli_emulator(**SLOW_EMULATOR))
    [job_key] = _ledger_jobs(wh)

    def locked(*args, **kwargs):
        raise CliError(f"warehouse {wh.database} is locked by process 1")

    monkeypatch.setattr(batch_assets.ledger.jobs, "record_snapshot", locked)
    code, out, err = run(capsys, "--database", wh.database, "cancel", job_key)
    assert code == 1 and out == ""
    assert err.splitlines()[0] == (
        f"{job_key}: cancel requested at the provider (cancelling), but the "
        f"ledger was not updated: warehouse {wh.database} is locked by process 1; "
        "the next poll records it"
    )
