"""Poll leases: which poller is polling a provider job right now, marked on the job's own row.

Every poll of provider jobs (a status sensor's tick, `batch-assets poll`, a collect run refreshing
its partition) first marks the jobs it is about to poll: `poll_owner` and `poll_lease_until` on
their `ledger.provider_job` rows, in one UPDATE whose row selection skips rows another poller holds
(on PostgreSQL `FOR UPDATE SKIP LOCKED`, so two pollers taking leases at the same moment never wait
for each other nor take the same row). A job whose mark belongs to another poller and has not run out
is not polled. Once its snapshots are recorded the poller clears its marks; a poller that dies
leaves marks that lapse with their lease. So pollers whose scopes overlap — sensors per provider
beside sensors per bucket of tasks, a CLI poll beside them — never poll one job twice at once.

On DuckDB (`local`) one process writes the file; sensor threads of that process racing for a row get
DuckDB's write conflict, and the loser takes what is left on its next try.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from batch_assets.ledger.control_db import ControlDB, as_control, epoch_sql, lease_sql
from batch_assets.ledger.states import IN_FLIGHT_SQL, JobState

Conn = duckdb.DuckDBPyConnection | ControlDB

# A lease outlives the poll it covers by this much (recording the results, a slow provider).
LEASE_MARGIN_S = 30.0
_CONFLICT_TRIES = 3  # DuckDB write conflicts between sensor threads of one process

# What a poll asks the provider about: jobs in flight, and completed jobs whose results are not
# fetchable yet (the provider ended the batch before its output file existed).
DUE_SQL = f"""({IN_FLIGHT_SQL} OR (state = '{JobState.COMPLETED.value}' AND downloaded_at IS NULL
               AND results_ready = false))"""


def new_owner(poller: str) -> str:
    """A poll's owner mark: who polls (a sensor's name, `cli`, `collect`), where, and a fresh id."""
    return f"{poller}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Leased:
    jobs: list[dict]  # job_key, provider, provider_batch_id, state, created_unix: least recently polled first
    held_elsewhere: int  # jobs due in the scope that another poller is polling now


def _scope_sql(
    providers: Sequence[str] | None, task_names: Sequence[str] | None, task_id: str | None
) -> tuple[str, list]:
    clauses, params = [], []
    if providers is not None:
        clauses.append("provider = ANY(?)")
        params.append(list(providers))
    if task_names is not None:
        clauses.append("task_id IN (SELECT task_id FROM ledger.batch_task WHERE task_name = ANY(?))")
        params.append(list(task_names))
    if task_id is not None:
        clauses.append("task_id = ?")
        params.append(task_id)
    return "".join(f" AND {c}" for c in clauses), params


def take_poll_leases(
    conn: Conn,
    owner: str,
    lease_s: float,
    *,
    providers: Sequence[str] | None = None,
    task_names: Sequence[str] | None = None,
    task_id: str | None = None,
    max_jobs: int | None = None,
) -> Leased:
    """Mark for `owner` the jobs due for a poll in the scope (all, or those of `providers`, of
    `task_names`, of one `task_id`; at most `max_jobs`, least recently polled first) that no other
    poller holds, for `lease_s` seconds; returns them."""
    db = as_control(conn)
    scope, scope_params = _scope_sql(providers, task_names, task_id)
    free = "(poll_lease_until IS NULL OR poll_lease_until <= now()::TIMESTAMP OR poll_owner = ?)"
    skip_locked = " FOR UPDATE SKIP LOCKED" if db.dialect == "postgres" else ""
    sql = f"""
        UPDATE ledger.provider_job SET poll_owner = ?, poll_lease_until = {lease_sql(lease_s)}
        WHERE job_key IN (
            SELECT job_key FROM ledger.provider_job
            WHERE {DUE_SQL} AND {free}{scope}
            ORDER BY last_polled_at NULLS FIRST, job_key
            LIMIT ?{skip_locked})
        RETURNING job_key, provider, provider_batch_id, state, {epoch_sql("created_at")} AS created_unix,
                  {epoch_sql("coalesce(last_polled_at, TIMESTAMP '1970-01-01')")} AS polled_unix"""
    params = [owner, owner, *scope_params, max_jobs]
    rows: list[dict] = []
    for attempt in range(_CONFLICT_TRIES):
        try:
            rows = db.execute(sql, params).dicts()
            break
        except db.ConflictError:  # another thread of this process took rows first: take what is left
            if attempt == _CONFLICT_TRIES - 1:
                rows = []
    rows.sort(key=lambda r: (r["polled_unix"], r["job_key"]))
    held = db.execute(
        f"""SELECT count(*) FROM ledger.provider_job
            WHERE {DUE_SQL}{scope} AND poll_lease_until > now()::TIMESTAMP AND poll_owner <> ?""",
        [*scope_params, owner],
    ).scalar()
    return Leased([{k: v for k, v in r.items() if k != "polled_unix"} for r in rows], int(held or 0))


def release_poll_leases(conn: Conn, owner: str) -> int:
    """Clear `owner`'s marks (its polls are recorded, or given up); returns how many it held."""
    return (
        as_control(conn)
        .execute(
            "UPDATE ledger.provider_job SET poll_owner = NULL, poll_lease_until = NULL WHERE poll_owner = ?",
            [owner],
        )
        .rowcount
    )


def held_poll_leases(conn: Conn) -> int:
    """Jobs some poller holds a mark on now (lapsed marks included)."""
    return int(as_control(conn).execute("SELECT count(poll_owner) FROM ledger.provider_job").scalar())
