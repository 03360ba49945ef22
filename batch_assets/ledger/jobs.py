"""Writes to `ledger.provider_job` and `ledger.status_event`: provider batches and their transitions.

A job row is written before the provider is asked to create the batch (state CREATED), so a crash
in between is found again instead of submitted twice. Every observed change of state or raw
provider status adds one status_event. A terminal state is final.

Claims: one submit run at a time owns an intent without a batch id (`claimed_by` = the run,
`claim_expires_at` = its lease). A new intent is inserted already claimed (a second run inserting
the same job_key loses on the primary key); an existing one is claimed by one guarded UPDATE
(free, lease expired, or already ours); a claim is renewed, strictly by its owner, before each
create call, and released when the job is recorded (after a crash it expires).

`create_outcome` says how a create that did not plainly succeed was settled: unknown (no answer:
the batch may exist), failed (refused), adopted (found at the provider, by a run or an operator),
abandoned (an operator gave the intent up: the shard goes again under a new job key);
`create_error` holds its detail (the call's error, why the provider cannot tell yet, how the batch
was found). Operator decisions also leave a `ledger.operator_action` row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import duckdb

from batch_assets.ledger.control_db import ControlDB, as_control, lease_sql
from batch_assets.ledger.statements import NOW, insert_select, insert_values
from batch_assets.ledger.states import TERMINAL_STATES, TERMINAL_STATES_SQL, JobState, terminal_sql
from batch_assets.ledger.transaction import transaction
from batch_assets.providers.contract import JobSnapshot
from batch_assets.sqltext import sql_literal

Params = Sequence[Any] | Mapping[str, Any] | None
Conn = duckdb.DuckDBPyConnection | ControlDB

# Every provider_job column a caller supplies to insert_jobs (task_id and terminal_seq are the writer's).
JOB_COLUMNS = (
    "job_key",
    "shard_id",
    "provider",
    "endpoint",
    "provider_batch_id",
    "input_file_id",
    "output_file_id",
    "error_file_id",
    "raw_status",
    "state",
    "cancel_requested",
    "request_total",
    "request_completed",
    "request_failed",
    "provider_errors",
    "created_at",
    "submitted_at",
    "state_changed_at",
    "terminal_at",
    "last_polled_at",
    "downloaded_at",
)
# How long a submit run's claim on an intent lasts unless renewed (renewed before each create call).
DEFAULT_CLAIM_LEASE_S = 15 * 60


class CreateMark(StrEnum):
    """`provider_job.create_outcome`: how a create that did not plainly succeed was settled."""

    UNKNOWN = "unknown"  # no answer: the batch may exist; never created again until looked up
    FAILED = "failed"  # the provider refused it: nothing was created
    ADOPTED = "adopted"  # the batch was found at the provider (by a submit run or an operator)
    ABANDONED = "abandoned"  # an operator gave the intent up; the shard goes again under a new job key


class JobNotSettled(ValueError):
    """An operator decision the ledger refuses (the message says why)."""


STATUS_EVENT_COLUMNS = (
    "job_key",
    "from_state",
    "to_state",
    "raw_status",
    "request_total",
    "request_completed",
    "request_failed",
    "observed_at",
)


ENDPOINT_MODES = ("emulator", "live")


def _endpoint_host(url: str) -> str:
    """`scheme://host[:port]` only: a recorded endpoint never carries a path, query or credentials."""
    parts = urlsplit(url)
    host = f"{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"
    return f"{parts.scheme}://{host}" if parts.scheme else host


def _check_endpoint_mode(mode: str) -> None:
    if mode not in ENDPOINT_MODES:
        raise ValueError(f"endpoint_mode must be one of {', '.join(ENDPOINT_MODES)}, got {mode!r}")


def _sent_with(
    endpoint_mode: str | None, endpoint_url: str | None, request_options: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The intent's columns saying where the job goes and how its lines were rendered (when given)."""
    values: dict[str, Any] = {}
    if endpoint_mode is not None:
        _check_endpoint_mode(endpoint_mode)
        values |= {"endpoint_mode": endpoint_mode, "endpoint_url": _endpoint_host(endpoint_url or "")}
    if request_options is not None:
        values["request_options"] = json.dumps(dict(request_options), sort_keys=True)
    return values


