"""Writes to the result tables: `ledger.raw_file`, `ledger.raw_result`, `ledger.parsed_result`,
`ledger.applied_result`.

Set-based: result rows come from a query the stage hands over (read by column name), inserted with
one INSERT … SELECT however many lines there are. Task-wide constants are the writer's arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from batch_assets.ledger.statements import NOW, insert_select, insert_values
from batch_assets.sqltext import sql_literal

Params = Sequence[Any] | Mapping[str, Any] | None

RAW_FILE_COLUMNS = ("file_key", "job_key", "kind", "provider_file_id", "path", "sha256", "byte_count")
RAW_RESULT_COLUMNS = (
    "file_key",
    "line_no",
    "job_key",
    "attempt",
    "request_id",
    "custom_id",
    "item_no",
    "status",
    "line_id",
    "status_code",
    "provider_request_id",
    "body",
    "error",
    "malformed_line",
)
PARSED_RESULT_COLUMNS = (
    "custom_id",
    "item_no",
    "attempt",
    "job_key",
    "provider_succeeded",
    "error_class",
    "error_code",
    "error_message",
    "http_status",
    "output_json",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "provider_request_id",
    "thinking_tokens",
    "cached_input_tokens",
)
APPLIED_RESULT_COLUMNS = ("custom_id", "item_no", "business_id", "outcome")


def insert_raw_file(
    conn: duckdb.DuckDBPyConnection,
    *,
    file_key: str,
    job_key: str,
    task_id: str,
    kind: str,
    provider_file_id: str | None,
    path: str,
    sha256: str,
    byte_count: int,
    unmatched_lines: int = 0,
) -> bool:
    """Record a downloaded provider file (downloaded now, not ingested yet), with the provider's
    answers it left out as unmatchable. A file_key already recorded is left as it is. Returns
    whether a row was added."""
    return (
        insert_values(
            conn,
            "raw_file",
            {
                "file_key": file_key,
                "job_key": job_key,
                "task_id": task_id,
                "kind": kind,
                "provider_file_id": provider_file_id,
                "path": path,
                "sha256": sha256,
                "byte_count": byte_count,
                "unmatched_lines": unmatched_lines,
            },
            fixed={"line_count": "NULL", "downloaded_at": NOW, "ingested_at": "NULL"},
            on_conflict="ON CONFLICT (file_key) DO NOTHING",
        )
        > 0
    )


def insert_raw_files(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Record the downloaded files of `query` (columns of RAW_FILE_COLUMNS) for the partition,
    downloaded now, not ingested yet. Returns the number recorded."""
    return insert_select(
        conn,
        "raw_file",
        RAW_FILE_COLUMNS,
        query,
        params,
        fixed={"task_id": sql_literal(task_id), "line_count": "NULL", "downloaded_at": NOW, "ingested_at": "NULL"},
    )


def insert_raw_results(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Record result lines of the partition (columns of RAW_RESULT_COLUMNS), ingested now.
    Returns the number recorded."""
    return insert_select(
        conn,
        "raw_result",
        RAW_RESULT_COLUMNS,
        query,
        params,
        fixed={"task_id": sql_literal(task_id), "ingested_at": NOW},
    )


def mark_files_ingested(conn: duckdb.DuckDBPyConnection, counts_query: str, params: Params = None) -> None:
    """Mark files ingested (now) with their line counts: `counts_query` gives file_key, line_count."""
    conn.execute(
        f"""
        UPDATE ledger.raw_file SET ingested_at = now()::TIMESTAMP, line_count = c.line_count
        FROM ({counts_query}) AS c
        WHERE raw_file.file_key = c.file_key
    """,
        params if params is not None else [],
    )


def insert_parsed_results(
    conn: duckdb.DuckDBPyConnection,
    task_id: str,
    query: str,
    params: Params = None,
    *,
    output_schema_version: str | None,
    from_line: bool,
    cost_sql: str = "NULL",
) -> int:
    """Record outcomes (columns of PARSED_RESULT_COLUMNS), parsed now under `output_schema_version`
    (None: each row's own `output_schema_version` column of `query`, the version its item was frozen
    with). `from_line` says whether they came from result lines (true) or from their batch's end state.
    `cost_sql` prices a row from its `_rows.input_tokens` / `_rows.output_tokens` /
    `_rows.cached_input_tokens` (the provider's usage; NULL when unknown). Returns the number recorded."""
    version = "_rows.output_schema_version" if output_schema_version is None else sql_literal(output_schema_version)
    return insert_select(
        conn,
        "parsed_result",
        PARSED_RESULT_COLUMNS,
        query,
        params,
        fixed={
            "task_id": sql_literal(task_id),
            "output_schema_version": version,
            "parsed_at": NOW,
            "from_line": "true" if from_line else "false",
            "cost": cost_sql,
        },
    )


def insert_applied_results(
    conn: duckdb.DuckDBPyConnection,
    task_id: str,
    query: str,
    params: Params = None,
    *,
    target_table: str,
    output_version: str,
) -> int:
    """Record apply decisions (columns: custom_id, item_no, business_id, outcome 'applied' | 'stale') for
    `target_table` at `output_version`, applied now. Returns the number recorded."""
    return insert_select(
        conn,
        "applied_result",
        APPLIED_RESULT_COLUMNS,
        query,
        params,
        fixed={
            "task_id": sql_literal(task_id),
            "target_table": sql_literal(target_table),
            "output_version": sql_literal(output_version),
            "applied_at": NOW,
        },
    )
