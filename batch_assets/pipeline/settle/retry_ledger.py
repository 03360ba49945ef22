"""The retry ledger: every failed attempt of an item gets its failure class's action, until the item is final.

After parsing, each item whose latest attempt failed gets one decision (ledger.retry_decision):

| class                              | default action                                                     |
|------------------------------------|--------------------------------------------------------------------|
| rate_or_capacity_error, batch-level| requeue: the batch was rejected whole, its items never ran, so no  |
|                                    | attempt is charged; sent again once the backoff has passed         |
| rate_or_capacity_error, per item   | retry with exponential backoff                                     |
| unmatched_result                   | requeue as a file, no attempt charged (answered without its key)   |
| internal_error                     | retry                                                              |
| expired                            | retry the unfinished items, in smaller shards                      |
| canceled by the stuck-job policy   | retry the unfinished items, in smaller shards                      |
| canceled by an operator            | final (canceled)                                                   |
| parse_error                        | re-ask up to `retry.parse_retries` times, then final-failed        |
| validation_error                   | await an operator (`batch-assets retry --class validation_error`)  |
| content_policy_error               | compliance queue (ledger.compliance_hold), never retried           |

A retry is a new attempt (attempt n+1) of only the items that need it, cut into new shards by the
shards stage and sent by the submissions stage like any other shard. After `retry.max_attempts`
charged attempts an item is final-failed with its last class. A task overrides actions per class
under `retry.actions`.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from batch_assets.ledger.control_db import registered
from batch_assets.ledger.partition_control import partition_views
from batch_assets.ledger.retries import (
    insert_compliance_holds,
    insert_retry_decisions,
    record_operator_action,
    reopen_decisions,
    set_final_status,
)
from batch_assets.ledger.tasks import task_rows
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.spec.failure_classes import DEFAULT_ACTIONS, FAILURE_CLASSES, unknown_classes_error
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import rows_of_partitions, sql_literal

# A batch rejected whole for capacity charges no attempt; this many re-queues end it all the same.
MAX_REQUEUES = 20
RETRY_ACTIONS = ("retry", "requeue")
FINAL_FAILED_ACTIONS = ("final_failed", "await_operator")
# An operator's explicit retry may also take back an operator's cancel (`--class canceled`).
OPERATOR_REOPENABLE_ACTIONS = (*FINAL_FAILED_ACTIONS, "canceled")


@dataclass(frozen=True)
class RetryPlan:
    task_id: str
    decided: int
    by_action: dict[str, int]


def latest_attempt_sql(tid: str) -> str:
    """Each item's latest attempt that was cut into a shard: (custom_id, attempt)."""
    return f"SELECT custom_id, max(attempt) AS attempt FROM ledger.shard_line WHERE task_id = {tid} GROUP BY custom_id"


def _action_sql(task: ResolvedTask) -> str:
    """SQL CASE: the action for a failed attempt (columns of the planner's `f` relation)."""
    retry = task.spec.retry
    actions = {**DEFAULT_ACTIONS, **retry.actions}
    base = (
        "CASE error_class "
        + " ".join(f"WHEN {sql_literal(c)} THEN {sql_literal(actions[c])}" for c in FAILURE_CLASSES if c in actions)
        + " ELSE 'final_failed' END"
    )
    # An operator's cancel is final; the stuck-job policy's cancel re-sends what did not run.
    operator_cancel = (
        "" if "canceled" in retry.actions else "WHEN error_class = 'canceled' AND NOT system_cancel THEN 'canceled'"
    )
    return f"""
        CASE
            {operator_cancel}
            WHEN ({base}) <> 'retry' THEN ({base})
            WHEN batch_capacity OR error_class = 'unmatched_result'
                 THEN CASE WHEN attempt >= {MAX_REQUEUES} THEN 'final_failed' ELSE 'requeue' END
            WHEN error_class = 'parse_error' AND reasks >= {int(retry.parse_retries)} THEN 'final_failed'
            WHEN charged_before + 1 >= {int(retry.max_attempts)} THEN 'final_failed'
            ELSE 'retry'
        END"""