def insert_job_intent(
    conn: Conn,
    job_key: str,
    task_id: str,
    shard_id: str,
    provider: str,
    endpoint: str,
    endpoint_mode: str | None = None,
    endpoint_url: str | None = None,
    request_options: Mapping[str, Any] | None = None,
) -> None:
    """Record the intent to submit a shard: a provider_job row in state CREATED (no provider batch
    yet) and its first status event, atomically. Written before the provider is called. Where the
    job goes (`endpoint_mode` emulator | live, `endpoint_url` reduced to its host) and the request
    options its lines were rendered with (JSON) are recorded with it when given."""
    conn = as_control(conn)
    values = {
        "job_key": job_key,
        "task_id": task_id,
        "shard_id": shard_id,
        "provider": provider,
        "endpoint": endpoint,
        "state": JobState.CREATED.value,
    }
    values |= _sent_with(endpoint_mode, endpoint_url, request_options)
    with transaction(conn):
        insert_values(conn, "provider_job", values, fixed={"created_at": NOW, "state_changed_at": NOW})
        insert_values(
            conn,
            "status_event",
            {"job_key": job_key, "from_state": None, "to_state": JobState.CREATED.value},
            fixed={"observed_at": NOW},
        )


def set_input_file(conn: Conn, job_key: str, file_id: str) -> None:
    """Record the provider file id the job's shard was uploaded as (before the create call)."""
    conn = as_control(conn)
    conn.execute("UPDATE ledger.provider_job SET input_file_id = ? WHERE job_key = ?", [file_id, job_key])


# The provider's own timestamps of a batch (JobSnapshot fields of the same names): only filled in,
# never set back to NULL, so an answer that leaves one out (a listing page) keeps what was known.
PROVIDER_TIMES = ("provider_created_at", "provider_started_at", "provider_finalizing_at", "provider_ended_at")
_KEEP_TIMES_SQL = ", ".join(f"{c} = coalesce(?, {c})" for c in PROVIDER_TIMES)
_KEEP_POLLED_TIMES_SQL = ", ".join(f"{c} = coalesce(p.{c}, j.{c})" for c in PROVIDER_TIMES)


def _utc_naive(instant: datetime | None) -> datetime | None:
    """A snapshot's UTC time as the ledger stores times: a naive UTC TIMESTAMP."""
    if instant is None:
        return None
    return instant.astimezone(UTC).replace(tzinfo=None) if instant.tzinfo else instant


def _provider_times(snap: JobSnapshot) -> list[datetime | None]:
    return [_utc_naive(getattr(snap, c)) for c in PROVIDER_TIMES]


def _errors_json(errors) -> str | None:
    """The provider's batch errors as a JSON array of objects: accepts dicts or objects with `.as_dict()`."""
    if not errors:
        return None
    return json.dumps([e.as_dict() if hasattr(e, "as_dict") else e for e in errors])


def record_snapshot(conn: duckdb.DuckDBPyConnection, job_key: str, snap: JobSnapshot, submitted: bool = False) -> bool:
    """Store what a poll (or the create call) saw; returns True if the internal state changed.

    Updates the job row (batch id, raw status, state, request counts, file ids, errors, cancel flag,
    whether its results can be fetched, the provider's own timestamps where it gives them (a known
    one is never set back to NULL); `submitted_at` the first time `submitted` is true;
    `state_changed_at` on a change of state; `terminal_at` and the next `terminal_seq` when the state
    becomes terminal; `last_polled_at` always) and adds a status_event when the state or the raw
    status changed.

    A terminal state is final: a late or reordered observation never moves a job out of it. A later
    poll of a terminal job only completes what it learns about the results (see
    `_record_results_of_terminal`).

    Atomic on its own (the row read, its update and the event), or part of the caller's transaction."""
    with transaction(conn):
        return _record_snapshot(conn, job_key, snap, submitted)


