"""A command run beside `batch-assets dev` talks to the emulator that stack started, found through the
record dev writes in its data directory; a stale record (its process gone) is ignored."""

from __future__ import annotations

import json
import subprocess
import sys

from batch_assets import dev_stack
from batch_assets.resources import DEFAULT_EMULATOR_URL, emulator_url_from_env


def _env(monkeypatch, data_dir, emulator_url=None):
    monkeypatch.delenv("BATCH_ASSETS_EMULATOR_URL", raising=False)
    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(data_dir / "warehouse.duckdb"))
    monkeypatch.delenv("BATCH_ASSETS_DATA_DIR", raising=False)
    if emulator_url:
        monkeypatch.setenv("BATCH_ASSETS_EMULATOR_URL", emulator_url)


def test_the_running_stacks_emulator_is_found(tmp_path, monkeypatch):
    _env(monkeypatch, tmp_path)
    assert emulator_url_from_env() == DEFAULT_EMULATOR_URL
    dev_stack.record(tmp_path, emulator_url="http://127.0.0.1:9911", ui_url="http://127.0.0.1:3111")
    assert emulator_url_from_env() == "http://127.0.0.1:9911"


def test_an_explicit_url_wins_over_the_record(tmp_path, monkeypatch):
    dev_stack.record(tmp_path, emulator_url="http://127.0.0.1:9911", ui_url="http://127.0.0.1:3111")
    _env(monkeypatch, tmp_path, emulator_url="http://127.0.0.1:7777")
    assert emulator_url_from_env() == "http://127.0.0.1:7777"


def test_a_record_whose_process_is_gone_is_ignored(tmp_path, monkeypatch):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = {"pid": int(gone.stdout), "emulator_url": "http://127.0.0.1:9911", "ui_url": "x"}
    (tmp_path / dev_stack.STACK_FILE).write_text(json.dumps(stale))
    _env(monkeypatch, tmp_path)
    assert emulator_url_from_env() == DEFAULT_EMULATOR_URL


def test_clear_removes_only_this_process_record(tmp_path):
    dev_stack.record(tmp_path, emulator_url="http://127.0.0.1:9911", ui_url="x")
    dev_stack.clear(tmp_path)
    assert not (tmp_path / dev_stack.STACK_FILE).exists()
    other = {"pid": 1, "emulator_url": "http://127.0.0.1:9911", "ui_url": "x"}
    (tmp_path / dev_stack.STACK_FILE).write_text(json.dumps(other))
    dev_stack.clear(tmp_path)
    assert (tmp_path / dev_stack.STACK_FILE).exists()
