"""Recording provider job observations: the job row and one status event per transition."""

from __future__ import annotations

import json

import duckdb

from batch_assets.providers.contract import TERMINAL_STATES, JobSnapshot


def record_snapshot(conn: duckdb.DuckDBPyConnection, job_key: str, snap: JobSnapshot, submitted: bool = False) -> bool:
    """Store what a poll (or the create call) saw; returns True if the internal state changed.

    A terminal state is final: a late or reordered observation never moves a job out of it.
    """
    row = conn.execute("SELECT state, raw_status FROM ledger.provider_job WHERE job_key = ?", [job_key]).fetchone()
    if row is None:
        raise KeyError(f"no provider job {job_key!r} in the ledger")
    old_state, old_raw = row
    if old_state in TERMINAL_STATES:
        return False
    changed = old_state != snap.state.value
    conn.execute("""
        UPDATE ledger.provider_job SET
            provider_batch_id = ?, raw_status = ?, state = ?, request_total = ?, request_completed = ?,
            request_failed = ?, output_file_id = ?, error_file_id = ?, provider_errors = ?,
            cancel_requested = cancel_requested OR ?,
            submitted_at = CASE WHEN ? THEN coalesce(submitted_at, now()::TIMESTAMP) ELSE submitted_at END,
            state_changed_at = CASE WHEN ? THEN now()::TIMESTAMP ELSE state_changed_at END,
            terminal_at = CASE WHEN ? THEN now()::TIMESTAMP ELSE terminal_at END,
            terminal_seq = CASE WHEN ? THEN nextval('ledger.terminal_seq') ELSE terminal_seq END,
            last_polled_at = now()::TIMESTAMP
        WHERE job_key = ?
    """, [snap.provider_batch_id, snap.raw_status, snap.state.value, snap.request_total, snap.request_completed,
          snap.request_failed, snap.output_file_id, snap.error_file_id,
          json.dumps([e.as_dict() for e in snap.errors]) if snap.errors else None, snap.cancel_requested,
          submitted, changed, snap.terminal, snap.terminal, job_key])
    if changed or old_raw != snap.raw_status:
        conn.execute("INSERT INTO ledger.status_event VALUES (?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
                     [job_key, old_state, snap.state.value, snap.raw_status, snap.request_total,
                      snap.request_completed, snap.request_failed])
    return changed