def _record_snapshot(conn: Conn, job_key: str, snap: JobSnapshot, submitted: bool) -> bool:
    conn = as_control(conn)
    row = conn.execute("SELECT state, raw_status FROM ledger.provider_job WHERE job_key = ?", [job_key]).one()
    if row is None:
        raise KeyError(f"no provider job {job_key!r} in the ledger")
    old_state, old_raw = row
    if old_state in TERMINAL_STATES:
        _record_results_of_terminal(conn, job_key, snap)
        return False
    new_state = JobState(snap.state).value
    changed = old_state != new_state
    terminal = new_state in TERMINAL_STATES
    conn.execute(
        f"""
        UPDATE ledger.provider_job SET
            provider_batch_id = ?, raw_status = ?, state = ?, request_total = ?, request_completed = ?,
            request_failed = ?, output_file_id = ?, error_file_id = ?, provider_errors = ?,
            cancel_requested = cancel_requested OR ?, results_ready = ?,
            submitted_at = CASE WHEN ? THEN coalesce(submitted_at, now()::TIMESTAMP) ELSE submitted_at END,
            state_changed_at = CASE WHEN ? THEN now()::TIMESTAMP ELSE state_changed_at END,
            terminal_at = CASE WHEN ? THEN now()::TIMESTAMP ELSE terminal_at END,
            terminal_seq = CASE WHEN ? THEN nextval('ledger.terminal_seq') ELSE terminal_seq END,
            last_polled_at = now()::TIMESTAMP, {_KEEP_TIMES_SQL}
        WHERE job_key = ?
    """,
        [
            snap.provider_batch_id,
            snap.raw_status,
            new_state,
            snap.request_total,
            snap.request_completed,
            snap.request_failed,
            snap.output_file_id,
            snap.error_file_id,
            _errors_json(snap.errors),
            snap.cancel_requested,
            snap.results_ready,
            submitted,
            changed,
            terminal,
            terminal,
            *_provider_times(snap),
            job_key,
        ],
    )
    if changed or old_raw != snap.raw_status:
        insert_values(
            conn,
            "status_event",
            {
                "job_key": job_key,
                "from_state": old_state,
                "to_state": new_state,
                "raw_status": snap.raw_status,
                "request_total": snap.request_total,
                "request_completed": snap.request_completed,
                "request_failed": snap.request_failed,
            },
            fixed={"observed_at": NOW},
        )
    return changed


def _record_results_of_terminal(conn: Conn, job_key: str, snap: JobSnapshot) -> None:
    """A terminal job polled again (its provider reported the end before its results existed): keep
    its state, take the results' readiness (once ready, it stays ready), file ids and errors the
    provider names now, any provider time it did not know yet, and the poll time. Adds no status event."""
    conn = as_control(conn)
    conn.execute(
        f"""
        UPDATE ledger.provider_job SET
            results_ready = coalesce(results_ready, false) OR ?,
            output_file_id = coalesce(?, output_file_id), error_file_id = coalesce(?, error_file_id),
            provider_errors = coalesce(provider_errors, ?), last_polled_at = now()::TIMESTAMP, {_KEEP_TIMES_SQL}
        WHERE job_key = ?
    """,
        [
            snap.results_ready,
            snap.output_file_id,
            snap.error_file_id,
            _errors_json(snap.errors),
            *_provider_times(snap),
            job_key,
        ],
    )


# The columns of a batch of poll results (`snapshot_columns`), in order, with their SQL types.
SNAPSHOT_FIELDS = (
    ("job_key", "VARCHAR"),
    ("provider_batch_id", "VARCHAR"),
    ("raw_status", "VARCHAR"),
    ("state", "VARCHAR"),
    ("request_total", "BIGINT"),
    ("request_completed", "BIGINT"),
    ("request_failed", "BIGINT"),
    ("output_file_id", "VARCHAR"),
    ("error_file_id", "VARCHAR"),
    ("provider_errors", "VARCHAR"),
    ("cancel_requested", "BOOLEAN"),
    ("results_ready", "BOOLEAN"),
    *((name, "TIMESTAMP") for name in PROVIDER_TIMES),
)


