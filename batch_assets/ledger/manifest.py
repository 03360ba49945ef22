"""Writes to `ledger.source_reject` and `ledger.manifest_item` (the frozen input manifest).

Set-based: the stage hands over a query producing the rows (read by column name) and the writer
runs one INSERT … SELECT / UPDATE over it. Task-wide constants are the writer's arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from batch_assets.ledger.statements import NOW, insert_select
from batch_assets.sqltext import sql_literal

Params = Sequence[Any] | Mapping[str, Any] | None

SOURCE_REJECT_COLUMNS = ("business_id", "row_count", "reason_code", "reason")
MANIFEST_ITEM_COLUMNS = ("custom_id", "item_no", "business_id", "input_hash", "est_input_tokens", "est_cost")
PII_MAPPING_COLUMNS = ("custom_id", "detector", "placeholder", "value")


def replace_source_rejects(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Replace the partition's source rejects with the rows of `query`
    (columns: business_id, row_count, reason_code, reason). Returns the number recorded."""
    conn.execute("DELETE FROM ledger.source_reject WHERE task_id = ?", [task_id])
    return insert_select(
        conn,
        "source_reject",
        SOURCE_REJECT_COLUMNS,
        query,
        params,
        fixed={"task_id": sql_literal(task_id), "recorded_at": NOW},
    )


def insert_manifest_items(
    conn: duckdb.DuckDBPyConnection,
    task_id: str,
    query: str,
    params: Params = None,
    *,
    item_type: str,
    prompt_version: str,
    model: str,
    params_json: str,
    output_schema_version: str,
    manifest_version: int,
) -> int:
    """Add manifest items (columns of `query`: custom_id, item_no (unique in the partition),
    business_id, input_hash, est_input_tokens, est_cost), frozen now under `manifest_version`, not
    superseded. Returns the number inserted."""
    return insert_select(
        conn,
        "manifest_item",
        MANIFEST_ITEM_COLUMNS,
        query,
        params,
        fixed={
            "task_id": sql_literal(task_id),
            "item_type": sql_literal(item_type),
            "prompt_version": sql_literal(prompt_version),
            "model": sql_literal(model),
            "params_json": sql_literal(params_json),
            "output_schema_version": sql_literal(output_schema_version),
            "manifest_version": str(int(manifest_version)),
            "frozen_at": NOW,
            "superseded_at": "NULL",
        },
    )


def supersede_items_not_in(conn: duckdb.DuckDBPyConnection, task_id: str, current_ids_query: str) -> int:
    """Mark superseded (now) the partition's live items whose custom_id is not among the
    `custom_id`s of `current_ids_query`. Returns the number superseded."""
    # A first freeze has no live items: the anti-join would still read every current id first
    # (the freeze's highest memory), so it is not run at all.
    if not conn.execute(
        "SELECT EXISTS (SELECT 1 FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL)", [task_id]
    ).fetchone()[0]:
        return 0
    return conn.execute(
        f"""
        UPDATE ledger.manifest_item SET superseded_at = now()::TIMESTAMP
        WHERE task_id = ? AND superseded_at IS NULL
          AND custom_id NOT IN (SELECT custom_id FROM ({current_ids_query}))
    """,
        [task_id],
    ).fetchone()[0]


def revive_items_in(conn: duckdb.DuckDBPyConnection, task_id: str, current_ids_query: str) -> int:
    """Un-supersede the partition's items whose custom_id is among the `custom_id`s of
    `current_ids_query` (an input that changed back to an earlier text). Returns the number revived."""
    return conn.execute(
        f"""
        UPDATE ledger.manifest_item SET superseded_at = NULL
        WHERE task_id = ? AND superseded_at IS NOT NULL
          AND custom_id IN (SELECT custom_id FROM ({current_ids_query}))
    """,
        [task_id],
    ).fetchone()[0]


def insert_pii_mapping(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Keep the original values behind redaction placeholders (columns of `query`: custom_id,
    detector, placeholder, value), recorded now. Local only: nothing reads this table to send,
    log or report it. A (custom_id, placeholder) already kept stays as it is. Returns rows added."""
    return insert_select(
        conn,
        "pii_mapping",
        PII_MAPPING_COLUMNS,
        query,
        params,
        fixed={"task_id": sql_literal(task_id), "recorded_at": NOW},
        on_conflict="ON CONFLICT (custom_id, placeholder) DO NOTHING",
    )
