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


_publishers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def bind_publisher(conn: Any, publish: Any) -> None:
    """After each DuckDB commit on `conn`, `publish(conn, control)` runs inside the bound PostgreSQL
    transaction (a partition store's new version, ledger/store_versions.py) until unbind_publisher."""
    _publishers[conn] = publish


def unbind_publisher(conn: Any) -> None:
    _publishers.pop(conn, None)


def bound_publisher(conn: Any) -> Any | None:
    return _publishers.get(conn)
