"""The table-building scaffolding the demo seeders (``seed.py``, ``seed_kb.py``, ``seed_reviews.py``) share.

Each seeder checks its size arguments, fills one list per column day by day (each day from its own
``random.Random``), and replaces its table in one ``CREATE OR REPLACE TABLE ... AS SELECT`` statement.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import date, timedelta

import duckdb
import pyarrow as pa

Columns = dict[str, list]


def check_size(days: int, per_day: int, min_per_day: int) -> None:
    """Reject a seeding size too small for the fixed per-day edge cases."""
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    if per_day < min_per_day:
        raise ValueError(f"per_day must be >= {min_per_day}, got {per_day}")


def seeded_days(start_date: date, days: int) -> Iterator[date]:
    """The ``days`` consecutive dates from ``start_date`` on, one partition each."""
    for offset in range(days):
        yield start_date + timedelta(days=offset)


def second_of_day(rng: random.Random, hour_weights: tuple[int, ...]) -> int:
    """A second within a day: the hour drawn by ``hour_weights`` (24 of them), then uniformly within it."""
    return rng.choices(range(24), hour_weights)[0] * 3600 + rng.randrange(3600)


def append_row(columns: Columns, *values) -> None:
    """Append one row, ``values`` in column (schema) order."""
    if len(values) != len(columns):
        raise ValueError(f"expected {len(columns)} values, got {len(values)}")
    for column, value in zip(columns.values(), values):
        column.append(value)


def build_rows(schema: pa.Schema, start_date: date, days: int, append_day: Callable[[Columns, date], None]) -> pa.Table:
    """Run ``append_day(columns, day)`` for each seeded day and return the rows as one Arrow table."""
    columns: Columns = {field.name: [] for field in schema}
    for day in seeded_days(start_date, days):
        append_day(columns, day)
    return pa.table(columns, schema=schema)


def replace_table(conn: duckdb.DuckDBPyConnection, table: str, rows: pa.Table, order_by: str) -> int:
    """(Re)create ``table`` from ``rows`` sorted by ``order_by`` in one statement; returns rows written."""
    # A replacement scan of the local Arrow table rather than conn.register(): DuckDB 2 refuses
    # register() while the caller still holds a half-read result (e.g. after .fetchone()), but not
    # execute(). The local's name is distinctive because a real table of that name would win.
    batch_assets_demo_rows = rows
    conn.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM batch_assets_demo_rows ORDER BY {order_by}")
    return batch_assets_demo_rows.num_rows