def snapshot_columns(snapshots: Mapping[str, JobSnapshot]) -> dict[str, list]:
    """job_key -> snapshot as columns (SNAPSHOT_FIELDS), for `record_snapshots`."""
    snaps = list(snapshots.values())
    return {
        "job_key": list(snapshots),
        "provider_batch_id": [s.provider_batch_id for s in snaps],
        "raw_status": [s.raw_status for s in snaps],
        "state": [JobState(s.state).value for s in snaps],
        "request_total": [s.request_total for s in snaps],
        "request_completed": [s.request_completed for s in snaps],
        "request_failed": [s.request_failed for s in snaps],
        "output_file_id": [s.output_file_id for s in snaps],
        "error_file_id": [s.error_file_id for s in snaps],
        "provider_errors": [_errors_json(s.errors) for s in snaps],
        "cancel_requested": [bool(s.cancel_requested) for s in snaps],
        "results_ready": [bool(s.results_ready) for s in snaps],
        **{name: [_utc_naive(getattr(s, name)) for s in snaps] for name in PROVIDER_TIMES},
    }


def record_snapshots(conn: Conn, columns: Mapping[str, Sequence]) -> list[tuple[str, str, str]]:
    """`record_snapshot` for a whole batch of poll results at once (`snapshot_columns`): the same
    rules, in one transaction whose statements do not grow with the number of jobs (the batch goes
    in as one list parameter per column; one UPDATE … FROM for the job rows, one INSERT … SELECT
    for the status events). Returns (job_key, old state, new state) for every job whose internal
    state changed, by job_key. Job keys not in the ledger are ignored."""
    conn = as_control(conn)
    if not columns["job_key"]:
        return []
    # List parameters, not a registered Arrow table: DuckDB 2 refuses register() while the
    # connection holds a half-read result, and its Arrow replacement scan fails on connections
    # opened in another thread (a sensor tick beside a run).
    unnested = ", ".join(f"unnest(?::{kind}[]) AS {name}" for name, kind in SNAPSHOT_FIELDS)
    params = [list(columns[name]) for name, _kind in SNAPSHOT_FIELDS]
    with transaction(conn):
        # The rows as they are now (inside the transaction): a terminal job stays terminal.
        conn.execute("DROP TABLE IF EXISTS _poll_recorded")
        conn.execute(
            f"""
            CREATE TEMP TABLE _poll_recorded AS
            SELECT p.*, j.state AS old_state, j.raw_status AS old_raw,
                   j.state IN {TERMINAL_STATES_SQL} AS was_terminal,
                   j.state IS DISTINCT FROM p.state AS changed,
                   p.state IN {TERMINAL_STATES_SQL} AS now_terminal
            FROM (SELECT {unnested}) p JOIN ledger.provider_job j USING (job_key)""",
            params,
        )
        insert_status_events(
            conn,
            """
            SELECT job_key, old_state AS from_state, state AS to_state, raw_status, request_total,
                   request_completed, request_failed, now()::TIMESTAMP AS observed_at
            FROM _poll_recorded WHERE NOT was_terminal AND (changed OR old_raw IS DISTINCT FROM raw_status)""",
        )
        # A terminal row only takes what it learns about its results (see _record_results_of_terminal).
        conn.execute(f"""
            UPDATE ledger.provider_job AS j SET
                provider_batch_id = CASE WHEN p.was_terminal THEN j.provider_batch_id ELSE p.provider_batch_id END,
                raw_status = CASE WHEN p.was_terminal THEN j.raw_status ELSE p.raw_status END,
                state = CASE WHEN p.was_terminal THEN j.state ELSE p.state END,
                request_total = CASE WHEN p.was_terminal THEN j.request_total ELSE p.request_total END,
                request_completed = CASE WHEN p.was_terminal THEN j.request_completed ELSE p.request_completed END,
                request_failed = CASE WHEN p.was_terminal THEN j.request_failed ELSE p.request_failed END,
                output_file_id = CASE WHEN p.was_terminal THEN coalesce(p.output_file_id, j.output_file_id)
                                      ELSE p.output_file_id END,
                error_file_id = CASE WHEN p.was_terminal THEN coalesce(p.error_file_id, j.error_file_id)
                                     ELSE p.error_file_id END,
                provider_errors = CASE WHEN p.was_terminal THEN coalesce(j.provider_errors, p.provider_errors)
                                       ELSE p.provider_errors END,
                cancel_requested = CASE WHEN p.was_terminal THEN j.cancel_requested
                                        ELSE j.cancel_requested OR p.cancel_requested END,
                results_ready = CASE WHEN p.was_terminal THEN coalesce(j.results_ready, false) OR p.results_ready
                                     ELSE p.results_ready END,
                state_changed_at = CASE WHEN NOT p.was_terminal AND p.changed THEN now()::TIMESTAMP
                                        ELSE j.state_changed_at END,
                terminal_at = CASE WHEN NOT p.was_terminal AND p.now_terminal THEN now()::TIMESTAMP
                                   ELSE j.terminal_at END,
                terminal_seq = CASE WHEN NOT p.was_terminal AND p.now_terminal THEN nextval('ledger.terminal_seq')
                                    ELSE j.terminal_seq END,
                last_polled_at = now()::TIMESTAMP, {_KEEP_POLLED_TIMES_SQL}
            FROM _poll_recorded p WHERE j.job_key = p.job_key""")
        changed = conn.execute("""
            SELECT job_key, old_state, state FROM _poll_recorded
            WHERE changed AND NOT was_terminal ORDER BY job_key""").rows
        conn.execute("DROP TABLE _poll_recorded")
    return [tuple(row) for row in changed]


