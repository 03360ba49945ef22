"""Tables on a terminal fit its width: the columns that do not fit are left out and named, `--wide`
keeps them all; a pipe or file always gets every column (stable for scripts)."""

from __future__ import annotations

import io
import re

from batch_assets.cli.console import FULL_WIDTH, fit_columns, print_table
from batch_assets.cli.parser import build_parser

HEADERS = ["task_id", *(f"figure_{i}" for i in range(12))]
ROWS = [["ticket_triage_20261120", *(f"{i * 1000:,}" for i in range(12))]]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _on_terminal(monkeypatch, columns: int, **kwargs) -> str:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich treats the stream as a terminal
    monkeypatch.setenv("COLUMNS", str(columns))
    out = io.StringIO()
    print_table(HEADERS, ROWS, out=out, **kwargs)
    return ANSI.sub("", out.getvalue())


def test_a_narrow_terminal_gets_the_columns_that_fit_and_their_names(monkeypatch):
    text = _on_terminal(monkeypatch, 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "task_id" in text and "figure_0" in text and "figure_11" not in lines[0]
    note = " ".join(text.split("more column(s)")[1].split())
    assert re.fullmatch(r"not shown: .*figure_10, figure_11 \(--wide shows them\)", note)


def test_wide_keeps_every_column(monkeypatch):
    text = _on_terminal(monkeypatch, 80, wide=True)
    assert "figure_11" in text.splitlines()[0] and "not shown" not in text
    token = FULL_WIDTH.set(True)
    try:
        assert "not shown" not in _on_terminal(monkeypatch, 80)
    finally:
        FULL_WIDTH.reset(token)


def test_a_pipe_gets_every_column(monkeypatch):
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "40")
    out = io.StringIO()
    print_table(HEADERS, ROWS, out=out)
    assert "figure_11" in out.getvalue() and "not shown" not in out.getvalue()


def test_the_first_column_always_stays():
    headers, rows, dropped = fit_columns(HEADERS, ROWS, 5)
    assert headers == ["task_id"] and rows == [["ticket_triage_20261120"]] and len(dropped) == 12


def test_empty_columns_go_first_and_the_verdict_stays():
    headers = ["task_id", "items", "held", "canceled", "unresolved", "check", "status"]
    rows = [["t_20261120", "1,190", "0", "0", "12", "failed", "NOT DONE"]]
    kept, _, dropped = fit_columns(headers, rows, 48)
    assert dropped == ["held", "canceled"] and kept == ["task_id", "items", "unresolved", "check", "status"]
    kept, _, dropped = fit_columns(headers, rows, 30)
    assert kept == ["task_id", "check", "status"]


def test_read_commands_take_wide():
    for argv in (["report", "--wide"], ["jobs", "--wide"], ["review", "list", "--wide"]):
        assert build_parser().parse_args(argv).wide is True
