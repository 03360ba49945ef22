"""Writes to `ledger.quarantine`, `ledger.shard` and `ledger.shard_line`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from batch_assets.ledger.statements import NOW, insert_select, insert_values
from batch_assets.sqltext import sql_literal

Params = Sequence[Any] | Mapping[str, Any] | None

QUARANTINE_COLUMNS = ("custom_id", "reason_code", "reason")
SHARD_LINE_COLUMNS = ("shard_id", "line_no", "custom_id", "request_id", "line_bytes", "est_tokens")


def insert_quarantine(conn: duckdb.DuckDBPyConnection, task_id: str, query: str, params: Params = None) -> int:
    """Quarantine the lines of `query` (columns: custom_id, reason_code, reason), recorded now.
    Returns the number quarantined."""
    return insert_select(conn, "quarantine", QUARANTINE_COLUMNS, query, params,
                         fixed={"task_id": sql_literal(task_id), "recorded_at": NOW})


def insert_shard(conn: duckdb.DuckDBPyConnection, *, shard_id: str, task_id: str, provider: str, endpoint: str,
                 model: str, attempt: int, shard_no: int, path: str, line_count: int, byte_count: int,
                 est_tokens: int, sha256: str | None) -> None:
    """Record one cut shard file (created now, not deferred)."""
    insert_values(conn, "shard", {
        "shard_id": shard_id, "task_id": task_id, "provider": provider, "endpoint": endpoint, "model": model,
        "attempt": attempt, "shard_no": shard_no, "path": path, "line_count": line_count,
        "byte_count": byte_count, "est_tokens": est_tokens, "sha256": sha256,
    }, fixed={"created_at": NOW, "deferred_at": "NULL"})


def insert_shard_lines(conn: duckdb.DuckDBPyConnection, task_id: str, attempt: int, query: str,
                       params: Params = None) -> int:
    """Record the request lines of `query` (columns: shard_id, line_no, custom_id, request_id,
    line_bytes, est_tokens) for the partition's submission `attempt`. Returns the number recorded."""
    return insert_select(conn, "shard_line", SHARD_LINE_COLUMNS, query, params,
                         fixed={"task_id": sql_literal(task_id), "attempt": str(int(attempt))})


def mark_shards_deferred(conn: duckdb.DuckDBPyConnection, shard_ids: Sequence[str]) -> None:
    """Record that submission held these shards back for the provider's concurrent-job cap (the
    first time only: an already deferred shard keeps its deferred_at)."""
    if not shard_ids:
        return
    conn.execute("UPDATE ledger.shard SET deferred_at = coalesce(deferred_at, now()::TIMESTAMP) "
                 "WHERE list_contains(?::VARCHAR[], shard_id)", [list(shard_ids)])
