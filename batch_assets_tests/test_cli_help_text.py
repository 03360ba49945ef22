"""Every verb's --help reads as text a user can act on: no Python reprs of internal objects."""

from __future__ import annotations

import argparse
import re

import pytest

from batch_assets.cli import main
from batch_assets.cli.parser import build_parser

REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>|_MISSING_TYPE")


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
