"""Where the commands find the warehouse, and connections that fail with a clear line."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from batch_assets.cli.errors import CliError, UsageError, first_paragraph, is_lock_conflict, locked_message

if TYPE_CHECKING:
    import duckdb

    from batch_assets.ledger.warehouse import Warehouse

DEFAULT_DATABASE = "data/warehouse.duckdb"
# How long a command waits for a Dagster run (or another writer) to let go of the DuckDB file.
DEFAULT_LOCK_TIMEOUT_S = 10.0


def database_path(args) -> Path:
    return Path(getattr(args, "database", None) or os.environ.get("BATCH_ASSETS_DATABASE") or DEFAULT_DATABASE)


def reject_database_option(args, command: str) -> None:
    """demo and dev keep their warehouse under --data-dir; a --database given before them is a mistake."""
    if getattr(args, "database", None):
        raise UsageError(
            f"--database does not apply to `{command}`: it uses DATA_DIR/warehouse.duckdb (pass --data-dir DIR)"
        )


def warehouse(args, *, must_exist: bool = True) -> Warehouse:
    """The warehouse named by --database / $BATCH_ASSETS_DATABASE (data folder: $BATCH_ASSETS_DATA_DIR or
    the file's folder). With must_exist, a missing file is an error instead of a new empty warehouse."""
    import dataclasses

    from batch_assets.ledger.warehouse import Warehouse

    db = database_path(args)
    if must_exist and not db.is_file():
        raise CliError(
            f"no warehouse at {db}: run `batch-assets demo` or set BATCH_ASSETS_DATABASE (or pass --database FILE)"
        )
    wh = Warehouse.at(db, os.environ.get("BATCH_ASSETS_DATA_DIR") or db.parent)
    timeout = getattr(args, "lock_timeout", None)
    return dataclasses.replace(wh, lock_timeout_s=DEFAULT_LOCK_TIMEOUT_S if timeout is None else timeout)


@contextlib.contextmanager
def connect(wh: Warehouse, *, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """wh.connect(), with a locked file and a warehouse without ledger tables turned into CliErrors."""
    import duckdb

    with contextlib.ExitStack() as stack:
        try:
            conn = stack.enter_context(wh.connect(read_only=read_only))
        except (duckdb.IOException, duckdb.ConnectionException) as exc:
            if is_lock_conflict(exc):
                raise CliError(locked_message(wh.database, exc)) from exc
            raise CliError(f"cannot open warehouse {wh.database}: {first_paragraph(exc)}") from exc
        try:
            yield conn
        except duckdb.CatalogException as exc:
            missing = re.search(r"Table with name (\S+) does not exist", str(exc))
            if missing and read_only:
                raise CliError(
                    f"warehouse {wh.database} has no table {missing.group(1)}: it holds no batch work "
                    "yet (run `batch-assets demo`, or materialize a task in `batch-assets dev`)"
                ) from exc
            raise


def match_task_ids(task_ids: list[str], pattern: str | None) -> list[str]:
    """The task_ids `--task PATTERN` selects: all without a pattern; else the task_id itself, or the
    partitions of the task named PATTERN (`<name>_YYYYMMDD`), or failing those every task_id starting
    with PATTERN. A pattern that selects nothing is an error listing the known tasks."""
    if pattern is None:
        return task_ids
    exact = [t for t in task_ids if t == pattern or re.fullmatch(re.escape(pattern) + r"_\d{8}", t)]
    found = exact or [t for t in task_ids if t.startswith(pattern)]
    if not found:
        raise CliError(
            f"no batch task matches {pattern!r} (a task name, a task_id or a task_id prefix); {known_tasks(task_ids)}"
        )
    return found


def known_tasks(task_ids: list[str]) -> str:
    """The warehouse's tasks for an error message: each name with its partitions (first … last)."""
    if not task_ids:
        return "the warehouse holds no batch task yet (run `batch-assets demo`, or materialize a task in `dev`)"
    by_name: dict[str, list[str]] = {}
    for task_id in sorted(task_ids):
        m = re.fullmatch(r"(.+)_\d{8}", task_id)
        by_name.setdefault(m.group(1) if m else task_id, []).append(task_id)

    def partitions(ids: list[str]) -> str:
        if len(ids) <= 2:
            return ", ".join(ids)
        return f"{len(ids)} partitions: {ids[0]} … {ids[-1]}"

    return "known tasks: " + "; ".join(f"{name} ({partitions(ids)})" for name, ids in by_name.items())


def known_task_ids(conn: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT task_id FROM ledger.batch_task ORDER BY task_id").fetchall()]
