"""The runs the provider status sensors asked for, by run key: one sensor asks, the others drop it.

Dagster deduplicates a run key within one sensor only. With polling sharded over several status
sensors (by provider, by bucket of tasks), every sensor plans the same collect and submit runs from
the same ledger, and two of them may serve one partition. Before asking Dagster for runs, a sensor
claims their keys in `ledger.run_request`: a key nobody holds, or one this sensor holds already
(asked for again after a tick whose requests never reached the daemon; Dagster drops the repeat),
is its to ask; a key another sensor holds is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from batch_assets.ledger.control_db import ControlDB, as_control, seconds_ago_sql

Conn = duckdb.DuckDBPyConnection | ControlDB
KEEP_S = 7 * 86400  # rows older than this are deleted by retention (their runs are long done)


def claim_run_keys(conn: Conn, sensor: str, requests: Sequence[tuple[str, str, str]]) -> set[str]:
    """Of `requests` (run_key, task_id, job_name), the keys `sensor` may ask for."""
    unique = {key: (task_id, job) for key, task_id, job in requests}
    if not unique:
        return set()
    keys = sorted(unique)
    won = (
        as_control(conn)
        .execute(
            """
        INSERT INTO ledger.run_request (run_key, task_id, job_name, sensor, requested_at)
        SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), ?, now()::TIMESTAMP
        ON CONFLICT (run_key) DO UPDATE SET requested_at = excluded.requested_at
            WHERE ledger.run_request.sensor = excluded.sensor
        RETURNING run_key""",
            [keys, [unique[k][0] for k in keys], [unique[k][1] for k in keys], sensor],
        )
        .rows
    )
    return {row[0] for row in won}


def forget_old_run_requests(conn: Conn, older_than_s: float = KEEP_S) -> int:
    """Delete the claims older than `older_than_s`; returns how many."""
    return (
        as_control(conn)
        .execute(f"DELETE FROM ledger.run_request WHERE requested_at < {seconds_ago_sql(older_than_s)}")
        .rowcount
    )
