"""Writes for a re-parse of kept raw results: `ledger.parse_generation`, `ledger.parsed_result_superseded`,
and the replaced rows of `ledger.parsed_result` / `ledger.retry_decision`.

An attempt keeps one current outcome (ledger.parsed_result, keyed by custom_id and attempt); a
re-parse that changes it keeps the row it replaces, with the retry decision taken on it, in
ledger.parsed_result_superseded, and records its generation. Set-based: the new outcomes come from
a relation the stage hands over (read by column name).
"""

from __future__ import annotations

import duckdb

from batch_assets.ledger.jobs import unmark_collected
from batch_assets.ledger.results import PARSED_RESULT_COLUMNS
from batch_assets.ledger.statements import NOW, insert_select, insert_values
from batch_assets.sqltext import sql_literal

# The columns a re-parse replaces: every outcome column a parse writes, and its cost.
REPLACED_COLUMNS = tuple(c for c in PARSED_RESULT_COLUMNS if c not in ("custom_id", "item_no", "attempt")) + (
    "output_schema_version",
    "cost",
)


def next_generation(conn: duckdb.DuckDBPyConnection, task_id: str) -> int:
    """The partition's next parse generation: 1 for its first re-parse (0 is every first parse)."""
    row = conn.execute(
        "SELECT coalesce(max(generation), 0) + 1 FROM ledger.parse_generation WHERE task_id = ?", [task_id]
    ).fetchone()
    return int(row[0])


def supersede_outcomes(conn: duckdb.DuckDBPyConnection, task_id: str, generation: int, new_rows: str) -> int:
    """Replace the current outcomes of the attempts in relation `new_rows` (custom_id, attempt and
    REPLACED_COLUMNS, each attempt once) with its rows, parsed now under `generation`. Each replaced
    row is kept in ledger.parsed_result_superseded with the retry decision taken on it, and that
    decision is removed: the retry planner decides again on the new outcome. The jobs of the
    attempts are no longer taken as collected, so a collect run applies what now parses even if
    the caller stops before its apply. Returns the number replaced. Call inside a transaction."""
    tid = sql_literal(task_id)
    keys = f"(SELECT custom_id, attempt FROM {new_rows})"
    insert_select(
        conn,
        "parsed_result_superseded",
        ("custom_id", "attempt", "item_no", "parse_generation", "parsed_row", "retry_decision"),
        f"""
        SELECT p.custom_id, p.attempt, p.item_no, coalesce(p.parse_generation, 0) AS parse_generation,
               to_json(p) AS parsed_row, CASE WHEN d.custom_id IS NOT NULL THEN to_json(d) END AS retry_decision
        FROM ledger.parsed_result p
        SEMI JOIN {keys} k ON k.custom_id = p.custom_id AND k.attempt = p.attempt
        LEFT JOIN ledger.retry_decision d ON d.custom_id = p.custom_id AND d.attempt = p.attempt
        WHERE p.task_id = {tid}
        """,
        fixed={"task_id": tid, "superseded_by": str(int(generation)), "superseded_at": NOW},
    )
    conn.execute(f"""
        DELETE FROM ledger.retry_decision d
        WHERE d.task_id = {tid} AND EXISTS (SELECT 1 FROM {keys} k WHERE k.custom_id = d.custom_id
                                                                  AND k.attempt = d.attempt)
    """)
    sets = ", ".join(f"{c} = n.{c}" for c in REPLACED_COLUMNS)
    replaced = conn.execute(f"""
        UPDATE ledger.parsed_result AS p
        SET {sets}, parse_generation = {int(generation)}, parsed_at = now()::TIMESTAMP, from_line = true
        FROM {new_rows} AS n
        WHERE p.task_id = {tid} AND p.custom_id = n.custom_id AND p.attempt = n.attempt
    """).fetchone()[0]
    job_keys = [r[0] for r in conn.execute(f"SELECT DISTINCT job_key FROM {new_rows}").fetchall()]
    unmark_collected(conn, task_id, job_keys)
    return int(replaced)


def record_generation(
    conn: duckdb.DuckDBPyConnection,
    *,
    task_id: str,
    generation: int,
    classes: tuple[str, ...],
    output_schema_version: str,
    output_schema_hash: str | None,
    candidates: int,
    changed: int,
    now_usable: int,
    still_failed: int,
    who: str | None,
) -> None:
    """Record one re-parse of the partition: what it parsed again and what changed."""
    insert_values(
        conn,
        "parse_generation",
        {
            "task_id": task_id,
            "generation": generation,
            "classes": ",".join(classes),
            "output_schema_version": output_schema_version,
            "output_schema_hash": output_schema_hash,
            "candidates": candidates,
            "changed": changed,
            "now_usable": now_usable,
            "still_failed": still_failed,
            "who": who,
        },
        fixed={"created_at": NOW},
    )
