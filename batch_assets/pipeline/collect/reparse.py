"""Re-parse: after a parser or output-schema fix, parse the kept raw results of failed items again.

Nothing is sent: the provider's lines are in ledger.raw_result (the only verbatim copy of its
answers, kept so they can be parsed again). The candidates are the outcomes taken from a result line
that failed with one of the chosen classes (default parse_error), of an item's latest attempt (no
later attempt cut yet: a resent item is left to its new attempt), not applied, frozen under the
task's output version now. Each is parsed again exactly as the first parse does (parse.py's SQL);
an outcome that changes replaces the current one as a new parse generation (the replaced row and its
retry decision kept, ledger.parse_generations), an outcome that does not change is left as it is.

Then the normal path: the retry planner decides on the outcomes that still fail, apply writes the
answers that now parse (exactly once, under the stale-input guard; a business row it overwrites is
kept in applied_previous), and the partition is settled again. A second re-parse with nothing fixed
since finds every outcome unchanged and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from batch_assets.ledger.parse_generations import next_generation, record_generation, supersede_outcomes
from batch_assets.ledger.retries import record_operator_action, set_final_status
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.parse import create_answer_views, drop_answer_views, line_cost_sql, line_outcomes_sql
from batch_assets.pipeline.settle.retry_ledger import latest_attempt_sql
from batch_assets.spec.failure_classes import FAILURE_CLASSES, unknown_classes_error
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal

DEFAULT_CLASSES = ("parse_error",)
# A content-policy refusal waits in the compliance queue for a person: a re-parse leaves it there.
REPARSE_CLASSES = tuple(c for c in FAILURE_CLASSES if c != "content_policy_error")
# The outcome columns compared: an outcome that differs in any of them has changed.
_OUTCOME = ("provider_succeeded", "error_class", "error_code", "error_message", "output_json", "finish_reason")


@dataclass(frozen=True)
class ReparseSummary:
    task_id: str
    classes: tuple[str, ...]
    candidates: int  # failed outcomes parsed again
    now_usable: int  # of those, answers that parse now
    still_failed: dict[str, int] = field(default_factory=dict)  # changed, failing still: by new class
    unchanged: int = 0  # parsed again to the same outcome: left as they are
    sent_again: int = 0  # not candidates: a later attempt of the item is cut already
    other_version: int = 0  # not candidates: frozen under another output version than the task's now
    generation: int | None = None  # the generation written (None: nothing changed, or a dry run)
    dry_run: bool = False

    @property
    def changed(self) -> int:
        return self.now_usable + sum(self.still_failed.values())


def _check_classes(classes: tuple[str, ...]) -> None:
    if error := unknown_classes_error(classes):
        raise error
    if refused := sorted(set(classes) - set(REPARSE_CLASSES)):
        raise ValueError(
            f"{', '.join(refused)}: not re-parsed (held for compliance review); use: {', '.join(REPARSE_CLASSES)}"
        )


def _failed_outcomes(conn: duckdb.DuckDBPyConnection, task_id: str, classes: tuple[str, ...]) -> None:
    """Temp table `_reparse_failed`: the partition's outcomes taken from a result line that failed with
    one of `classes`, not applied, of live items, with whether each is still its item's latest
    attempt (`latest`)."""
    tid = sql_literal(task_id)
    conn.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _reparse_failed AS
        SELECT p.custom_id, p.attempt, p.job_key, p.output_schema_version, l.attempt IS NOT NULL AS latest
        FROM ledger.parsed_result p
        SEMI JOIN ledger.manifest_item m ON m.task_id = {tid} AND m.custom_id = p.custom_id AND m.superseded_at IS NULL
        LEFT JOIN ({latest_attempt_sql(tid)}) l ON l.custom_id = p.custom_id AND l.attempt = p.attempt
        WHERE p.task_id = {tid} AND p.from_line AND list_contains(?, p.error_class)
          AND p.custom_id NOT IN (SELECT custom_id FROM ledger.applied_result WHERE task_id = {tid})
        """,
        [list(classes)],
    )


