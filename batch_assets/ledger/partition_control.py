"""One partition's control rows as DuckDB views beside its per-item tables.

A check or report about one task partition joins the control tables (its batch_task row, shards,
provider jobs, their status events, operator actions) with the partition's per-item tables
(manifest items, shard lines, results). The control rows are read here, through the ControlDB (the
Warehouse's DuckDB file, or PostgreSQL), as Arrow, and registered on the DuckDB connection that holds
the per-item tables under fixed names (temp tables), so the stage's SQL is the same on both backends:

    part_task    ledger.batch_task        the partition's row
    part_shard   ledger.shard             its shards
    part_job     ledger.provider_job      its provider jobs
    part_event   ledger.status_event      its jobs' events, `event_no` numbering them in order
    part_action  ledger.operator_action   the operator actions on it

The views are a snapshot taken when the block starts: they are for reads. A stage that writes a
control row and reads it again in the same block reads it through ledger functions instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import duckdb
import pyarrow as pa

from batch_assets.ledger.control_db import ControlDB, as_control, registered

VIEWS = ("part_task", "part_shard", "part_job", "part_event", "part_action")

# A connection's registered partition (and how deep the blocks using it are nested).
_open: dict[int, tuple[str, int]] = {}


def partition_rows(control: duckdb.DuckDBPyConnection | ControlDB, task_id: str) -> dict[str, pa.Table]:
    """The partition's control rows, view name -> Arrow table."""
    db = as_control(control)
    insert_order = "rowid" if db.dialect == "duckdb" else "ctid"  # status_event is append-only
    return {
        "part_task": db.arrow("SELECT * FROM ledger.batch_task WHERE task_id = ?", [task_id]),
        "part_shard": db.arrow("SELECT * FROM ledger.shard WHERE task_id = ?", [task_id]),
        "part_job": db.arrow("SELECT * FROM ledger.provider_job WHERE task_id = ?", [task_id]),
        "part_event": db.arrow(
            f"""SELECT e.*, row_number() OVER (ORDER BY e.job_key, e.observed_at, e.{insert_order}) AS event_no
                FROM ledger.status_event e
                WHERE e.job_key IN (SELECT job_key FROM ledger.provider_job WHERE task_id = ?)""",
            [task_id],
        ),
        "part_action": db.arrow("SELECT * FROM ledger.operator_action WHERE task_id = ?", [task_id]),
    }


@contextlib.contextmanager
def partition_views(
    conn: duckdb.DuckDBPyConnection, task_id: str, control: ControlDB | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Register the partition's control rows (read from `control`, by default `conn`'s own ledger)
    as the VIEWS on `conn` for the block. A block nested in one for the same partition reuses its
    views; one for another partition is a mistake and raises."""
    key = id(conn)
    held = _open.get(key)
    if held is not None:
        if held[0] != task_id:
            raise RuntimeError(f"partition views of {held[0]} are open on this connection, not of {task_id}")
        _open[key] = (task_id, held[1] + 1)
        try:
            yield conn
        finally:
            _open[key] = (task_id, _open[key][1] - 1)
        return
    rows = partition_rows(control if control is not None else conn, task_id)
    with contextlib.ExitStack() as views:
        for name, table in rows.items():
            views.enter_context(registered(conn, name, table))
        _open[key] = (task_id, 1)
        try:
            yield conn
        finally:
            del _open[key]
