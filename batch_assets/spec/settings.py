"""Settings every task shares, read from the environment and checked before anything uses them."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping

from batch_assets.spec.errors import SettingError

PARTITION_START_VAR = "BATCH_ASSETS_PARTITION_START"
DEFAULT_PARTITION_START = "2026-11-01"


def partition_start(environ: Mapping[str, str] | None = None) -> str:
    """The first daily partition (YYYY-MM-DD): $BATCH_ASSETS_PARTITION_START, unset or empty for the
    default. Any other value that is not a calendar date raises SettingError naming the variable."""
    value = (os.environ if environ is None else environ).get(PARTITION_START_VAR, "").strip()
    if not value:
        return DEFAULT_PARTITION_START
    try:
        day = dt.datetime.strptime(value, "%Y-%m-%d").date()
    except ValueError:
        raise SettingError(
            f"{PARTITION_START_VAR}={value!r} is not a date: expected YYYY-MM-DD, a real calendar day "
            f"(e.g. {DEFAULT_PARTITION_START}); unset it for the default {DEFAULT_PARTITION_START}"
        ) from None
    return day.isoformat()


EXECUTOR_VAR = "BATCH_ASSETS_EXECUTOR"
EXECUTORS = ("in_process", "multiprocess")


def executor_name(environ: Mapping[str, str] | None = None) -> str:
    """How a run executes its steps: $BATCH_ASSETS_EXECUTOR, `in_process` (the default: one process
    per run, which suits the one-writer DuckDB ledger) or `multiprocess` (a process per step; each
    step then waits its turn for the DuckDB file). Any other value raises SettingError."""
    value = (os.environ if environ is None else environ).get(EXECUTOR_VAR, "").strip()
    if not value:
        return EXECUTORS[0]
    if value not in EXECUTORS:
        raise SettingError(
            f"{EXECUTOR_VAR}={value!r} is not an executor: use {' or '.join(EXECUTORS)}; "
            f"unset it for the default {EXECUTORS[0]}"
        )
    return value