def plan_retries(wh: Warehouse, task: ResolvedTask, partition_date: str) -> RetryPlan:
    """Decide, for every item whose latest attempt failed and has no decision yet, what happens next."""
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    tid = sql_literal(task_id)
    retry = task.spec.retry
    with wh.connect() as conn:
        with partition_views(conn, task_id):
            conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _failed AS
            SELECT o.custom_id, o.item_no, o.attempt, o.error_class, o.error_code, o.error_message, m.business_id,
                   (o.error_class = 'rate_or_capacity_error' AND NOT coalesce(o.from_line, true)) AS batch_capacity,
                   coalesce(j.stuck_action = 'cancel_requested', false) AS system_cancel,
                   coalesce(h.charged_before, 0) AS charged_before, coalesce(h.reasks, 0) AS reasks
            FROM ledger.parsed_result o
            JOIN ({latest_attempt_sql(tid)}) l USING (custom_id, attempt)
            JOIN ledger.manifest_item m ON m.custom_id = o.custom_id AND m.superseded_at IS NULL
            LEFT JOIN part_job j ON j.job_key = o.job_key
            LEFT JOIN (SELECT custom_id, count(*) FILTER (charged) AS charged_before,
                              count(*) FILTER (error_class = 'parse_error' AND action = 'retry') AS reasks
                       FROM ledger.retry_decision WHERE task_id = {tid} GROUP BY custom_id) h USING (custom_id)
            WHERE o.task_id = {tid} AND o.error_class IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM ledger.retry_decision d
                              WHERE d.custom_id = o.custom_id AND d.attempt = o.attempt)
              AND o.custom_id NOT IN (SELECT custom_id FROM ledger.applied_result WHERE task_id = {tid})
        """)
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _decided AS
            SELECT *, action IN {RETRY_ACTIONS} AS resend,
                   CASE WHEN action IN {RETRY_ACTIONS} THEN attempt + 1 END AS next_attempt,
                   CASE WHEN action = 'requeue' THEN now()::TIMESTAMP + to_seconds({float(retry.backoff_s)})
                        WHEN action = 'retry'
                        THEN now()::TIMESTAMP + to_seconds({float(retry.backoff_s)} * pow(2, least(charged_before, 10)))
                   END AS not_before,
                   action <> 'requeue' AS charged,
                   CASE action
                       WHEN 'requeue' THEN CASE WHEN error_class = 'unmatched_result'
                           THEN 'answered without its request key; re-queued as a file without charging an attempt'
                           ELSE 'batch rejected whole for capacity; re-queued without charging an attempt' END
                       WHEN 'retry'
                            THEN error_class || ': attempt ' || (attempt + 1) || ' of ' || {int(retry.max_attempts)}
                       WHEN 'final_failed' THEN error_class || ': final after attempt ' || attempt
                       WHEN 'await_operator' THEN error_class || ': not resent unchanged; fix, then '
                                                  || '`batch-assets retry {task_id} --class ' || error_class || '`'
                       WHEN 'compliance_hold' THEN 'content policy: held for compliance review, never retried'
                       WHEN 'canceled' THEN 'canceled by an operator'
                   END || coalesce(' (' || error_code || ')', '') AS reason
            FROM (SELECT *, {_action_sql(task)} AS action FROM _failed)
        """)
        with transaction(conn):
            decided = insert_retry_decisions(conn, task_id, "FROM _decided")
            insert_compliance_holds(
                conn,
                task_id,
                """
                SELECT custom_id, business_id, attempt, error_code AS provider_code, error_message AS provider_reason
                FROM _decided WHERE action = 'compliance_hold'""",
            )
        by_action = dict(conn.execute("SELECT action, count(*) FROM _decided GROUP BY 1").fetchall())
        conn.execute("DROP TABLE _decided; DROP TABLE _failed")
    return RetryPlan(task_id, decided, by_action)


def due_retries_sql(tid: str) -> str:
    """Items whose latest decision re-sends them and whose next attempt is not cut yet, due now:
    (custom_id, next_attempt, error_class, item_no)."""
    return f"""
        SELECT d.custom_id, d.next_attempt, d.error_class, m.item_no
        FROM ledger.retry_decision d
        JOIN ({latest_attempt_sql(tid)}) l ON l.custom_id = d.custom_id AND l.attempt = d.attempt
        JOIN ledger.manifest_item m ON m.custom_id = d.custom_id AND m.superseded_at IS NULL
        WHERE d.task_id = {tid} AND d.action IN {RETRY_ACTIONS} AND d.not_before <= now()::TIMESTAMP
    """


