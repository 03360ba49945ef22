"""Every `batch-assets` subcommand: its --help, a happy path and bad input (exit non-zero with one line
naming the fix, no traceback), and what the output looks like on a terminal and elsewhere.

On a terminal (forced here with FORCE_COLOR=1, as rich reads it, or BATCH_ASSETS_PROGRESS=1) tables
are drawn with rich and long work shows progress bars on stderr; piped, the output is plain text
without ANSI codes; json and csv are never decorated. Runs against a real DuckDB ledger holding one
finished partition (`finished_db`) and the local emulator where a command needs a provider.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from batch_assets import progress
from batch_assets.cli import demo as cli_demo

from .cli_calls import TASK_ID, assert_one_line_error, run
from .conftest import TERMINAL_ENV

PROJECT_ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[")
BAR = "━"  # what rich draws a progress bar with
DB = object()  # stands for `--database <finished_db>` in the argument lists below


def _argv(argv, db: Path) -> list:
    return [x for a in argv for x in ((["--database", db]) if a is DB else [a])]


# --- --help ------------------------------------------------------------------------------------------------

HELP = [
    ("demo",),
    ("dev",),
    ("emulator",),
    ("bench",),
    ("soak",),
    ("seed",),
    ("jobs",),
    ("jobs", "adopt"),
    ("jobs", "abandon"),
    ("report",),
    ("export",),
    ("sql",),
    ("retry",),
    ("cancel",),
]


@pytest.mark.parametrize("command", HELP, ids=" ".join)
def test_every_command_has_a_help(capsys, command):
    code, out, err = run(capsys, *command, "--help")
    assert code == 0 and err == ""
    assert out.startswith(f"usage: batch-assets {' '.join(command)}")
    assert not ANSI.search(out)


def test_demo_help_names_every_task_it_runs(capsys):
    from batch_assets.demo.runner import DEMO_TASKS

    assert cli_demo.DEMO_TASKS == DEMO_TASKS
    out = " ".join(run(capsys, "demo", "--help")[1].split())
    assert "five demo tasks" in out and len(DEMO_TASKS) == 5
    for task in DEMO_TASKS:
        assert task in out
    for provider in ("OpenAI", "Anthropic", "Gemini", "DashScope"):
        assert provider in out


# --- bad input: exit non-zero, one line naming the fix -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, code, expected",
    [
        (["seed", "--days", "0"], 2, ["--days must be at least 1"]),
        (["seed", "--days", "x"], 2, ["invalid int value: 'x'", "batch-assets seed --help"]),
        ([DB, "jobs", "--format", "yaml"], 2, ["invalid choice: 'yaml'"]),
        ([DB, "jobs", "adopt", "nosuch"], 2, ["required: batch_id", "batch-assets jobs adopt --help"]),
        ([DB, "jobs", "adopt", "nosuch", "batch_1"], 1, ["no provider job 'nosuch'", "batch-assets jobs"]),
        ([DB, "jobs", "abandon", "nosuch"], 1, ["no provider job 'nosuch'", "batch-assets jobs"]),
        ([DB, "jobs", "abandon", f"{TASK_ID}_a1_s0000:job1"], 1, ["has provider batch", "batch-assets cancel"]),
        ([DB, "report", "--format", "xml"], 2, ["invalid choice: 'xml'", "table", "json", "csv"]),
        ([DB, "export", TASK_ID], 2, ["required: --out"]),
        ([DB, "export", "ticket_triage_2026", "--out", "x.csv"], 1, ["no batch task 'ticket_triage_2026'", TASK_ID]),
        ([DB, "sql"], 2, ["required: query"]),
        ([DB, "sql", "SELECT 1", "--limit", "0"], 2, ["--limit must be at least 1"]),
        ([DB, "retry", "nosuch_20261120"], 1, ["no batch task 'nosuch_20261120'", "batch-assets report"]),
        ([DB, "retry", TASK_ID, "--class", "bogus"], 2, ["invalid choice: 'bogus'"]),
        ([DB, "cancel"], 2, ["required: target"]),
        ([DB, "cancel", "nosuch"], 1, ["no provider job or task_id 'nosuch'", "batch-assets jobs"]),
        (["demo", "--task", "nosuch"], 2, ["invalid choice: 'nosuch'"]),
        ([DB, "demo"], 2, ["--database does not apply to `demo`", "--data-dir"]),
        (["dev", "--emulator-port", "0"], 2, ["outside 1-65535"]),
        ([DB, "--lock-timeout", "-1", "jobs"], 2, ["must be 0 or more"]),
    ],
)
def test_bad_input_is_one_line_naming_the_fix(capsys, finished_db, tmp_path, monkeypatch, argv, code, expected):
    monkeypatch.chdir(tmp_path)  # nothing a failed command might write lands in the repository
    got, out, err = run(capsys, *_argv(argv, finished_db))
    assert got == code and out == ""
    assert_one_line_error(err, *expected)
    assert not list(tmp_path.iterdir())


def test_bench_and_soak_refuse_bad_flags_before_running(capsys, no_benchmark):
    code, out, err = run(capsys, "bench", "--items", "0")
    assert code == 2 and out == "" and "--items must be at least 1" in err and "Traceback" not in err
    code, _, err = run(capsys, "soak", "--days", "x")
    assert code == 2 and "invalid int value: 'x'" in err and "Traceback" not in err


@pytest.fixture
def no_benchmark(monkeypatch):
    import batch_assets.bench.runner

    def refuse(*args, **kwargs):
        raise AssertionError("the benchmark was started")

    monkeypatch.setattr(batch_assets.bench.runner, "run_benchmark", refuse)


def test_the_emulator_on_a_taken_port_names_it_and_serves_nothing(capsys, tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, out, err = run(capsys, "emulator", "--port", port, "--state-dir", tmp_path / "emu")
    assert code == 1 and out == ""
    assert_one_line_error(err, f"port {port} already in use", "--port N", "nothing was started")


# --- happy paths ------------------------------------------------------------------------------------------


def test_seed_creates_the_warehouse_and_says_what_it_wrote(capsys, tmp_path):
    db = tmp_path / "new" / "warehouse.duckdb"
    db.parent.mkdir()
    code, out, err = run(capsys, "--database", db, "seed", "--days", "1")
    assert (code, err) == (0, "")
    assert re.fullmatch(
        rf"\d+ rows in support_tickets, \d+ rows in kb_articles, \d+ rows in product_reviews "
        rf"\({re.escape(str(db))}\)\n",
        out,
    )


@pytest.mark.slow
def test_export_writes_every_item_for_a_spreadsheet(capsys, finished_db, tmp_path):
    out_file = tmp_path / "triage.csv"
    code, out, err = run(capsys, "--database", finished_db, "export", TASK_ID, "--out", out_file)
    assert (code, err) == (0, "")
    assert out == f"wrote 58 rows to {out_file} (UTF-8 with BOM)\n"
    data = out_file.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"))))
    assert len(rows) == 58 and {"custom_id", "outcome", "answer", "input_text"} <= set(rows[0])
    assert not out_file.with_suffix(".csv.part").exists()


@pytest.mark.slow
def test_export_gives_a_retried_item_one_row_with_its_latest_attempt(capsys, finished_db, tmp_path):
    """An item answered twice (attempts 1 and 2) is one row holding attempt 2's answer; other
    partitions' rows in the ledger change nothing."""
    import shutil

    from batch_assets.ledger.history import copy_partition_rows
    from batch_assets.ledger.warehouse import Warehouse

    from .profiles import EARLIER_DAYS

    db = tmp_path / "warehouse.duckdb"
    shutil.copy(finished_db, db)
    with Warehouse.at(db, tmp_path / "data").connect() as conn:
        (item,) = conn.execute(
            "SELECT min(custom_id) FROM ledger.parsed_result WHERE task_id = ?", [TASK_ID]
        ).fetchone()
        conn.execute(
            """INSERT INTO ledger.parsed_result SELECT * REPLACE (attempt + 1 AS attempt,
                            '{"category": "latest"}' AS output_json) FROM ledger.parsed_result WHERE custom_id = ?""",
            [item],
        )
        copy_partition_rows(conn, "2026-11-20", EARLIER_DAYS)
    out_file = tmp_path / "triage.csv"
    code, out, err = run(capsys, "--database", db, "export", TASK_ID, "--out", out_file)
    assert (code, err) == (0, "") and out == f"wrote 58 rows to {out_file} (UTF-8 with BOM)\n"
    rows = list(csv.DictReader(io.StringIO(out_file.read_bytes().decode("utf-8-sig"))))
    assert len(rows) == len({r["custom_id"] for r in rows}) == 58
    (retried,) = [r for r in rows if r["custom_id"] == item]
    assert json.loads(retried["answer"]) == {"category": "latest"}


