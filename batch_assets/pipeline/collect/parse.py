"""Stage 6 — extract and check every answer; classify every failure.

One parsed_result per item that got an outcome: provider success with a schema-valid answer,
provider success whose answer is unusable (parse_error / content_policy_error), or a provider
failure by class. Items of jobs that ended FAILED / EXPIRED / CANCELLED without a line of their
own get the job's outcome, and items of a COMPLETED job that returned no line for them (once its
files are all read) are `missing_result` failures, retried like any other: nothing stays silently
unaccounted. When that job returned answers it could not match to a request (Gemini inline responses
without their key, `raw_file.unmatched_lines`), its line-less items are `unmatched_result` instead:
they were answered, so they are sent again as a file without charging an attempt (retry_ledger).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from batch_assets.ledger.accounts import pause_account
from batch_assets.ledger.partition_control import partition_views
from batch_assets.ledger.results import insert_parsed_results
from batch_assets.ledger.states import FAILED_TERMINAL_STATES_SQL, JobState
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline import faultpoints
from batch_assets.providers.prices import cost_sql_or_null
from batch_assets.providers.registry import wire_format
from batch_assets.spec.output_schema import schema_fields_sql, schema_violation_sql
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal

# The code of an item whose batch answered it in a way that cannot be matched to it (no request key).
UNMATCHED_CODE = "unmatched_response"


@dataclass(frozen=True)
class ParseSummary:
    task_id: str
    parsed: int
    synthesized: int
    by_class: dict[str, int]
    # Results of items frozen under another output version than the task's now: left unparsed (an
    # answer to v1 is never recorded or applied as v2); restore the version or refreeze.
    refused_version: int = 0


_EMPTY_ANSWER = {
    "json": "answer is not valid JSON",
    "text": "answer has no text",
    "embedding": "answer has no embedding vector",
}


def _answer_checks(task: ResolvedTask) -> tuple[str, str]:
    """(SQL of the answer as JSON, SQL of its first violation) for the task's output kind."""
    kind = task.spec.output.kind
    if kind == "json":
        return "CASE WHEN json_valid(content) THEN content::JSON END", schema_violation_sql(
            task.output_schema, "answer", "answer_fields" if schema_fields_sql(task.output_schema, "answer") else None
        )
    if kind == "text":
        return "CASE WHEN trim(coalesce(content, '')) <> '' THEN json_object('text', content) END", "NULL"
    dims = int(task.spec.output.dimensions)
    return (
        "CASE WHEN json_type(vector) = 'ARRAY' THEN json_object('embedding', vector) END",
        f"CASE WHEN json_array_length(answer, '$.embedding') <> {dims} "
        f"THEN 'answer.embedding: ' || json_array_length(answer, '$.embedding') || ' values, expected {dims}' END",
    )


