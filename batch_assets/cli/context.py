"""Where the commands find the warehouse, and connections that fail with a clear line."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from batch_assets.cli.errors import (
    CliError,
    UsageError,
    connection_failure,
    first_paragraph,
    is_lock_conflict,
    locked_message,
)

if TYPE_CHECKING:
    import duckdb

    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.resources import ProvidersResource

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
    wh = Warehouse.at(db, os.environ.get("BATCH_ASSETS_DATA_DIR") or db.parent)
    if must_exist and not wh.partition_stores and not db.is_file():  # with partition stores there is no file
        raise CliError(
            f"no warehouse at {db}: run `batch-assets demo` or set BATCH_ASSETS_DATABASE (or pass --database FILE)"
        )
    timeout = getattr(args, "lock_timeout", None)
    return dataclasses.replace(wh, lock_timeout_s=DEFAULT_LOCK_TIMEOUT_S if timeout is None else timeout)


@contextlib.contextmanager
def control(wh: Warehouse) -> Iterator:
    """wh.control(read_only=True) (the PostgreSQL ledger), an unreachable server one CliError."""
    from batch_assets.ledger.distributed import LedgerStoreError

    with contextlib.ExitStack() as stack:
        try:
            db = stack.enter_context(wh.control(read_only=True))
        except (LedgerStoreError, ConnectionError) as exc:
            raise CliError(str(exc)) from None
        yield db


@contextlib.contextmanager
def connect(wh: Warehouse, *, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """wh.connect(), with a locked file and a warehouse without ledger tables turned into CliErrors."""
    import duckdb

    from batch_assets.ledger.control_db import CONTROL_TABLES
    from batch_assets.ledger.distributed import LEDGER_URL_VAR, LedgerStoreError
    from batch_assets.ledger.partition_lease import PartitionLeaseError

    with contextlib.ExitStack() as stack:
        try:
            conn = stack.enter_context(wh.connect(read_only=read_only))
        except (duckdb.IOException, duckdb.ConnectionException) as exc:
            if is_lock_conflict(exc):
                raise CliError(locked_message(wh.database, exc)) from exc
            raise CliError(f"cannot open warehouse {wh.database}: {first_paragraph(exc)}") from exc
        except (LedgerStoreError, ConnectionError, PartitionLeaseError) as exc:  # the PostgreSQL ledger
            raise CliError(str(exc)) from None
        try:
            yield conn
        except duckdb.CatalogException as exc:
            missing = re.search(r"Table with name (\S+) does not exist", str(exc))
            if missing and wh.ledger_url is not None and missing.group(1) in CONTROL_TABLES:
                raise CliError(
                    f"ledger.{missing.group(1)} is in the PostgreSQL ledger ({LEDGER_URL_VAR}), not in "
                    f"{wh.database}: query it there, e.g. with psql"
                ) from None
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
    from batch_assets.ledger.tasks import task_ids

    return task_ids(conn)


# --- Providers: the emulator a `batch-assets dev` over this data directory started, and one clear
# line (naming the URL tried) when a provider cannot be reached.


def providers(wh: Warehouse) -> ProvidersResource:
    """The provider clients for commands over `wh`: as the environment sets them, the emulator being
    $BATCH_ASSETS_EMULATOR_URL, else the one a running `batch-assets dev` recorded in wh.data_dir."""
    from batch_assets.resources import providers_from_env

    return providers_from_env(data_dir=wh.data_dir)


def _emulator_fix(wh: Warehouse) -> str:
    """How to point the command at a running emulator, given where its URL came from."""
    from batch_assets import dev_stack

    if os.environ.get("BATCH_ASSETS_EMULATOR_URL"):
        return "start it there (`batch-assets dev`), or correct BATCH_ASSETS_EMULATOR_URL"
    if dev_stack.recorded_emulator_url(wh.data_dir):
        record = wh.data_dir / dev_stack.STACK_FILE
        return f"the `batch-assets dev` recorded in {record} is not answering: restart it"
    return (
        "start it with `batch-assets dev` over this data directory, or set BATCH_ASSETS_EMULATOR_URL "
        "to the URL a running one prints"
    )


def unreachable_message(wh: Warehouse, clients: ProvidersResource, provider: str, reason: str) -> str:
    """One line: which provider, where (its base URL), why, and the fix."""
    from batch_assets.providers.registry import provider_definition

    base_url = clients.settings_for(provider).base_url or clients.emulator_url
    if clients.is_live(provider):
        live = provider_definition(provider).live_base_url
        fix = f"check the network and {provider.upper()}_BASE_URL" if base_url != live else "check the network"
        return f"cannot reach the {provider} API at {base_url}: {reason} — {fix}"
    return f"cannot reach the {provider} emulator at {base_url}: {reason} — {_emulator_fix(wh)}"


def check_reachable(wh: Warehouse, clients: ProvidersResource, provider: str) -> None:
    """Before a command changes anything for `provider`: in emulator mode the emulator must accept a
    connection (a command run beside a stopped `batch-assets dev` fails here at once, not after the
    SDK's retries)."""
    import errno
    import socket
    from urllib.parse import urlsplit

    if clients.is_live(provider):
        return  # the SDK's own retries and `reaching` name a live provider that does not answer
    url = urlsplit(clients.emulator_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        try:
            code = s.connect_ex((url.hostname or "127.0.0.1", port))
        except (TimeoutError, OSError) as exc:
            code = getattr(exc, "errno", None) or errno.ETIMEDOUT
    if code == 0:
        return
    reason = "connection refused" if code == errno.ECONNREFUSED else os.strerror(code).lower()
    raise CliError(unreachable_message(wh, clients, provider, reason))


@contextlib.contextmanager
def reaching(wh: Warehouse, clients: ProvidersResource, provider: str) -> Iterator[None]:
    """Around calls to `provider`'s API: a failure to connect becomes one line naming the URL tried."""
    try:
        yield
    except CliError:
        raise
    except Exception as exc:
        failure = connection_failure(exc)
        if failure is None:
            raise
        raise CliError(unreachable_message(wh, clients, provider, failure[1])) from exc