def request_cancel(conn: Conn, job_key: str) -> None:
    """Record that a cancel of the job was requested (the flag stays set)."""
    conn = as_control(conn)
    conn.execute("UPDATE ledger.provider_job SET cancel_requested = true WHERE job_key = ?", [job_key])


def mark_downloaded(conn: Conn, job_key: str) -> None:
    """Record that the terminal job's result files were downloaded (now); clears a collect error."""
    conn = as_control(conn)
    conn.execute(
        "UPDATE ledger.provider_job SET downloaded_at = now()::TIMESTAMP, collect_error = NULL WHERE job_key = ?",
        [job_key],
    )


def count_collect_attempts(conn: Conn, job_keys: Sequence[str]) -> None:
    """A collect run starts on these jobs: one more collection try each (`collect_attempts`)."""
    conn = as_control(conn)
    if job_keys:
        conn.execute(
            "UPDATE ledger.provider_job SET collect_attempts = coalesce(collect_attempts, 0) + 1 "
            "WHERE job_key = ANY(?)",
            [list(job_keys)],
        )


def set_collect_error(conn: Conn, job_key: str, error: str | None) -> None:
    """Record (or clear, with None) why collecting the job failed or is held back."""
    conn = as_control(conn)
    conn.execute(
        "UPDATE ledger.provider_job SET collect_error = ? WHERE job_key = ?",
        [None if error is None else error[:2000], job_key],
    )


def mark_stuck(conn: Conn, job_key: str) -> None:
    """Record that the job stayed in its state longer than its SLA (the first time only)."""
    conn = as_control(conn)
    conn.execute(
        "UPDATE ledger.provider_job SET stuck_at = coalesce(stuck_at, now()::TIMESTAMP) WHERE job_key = ?", [job_key]
    )


def set_stuck_action(conn: Conn, job_key: str, action: str) -> None:
    """Record what the stuck policy did about the job (e.g. 'cancel_requested', 'notified')."""
    conn = as_control(conn)
    conn.execute("UPDATE ledger.provider_job SET stuck_action = ? WHERE job_key = ?", [action, job_key])