@pytest.mark.slow
def test_retry_dry_run_counts_and_sends_nothing(capsys, finished_db):
    code, out, err = run(capsys, "--database", finished_db, "retry", TASK_ID, "--dry-run")
    assert (code, err) == (0, "")
    assert out == f"{TASK_ID}: would send 0 item(s) again (none due)\n"


@pytest.mark.slow
def test_cancel_of_a_finished_task_has_nothing_to_do(capsys, finished_db):
    code, out, err = run(capsys, "--database", finished_db, "cancel", TASK_ID)
    assert (code, err) == (0, "")
    assert out == f"nothing to cancel: no provider job of {TASK_ID!r} is still running\n"


def test_bench_through_the_cli_reports_progress_per_step(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BATCH_ASSETS_PROGRESS", "1")  # bars although stderr is captured
    code, out, err = run(capsys, "bench", "--items", "200", "--workdir", tmp_path)
    assert code == 0, err
    assert "stage: reconcile" in out and not ANSI.search(out)
    from batch_assets.bench.runner import STAGES

    steps = 2 * len(STAGES) + 3  # a floor and a stage per stage, the source, the provider outputs, the check
    assert BAR in err and f"{steps}/{steps} steps" in err
    assert (tmp_path / "bench_report.json").is_file()


@pytest.mark.slow
def test_demo_of_one_task_runs_to_balanced_with_progress_bars(capsys, tmp_path, monkeypatch):
    # The demo points its own process at its warehouse and emulator: keep that inside this test.
    for name in (
        "BATCH_ASSETS_DATABASE",
        "BATCH_ASSETS_DATA_DIR",
        "BATCH_ASSETS_EMULATOR_URL",
        "DAGSTER_HOME",
        "BATCH_ASSETS_PROVIDER_MODE",
    ):
        monkeypatch.setenv(name, "")
    for provider in ("OPENAI", "ANTHROPIC", "GEMINI", "DASHSCOPE"):  # the demo drops these: restore them after
        monkeypatch.delenv(f"BATCH_ASSETS_{provider}_MODE", raising=False)
        monkeypatch.delenv(f"{provider}_BASE_URL", raising=False)
    monkeypatch.setenv("BATCH_ASSETS_PROGRESS", "1")
    code, out, err = run(capsys, "demo", "--data-dir", tmp_path / "data", "--task", "ticket_triage")
    assert code == 0, out + err
    assert not ANSI.search(out)  # stdout is not the terminal: plain tables
    partitions = [line.split() for line in out.splitlines() if line.startswith("ticket_triage_2026112")]
    assert [p[0] for p in partitions[:2]] == ["ticket_triage_20261120", "ticket_triage_20261121"]
    assert all("passed" in p for p in partitions[:2])
    assert "kb_embeddings" not in out
    assert BAR in err and "demo: submit" in err and "2/2 partitions" in err and "demo: provider jobs collected" in err


# --- terminal or not ---------------------------------------------------------------------------------------


def _cli(*argv, env_extra: dict | None = None, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in TERMINAL_ENV and not k.startswith("BATCH_ASSETS_")}
    env.update({"PYTHONPATH": str(PROJECT_ROOT), **(env_extra or {})})
    return subprocess.run(
        [sys.executable, "-m", "batch_assets.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.slow
def test_piped_output_is_plain_text_without_ansi_codes(finished_db, tmp_path):
    """Real pipes (not a terminal): the plain aligned tables scripts read, no bars, no escape codes."""
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.pipeline.report.partition_tables import reconciliation_table
    from batch_assets.pipeline.settle.reconcile import reconcile

    report = _cli("--database", finished_db, "report", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith(reconciliation_table([reconcile(Warehouse.at(finished_db), TASK_ID)]) + "\n")
    export = _cli("--database", finished_db, "export", TASK_ID, "--out", tmp_path / "x.csv", cwd=tmp_path)
    jobs = _cli("--database", finished_db, "jobs", cwd=tmp_path)
    for done in (report, export, jobs):
        assert done.returncode == 0, done.stderr
        assert not ANSI.search(done.stdout + done.stderr) and BAR not in done.stderr
    assert jobs.stdout.splitlines()[1].startswith("-------")


@pytest.mark.slow
def test_a_terminal_gets_rich_tables_and_progress_bars(capsys, finished_db, tmp_path, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats stdout and stderr as terminals
    code, out, _ = run(capsys, "--database", finished_db, "report")
    assert code == 0 and ANSI.search(out)
    assert "─" in out and "-----" not in out  # rich's rule under the header, not the plain dashes
    assert TASK_ID in out and "passed" in out
    code, out, err = run(capsys, "--database", finished_db, "export", TASK_ID, "--out", tmp_path / "x.csv")
    assert code == 0 and BAR in err and f"{TASK_ID}: export" in err
    # Switched off explicitly: no bars even on a terminal.
    monkeypatch.setenv("BATCH_ASSETS_PROGRESS", "0")
    code, out, err = run(capsys, "--database", finished_db, "export", TASK_ID, "--out", tmp_path / "y.csv")
    assert code == 0 and err == ""


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_json_and_csv_are_never_decorated(capsys, finished_db, monkeypatch, fmt):
    monkeypatch.setenv("FORCE_COLOR", "1")
    for command in ("jobs", "report"):
        code, out, _ = run(capsys, "--database", finished_db, command, "--format", fmt)
        assert code == 0 and not ANSI.search(out)
        rows = json.loads(out) if fmt == "json" else list(csv.DictReader(io.StringIO(out)))
        assert [r["task_id"] for r in rows] == [TASK_ID]


# --- the progress interface the library reports through ---------------------------------------------------


class _RecordedBar:
    def __init__(self, record: list):
        self.record = record

    def advance(self, amount=1):
        self.record[3] += amount

    def update(self, *, completed=None, total=None, description=None):
        if completed is not None:
            self.record[3] = completed
        if total is not None:
            self.record[1] = total


class Recorder:
    """A reporter that keeps what it is told: [description, total, unit, advanced, finished, keep] per bar."""

    def __init__(self):
        self.bars: list[list] = []

    def start(self, description, total, unit, keep):
        self.bars.append([description, total, unit, 0, False, keep])
        return _RecordedBar(self.bars[-1])

    def finish(self, bar):
        bar.record[4] = True


@pytest.mark.slow
def test_the_library_reports_progress_only_to_an_installed_reporter(finished_db, tmp_path):
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.pipeline.report.export import export_results

    wh = Warehouse.at(finished_db)
    assert isinstance(progress.current(), progress.NullReporter)
    export_results(wh, TASK_ID, tmp_path / "quiet.csv")  # no reporter: nothing to see, nothing breaks
    recorder = Recorder()
    with progress.reporting(recorder):
        assert progress.current() is recorder
        export_results(wh, TASK_ID, tmp_path / "loud.csv")
    assert isinstance(progress.current(), progress.NullReporter)
    size = (tmp_path / "loud.csv").stat().st_size - 3  # without the BOM
    assert recorder.bars == [
        [f"{TASK_ID}: export (query)", None, "rows", 58, True, True],
        [f"{TASK_ID}: export (write loud.csv)", size, "bytes", size, True, True],
    ]


@pytest.mark.slow
def test_downloads_and_ingest_report_jobs_and_bytes(seeded_copy, ticket_task, adapter, wait_for_jobs):
    from batch_assets.pipeline.collect.ingest import collect_raw_results
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending

    from .conftest import DAY1

    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    submit_pending(wh, ticket_task, DAY1, adapter)
    wait_for_jobs(wh, adapter)
    recorder = Recorder()
    with progress.reporting(recorder):
        summary = collect_raw_results(wh, ticket_task, DAY1, adapter)
    by_name = {b[0]: b for b in recorder.bars}
    task_id = ticket_task.task_id(DAY1)
    assert by_name[f"{task_id}: download results"][1:] == [1, "jobs", 1, True, False]
    with wh.connect(read_only=True) as conn:
        files = dict(conn.execute("SELECT path, byte_count FROM ledger.raw_file").fetchall())
    downloads = [b for b in recorder.bars if b[0].startswith("download ")]
    assert len(downloads) == summary.downloaded_files == len(files)
    assert all(
        b[2] == "bytes" and b[3] == files[str(wh.data_dir / "raw" / task_id / b[0][len("download ") :])] and b[4]
        for b in downloads
    )
    total = sum(files.values())
    assert by_name[f"{task_id}: ingest results"][1:] == [total, "bytes", total, True, False]


def test_library_modules_report_progress_without_rich():
    code = (
        "import sys\nimport batch_assets.progress, batch_assets.pipeline.report.export, batch_assets.providers.files\n"
        "print('rich' in sys.modules)"
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
    assert done.stdout.strip() == "False"