def create_answer_views(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, task_id: str, pick: str) -> None:
    """Temp views over the partition's ok result lines that `pick` (a condition on ledger.raw_result
    `r`) selects: `_ans_all` (each line's answer as the wire format reads it, with its item's output
    version), `_ans` (those of the task's output version now) and `_checked` (each answer checked
    against the output schema). The first parse and a re-parse (reparse.py) read lines through them
    alike. Dropped by drop_answer_views."""
    tid = sql_literal(task_id)
    fmt = wire_format(task.spec.provider, task.spec.endpoint)
    answer_sql, violation = _answer_checks(task)
    version = sql_literal(task.spec.output.version)
    fields = (task.spec.output.kind == "json" and schema_fields_sql(task.output_schema, "answer")) or "NULL"
    # Each result is parsed under its item's output version recorded at freeze, and only when
    # that is the task's version now (its schema is the one checked here). When every item of
    # the partition was frozen under one version (the usual case) that version is a constant:
    # the results are not joined with the manifest (a hash join over every custom_id).
    versions = conn.execute(
        "SELECT DISTINCT output_schema_version FROM ledger.manifest_item WHERE task_id = ?", [task_id]
    ).fetchall()
    if len(versions) <= 1:
        item_version, manifest_join = sql_literal(versions[0][0] if versions else task.spec.output.version), ""
    else:
        item_version = f"coalesce(m.output_schema_version, {version})"
        manifest_join = "LEFT JOIN ledger.manifest_item m USING (custom_id)"
    conn.execute(f"""
        CREATE OR REPLACE TEMP VIEW _ans_all AS
        SELECT r.custom_id, r.item_no, r.attempt, r.job_key, r.status_code, r.provider_request_id,
               {item_version} AS output_schema_version, {fmt.answer_sql("r")}
        FROM ledger.raw_result r {manifest_join}
        WHERE r.task_id = {tid} AND r.status = 'ok' AND ({pick})
    """)
    conn.execute(f"CREATE OR REPLACE TEMP VIEW _ans AS SELECT * FROM _ans_all WHERE output_schema_version = {version}")
    conn.execute(f"""
        CREATE OR REPLACE TEMP VIEW _checked AS
        SELECT * EXCLUDE (answer_fields), CASE WHEN answer IS NOT NULL THEN {violation} END AS violation
        FROM (SELECT *, {fields} AS answer_fields  -- the answer parsed once: its fields as a list
              FROM (SELECT *, {answer_sql} AS answer FROM _ans))
    """)