def insert_jobs(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Insert whole provider_job rows of the partition as `query` gives them (every column of
    JOB_COLUMNS, by name) — e.g. the benchmark's synthetic jobs. A row in a terminal state gets the
    next terminal_seq. Returns the number inserted."""
    return insert_select(
        conn,
        "provider_job",
        JOB_COLUMNS,
        query,
        params,
        fixed={
            "task_id": sql_literal(task_id),
            "terminal_seq": f"CASE WHEN {terminal_sql('_rows')} THEN nextval('ledger.terminal_seq') END",
        },
    )


def insert_in_flight_jobs(conn: Conn, task_id: str, provider: str, count: int, prefix: str) -> int:
    """`count` in-flight job rows `<prefix><n>` of one partition with no provider batch behind them,
    for benchmarks of the control protocols (poll leases); returns the number inserted."""
    return (
        as_control(conn)
        .execute(
            """INSERT INTO ledger.provider_job (job_key, task_id, shard_id, provider, endpoint, state,
                   provider_batch_id, created_at, state_changed_at)
               SELECT ? || CAST(g.i AS VARCHAR), ?, 's', ?, '/v1/chat/completions', 'in_progress',
                      'batch_' || ? || CAST(g.i AS VARCHAR), now()::TIMESTAMP, now()::TIMESTAMP
               FROM generate_series(1, ?) AS g(i)""",
            [prefix, task_id, provider, prefix, count],
        )
        .rowcount
    )


def insert_status_events(conn: duckdb.DuckDBPyConnection, query: str, params: Params = None) -> int:
    """Insert status events as `query` gives them (every column of STATUS_EVENT_COLUMNS, by name).
    Returns the number inserted."""
    return insert_select(conn, "status_event", STATUS_EVENT_COLUMNS, query, params)


# --- claims and the settling of creates ----------------------------------------------------------------


def _lease(lease_s: float) -> str:
    """SQL for now + lease (the lease is a number, never text from outside)."""
    return lease_sql(lease_s)


_OPEN_INTENT = f"provider_batch_id IS NULL AND create_outcome IS DISTINCT FROM '{CreateMark.ABANDONED.value}'"
_CLAIM_FREE = "(claimed_by IS NULL OR claim_expires_at < now()::TIMESTAMP)"


def claim_new_intent(
    conn: duckdb.DuckDBPyConnection | ControlDB,
    job_key: str,
    task_id: str,
    shard_id: str,
    provider: str,
    endpoint: str,
    owner: str,
    lease_s: float = DEFAULT_CLAIM_LEASE_S,
    *,
    endpoint_mode: str | None = None,
    endpoint_url: str | None = None,
    request_options: Mapping[str, Any] | None = None,
    account: str = "default",
) -> bool:
    """Record the intent to submit a shard already claimed by `owner` (plus its first status
    event), atomically, with where it goes and its request options (as `insert_job_intent`).
    False when the job_key exists already: another run got there first and this one must neither
    upload nor create."""
    db = as_control(conn)
    with db.transaction():
        inserted = insert_values(
            db,
            "provider_job",
            {
                "job_key": job_key,
                "task_id": task_id,
                "shard_id": shard_id,
                "provider": provider,
                "endpoint": endpoint,
                "state": JobState.CREATED.value,
                "claimed_by": owner,
                "account": account,
                **_sent_with(endpoint_mode, endpoint_url, request_options),
            },
            fixed={"created_at": NOW, "state_changed_at": NOW, "claim_expires_at": _lease(lease_s)},
            on_conflict="ON CONFLICT (job_key) DO NOTHING",
        )
        if inserted:
            insert_values(
                db,
                "status_event",
                {"job_key": job_key, "from_state": None, "to_state": JobState.CREATED.value},
                fixed={"observed_at": NOW},
            )
    return inserted == 1


def claim_intent(
    conn: duckdb.DuckDBPyConnection | ControlDB, job_key: str, owner: str, lease_s: float = DEFAULT_CLAIM_LEASE_S
) -> bool:
    """Claim an existing intent without a batch id (not abandoned) for `owner`: it must be free,
    its lease expired, or already `owner`'s. One guarded UPDATE (the engine serializes writers of
    the row and re-checks the guard): True = won."""
    touched = (
        as_control(conn)
        .execute(
            f"""
        UPDATE ledger.provider_job SET claimed_by = ?, claim_expires_at = {_lease(lease_s)}
        WHERE job_key = ? AND {_OPEN_INTENT} AND ({_CLAIM_FREE} OR claimed_by = ?)
    """,
            [owner, job_key, owner],
        )
        .rowcount
    )
    return touched == 1


def renew_claim(
    conn: duckdb.DuckDBPyConnection | ControlDB, job_key: str, owner: str, lease_s: float = DEFAULT_CLAIM_LEASE_S
) -> bool:
    """Extend `owner`'s claim (before a create call). Strict: only while the row is still claimed by
    `owner` and still has no batch id; False means the claim was lost and nothing may be created."""
    touched = (
        as_control(conn)
        .execute(
            f"""
        UPDATE ledger.provider_job SET claim_expires_at = {_lease(lease_s)}
        WHERE job_key = ? AND claimed_by = ? AND {_OPEN_INTENT}
    """,
            [job_key, owner],
        )
        .rowcount
    )
    return touched == 1


def release_claim(conn: duckdb.DuckDBPyConnection | ControlDB, job_key: str, owner: str) -> None:
    """Give up `owner`'s claim (a no-op if the row is not claimed by `owner`)."""
    as_control(conn).execute(
        "UPDATE ledger.provider_job SET claimed_by = NULL, claim_expires_at = NULL "
        "WHERE job_key = ? AND claimed_by = ?",
        [job_key, owner],
    )


