"""The seeded demo tables, pinned: each seeder's output hashes to a recorded digest.

The digests were recorded from the seeding code as it stood before its text banks moved from Python
modules to data files, so any change to the rows, their values or their stored order fails here.
A deliberate change to the demo data means recording new digests (run ``table_digest`` on a fresh
seed and paste them below, saying why in the commit).
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime

import duckdb
import pytest

from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets

_ALT = {"start_date": date(2025, 2, 27), "seed": 7}

# (seeder, table, keyword arguments, digest). The defaults are what `make demo` seeds; the second set
# covers another seed and start date, a day crossing a month end and a KB catalogue grown past its
# default size (4 * per_day > 2400).
CASES = [
    (
        seed_support_tickets,
        "main.support_tickets",
        {},
        "9b56fd489e311022e2feac11782ae75c75f5762f5296ba58494d1b2c94510933",
    ),
    (seed_kb_articles, "main.kb_articles", {}, "5580343d240235a15343a749a7021fe4daf1c81e06af836263b9f8e2bf1f153a"),
    (
        seed_product_reviews,
        "main.product_reviews",
        {},
        "896eb100b642133f5f671646686533eaeb6ab98ab85c8f19530b3d204f9ad491",
    ),
    (
        seed_support_tickets,
        "main.support_tickets",
        {**_ALT, "days": 2, "per_day": 60},
        "2bd677b0cd817803d2fe4aca693098aeca79a5f5c8a02b92359f5a70698b9445",
    ),
    (
        seed_kb_articles,
        "main.kb_articles",
        {**_ALT, "days": 3, "per_day": 700},
        "d4a6b3be339321fe2eaea10ef0c1bca75563b195556ed2fd2fb795056e171a58",
    ),
    (
        seed_product_reviews,
        "main.product_reviews",
        {**_ALT, "days": 2, "per_day": 50},
        "3e282096a353d6e20ef33c66ff1fc8b6749156e64ddaf386b4648ed86639f2c3",
    ),
]


def _canonical(value):
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, (date, datetime)):  # datetime is a date: both print as ISO 8601
        return value.isoformat()
    raise TypeError(f"no canonical text for {type(value).__name__}")


def table_digest(conn: duckdb.DuckDBPyConnection, table: str) -> str:
    """SHA-256 over ``table``'s column names and types, then each row in stored (rowid) order as one
    line of JSON (UTF-8, ints and NULLs kept apart from strings, dates and timestamps in ISO 8601)."""
    digest = hashlib.sha256()
    columns = conn.execute(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall()
    digest.update(json.dumps(columns).encode())
    cursor = conn.execute(f"SELECT * FROM {table} ORDER BY rowid")
    while batch := cursor.fetchmany(2000):
        for row in batch:
            digest.update(json.dumps([_canonical(v) for v in row], ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest()


@pytest.mark.parametrize(
    ("seeder", "table", "kwargs", "expected"),
    CASES,
    ids=[f"{table.split('.')[1]}-{'default' if not kwargs else 'alt'}" for _, table, kwargs, _ in CASES],
)
def test_seeded_table_matches_its_recorded_digest(tmp_path, seeder, table, kwargs, expected):
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as conn:
        seeder(conn, **kwargs)
        assert table_digest(conn, table) == expected
