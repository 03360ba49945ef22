"""What a statement read, from DuckDB's own profile: rows each ledger table's scans yielded. Lets a
test assert that a check reads only its partitions' rows (a count, not a time)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb

EARLIER_DAYS = [f"2026-10-0{d}" for d in range(1, 10)]  # nine partitions before the tests' days


def ledger_scans(conn: duckdb.DuckDBPyConnection, run: Callable[[], object], profile: Path) -> dict[str, list[int]]:
    """Run `run()` with JSON profiling on `conn` (its last statement is the one profiled); returns,
    per ledger table, the rows each of its scans yielded."""
    conn.execute("PRAGMA enable_profiling = 'json'")
    conn.execute(f"PRAGMA profiling_output = '{profile}'")
    try:
        run()
    finally:
        conn.execute("PRAGMA disable_profiling")
    scans: dict[str, list[int]] = {}

    def walk(node: dict) -> None:
        table = (node.get("extra_info") or {}).get("Table", "")
        if node.get("name") == "SEQ_SCAN" and ".ledger." in table:
            scans.setdefault(table.rsplit(".", 1)[1], []).append(node["intermediate_rows"])
        for child in node.get("children", []):
            walk(child)

    for node in json.loads(profile.read_text())["operator"]:
        walk(node)
    return scans
