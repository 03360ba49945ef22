"""Per-statement timing of a stage: which SQL statement a slow stage spends its time in.

`ProfilingWarehouse` is a `Warehouse` whose connections time every `execute()` the product code
makes (wall time, to completion: DuckDB's Python `execute` runs the statement before returning).
The stage code runs unchanged; only the connection it gets is wrapped.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import duckdb

from batch_assets.ledger.warehouse import Warehouse


def _shorten(sql: str, limit: int = 160) -> str:
    text = re.sub(r"\s+", " ", sql).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _TimedConnection:
    """Forwards everything to the DuckDB connection; records execute() durations."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, log: list):
        self._conn = conn
        self._log = log

    def execute(self, sql, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self._conn.execute(sql, *args, **kwargs)
        finally:
            self._log.append((time.perf_counter() - t0, sql))

    def cursor(self):
        """Another cursor of the same database, timed into the same log (list.append is atomic)."""
        return _TimedConnection(self._conn.cursor(), self._log)

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._conn.close()
        return False


@dataclass(frozen=True)
class ProfilingWarehouse(Warehouse):
    statements: list = field(default_factory=list, compare=False, hash=False)

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        t0 = time.perf_counter()
        with super().connect(read_only) as conn:
            # Replacement scans of Python locals look at the caller's frame, which is now ours.
            conn.execute("SET python_scan_all_frames = true")
            self.statements.append((time.perf_counter() - t0, "<open warehouse + migrate check>"))
            try:
                yield _TimedConnection(conn, self.statements)
            finally:
                t1 = time.perf_counter()
        # Closing the file checkpoints it: the WAL written by the stage goes into the database.
        self.statements.append((time.perf_counter() - t1, "<close warehouse (checkpoint of the WAL)>"))

    def top(self, n: int = 6, stage_wall_s: float | None = None) -> list[dict]:
        """The statements that took longest, grouped by text with literals and numbers blanked (so a
        statement run once per file or per shard adds up), plus the time spent outside SQL."""
        totals: dict[str, list] = {}
        for seconds, sql in self.statements:
            key = _shorten(re.sub(r"\b\d+\b", "#", re.sub(r"'[^']*'", "'…'", sql)))
            entry = totals.setdefault(key, [0.0, 0])
            entry[0] += seconds
            entry[1] += 1
        if stage_wall_s is not None:
            in_sql = sum(seconds for seconds, _ in self.statements)
            totals["<outside SQL: Python, file hashing, result fetching>"] = [max(stage_wall_s - in_sql, 0.0), 1]
        ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])[:n]
        return [{"seconds": round(s, 3), "calls": c, "sql": k} for k, (s, c) in ranked]