def drop_answer_views(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute("DROP VIEW _checked; DROP VIEW _ans; DROP VIEW _ans_all;")


def line_outcomes_sql(task: ResolvedTask) -> str:
    """One outcome per line of `_checked` (create_answer_views): the columns of ledger.parsed_result
    a parse writes (PARSED_RESULT_COLUMNS, output_schema_version); priced by line_cost_sql."""
    fmt = wire_format(task.spec.provider, task.spec.endpoint)
    return f"""
                SELECT custom_id, item_no, attempt, job_key, ok AS provider_succeeded,
                       CASE WHEN NOT ok THEN {fmt.failure_class_sql}
                            WHEN finish_reason = 'content_filter' OR refusal IS NOT NULL THEN 'content_policy_error'
                            WHEN finish_reason = 'length' OR answer IS NULL OR violation IS NOT NULL THEN 'parse_error'
                       END AS error_class,
                       CASE WHEN NOT ok THEN error_code
                            WHEN finish_reason = 'content_filter' OR refusal IS NOT NULL THEN 'content_filter'
                            WHEN finish_reason = 'length' THEN 'finish_reason_length'
                            WHEN answer IS NULL THEN 'no_answer'
                            WHEN violation IS NOT NULL THEN 'schema_mismatch' END AS error_code,
                       CASE WHEN NOT ok THEN error_message
                            WHEN finish_reason = 'content_filter' OR refusal IS NOT NULL
                                 THEN coalesce(refusal, 'answer blocked by the provider content filter')
                            WHEN finish_reason = 'length' THEN 'answer cut off at max_tokens; raise params.max_tokens'
                            WHEN answer IS NULL THEN {sql_literal(_EMPTY_ANSWER[task.spec.output.kind])}
                            ELSE violation END AS error_message,
                       status_code AS http_status,
                       CASE WHEN ok AND answer IS NOT NULL AND violation IS NULL
                                 AND finish_reason IS DISTINCT FROM 'length'
                            THEN CAST(answer AS VARCHAR) END AS output_json,
                       finish_reason, input_tokens, output_tokens, provider_request_id,
                       thinking_tokens, cached_input_tokens, output_schema_version
                FROM (SELECT *, coalesce(status_code BETWEEN 200 AND 299, false) AS ok FROM _checked)
            """


def line_cost_sql(task: ResolvedTask, rows: str = "_rows") -> str:
    """SQL of a line outcome's cost from the provider's usage on relation `rows` (NULL when unknown)."""
    return cost_sql_or_null(
        task.spec.provider,
        task.spec.model,
        f"{rows}.input_tokens",
        f"{rows}.output_tokens",
        f"{rows}.cached_input_tokens",
    )


def _pause_on_account_errors(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, task_id: str) -> None:
    """Outcomes this parse recorded (in its transaction: parsed_at is its now()) that say the provider
    account cannot be used pause that account (ledger.accounts): the send gate refuses it from now on."""
    found = conn.execute(
        """
        SELECT arg_min(error_code, (job_key, custom_id)), arg_min(error_message, (job_key, custom_id)),
               min(job_key), count(*)
        FROM ledger.parsed_result
        WHERE task_id = ? AND error_class = 'account_error' AND parsed_at = now()::TIMESTAMP
        """,
        [task_id],
    ).fetchone()
    code, message, job_key, items = found
    if not items:
        return
    fmt = wire_format(task.spec.provider, task.spec.endpoint)
    pause_account(
        conn,
        task.spec.provider,
        task_id=task_id,
        error_code=code or "account_error",
        error_message=message,
        job_key=job_key,
        items=items,
        fix=fmt.account_fix(code),
    )


def parse_results(wh: Warehouse, task: ResolvedTask, partition_date: str) -> ParseSummary:
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    tid = sql_literal(task_id)
    fmt = wire_format(task.spec.provider, task.spec.endpoint)
    version = sql_literal(task.spec.output.version)
    with wh.connect() as conn:
        # The lines without an outcome for their attempt yet.
        create_answer_views(
            conn,
            task,
            task_id,
            f"""NOT EXISTS (SELECT 1 FROM ledger.parsed_result p
                            WHERE p.task_id = {tid} AND p.custom_id = r.custom_id AND p.attempt = r.attempt)""",
        )
        with transaction(conn):
            parsed = insert_parsed_results(
                conn,
                task_id,
                line_outcomes_sql(task),
                output_schema_version=None,
                from_line=True,
                cost_sql=line_cost_sql(task),
            )
            # Items of batches that ended without a line of their own take the batch's outcome: its
            # error code classifies a batch-level failure (e.g. token_limit_exceeded is capacity); in
            # a COMPLETED batch such an item is a missing_result. The lines of such batches are
            # collected first; only their own outcomes are then looked up (an anti-join against the
            # partition's whole result set would hash every result row: out of memory when large),
            # and with no such batch nothing more is read. A COMPLETED batch is one of them only when
            # it has fewer ok lines than it was sent (counted per job, no join by custom_id).
            with partition_views(conn, task_id):
                conn.execute(f"""
                CREATE OR REPLACE TEMP TABLE _failed_lines AS
                WITH short_completed AS (
                    SELECT j.job_key FROM part_job j JOIN part_shard s USING (shard_id)
                    LEFT JOIN (SELECT job_key, count(*) AS ok_lines FROM ledger.raw_result
                               WHERE task_id = {tid} AND status = 'ok' GROUP BY job_key) r USING (job_key)
                    WHERE j.task_id = {tid} AND j.state = '{JobState.COMPLETED}' AND j.collected_at IS NULL
                      AND j.downloaded_at IS NOT NULL AND coalesce(r.ok_lines, 0) < s.line_count
                )
                SELECT sl.custom_id, sl.item_no, sl.attempt, j.job_key, j.state, m.output_schema_version,
                       CASE j.state
                            WHEN '{JobState.FAILED}'
                                 THEN coalesce(j.provider_errors::JSON ->> '$[0].code', 'batch_failed')
                            WHEN '{JobState.EXPIRED}' THEN 'batch_expired'
                            WHEN '{JobState.COMPLETED}'
                                 THEN CASE WHEN u.job_key IS NULL THEN 'missing_result' ELSE '{UNMATCHED_CODE}' END
                            ELSE 'batch_cancelled' END AS error_code,
                       CASE j.state
                            WHEN '{JobState.FAILED}' THEN 'the provider rejected the whole batch: '
                                 || coalesce(j.provider_errors::JSON ->> '$[0].message', 'no detail')
                            WHEN '{JobState.COMPLETED}'
                                 THEN CASE WHEN u.job_key IS NULL
                                           THEN 'the batch completed without a result line for this request'
                                           ELSE CAST(u.unmatched AS VARCHAR)
                                                || ' answer(s) of the batch came back without their request key '
                                                || 'and could not be matched; sent again as a file'
                                      END
                            ELSE 'the batch ended ' || lower(j.state) || ' before this request ran' END AS error_message
                FROM part_job j JOIN ledger.shard_line sl USING (shard_id)
                JOIN ledger.manifest_item m ON m.task_id = {tid} AND m.custom_id = sl.custom_id
                LEFT JOIN (SELECT job_key, sum(unmatched_lines) AS unmatched FROM ledger.raw_file
                           WHERE task_id = {tid} AND unmatched_lines > 0 GROUP BY job_key) u USING (job_key)
                WHERE j.task_id = {tid} AND j.downloaded_at IS NOT NULL
                  AND (j.state IN {FAILED_TERMINAL_STATES_SQL} OR j.job_key IN (SELECT job_key FROM short_completed))
                  AND m.output_schema_version = {version}
                  AND NOT EXISTS (SELECT 1 FROM ledger.raw_file f WHERE f.job_key = j.job_key AND f.ingested_at IS NULL)
                """)
            synthesized = 0
            if conn.execute("SELECT count(*) FROM _failed_lines").fetchone()[0]:
                capacity_codes = ", ".join(map(sql_literal, fmt.capacity_codes))
                internal_codes = ", ".join(map(sql_literal, fmt.internal_codes or ("",)))
                account_codes = ", ".join(map(sql_literal, fmt.account_codes or ("",)))
                synthesized = insert_parsed_results(
                    conn,
                    task_id,
                    f"""
                    WITH known AS (
                        SELECT p.custom_id, p.attempt FROM ledger.parsed_result p
                        WHERE p.task_id = {tid} AND p.custom_id IN (SELECT custom_id FROM _failed_lines)
                        UNION ALL
                        SELECT r.custom_id, r.attempt FROM ledger.raw_result r
                        WHERE r.task_id = {tid} AND r.status = 'ok'
                          AND r.custom_id IN (SELECT custom_id FROM _failed_lines)
                    )
                    SELECT custom_id, item_no, attempt, job_key, false AS provider_succeeded,
                           CASE WHEN state = '{JobState.EXPIRED}' THEN 'expired'
                                WHEN state = '{JobState.CANCELLED}' THEN 'canceled'
                                WHEN error_code = '{UNMATCHED_CODE}' THEN 'unmatched_result'
                                WHEN state = '{JobState.COMPLETED}' THEN 'missing_result'
                                WHEN error_code IN ({account_codes}) THEN 'account_error'
                                WHEN error_code IN ({capacity_codes}) THEN 'rate_or_capacity_error'
                                WHEN error_code IN ({internal_codes}) THEN 'internal_error'
                                ELSE 'validation_error' END AS error_class,
                           error_code, error_message,
                           NULL::INTEGER AS http_status, NULL::VARCHAR AS output_json, NULL::VARCHAR AS finish_reason,
                           NULL::BIGINT AS input_tokens, NULL::BIGINT AS output_tokens,
                           NULL::VARCHAR AS provider_request_id,
                           NULL::BIGINT AS thinking_tokens, NULL::BIGINT AS cached_input_tokens,
                           output_schema_version
                    FROM _failed_lines l
                    WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.custom_id = l.custom_id AND k.attempt = l.attempt)
                """,
                    output_schema_version=None,
                    from_line=False,
                )
            conn.execute("DROP TABLE _failed_lines")
            _pause_on_account_errors(conn, task, task_id)
            faultpoints.reached("parse.before_commit")
        by_class = dict(
            conn.execute(f"""
            SELECT coalesce(error_class, 'ok'), count(*) FROM ledger.parsed_result WHERE task_id = {tid} GROUP BY 1
        """).fetchall()
        )
        refused = conn.execute(f"SELECT count(*) FROM _ans_all WHERE output_schema_version <> {version}").fetchone()[0]
        drop_answer_views(conn)
    return ParseSummary(task_id, parsed, synthesized, by_class, refused)
