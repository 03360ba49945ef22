"""The fast lane's guard (slow_guard.py): a test not marked slow that starts the emulator or a Dagster
instance, or asks for a fixture that does, fails; marked slow it passes; `-m "not slow"` skips it."""

from __future__ import annotations

import pytest

from .slow_guard import SLOW_FIXTURES

pytest_plugins = ["pytester"]

INNER = """
import dagster as dg
import pytest
import uvicorn


@pytest.fixture
def emulator():
    return None  # named like the real one, which starts the emulator


def test_plain():
    pass


def test_asks_for_the_emulator(emulator):
    pass


def test_builds_a_server():
    uvicorn.Server(uvicorn.Config(app=None))


def test_makes_a_dagster_instance():
    with dg.instance_for_test():
        pass


@pytest.mark.slow
def test_marked_asks_for_the_emulator(emulator):
    pass


@pytest.mark.slow
def test_marked_builds_a_server():
    uvicorn.Server(uvicorn.Config(app=None))
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts the emulator or Dagster\n")
    pytester.makepyfile(test_inner=INNER)
    return pytester.runpytest_inprocess("-p", "batch_assets_tests.slow_guard", "-p", "no:cacheprovider", *args)


def test_an_unmarked_test_that_starts_the_emulator_or_dagster_fails(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(passed=3, failed=2, errors=1)
    result.stdout.fnmatch_lines_random(
        [
            "*test_asks_for_the_emulator uses emulator but is not marked slow*",
            "*test_builds_a_server starts an HTTP server (the emulator) but is not marked slow*",
            "*test_makes_a_dagster_instance starts a Dagster instance but is not marked slow*",
        ]
    )


def test_the_fast_lane_deselects_what_is_marked_slow(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "-m", "not slow")
    result.assert_outcomes(passed=1, failed=2, errors=1, deselected=2)


def test_the_guarded_fixtures_exist() -> None:
    """A renamed fixture would silently leave the guard's list: every name in it is still defined."""
    from . import conftest

    assert SLOW_FIXTURES <= set(vars(conftest))