def pending_retries(wh: Warehouse) -> list[dict]:
    """Per task partition: retries decided but not cut yet (due now, and later)."""
    # Not read-only: a sensor thread may share the process with a run that holds a write connection,
    # and DuckDB refuses two configurations for one file in one process.
    with wh.connect() as conn:
        return pending_retries_conn(conn)


def pending_retries_conn(conn: duckdb.DuckDBPyConnection) -> list[dict]:
    """pending_retries on `conn`. A retry decision is pending while its attempt is the item's latest
    line: no later line of the item (the few lines of attempt > 1, which attempt's zone maps find)
    and a line of its attempt, looked up only in the partitions with such open decisions. The
    sensor runs this every tick; taking the latest attempt of every shard line of the ledger grows
    with its history."""
    with transaction(conn):  # one snapshot for both reads
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _open_retries AS
            SELECT d.task_id, d.custom_id, d.attempt, d.next_attempt, d.not_before
            FROM ledger.retry_decision d
            ANTI JOIN (SELECT task_id, custom_id, attempt FROM ledger.shard_line WHERE attempt > 1) later
                 ON later.task_id = d.task_id AND later.custom_id = d.custom_id AND later.attempt > d.attempt
            WHERE d.action IN {RETRY_ACTIONS}
        """)
        try:
            tasks = [r[0] for r in conn.execute("SELECT DISTINCT task_id FROM _open_retries").fetchall()]
            lines = rows_of_partitions("ledger.shard_line", "task_id, custom_id, attempt", tasks)
            with registered(conn, "_retry_task", task_rows(conn, tasks)):
                return _pending_by_partition(conn, lines)
        finally:
            conn.execute("DROP TABLE IF EXISTS _open_retries")


def _pending_by_partition(conn, lines: str) -> list[dict]:
    """Per partition of `_open_retries` (named through `_retry_task`): retries due, pending, next attempt."""
    return fetch_dicts(
        conn,
        f"""
        SELECT t.task_name, strftime(t.partition_date, '%Y-%m-%d') AS partition_date, d.task_id,
               count(*) FILTER (d.not_before <= now()::TIMESTAMP) AS due, count(*) AS pending,
               max(d.next_attempt) AS next_attempt
        FROM _open_retries d
        SEMI JOIN {lines} sl ON sl.task_id = d.task_id AND sl.custom_id = d.custom_id AND sl.attempt = d.attempt
        JOIN _retry_task t ON t.task_id = d.task_id
        GROUP BY ALL ORDER BY 1, 2
    """,
    )


def reopen_for_operator(
    wh: Warehouse, task_id: str, classes: tuple[str, ...], *, dry_run: bool = False, who: str = "cli"
) -> dict[str, int]:
    """An operator's explicit retry: items whose latest attempt is final-failed, awaiting an operator
    or canceled by an operator with one of `classes` become due retries. Returns counts by class
    (nothing written on dry run)."""
    wh = wh.of(task_id)  # its partition's store
    if error := unknown_classes_error(classes):
        raise error
    tid = sql_literal(task_id)
    keys = f"""
        SELECT d.custom_id, d.attempt, d.error_class
        FROM ledger.retry_decision d
        JOIN ({latest_attempt_sql(tid)}) l USING (custom_id, attempt)
        WHERE d.task_id = {tid} AND d.action IN {OPERATOR_REOPENABLE_ACTIONS}
          AND list_contains(?, d.error_class)
          AND d.custom_id NOT IN (SELECT custom_id FROM ledger.applied_result WHERE task_id = {tid})
    """
    with wh.connect(read_only=dry_run) as conn:
        counts = dict(
            conn.execute(f"SELECT error_class, count(*) FROM ({keys}) GROUP BY 1", [list(classes)]).fetchall()
        )
        if not dry_run and counts:
            with transaction(conn):
                reopen_decisions(conn, keys, [list(classes)], reason=f"operator retry ({who})")
                set_final_status(conn, task_id, None)  # work is pending again
                record_operator_action(
                    conn, "retry", task_id=task_id, detail=", ".join(f"{c}={n}" for c, n in sorted(counts.items()))
                )
    return counts
