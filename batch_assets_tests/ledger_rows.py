"""Tests' own reads of the ledger, on either deployment: a query that names a control table runs
where the control tables are (the PostgreSQL ledger bound to the connection in `distributed`), any
other on the warehouse file. For assertions only; the product reads through ledger/ functions."""

from __future__ import annotations

import re

from batch_assets.ledger.control_db import CONTROL_TABLES, as_control, local_control

_CONTROL = re.compile(r"\bledger\.(" + "|".join(CONTROL_TABLES) + r")\b")


def rows(conn, sql: str, params=None) -> list[tuple]:
    """The query's rows as tuples, from the store that holds the tables it names."""
    db = as_control(conn) if _CONTROL.search(sql) else local_control(conn)
    return [tuple(r) for r in db.execute(sql, params).rows]


def scalar(conn, sql: str, params=None):
    found = rows(conn, sql, params)
    return found[0][0] if found else None
