"""Reads of `ledger.provider_job` (with its shard and partition) for the sensor, the poller, the
submit runs and the CLI.

Every function takes a DuckDB connection or a ControlDB (either engine), runs SQL both engines
speak, and returns plain rows, dicts or an Arrow table — never a cursor or a temporary table, so a
stage that needs the jobs beside its per-item tables registers the Arrow table (`registered`).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from batch_assets.ledger.control_db import ControlDB, as_control, day_sql, epoch_sql
from batch_assets.ledger.jobs import CreateMark
from batch_assets.ledger.states import JobState, in_flight_sql, terminal_sql

Conn = duckdb.DuckDBPyConnection | ControlDB

ABANDONED = CreateMark.ABANDONED.value

# Whether a terminal job's results may be downloaded now, on provider_job `j`. Only a job reported
# COMPLETED whose results cannot be fetched yet is held back (results_ready NULL: recorded before
# the ledger knew, taken as ready); a failed, expired or cancelled batch has whatever it has.
READY_SQL = f"(j.state <> '{JobState.COMPLETED.value}' OR coalesce(j.results_ready, true))"

# Where the job's provider-side files stand (retention: `delete_remote_files`): deleted, a deletion
# that failed and is retried (next collect, sensor tick, retention job), or still on the provider.
REMOTE_FILES_SQL = """
    CASE WHEN remote_deleted_at IS NOT NULL THEN 'deleted'
         WHEN coalesce(remote_delete_attempts, 0) > 0
              THEN 'delete failed x' || CAST(remote_delete_attempts AS VARCHAR) || ' (retried)'
         WHEN downloaded_at IS NOT NULL THEN 'on provider'
    END"""

# What the `note` column says about a job whose create did not plainly succeed.
NOTE_SQL = """
    CASE WHEN provider_batch_id IS NULL AND create_outcome = 'unknown'
              THEN 'undecided: ' || coalesce(create_error, 'the create got no answer')
         WHEN create_outcome = 'abandoned' THEN 'abandoned (the shard goes again under a new job key)'
         WHEN provider_batch_id IS NULL AND create_outcome = 'failed'
              THEN 'refused: ' || coalesce(create_error, '')
         WHEN create_outcome = 'adopted' THEN coalesce(create_error, 'adopted')
         WHEN provider_batch_id IS NULL AND claimed_by IS NOT NULL AND claim_expires_at >= now()::TIMESTAMP
              THEN 'being submitted by ' || claimed_by
    END"""


def _open_intent_sql(alias: str) -> str:
    """Predicate: an intent without a batch whose create is not settled (never answered, or unknown)."""
    return (
        f"{alias}.provider_batch_id IS NULL AND {alias}.state = '{JobState.CREATED.value}' AND "
        f"({alias}.create_outcome IS NULL OR {alias}.create_outcome = '{CreateMark.UNKNOWN.value}')"
    )


# --- The sensor ----------------------------------------------------------------------------------


def max_terminal_seq(conn: Conn) -> int:
    """The highest terminal sequence number given so far (0: no job ended yet)."""
    return int(as_control(conn).execute("SELECT coalesce(max(terminal_seq), 0) FROM ledger.provider_job").scalar())


def shard_attempts(conn: Conn) -> dict[tuple[str, str], tuple[int | None, int]]:
    """(task_name, partition_date) -> (highest shard attempt among the partition's provider jobs,
    highest shard attempt of the partition's shards)."""
    rows = as_control(conn).execute(f"""
        SELECT t.task_name, {day_sql("t.partition_date")} AS day,
               max(s.attempt) FILTER (WHERE s.shard_id IN (SELECT shard_id FROM ledger.provider_job)),
               max(s.attempt)
        FROM ledger.shard s JOIN ledger.batch_task t USING (task_id)
        GROUP BY t.task_name, t.partition_date""")
    return {(name, day): (of_jobs, int(of_shards)) for name, day, of_jobs, of_shards in rows.rows}


def intent_claim_owners(conn: Conn) -> list[str]:
    """Who holds a live claim on an intent that has no batch yet (a submit run mid-create, or one
    that died holding it)."""
    rows = as_control(conn).execute(f"""
        SELECT DISTINCT j.claimed_by FROM ledger.provider_job j
        WHERE {_open_intent_sql("j")} AND j.claimed_by IS NOT NULL AND j.claim_expires_at > now()::TIMESTAMP
        ORDER BY 1""")
    return [r[0] for r in rows.rows]


def partitions_with_orphaned_intents(conn: Conn) -> list[tuple[str, str, int, str]]:
    """(task_name, partition_date, intents, fingerprint) for partitions holding intents that no run
    owns (never claimed again after their run ended, or the lease ran out) and whose create was not
    settled. The fingerprint changes when the set of such intents does."""
    rows = as_control(conn).execute(f"""
        SELECT t.task_name, {day_sql("t.partition_date")}, count(*),
               substr(md5(string_agg(j.job_key, ',' ORDER BY j.job_key)), 1, 12)
        FROM ledger.provider_job j JOIN ledger.batch_task t USING (task_id)
        WHERE {_open_intent_sql("j")}
          AND (j.claimed_by IS NULL OR j.claim_expires_at <= now()::TIMESTAMP)
        GROUP BY t.task_name, t.partition_date ORDER BY 1, 2""")
    return [(name, day, int(n), fp) for name, day, n, fp in rows.rows]


# --- Polling and stuck jobs ----------------------------------------------------------------------


def in_flight_jobs(conn: Conn, task_name: str | None = None) -> list[dict]:
    """Jobs the provider has and that have not ended, with their seconds in the state and stuck."""
    now = "now()::TIMESTAMP"
    return (
        as_control(conn)
        .execute(
            f"""
        SELECT j.job_key, t.task_name, j.provider, j.provider_batch_id, j.state, j.stuck_at, j.stuck_action,
               j.cancel_requested,
               {epoch_sql(now)} - {epoch_sql("j.state_changed_at")} AS seconds_in_state,
               {epoch_sql(now)} - {epoch_sql("j.stuck_at")} AS seconds_stuck
        FROM ledger.provider_job j JOIN ledger.batch_task t USING (task_id)
        WHERE {in_flight_sql("j")} AND (CAST(? AS VARCHAR) IS NULL OR t.task_name = ?)
        ORDER BY j.job_key""",
            [task_name, task_name],
        )
        .dicts()
    )


def unfinished_jobs(conn: Conn, task_id: str) -> int:
    """The partition's provider jobs not terminal yet (intents included)."""
    sql = "SELECT count(*) FROM ledger.provider_job WHERE task_id = ? AND terminal_at IS NULL"
    return int(as_control(conn).execute(sql, [task_id]).scalar())


def shards_sent_twice(conn: Conn, ids: Sequence[str]) -> list[str]:
    """Shards of the partitions `ids` with more than one provider job (exactly once says: none)."""
    sql = """SELECT shard_id FROM ledger.provider_job WHERE task_id = ANY(?)
             GROUP BY shard_id HAVING count(*) > 1 ORDER BY shard_id"""
    return [r[0] for r in as_control(conn).execute(sql, [list(ids)]).rows]


def job_spans(conn: Conn, ids: Sequence[str], provider: str) -> list[tuple[float, float]]:
    """(created, ended) in epoch seconds of every provider batch of the partitions `ids` on one
    provider (ended: now for one still running), for the most that were in flight at once."""
    now = epoch_sql("now()::TIMESTAMP")
    sql = f"""SELECT {epoch_sql("submitted_at")}, coalesce({epoch_sql("terminal_at")}, {now})
              FROM ledger.provider_job
              WHERE task_id = ANY(?) AND provider = ? AND provider_batch_id IS NOT NULL AND submitted_at IS NOT NULL"""
    return [(float(a), float(b)) for a, b in as_control(conn).execute(sql, [list(ids), provider]).rows]


def jobs_polled_since(conn: Conn, since) -> int:
    """Jobs whose last poll was recorded at or after `since` (a UTC timestamp)."""
    sql = "SELECT count(*) FROM ledger.provider_job WHERE last_polled_at >= ?"
    return int(as_control(conn).execute(sql, [since]).scalar())


def running_jobs(conn: Conn, target: str) -> list[dict] | None:
    """The provider batches still running of one job or one partition (`target`: a job key or a
    task_id); None when `target` names no job at all."""
    db = as_control(conn)
    if not db.execute(
        "SELECT count(*) FROM ledger.provider_job WHERE job_key = ? OR task_id = ?", [target] * 2
    ).scalar():
        return None
    return db.execute(
        """
        SELECT job_key, provider, provider_batch_id, state, output_file_id, error_file_id, input_file_id
        FROM ledger.provider_job
        WHERE (job_key = ? OR task_id = ?) AND terminal_at IS NULL AND provider_batch_id IS NOT NULL
        ORDER BY job_key""",
        [target, target],
    ).dicts()


def job_counts(conn: Conn) -> tuple[int, int, int]:
    """(jobs, jobs not ended, jobs downloaded) over the whole ledger."""
    row = as_control(conn).execute(
        "SELECT count(*), count(*) FILTER (WHERE terminal_at IS NULL), count(downloaded_at) FROM ledger.provider_job"
    )
    jobs, open_jobs, downloaded = row.one()
    return int(jobs), int(open_jobs), int(downloaded)


# --- Collection ----------------------------------------------------------------------------------


def collect_candidates(conn: Conn, task_id: str | None = None) -> pa.Table:
    """Terminal jobs (of one partition, or all) not yet found collected, whose results can be read:
    the candidates the collect search checks against the partitions' per-item tables."""
    return as_control(conn).arrow(
        f"""
        SELECT j.job_key, j.task_id, j.shard_id, j.state, j.downloaded_at, t.task_name,
               {day_sql("t.partition_date")} AS partition_date, s.attempt,
               coalesce(j.collect_attempts, 0) AS collect_attempts, j.collect_error
        FROM ledger.provider_job j
        JOIN ledger.batch_task t USING (task_id)
        JOIN ledger.shard s USING (shard_id)
        WHERE {terminal_sql("j")} AND (j.downloaded_at IS NOT NULL OR {READY_SQL}) AND j.collected_at IS NULL
          AND (CAST(? AS VARCHAR) IS NULL OR j.task_id = ?)""",
        [task_id, task_id],
    )


def jobs_to_download(conn: Conn, task_id: str) -> list[dict]:
    """The partition's ended jobs whose results can be read and are not downloaded yet."""
    return (
        as_control(conn)
        .execute(
            f"""
        SELECT j.job_key, j.provider_batch_id, j.input_file_id, j.output_file_id, j.error_file_id
        FROM ledger.provider_job j
        WHERE j.task_id = ? AND j.terminal_at IS NOT NULL AND j.downloaded_at IS NULL AND {READY_SQL}
        ORDER BY j.job_key""",
            [task_id],
        )
        .dicts()
    )


def results_not_ready(conn: Conn) -> list[dict]:
    """Terminal jobs whose results cannot be fetched yet, with the seconds since they ended."""
    return (
        as_control(conn)
        .execute(f"""
        SELECT j.job_key, j.state, j.collect_error,
               {epoch_sql("now()::TIMESTAMP")} - {epoch_sql("j.terminal_at")} AS seconds
        FROM ledger.provider_job j
        WHERE {terminal_sql("j")} AND j.downloaded_at IS NULL AND NOT {READY_SQL}
        ORDER BY j.job_key""")
        .dicts()
    )


# --- Submission ----------------------------------------------------------------------------------


def known_batch_ids(conn: Conn, provider: str) -> frozenset[str]:
    """Every provider batch id recorded for `provider` (a lookup never takes one of them as new)."""
    rows = as_control(conn).execute(
        "SELECT provider_batch_id FROM ledger.provider_job WHERE provider = ? AND provider_batch_id IS NOT NULL",
        [provider],
    )
    return frozenset(r[0] for r in rows.rows)


def has_batch(conn: Conn, job_key: str) -> bool:
    return bool(
        as_control(conn)
        .execute("SELECT provider_batch_id IS NOT NULL FROM ledger.provider_job WHERE job_key = ?", [job_key])
        .scalar()
    )


def shards_with_live_jobs(conn: Conn, task_id: str, ageing_s: float) -> list[dict]:
    """Per shard of the partition: its live job (the newest one not abandoned), if any, and how many
    jobs it ever had. The waiting shards come first, in the queue's order (ledger.admission): were a
    later waiter tried first, it would wait behind an earlier one of this run, which then never comes."""
    waited = f"{epoch_sql('now()::TIMESTAMP')} - {epoch_sql('s.deferred_at')}"
    return (
        as_control(conn)
        .execute(
            f"""
        SELECT shard_id, path, line_count, est_tokens, job_key, state, input_file_id, provider_batch_id,
               intent_unix, jobs_of_shard
        FROM (
            SELECT s.shard_id, s.path, s.line_count, s.est_tokens, s.shard_no, s.deferred_at,
                   j.job_key, j.state, j.input_file_id, j.provider_batch_id,
                   CAST(floor({epoch_sql("j.created_at")}) AS BIGINT) AS intent_unix,
                   (SELECT count(*) FROM ledger.provider_job k WHERE k.shard_id = s.shard_id) AS jobs_of_shard,
                   s.wait_priority + floor(({waited}) / ?) AS queue_rank,
                   row_number() OVER (PARTITION BY s.shard_id ORDER BY j.created_at DESC, j.job_key DESC) AS newest
            FROM ledger.shard s
            LEFT JOIN ledger.provider_job j ON j.shard_id = s.shard_id AND j.create_outcome IS DISTINCT FROM ?
            WHERE s.task_id = ?
        ) AS _s
        WHERE newest = 1
        ORDER BY queue_rank DESC NULLS LAST, deferred_at NULLS LAST, shard_no""",
            [float(ageing_s), ABANDONED, task_id],
        )
        .dicts()
    )


# --- Retention -----------------------------------------------------------------------------------


def jobs_with_remote_files(
    conn: Conn, task_id: str | None = None, task_names: Sequence[str] | None = None, *, retry_only: bool = False
) -> pa.Table:
    """Downloaded jobs (of one partition, of some tasks, or all) whose provider-side files are not
    deleted yet; with `retry_only`, those whose deletion failed before. Whether every downloaded file
    is ingested is the caller's to check (raw_file is a per-partition table)."""
    return as_control(conn).arrow(
        """
        SELECT j.job_key, j.task_id, j.provider, j.provider_batch_id, j.input_file_id, j.output_file_id,
               j.error_file_id, coalesce(j.remote_delete_attempts, 0) AS attempts,
               j.remote_delete_error AS last_error
        FROM ledger.provider_job j JOIN ledger.batch_task t USING (task_id)
        WHERE j.downloaded_at IS NOT NULL AND j.remote_deleted_at IS NULL AND j.provider_batch_id IS NOT NULL
          AND (CAST(? AS VARCHAR) IS NULL OR j.task_id = ?)
          AND (CAST(? AS VARCHAR[]) IS NULL OR t.task_name = ANY(?))
          AND (NOT ? OR coalesce(j.remote_delete_attempts, 0) > 0)""",
        [task_id, task_id, task_names and list(task_names), task_names and list(task_names), retry_only],
    )


# UTC "today" on both engines (their sessions run in UTC).
_TODAY = "CAST(now()::TIMESTAMP AS DATE)"


def tasks_with_jobs_created_today(conn: Conn) -> set[str]:
    """The partitions with a provider job (an intent counts) created today, UTC."""
    rows = as_control(conn).execute(
        f"SELECT DISTINCT task_id FROM ledger.provider_job WHERE CAST(created_at AS DATE) = {_TODAY}"
    )
    return {r[0] for r in rows.rows}


def shard_send_states(conn: Conn, task_ids: Sequence[str]) -> pa.Table:
    """The shards of these partitions: shard_id, task_id, model, `sent_today` (a job of it was
    created today, UTC), `unsent` (no job, or only abandoned ones: it goes again) and est_cost, for the budget."""
    return as_control(conn).arrow(
        f"""
        SELECT s.shard_id, s.task_id, s.model, s.est_cost,
               EXISTS (SELECT 1 FROM ledger.provider_job j
                       WHERE j.shard_id = s.shard_id AND CAST(j.created_at AS DATE) = {_TODAY}) AS sent_today,
               NOT EXISTS (SELECT 1 FROM ledger.provider_job j
                           WHERE j.shard_id = s.shard_id AND j.create_outcome IS DISTINCT FROM ?) AS unsent
        FROM ledger.shard s WHERE s.task_id = ANY(?)""",
        [ABANDONED, list(task_ids)],
    )


# --- The CLI ---------------------------------------------------------------------------------------


def job_listing(conn: Conn, ids: Sequence[str], limit: int = 0) -> tuple[list[dict], int]:
    """The jobs of these partitions oldest first (with `limit`, the newest `limit` of them) for
    `batch-assets jobs`, and how many there are in all."""
    db = as_control(conn)
    rows = db.execute(
        f"""
        SELECT * FROM (
            SELECT job_key, task_id, provider, endpoint_mode, endpoint_url, request_options,
                   provider_batch_id, state, raw_status, request_total,
                   request_completed, request_failed, cancel_requested, submitted_at, terminal_at,
                   create_outcome, create_error, claimed_by, claim_expires_at, {NOTE_SQL} AS note,
                   CASE WHEN stuck_at IS NOT NULL THEN coalesce(stuck_action, 'stuck') END AS stuck, stuck_at,
                   coalesce(collect_attempts, 0) AS collect_attempts, collect_error,
                   {REMOTE_FILES_SQL} AS remote_files, remote_delete_error, created_at
            FROM ledger.provider_job
            WHERE task_id = ANY(?)
            ORDER BY created_at DESC, job_key DESC
            LIMIT ?
        ) AS _newest ORDER BY created_at, job_key""",
        [list(ids), limit if limit > 0 else None],
    ).dicts()
    total = len(rows)
    if limit and total == limit:
        total = int(db.execute("SELECT count(*) FROM ledger.provider_job WHERE task_id = ANY(?)", [list(ids)]).scalar())
    return rows, total


def job_with_shard(conn: Conn, job_key: str) -> dict | None:
    """One job with its shard's line count (for adopt / abandon), None when unknown."""
    rows = (
        as_control(conn)
        .execute(
            """
        SELECT j.job_key, j.task_id, j.provider, j.provider_batch_id, j.create_outcome, s.line_count
        FROM ledger.provider_job j JOIN ledger.shard s USING (shard_id) WHERE j.job_key = ?""",
            [job_key],
        )
        .dicts()
    )
    return rows[0] if rows else None


def job_of_batch(conn: Conn, batch_id: str, other_than: str) -> str | None:
    """The job key recorded for provider batch `batch_id`, other than `other_than`."""
    return (
        as_control(conn)
        .execute(
            "SELECT job_key FROM ledger.provider_job WHERE provider_batch_id = ? AND job_key <> ?",
            [batch_id, other_than],
        )
        .scalar()
    )


# --- the soak's accounting ------------------------------------------------------------------------


def shards_without_batch(conn: Conn, task_id: str) -> int:
    """The partition's shards no provider batch holds yet (each is a create call to come)."""
    return int(
        as_control(conn)
        .execute(
            """SELECT count(*) FROM ledger.shard s WHERE s.task_id = ? AND NOT EXISTS (
                   SELECT 1 FROM ledger.provider_job j
                   WHERE j.shard_id = s.shard_id AND j.provider_batch_id IS NOT NULL)""",
            [task_id],
        )
        .scalar()
    )


def submitted_jobs_not_terminal(conn: Conn) -> int:
    """Jobs with a provider batch that has not ended yet, in every partition."""
    return int(
        as_control(conn)
        .execute("SELECT count(*) FROM ledger.provider_job WHERE terminal_at IS NULL AND provider_batch_id IS NOT NULL")
        .scalar()
    )


def provider_batches(conn: Conn) -> list[dict]:
    """task_id, provider and provider_batch_id of every job that has a provider batch."""
    return (
        as_control(conn)
        .execute(
            "SELECT task_id, provider, provider_batch_id FROM ledger.provider_job WHERE provider_batch_id IS NOT NULL"
        )
        .dicts()
    )


def failed_job_errors(conn: Conn) -> list[str | None]:
    """The provider_errors JSON text of every job the provider refused whole (state FAILED)."""
    return [
        r[0]
        for r in as_control(conn)
        .execute("SELECT provider_errors FROM ledger.provider_job WHERE state = ?", [JobState.FAILED.value])
        .rows
    ]
