"""Which task partitions still need a collect run, read from the ledger's state.

A terminal provider job is collected once its results are downloaded, every downloaded file is
ingested, every ok result line has a parsed outcome for its attempt, (a batch's items without any
line have their outcome from the batch's end state: missing_result when it completed), and every
usable outcome has an applied_result. A job short of any of these is *pending*, with the first missing step as its
reason. The provider status sensor asks for one collect run per partition with pending jobs on
every tick, so a collect run that failed (or never ran) is asked for again.

Every collect run counts one more try on the jobs it starts on (`collect_attempts`); the run key
carries the partition's total, so it changes after each run: a failed run is retried under a new
key, a run in flight is not asked for twice (same key). A job pending after `max_tries` tries is
given up on: the sensor stops asking, and `collect_error` says why.

A job whose provider reported success before the results can be fetched (`results_ready` false)
is not collected yet: the sensor keeps polling it, and after `results_wait_s` it is flagged in
`collect_error` (and logged at WARNING) until they can be.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import duckdb

from batch_assets.ledger.control_db import registered
from batch_assets.ledger.job_reads import collect_candidates, results_not_ready
from batch_assets.ledger.jobs import count_collect_attempts, mark_collected, set_collect_error
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.sqltext import rows_of_partitions

DEFAULT_MAX_COLLECT_TRIES = 5
DEFAULT_RESULTS_WAIT_S = 3600.0


def _reasons_sql(jobs: str, task_ids: list[str]) -> str:
    """Each candidate job of table `jobs` with why it is pending (NULL: collected). Every ledger table
    is read through the candidates' partitions only (rows_of_partitions; a custom_id belongs to one
    partition), so the search costs what the unfinished jobs' partitions cost, not the history."""
    parsed = rows_of_partitions(
        "ledger.parsed_result",
        "task_id, custom_id, attempt, job_key, provider_succeeded AND error_class IS NULL AS usable",
        task_ids,
    )
    ok_lines = rows_of_partitions("ledger.raw_result", "task_id, custom_id, attempt, job_key, status", task_ids)
    lines = rows_of_partitions("ledger.shard_line", "task_id, shard_id, custom_id, attempt", task_ids)
    items = rows_of_partitions("ledger.manifest_item", "task_id, custom_id", task_ids)
    applied = rows_of_partitions("ledger.applied_result", "task_id, custom_id", task_ids)
    return f"""
        WITH parsed AS MATERIALIZED (SELECT * FROM {parsed} p),
        ok_lines AS MATERIALIZED (SELECT task_id, custom_id, attempt, job_key FROM {ok_lines} r WHERE status = 'ok'),
        files_not_ingested AS (SELECT DISTINCT job_key FROM ledger.raw_file WHERE ingested_at IS NULL),
        lines_not_parsed AS (
            SELECT DISTINCT r.job_key FROM ok_lines r
            ANTI JOIN parsed p ON p.task_id = r.task_id AND p.custom_id = r.custom_id AND p.attempt = r.attempt
        ),
        items_without_outcome AS (
            SELECT DISTINCT j.job_key
            FROM {jobs} j JOIN {lines} sl ON sl.task_id = j.task_id AND sl.shard_id = j.shard_id
            ANTI JOIN parsed p ON p.task_id = sl.task_id AND p.custom_id = sl.custom_id AND p.attempt = sl.attempt
            ANTI JOIN ok_lines r ON r.task_id = sl.task_id AND r.custom_id = sl.custom_id AND r.attempt = sl.attempt
        ),
        not_applied AS (
            SELECT DISTINCT p.job_key
            FROM parsed p
            SEMI JOIN {items} m ON m.task_id = p.task_id AND m.custom_id = p.custom_id
            ANTI JOIN {applied} a ON a.task_id = p.task_id AND a.custom_id = p.custom_id
            WHERE p.usable
        )
        SELECT job_key, task_id, task_name, partition_date, attempt, collect_attempts, collect_error,
               CASE
                 WHEN downloaded_at IS NULL THEN 'not downloaded'
                 WHEN job_key IN (SELECT job_key FROM files_not_ingested) THEN 'raw files not ingested'
                 WHEN job_key IN (SELECT job_key FROM lines_not_parsed) THEN 'result lines not parsed'
                 WHEN job_key IN (SELECT job_key FROM items_without_outcome) THEN 'items without an outcome'
                 WHEN job_key IN (SELECT job_key FROM not_applied) THEN 'usable outcomes not applied'
               END AS reason
        FROM {jobs}
    """


@dataclass(frozen=True)
class PendingJob:
    job_key: str
    task_id: str
    task_name: str
    partition_date: str
    attempt: int
    collect_attempts: int
    collect_error: str | None
    reason: str


