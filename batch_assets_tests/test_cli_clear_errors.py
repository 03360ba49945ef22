"""Errors that name their cause (issue 43, item 4), through the real command line: a YAML syntax error
in a task file names the file and the line, a bad $BATCH_ASSETS_PARTITION_START names the variable
and the expected format, task-file errors are reported as such, and `report --task` / `jobs --task`
with an unknown task exit non-zero listing the known tasks. Each is one line on stderr, no traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from batch_assets.cli import main
from batch_assets.ledger.tasks import upsert_frozen_task
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.spec import resolve
from batch_assets.spec.errors import SettingError
from batch_assets.spec.settings import DEFAULT_PARTITION_START, PARTITION_START_VAR, partition_start

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TICKET_TRIAGE = PROJECT_ROOT / "batch_assets" / "defs" / "tasks" / "ticket_triage"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR", "BATCH_ASSETS_DEBUG", PARTITION_START_VAR):
        monkeypatch.delenv(name, raising=False)


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert "Traceback" not in err and "unexpected error" not in err, err
    return lines[0]


@pytest.fixture
def tasks_root(tmp_path, monkeypatch) -> Path:
    """A tasks folder holding a copy of ticket_triage, which the CLI loads instead of defs/tasks."""
    root = tmp_path / "tasks"
    shutil.copytree(TICKET_TRIAGE, root / "ticket_triage")
    monkeypatch.setattr(resolve, "tasks_dir", lambda: root)
    return root


# --- task files --------------------------------------------------------------------------------------


def test_a_yaml_syntax_error_names_the_file_and_line(capsys, tasks_root, tmp_path):
    defs = tasks_root / "ticket_triage" / "defs.yaml"
    lines = defs.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  item_type:"))
    lines.insert(at + 1, "  tags: {domain: support")  # an unclosed flow mapping
    defs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # A --task naming the broken task fails with its error before the warehouse is opened.
    code, out, err = run(capsys, "--database", tmp_path / "none.duckdb", "report", "--task", "ticket_triage")
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith("batch-assets report: task file error: ")
    assert f"{defs}:" in line and "not valid YAML" in line
    assert "<unicode string>" not in line and "ParserError" not in line
    reported = int(line.split(f"{defs}:", 1)[1].split(":", 1)[0])
    assert at + 2 <= reported <= at + 3  # the line after the unclosed `{`, where the parser stopped


def test_an_invalid_field_is_a_task_file_error_on_one_line(capsys, tasks_root, tmp_path):
    defs = tasks_root / "ticket_triage" / "defs.yaml"
    text = defs.read_text(encoding="utf-8")
    defs.write_text(text.replace("  item_type: ticket", "  item_type: ticket\n  modle: gpt-4o-mini"), encoding="utf-8")
    code, out, err = run(capsys, "--database", tmp_path / "none.duckdb", "report", "--task", "ticket_triage")
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith(f"batch-assets report: task file error: {defs}: invalid task spec: ")
    assert "field 'modle'" in line and "Extra inputs are not permitted" in line


def test_a_missing_template_is_a_task_file_error(capsys, tasks_root, tmp_path):
    (tasks_root / "ticket_triage" / "prompt.v1.txt").unlink()
    code, _, err = run(capsys, "--database", tmp_path / "none.duckdb", "report", "--task", "ticket_triage")
    assert code == 1
    line = one_line(err)
    assert "task file error:" in line and "field 'prompt.template'" in line and "TaskSpecError" not in line


# --- $BATCH_ASSETS_PARTITION_START -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["2026-13-45", "2026-02-30", "20261101", "yesterday"])
def test_a_bad_partition_start_names_the_variable_and_the_format(value):
    with pytest.raises(SettingError) as info:
        partition_start({PARTITION_START_VAR: value})
    message = str(info.value)
    assert f"{PARTITION_START_VAR}={value!r}" in message and "YYYY-MM-DD" in message
    assert "does not match format" not in message


def test_the_partition_start_defaults_when_unset_or_empty():
    assert partition_start({}) == partition_start({PARTITION_START_VAR: " "}) == DEFAULT_PARTITION_START
    assert partition_start({PARTITION_START_VAR: "2026-12-01"}) == "2026-12-01"


def _cli(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **env}
    full_env.pop("BATCH_ASSETS_DEBUG", None)
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=full_env, cwd=tmp_path, timeout=120
    )


@pytest.mark.parametrize("command", ["demo", "dev"])
def test_demo_and_dev_refuse_a_bad_partition_start_before_starting_anything(tmp_path, command):
    data = tmp_path / "data"
    done = _cli(
        tmp_path, "-m", "batch_assets.cli", command, "--data-dir", str(data), **{PARTITION_START_VAR: "2026-13-45"}
    )
    assert done.returncode == 1 and done.stdout == ""
    line = one_line(done.stderr)
    assert line.startswith(f"batch-assets {command}: setting error: {PARTITION_START_VAR}='2026-13-45'")
    assert "YYYY-MM-DD" in line
    assert not data.exists()  # nothing seeded, nothing started


def test_loading_the_definitions_names_the_variable(tmp_path):
    """Dagster (dg dev, a run) loading the partitions with a bad value: the error it shows names it."""
    done = _cli(tmp_path, "-c", "import batch_assets.components.partitions", **{PARTITION_START_VAR: "2026-13-45"})
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("batch_assets.spec.errors.SettingError: ") and PARTITION_START_VAR in last
    assert "YYYY-MM-DD" in last and "does not match format" not in done.stderr


# --- --task with an unknown task ---------------------------------------------------------------------


@pytest.fixture
def two_tasks(tmp_path) -> Path:
    """A warehouse whose ledger knows three partitions of two tasks (frozen, nothing sent)."""
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    with wh.connect() as conn:
        for name, day in (
            ("ticket_triage", "2026-11-20"),
            ("ticket_triage", "2026-11-21"),
            ("kb_embeddings", "2026-11-20"),
        ):
            upsert_frozen_task(
                conn,
                task_id=f"{name}_{day.replace('-', '')}",
                task_name=name,
                partition_date=day,
                item_type="ticket",
                provider="openai",
                model="gpt-4o-mini",
                endpoint="/v1/chat/completions",
                prompt_version="v1",
                output_schema_version="v1",
                manifest_uri=str(tmp_path / "manifest.parquet"),
                manifest_version=1,
                total_items=0,
                est_input_tokens=0,
                est_output_tokens=0,
            )
    return wh.database


@pytest.mark.parametrize("command", ["report", "jobs"])
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_an_unknown_task_exits_non_zero_listing_the_known_tasks(capsys, two_tasks, command, fmt):
    code, out, err = run(capsys, "--database", two_tasks, command, "--task", "nosuch", "--format", fmt)
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith(f"batch-assets {command}: no batch task matches 'nosuch'")
    assert "known tasks:" in line
    assert "ticket_triage (ticket_triage_20261120, ticket_triage_20261121)" in line
    assert "kb_embeddings (kb_embeddings_20261120)" in line


@pytest.mark.parametrize("command", ["report", "jobs"])
def test_a_known_task_name_or_prefix_still_selects(capsys, two_tasks, command):
    code, out, err = run(capsys, "--database", two_tasks, command, "--task", "ticket_triage", "--format", "json")
    assert code == 0, err
    code, out, err = run(capsys, "--database", two_tasks, command, "--task", "kb_emb", "--format", "json")
    assert code == 0, err


def test_an_unknown_task_in_an_empty_warehouse_says_it_holds_none(capsys, tmp_path):
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    with wh.connect():
        pass
    code, out, err = run(capsys, "--database", wh.database, "report", "--task", "ticket_triage")
    assert code == 1 and out == ""
    assert "holds no batch task yet" in one_line(err)