def _reparsed(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, task_id: str) -> None:
    """Temp table `_reparsed`: the candidates (`_reparse_keys`) parsed again from their kept result
    lines, with `changed` (the outcome differs from the current one)."""
    tid = sql_literal(task_id)
    create_answer_views(
        conn,
        task,
        task_id,
        "EXISTS (SELECT 1 FROM _reparse_keys k WHERE k.custom_id = r.custom_id AND k.attempt = r.attempt)",
    )
    try:
        differs = " OR ".join(f"n.{c} IS DISTINCT FROM p.{c}" for c in _OUTCOME)
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _reparsed AS
            SELECT n.*, {differs} AS changed
            FROM (SELECT o.*, {line_cost_sql(task, "o")} AS cost FROM ({line_outcomes_sql(task)}) o) n
            JOIN ledger.parsed_result p ON p.task_id = {tid} AND p.custom_id = n.custom_id AND p.attempt = n.attempt
        """)
    finally:
        drop_answer_views(conn)


def reparse_results(
    wh: Warehouse,
    task: ResolvedTask,
    partition_date: str,
    classes: tuple[str, ...] = DEFAULT_CLASSES,
    *,
    dry_run: bool = False,
    who: str = "cli",
) -> ReparseSummary:
    """Parse the failed outcomes of `classes` again from their kept result lines; record the ones
    that change as a new parse generation (nothing on a dry run, or when none changes)."""
    classes = tuple(dict.fromkeys(classes or DEFAULT_CLASSES))
    _check_classes(classes)
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    version = task.spec.output.version
    with wh.connect(read_only=dry_run) as conn:
        _failed_outcomes(conn, task_id, classes)
        conn.execute(
            "CREATE OR REPLACE TEMP TABLE _reparse_keys AS SELECT custom_id, attempt FROM _reparse_failed "
            "WHERE latest AND output_schema_version = ?",
            [version],
        )
        sent_again, other_version = conn.execute(
            "SELECT count(*) FILTER (NOT latest), count(*) FILTER (latest AND output_schema_version <> ?) "
            "FROM _reparse_failed",
            [version],
        ).fetchone()
        _reparsed(conn, task, task_id)
        candidates, now_usable, unchanged = conn.execute(
            "SELECT count(*), count(*) FILTER (changed AND error_class IS NULL), count(*) FILTER (NOT changed) "
            "FROM _reparsed"
        ).fetchone()
        still_failed = dict(
            conn.execute(
                "SELECT error_class, count(*) FROM _reparsed WHERE changed AND error_class IS NOT NULL GROUP BY 1"
            ).fetchall()
        )
        generation = None
        if not dry_run and (now_usable or still_failed):
            with transaction(conn):
                generation = next_generation(conn, task_id)
                conn.execute("CREATE OR REPLACE TEMP TABLE _reparse_new AS SELECT * FROM _reparsed WHERE changed")
                supersede_outcomes(conn, task_id, generation, "_reparse_new")
                record_generation(
                    conn,
                    task_id=task_id,
                    generation=generation,
                    classes=classes,
                    output_schema_version=version,
                    output_schema_hash=task.output_schema_hash,
                    candidates=candidates,
                    changed=now_usable + sum(still_failed.values()),
                    now_usable=now_usable,
                    still_failed=sum(still_failed.values()),
                    who=who,
                )
                record_operator_action(
                    conn,
                    "reparse",
                    task_id=task_id,
                    detail=f"generation {generation}: {candidates} parsed again ({', '.join(classes)}), "
                    f"{now_usable} now usable, {sum(still_failed.values())} failing otherwise, {unchanged} unchanged",
                )
                set_final_status(conn, task_id, None)  # work is pending again until apply and settle
            conn.execute("DROP TABLE _reparse_new")
        conn.execute("DROP TABLE _reparsed; DROP TABLE _reparse_keys; DROP TABLE _reparse_failed;")
    return ReparseSummary(
        task_id,
        classes,
        int(candidates),
        int(now_usable),
        {str(k): int(v) for k, v in still_failed.items()},
        int(unchanged),
        int(sent_again),
        int(other_version),
        generation,
        dry_run,
    )


@dataclass(frozen=True)
class ReparseRun:
    """A re-parse and the normal path after it: retry decisions, apply, the partition settled."""

    reparse: ReparseSummary
    decided: dict[str, int]  # retry decisions taken on outcomes that still fail, by action
    applied: int
    stale: int
    final_status: str | None
    check: str


def reparse_partition(
    wh: Warehouse,
    task: ResolvedTask,
    partition_date: str,
    classes: tuple[str, ...] = DEFAULT_CLASSES,
    *,
    who: str = "cli",
) -> ReparseRun:
    """reparse_results, then what a collect run does after a parse: plan the retries of what still
    fails, apply what now parses, settle the partition. The apply runs even when nothing changed now
    (an earlier re-parse stopped before its apply is finished by running it again)."""
    from batch_assets.pipeline.settle.apply import apply_results
    from batch_assets.pipeline.settle.reconcile import settle
    from batch_assets.pipeline.settle.retry_ledger import plan_retries

    summary = reparse_results(wh, task, partition_date, classes, who=who)
    plan = plan_retries(wh, task, partition_date)
    applied = apply_results(wh, task, partition_date)
    rec, verdict = settle(wh, summary.task_id, task.spec.retry.max_failed_fraction, task.spec.empty_source)
    return ReparseRun(summary, dict(plan.by_action), applied.applied, applied.stale, rec.final_status, verdict.status)


def reparse_figures(conn: duckdb.DuckDBPyConnection, task_ids: list[str]) -> dict[str, dict]:
    """Per task partition with a re-parse: its generations, the outcomes they replaced, and how many
    current outcomes came from one (`reparsed`)."""
    rows = conn.execute(
        """
        SELECT g.task_id, count(*) AS parse_generations, sum(g.changed) AS reparse_replaced,
               (SELECT count(*) FROM ledger.parsed_result p
                WHERE p.task_id = g.task_id AND coalesce(p.parse_generation, 0) > 0) AS reparsed
        FROM ledger.parse_generation g WHERE list_contains(?, g.task_id) GROUP BY g.task_id
        """,
        [list(task_ids)],
    ).fetchall()
    return {t: {"parse_generations": int(n), "reparse_replaced": int(c), "reparsed": int(r)} for t, n, c, r in rows}
