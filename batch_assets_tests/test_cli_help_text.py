"""Every verb's --help reads as text a user can act on: no Python reprs of internal objects, and a
default shown is a value the user could type (an option unset by default shows none)."""

from __future__ import annotations

import argparse
import re

import pytest

from batch_assets.cli import main
from batch_assets.cli.parser import build_parser

REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>|_MISSING_TYPE|default: None\b")


def _verbs() -> list[str]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


@pytest.mark.parametrize("verb", _verbs())
def test_help_text_has_no_internal_reprs(verb, capsys):
    try:
        code = main([verb, "--help"])
    except SystemExit as done:  # a passthrough verb's own parser exits
        code = done.code
    out = capsys.readouterr().out
    assert code == 0 and verb in out
    assert not REPR.search(out), REPR.search(out).group(0)


def test_emulator_help_shows_the_real_defaults(capsys):
    try:
        main(["emulator", "--help"])
    except SystemExit:
        pass
    out = " ".join(capsys.readouterr().out.split())
    assert "--port PORT port on 127.0.0.1 (default: 8765)" in out
    assert "--queue-delay-s QUEUE_DELAY_S validating -> in_progress (default: 2.0)" in out
    assert "unset: the batch's own completion_window --" in out  # no default shown for an unset knob
