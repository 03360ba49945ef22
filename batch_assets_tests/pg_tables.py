"""Test helper: a seeded warehouse's source table moved into PostgreSQL."""

from __future__ import annotations

import dataclasses

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.task_tables.postgres import PgTables


def tables_in_postgres(wh: Warehouse, postgres_url: str, schema: str = "biz") -> Warehouse:
    """`wh` with the seeded support_tickets moved from its file to `schema` in PostgreSQL."""
    tables = PgTables(postgres_url, schema=schema)
    with wh.connect() as conn:
        tables.publish(conn, "support_tickets", "SELECT * FROM support_tickets")
        conn.execute("DROP TABLE support_tickets")  # nothing left to read by mistake
    return dataclasses.replace(wh, tables=tables)