def release_claims_of(conn: duckdb.DuckDBPyConnection | ControlDB, owners: Sequence[str]) -> int:
    """Give up every intent claim (no batch id yet) held by `owners` — runs known to have ended, so
    their claims would otherwise block the shard until the lease runs out. Returns how many."""
    if not owners:
        return 0
    return (
        as_control(conn)
        .execute(
            """
        UPDATE ledger.provider_job SET claimed_by = NULL, claim_expires_at = NULL
        WHERE provider_batch_id IS NULL AND claimed_by = ANY(?)
    """,
            [list(owners)],
        )
        .rowcount
    )


def _mark_create(conn: Conn, job_key: str, mark: CreateMark, detail: str | None) -> None:
    conn = as_control(conn)
    conn.execute(
        "UPDATE ledger.provider_job SET create_outcome = ?, create_error = ? WHERE job_key = ?",
        [mark.value, detail, job_key],
    )


def mark_create_unknown(conn: duckdb.DuckDBPyConnection, job_key: str, detail: str) -> None:
    """The create call got no answer, or the lookup after it could not tell: `detail` says what is
    known (the call's error, or why the provider cannot tell yet). The job stays CREATED, undecided."""
    _mark_create(conn, job_key, CreateMark.UNKNOWN, detail)


def mark_create_failed(conn: duckdb.DuckDBPyConnection, job_key: str, detail: str) -> None:
    """The provider refused the create (nothing was created); `detail` is its error."""
    _mark_create(conn, job_key, CreateMark.FAILED, detail)


def record_created(conn: duckdb.DuckDBPyConnection, job_key: str, snap: JobSnapshot, owner: str) -> None:
    """The create call answered with the batch: record it (submitted) and release `owner`'s claim, atomically."""
    with transaction(conn):
        record_snapshot(conn, job_key, snap, submitted=True)
        release_claim(conn, job_key, owner)


def record_found(conn: duckdb.DuckDBPyConnection, job_key: str, snap: JobSnapshot, owner: str, detail: str) -> None:
    """A submit run found the batch of an undecided (or crashed) create at the provider: record it
    (submitted), mark the create adopted with how it was found, release the claim; atomically."""
    with transaction(conn):
        record_snapshot(conn, job_key, snap, submitted=True)
        _mark_create(conn, job_key, CreateMark.ADOPTED, detail)
        release_claim(conn, job_key, owner)


def _operator_action(conn: duckdb.DuckDBPyConnection, action: str, task_id: str, job_key: str, detail: str) -> None:
    insert_values(
        conn,
        "operator_action",
        {"action": action, "task_id": task_id, "job_key": job_key, "custom_id": None, "detail": detail},
        fixed={"acted_at": NOW},
    )


