"""Writes to `ledger.provider_job` and `ledger.status_event`: provider batches and their transitions.

A job row is written before the provider is asked to create the batch (state CREATED), so a crash
in between is found again instead of submitted twice. Every observed change of state or raw
provider status adds one status_event. A terminal state is final.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from batch_assets.ledger.states import TERMINAL_STATES, JobState, terminal_sql
from batch_assets.ledger.statements import NOW, insert_select, insert_values
from batch_assets.ledger.transaction import transaction
from batch_assets.providers.contract import JobSnapshot
from batch_assets.sqltext import sql_literal

Params = Sequence[Any] | Mapping[str, Any] | None

# Every provider_job column a caller supplies to insert_jobs (task_id and terminal_seq are the writer's).
JOB_COLUMNS = (
    "job_key", "shard_id", "provider", "endpoint", "provider_batch_id", "input_file_id", "output_file_id",
    "error_file_id", "raw_status", "state", "cancel_requested", "request_total", "request_completed",
    "request_failed", "provider_errors", "created_at", "submitted_at", "state_changed_at", "terminal_at",
    "last_polled_at", "downloaded_at",
)
STATUS_EVENT_COLUMNS = ("job_key", "from_state", "to_state", "raw_status", "request_total", "request_completed",
                        "request_failed", "observed_at")


def insert_job_intent(conn: duckdb.DuckDBPyConnection, job_key: str, task_id: str, shard_id: str, provider: str,
                      endpoint: str) -> None:
    """Record the intent to submit a shard: a provider_job row in state CREATED (no provider batch
    yet) and its first status event, atomically. Written before the provider is called."""
    with transaction(conn):
        insert_values(conn, "provider_job", {
            "job_key": job_key, "task_id": task_id, "shard_id": shard_id, "provider": provider, "endpoint": endpoint,
            "state": JobState.CREATED.value,
        }, fixed={"created_at": NOW, "state_changed_at": NOW})
        insert_values(conn, "status_event", {"job_key": job_key, "from_state": None, "to_state": JobState.CREATED.value},
                      fixed={"observed_at": NOW})


def set_input_file(conn: duckdb.DuckDBPyConnection, job_key: str, file_id: str) -> None:
    """Record the provider file id the job's shard was uploaded as (before the create call)."""
    conn.execute("UPDATE ledger.provider_job SET input_file_id = ? WHERE job_key = ?", [file_id, job_key])


def _errors_json(errors) -> str | None:
    """The provider's batch errors as a JSON array of objects: accepts dicts or objects with `.as_dict()`."""
    if not errors:
        return None
    return json.dumps([e.as_dict() if hasattr(e, "as_dict") else e for e in errors])


def record_snapshot(conn: duckdb.DuckDBPyConnection, job_key: str, snap: JobSnapshot, submitted: bool = False) -> bool:
    """Store what a poll (or the create call) saw; returns True if the internal state changed.

    Updates the job row (batch id, raw status, state, request counts, file ids, errors, cancel flag;
    `submitted_at` the first time `submitted` is true; `state_changed_at` on a change of state;
    `terminal_at` and the next `terminal_seq` when the state becomes terminal; `last_polled_at`
    always) and adds a status_event when the state or the raw status changed.

    Also records whether the provider's results can be fetched (`results_ready`).

    A terminal state is final: a late or reordered observation never moves a job out of it. Of a
    terminal job, a later poll only adds what the provider may publish after reporting its end:
    result file ids and `results_ready` (which, once true, stays true)."""
    row = conn.execute("SELECT state, raw_status FROM ledger.provider_job WHERE job_key = ?", [job_key]).fetchone()
    if row is None:
        raise KeyError(f"no provider job {job_key!r} in the ledger")
    old_state, old_raw = row
    if old_state in TERMINAL_STATES:
        conn.execute("""
            UPDATE ledger.provider_job SET
                output_file_id = coalesce(output_file_id, ?), error_file_id = coalesce(error_file_id, ?),
                results_ready = coalesce(results_ready, false) OR ?, last_polled_at = now()::TIMESTAMP
            WHERE job_key = ?
        """, [snap.output_file_id, snap.error_file_id, bool(snap.results_ready), job_key])
        return False
    new_state = JobState(snap.state).value
    changed = old_state != new_state
    terminal = new_state in TERMINAL_STATES
    conn.execute("""
        UPDATE ledger.provider_job SET
            provider_batch_id = ?, raw_status = ?, state = ?, request_total = ?, request_completed = ?,
            request_failed = ?, output_file_id = ?, error_file_id = ?, provider_errors = ?, results_ready = ?,
            cancel_requested = cancel_requested OR ?,
            submitted_at = CASE WHEN ? THEN coalesce(submitted_at, now()::TIMESTAMP) ELSE submitted_at END,
            state_changed_at = CASE WHEN ? THEN now()::TIMESTAMP ELSE state_changed_at END,
            terminal_at = CASE WHEN ? THEN now()::TIMESTAMP ELSE terminal_at END,
            terminal_seq = CASE WHEN ? THEN nextval('ledger.terminal_seq') ELSE terminal_seq END,
            last_polled_at = now()::TIMESTAMP
        WHERE job_key = ?
    """, [snap.provider_batch_id, snap.raw_status, new_state, snap.request_total, snap.request_completed,
          snap.request_failed, snap.output_file_id, snap.error_file_id, _errors_json(snap.errors),
          bool(snap.results_ready), snap.cancel_requested, submitted, changed, terminal, terminal, job_key])
    if changed or old_raw != snap.raw_status:
        insert_values(conn, "status_event", {
            "job_key": job_key, "from_state": old_state, "to_state": new_state, "raw_status": snap.raw_status,
            "request_total": snap.request_total, "request_completed": snap.request_completed,
            "request_failed": snap.request_failed,
        }, fixed={"observed_at": NOW})
    return changed


