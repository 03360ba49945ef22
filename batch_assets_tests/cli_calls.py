"""Calling the `batch-assets` command line in process, shared by the CLI test modules."""

from __future__ import annotations

from batch_assets.cli import main

# The task of the `finished_db` fixture's one partition (conftest.py).
TASK_ID = "ticket_triage_20261120"


def run(capsys, *argv) -> tuple[int, str, str]:
    """`main(argv)` in process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, *expected: str) -> None:
    """stderr is one line, no traceback, holding every expected text."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert "Traceback" not in err
    for text in expected:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"