def _open_intent_for_operator(conn: Conn, job_key: str) -> dict:
    """The job row an operator may settle, or JobNotSettled saying why not."""
    conn = as_control(conn)
    row = conn.execute(
        """
        SELECT task_id, provider_batch_id, create_outcome, claimed_by, claim_expires_at,
               claimed_by IS NOT NULL AND claim_expires_at >= now()::TIMESTAMP AS claim_live
        FROM ledger.provider_job WHERE job_key = ?""",
        [job_key],
    ).one()
    if row is None:
        raise JobNotSettled(f"no provider job {job_key!r}")
    task_id, batch_id, outcome, claimed_by, expires, claim_live = row
    if batch_id is not None:
        raise JobNotSettled(f"job {job_key} already has provider batch {batch_id}: nothing to settle")
    if outcome == CreateMark.ABANDONED.value:
        raise JobNotSettled(f"job {job_key} was abandoned: the shard goes again under a new job key")
    if claim_live:
        raise JobNotSettled(
            f"job {job_key} is held by submit run {claimed_by} until {expires:%Y-%m-%d %H:%M:%S} UTC: "
            "retry when that run has ended"
        )
    return {"task_id": task_id}


def adopt_job(conn: Conn, job_key: str, snap: JobSnapshot, detail: str) -> None:
    """An operator settles an undecided intent with the provider batch `snap` describes: recorded
    as the job's batch (submitted), create_outcome 'adopted', one operator_action row; atomically.
    Raises JobNotSettled when the job is not an open, unclaimed intent or the batch already belongs
    to another job."""
    conn = as_control(conn)
    with transaction(conn):
        job = _open_intent_for_operator(conn, job_key)
        other = conn.execute(
            "SELECT job_key FROM ledger.provider_job WHERE provider_batch_id = ? AND job_key <> ?",
            [snap.provider_batch_id, job_key],
        ).one()
        if other is not None:
            raise JobNotSettled(f"batch {snap.provider_batch_id} is already recorded for job {other[0]}")
        record_snapshot(conn, job_key, snap, submitted=True)
        _mark_create(conn, job_key, CreateMark.ADOPTED, f"adopted by an operator: {detail}")
        conn.execute(
            "UPDATE ledger.provider_job SET claimed_by = NULL, claim_expires_at = NULL WHERE job_key = ?", [job_key]
        )
        _operator_action(conn, "adopt", job["task_id"], job_key, detail)


def abandon_job(conn: Conn, job_key: str, detail: str) -> None:
    """An operator gives up an undecided intent: create_outcome 'abandoned' (the job key is never
    used again; the next submit run sends the shard under a new one), one operator_action row;
    atomically. Raises JobNotSettled when the job is not an open, unclaimed intent."""
    conn = as_control(conn)
    with transaction(conn):
        job = _open_intent_for_operator(conn, job_key)
        _mark_create(conn, job_key, CreateMark.ABANDONED, f"abandoned by an operator: {detail}")
        conn.execute(
            "UPDATE ledger.provider_job SET claimed_by = NULL, claim_expires_at = NULL WHERE job_key = ?", [job_key]
        )
        _operator_action(conn, "abandon", job["task_id"], job_key, detail)


def mark_collected(conn: Conn, job_keys: Sequence[str]) -> None:
    """Mark these jobs as fully collected: the search for pending collections skips them from now on
    (no ledger step is ever undone)."""
    conn = as_control(conn)
    with transaction(conn):
        conn.execute(
            "UPDATE ledger.provider_job SET collected_at = now()::TIMESTAMP "
            "WHERE collected_at IS NULL AND job_key = ANY(?)",
            [list(job_keys)],
        )


def unmark_collected(conn: Conn, task_id: str, job_keys: Sequence[str] | None = None) -> None:
    """Have the partition's jobs (or these of them) looked at again by the next search for pending
    collections."""
    conn = as_control(conn)
    with transaction(conn):
        conn.execute(
            "UPDATE ledger.provider_job SET collected_at = NULL "
            "WHERE task_id = ? AND (CAST(? AS VARCHAR[]) IS NULL OR job_key = ANY(?))",
            [task_id, None if job_keys is None else list(job_keys), None if job_keys is None else list(job_keys)],
        )
