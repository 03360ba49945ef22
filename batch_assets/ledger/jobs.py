"""Writes to `ledger.provider_job` and `ledger.status_event`: provider batches and their transitions.

A job row is written before the provider is asked to create the batch (state CREATED), so a crash
in between is found again instead of submitted twice. Every observed change of state or raw
provider status adds one status_event. A terminal state is final.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

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


ENDPOINT_MODES = ("emulator", "live")


def _endpoint_host(url: str) -> str:
    """`scheme://host[:port]` only: a recorded endpoint never carries a path, query or credentials."""
    parts = urlsplit(url)
    host = f"{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"
    return f"{parts.scheme}://{host}" if parts.scheme else host


def _check_endpoint_mode(mode: str) -> None:
    if mode not in ENDPOINT_MODES:
        raise ValueError(f"endpoint_mode must be one of {', '.join(ENDPOINT_MODES)}, got {mode!r}")


def insert_job_intent(conn: duckdb.DuckDBPyConnection, job_key: str, task_id: str, shard_id: str, provider: str,
                      endpoint: str, endpoint_mode: str | None = None, endpoint_url: str | None = None) -> None:
    """Record the intent to submit a shard: a provider_job row in state CREATED (no provider batch
    yet) and its first status event, atomically. Written before the provider is called. Where the
    job goes (`endpoint_mode` emulator | live, `endpoint_url` reduced to its host) is recorded with
    it when given."""
    values = {"job_key": job_key, "task_id": task_id, "shard_id": shard_id, "provider": provider,
              "endpoint": endpoint, "state": JobState.CREATED.value}
    if endpoint_mode is not None:
        _check_endpoint_mode(endpoint_mode)
        values |= {"endpoint_mode": endpoint_mode, "endpoint_url": _endpoint_host(endpoint_url or "")}
    with transaction(conn):
        insert_values(conn, "provider_job", values, fixed={"created_at": NOW, "state_changed_at": NOW})
        insert_values(conn, "status_event", {"job_key": job_key, "from_state": None, "to_state": JobState.CREATED.value},
                      fixed={"observed_at": NOW})


def set_job_endpoint(conn: duckdb.DuckDBPyConnection, job_key: str, endpoint_mode: str, endpoint_url: str) -> None:
    """Record where the job went: `emulator` or `live`, and the endpoint's `scheme://host[:port]`."""
    _check_endpoint_mode(endpoint_mode)
    conn.execute("UPDATE ledger.provider_job SET endpoint_mode = ?, endpoint_url = ? WHERE job_key = ?",
                 [endpoint_mode, _endpoint_host(endpoint_url), job_key])


def record_job_endpoints(conn: duckdb.DuckDBPyConnection, task_id: str, provider: str, endpoint_mode: str,
                         endpoint_url: str) -> int:
    """Record where the task partition's jobs of `provider` went, for those not recorded yet (right
    after the submit run that created them, with the same provider settings). Returns how many."""
    _check_endpoint_mode(endpoint_mode)
    return conn.execute("""
        UPDATE ledger.provider_job SET endpoint_mode = ?, endpoint_url = ?
        WHERE task_id = ? AND provider = ? AND endpoint_mode IS NULL
    """, [endpoint_mode, _endpoint_host(endpoint_url), task_id, provider]).fetchone()[0]


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

    Updates the job row (batch id, raw status, state, request counts, file ids, errors, cancel flag,
    whether its results can be fetched; `submitted_at` the first time `submitted` is true;
    `state_changed_at` on a change of state; `terminal_at` and the next `terminal_seq` when the state
    becomes terminal; `last_polled_at` always) and adds a status_event when the state or the raw
    status changed.

    A terminal state is final: a late or reordered observation never moves a job out of it. A later
    poll of a terminal job only completes what it learns about the results (see
    `_record_results_of_terminal`)."""
    row = conn.execute("SELECT state, raw_status FROM ledger.provider_job WHERE job_key = ?", [job_key]).fetchone()
    if row is None:
        raise KeyError(f"no provider job {job_key!r} in the ledger")
    old_state, old_raw = row
    if old_state in TERMINAL_STATES:
        _record_results_of_terminal(conn, job_key, snap)
        return False
    new_state = JobState(snap.state).value
    changed = old_state != new_state
    terminal = new_state in TERMINAL_STATES
    conn.execute("""
        UPDATE ledger.provider_job SET
            provider_batch_id = ?, raw_status = ?, state = ?, request_total = ?, request_completed = ?,
            request_failed = ?, output_file_id = ?, error_file_id = ?, provider_errors = ?,
            cancel_requested = cancel_requested OR ?, results_ready = ?,
            submitted_at = CASE WHEN ? THEN coalesce(submitted_at, now()::TIMESTAMP) ELSE submitted_at END,
            state_changed_at = CASE WHEN ? THEN now()::TIMESTAMP ELSE state_changed_at END,
            terminal_at = CASE WHEN ? THEN now()::TIMESTAMP ELSE terminal_at END,
            terminal_seq = CASE WHEN ? THEN nextval('ledger.terminal_seq') ELSE terminal_seq END,
            last_polled_at = now()::TIMESTAMP
        WHERE job_key = ?
    """, [snap.provider_batch_id, snap.raw_status, new_state, snap.request_total, snap.request_completed,
          snap.request_failed, snap.output_file_id, snap.error_file_id, _errors_json(snap.errors),
          snap.cancel_requested, snap.results_ready, submitted, changed, terminal, terminal, job_key])
    if changed or old_raw != snap.raw_status:
        insert_values(conn, "status_event", {
            "job_key": job_key, "from_state": old_state, "to_state": new_state, "raw_status": snap.raw_status,
            "request_total": snap.request_total, "request_completed": snap.request_completed,
            "request_failed": snap.request_failed,
        }, fixed={"observed_at": NOW})
    return changed


def _record_results_of_terminal(conn: duckdb.DuckDBPyConnection, job_key: str, snap: JobSnapshot) -> None:
    """A terminal job polled again (its provider reported the end before its results existed): keep
    its state, take the results' readiness (once ready, it stays ready), file ids and errors the
    provider names now, and the poll time. Adds no status event."""
    conn.execute("""
        UPDATE ledger.provider_job SET
            results_ready = coalesce(results_ready, false) OR ?,
            output_file_id = coalesce(?, output_file_id), error_file_id = coalesce(?, error_file_id),
            provider_errors = coalesce(provider_errors, ?), last_polled_at = now()::TIMESTAMP
        WHERE job_key = ?
    """, [snap.results_ready, snap.output_file_id, snap.error_file_id, _errors_json(snap.errors), job_key])


def request_cancel(conn: duckdb.DuckDBPyConnection, job_key: str) -> None:
    """Record that a cancel of the job was requested (the flag stays set)."""
    conn.execute("UPDATE ledger.provider_job SET cancel_requested = true WHERE job_key = ?", [job_key])


def mark_downloaded(conn: duckdb.DuckDBPyConnection, job_key: str) -> None:
    """Record that the terminal job's result files were downloaded (now)."""
    conn.execute("UPDATE ledger.provider_job SET downloaded_at = now()::TIMESTAMP WHERE job_key = ?", [job_key])


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