@dataclass(frozen=True)
class CollectRequest:
    """One collect run for a partition: its pending jobs and how often collection was tried."""

    task_name: str
    partition_date: str
    jobs: tuple[PendingJob, ...]

    @property
    def job_keys(self) -> tuple[str, ...]:
        return tuple(j.job_key for j in self.jobs)

    @property
    def generation(self) -> int:
        """Collect runs started on these jobs so far: part of the run key, so a retry gets a new one."""
        return sum(j.collect_attempts for j in self.jobs)

    @property
    def tries(self) -> int:
        """The most collect runs any of the jobs has had."""
        return max(j.collect_attempts for j in self.jobs)

    @property
    def attempt(self) -> int:
        """The highest shard attempt among the jobs (1, or more for a retry shard)."""
        return max(j.attempt for j in self.jobs)

    @property
    def run_key(self) -> str:
        digest = hashlib.sha256("|".join(sorted(self.job_keys)).encode()).hexdigest()[:16]
        return f"collect:{self.task_name}:{self.partition_date}:{digest}:try{self.generation}"

    def describe(self) -> str:
        return "; ".join(
            f"{j.job_key}: {j.reason}" + (f" (last error: {j.collect_error})" if j.collect_error else "")
            for j in self.jobs
        )


@dataclass
class CollectPlan:
    requests: list[CollectRequest]
    given_up: list[PendingJob]  # pending after max_tries: no longer asked for
    results_not_ready: list[dict]  # terminal, results not fetchable yet (job_key, state, seconds)


def pending_jobs(
    wh: Warehouse, task_id: str | None = None, conn: duckdb.DuckDBPyConnection | None = None
) -> list[PendingJob]:
    """Terminal jobs (of one partition, or all) whose results are not fully collected, with why.
    Writes: the jobs it finds fully collected are marked (`ledger.jobs.mark_collected`) and not
    looked at again, so `conn` must be writable."""
    if conn is None:
        with wh.connect() as own:
            return pending_jobs(wh, task_id, own)
    candidates = collect_candidates(conn, task_id)
    tasks = sorted(set(candidates.column("task_id").to_pylist()))
    try:
        with registered(conn, "_collect_candidates", candidates):
            conn.execute(f"CREATE OR REPLACE TEMP TABLE _pending AS {_reasons_sql('_collect_candidates', tasks)}")
        # A job found collected stays so (no ledger step is ever undone): later searches skip it.
        mark_collected(
            conn, [r[0] for r in conn.execute("SELECT job_key FROM _pending WHERE reason IS NULL").fetchall()]
        )
        rows = fetch_dicts(conn, "SELECT * FROM _pending WHERE reason IS NOT NULL ORDER BY task_id, job_key")
    finally:
        conn.execute("DROP TABLE IF EXISTS _pending")
    return [PendingJob(**r) for r in rows]


def plan_collection(
    wh: Warehouse,
    max_tries: int = DEFAULT_MAX_COLLECT_TRIES,
    results_wait_s: float = DEFAULT_RESULTS_WAIT_S,
    conn: duckdb.DuckDBPyConnection | None = None,
) -> CollectPlan:
    """One request per partition with pending jobs still within `max_tries`; the jobs given up on
    get (once) a `collect_error` saying so; jobs waiting for their results past the wait are flagged."""
    if conn is None:
        with wh.connect() as own:
            return plan_collection(wh, max_tries, results_wait_s, own)
    by_partition: dict[tuple[str, str], list[PendingJob]] = {}
    given_up = []
    for job in pending_jobs(wh, conn=conn):
        if job.collect_attempts >= max_tries:
            given_up.append(job)
        else:
            by_partition.setdefault((job.task_name, job.partition_date), []).append(job)
    for job in given_up:
        if not (job.collect_error or "").startswith("gave up"):
            set_collect_error(
                conn,
                job.job_key,
                f"gave up after {job.collect_attempts} collect tries: {job.reason}"
                + (f"; last error: {job.collect_error}" if job.collect_error else ""),
            )
    waiting = results_not_ready(conn)
    for job in waiting:
        if job["seconds"] > results_wait_s and job["collect_error"] is None:
            set_collect_error(
                conn, job["job_key"], f"{job['state']} but results not ready after {job['seconds']:.0f} s"
            )
    requests = [CollectRequest(task, day, tuple(js)) for (task, day), js in sorted(by_partition.items())]
    return CollectPlan(requests, given_up, waiting)


def start_collect_run(wh: Warehouse, task_id: str) -> list[PendingJob]:
    """A collect run of the partition starts: count one more try on each of its pending jobs."""
    wh = wh.of(task_id)  # its partition's store
    with wh.connect() as conn:
        jobs = pending_jobs(wh, task_id, conn)
        count_collect_attempts(conn, [j.job_key for j in jobs])
    return jobs
