"""Which PostgreSQL ledger a DuckDB warehouse connection carries (`distributed`), if any.

`Warehouse.connect()` binds one for the block (ledger/distributed.py); `as_control(conn)` and
`transaction(conn)` look it up here, so neither needs the other to know about it.
"""

from __future__ import annotations

import weakref
from typing import Any

_bound: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def bind(conn: Any, control: Any) -> None:
    """`conn`'s control tables are those of `control` (a PgControl) until unbind(conn)."""
    _bound[conn] = control


def unbind(conn: Any) -> None:
    _bound.pop(conn, None)


def bound_control(conn: Any) -> Any | None:
    """The PgControl bound to DuckDB connection `conn`, or None (`local`)."""
    return _bound.get(conn)
