"""Keeps the fast lane honest (a pytest plugin; conftest.py loads it): a test not marked `slow` that
starts the emulator or Dagster fails, so `make test-fast` (`-m "not slow"`) skips every such test.

Two checks, neither timed (so neither is flaky on a slow machine):
- before it runs: the test asks for a fixture that starts one (`SLOW_FIXTURES`), directly or through
  another fixture (a module-scoped one starts once, for the first test that asks);
- while it runs: the test (or a fixture set up for it) constructs an in-process HTTP server (the
  emulator runs on uvicorn) or a Dagster instance (`materialize`, `execute_in_process` and sensor
  contexts make one).
"""

from __future__ import annotations

import functools

import dagster as dg
import pytest
import uvicorn

# Fixtures of conftest.py (and test modules) that start the emulator or a Dagster instance.
SLOW_FIXTURES = frozenset({"emulator", "instance", "sensor_instance", "dagster_env", "finished_db"})

_running: list[pytest.Item] = []  # the test whose setup, call or teardown runs now
_STARTED = pytest.StashKey[list[str]]()  # what an unmarked test started


def is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


def slow_fixtures_of(item: pytest.Item) -> list[str]:
    """The fixtures in the test's closure that start the emulator or Dagster."""
    return sorted(SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def _message(item: pytest.Item, what: str) -> str:
    return (
        f"{item.nodeid} {what} but is not marked slow: add @pytest.mark.slow "
        "(or `pytestmark = pytest.mark.slow` for the module) so `make test-fast` skips it"
    )


def _started(what: str) -> None:
    """Called where the emulator or Dagster starts: fails an unmarked running test (and remembers it,
    in case the start happened in a thread that swallows the failure)."""
    if not _running or is_slow(_running[-1]):
        return
    item = _running[-1]
    item.stash.setdefault(_STARTED, []).append(what)
    pytest.fail(_message(item, f"starts {what}"), pytrace=False)


def _guarded(cls: type, what: str):
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        _started(what)
        original(self, *args, **kwargs)

    return original, __init__


_PATCHES = [(uvicorn.Server, "an HTTP server (the emulator)"), (dg.DagsterInstance, "a Dagster instance")]
_ORIGINALS = pytest.StashKey[list[tuple[type, object]]]()


def pytest_configure(config: pytest.Config) -> None:
    originals = config.stash[_ORIGINALS] = []
    for cls, what in _PATCHES:
        original, wrapper = _guarded(cls, what)
        originals.append((cls, original))
        cls.__init__ = wrapper


def pytest_unconfigure(config: pytest.Config) -> None:
    """Undoes this session's patches only (a session inside a test, as the guard's tests run, nests)."""
    for cls, original in reversed(config.stash.get(_ORIGINALS, [])):
        cls.__init__ = original


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if not is_slow(item) and (names := slow_fixtures_of(item)):
        pytest.fail(_message(item, f"uses {', '.join(names)}"), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    started = item.stash.get(_STARTED, [])
    if started and report.passed and report.when == "call":
        report.outcome = "failed"
        report.longrepr = _message(item, f"starts {', '.join(started)}")
    return report