def request_cancel(conn: duckdb.DuckDBPyConnection, job_key: str) -> None:
    """Record that a cancel of the job was requested (the flag stays set)."""
    conn.execute("UPDATE ledger.provider_job SET cancel_requested = true WHERE job_key = ?", [job_key])


def mark_downloaded(conn: duckdb.DuckDBPyConnection, job_key: str) -> None:
    """Record that the terminal job's result files were downloaded (now); clears a collect error."""
    conn.execute("UPDATE ledger.provider_job SET downloaded_at = now()::TIMESTAMP, collect_error = NULL "
                 "WHERE job_key = ?", [job_key])


def count_collect_attempts(conn: duckdb.DuckDBPyConnection, job_keys: Sequence[str]) -> None:
    """A collect run starts on these jobs: one more collection try each (`collect_attempts`)."""
    if job_keys:
        conn.execute("UPDATE ledger.provider_job SET collect_attempts = coalesce(collect_attempts, 0) + 1 "
                     "WHERE list_contains(?, job_key)", [list(job_keys)])


def set_collect_error(conn: duckdb.DuckDBPyConnection, job_key: str, error: str | None) -> None:
    """Record (or clear, with None) why collecting the job failed or is held back."""
    conn.execute("UPDATE ledger.provider_job SET collect_error = ? WHERE job_key = ?",
                 [None if error is None else error[:2000], job_key])


def mark_stuck(conn: duckdb.DuckDBPyConnection, job_key: str) -> None:
    """Record that the job stayed in its state longer than its SLA (the first time only)."""
    conn.execute("UPDATE ledger.provider_job SET stuck_at = coalesce(stuck_at, now()::TIMESTAMP) WHERE job_key = ?",
                 [job_key])


def set_stuck_action(conn: duckdb.DuckDBPyConnection, job_key: str, action: str) -> None:
    """Record what the stuck policy did about the job (e.g. 'cancel_requested', 'notified')."""
    conn.execute("UPDATE ledger.provider_job SET stuck_action = ? WHERE job_key = ?", [action, job_key])


def insert_jobs(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Insert whole provider_job rows of the partition as `query` gives them (every column of
    JOB_COLUMNS, by name) — e.g. the benchmark's synthetic jobs. A row in a terminal state gets the
    next terminal_seq. Returns the number inserted."""
    return insert_select(conn, "provider_job", JOB_COLUMNS, query, params, fixed={
        "task_id": sql_literal(task_id),
        "terminal_seq": f"CASE WHEN {terminal_sql('_rows')} THEN nextval('ledger.terminal_seq') END",
    })


def insert_status_events(conn: duckdb.DuckDBPyConnection, query: str, params: Params = None) -> int:
    """Insert status events as `query` gives them (every column of STATUS_EVENT_COLUMNS, by name).
    Returns the number inserted."""
    return insert_select(conn, "status_event", STATUS_EVENT_COLUMNS, query, params)
