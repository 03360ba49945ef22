"""The one way ledger work is made atomic: `with transaction(conn): ...`.

BEGIN on entry, COMMIT when the block ends normally, ROLLBACK when anything is raised in it
(KeyboardInterrupt included), then the exception propagates. DuckDB has no nested transactions:
a `transaction(conn)` opened while the same connection is already inside one joins the outer
transaction, so a writer function that must be atomic on its own can still be called from a
stage's larger transaction. With a PostgreSQL ledger bound to the connection (`distributed`), the
block is a transaction there too, committed after the file's.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator

import duckdb

from batch_assets.ledger.binding import bound_control, bound_publisher

_open: weakref.WeakSet = weakref.WeakSet()  # connections inside a transaction() block
# Called after the file's COMMIT, before PostgreSQL's (`distributed`): empty, except in the kill
# tests' stage process, which crashes there (batch_assets_tests/stage_process.py).
BETWEEN_COMMITS: list[Callable[[], None]] = []


@contextlib.contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN … COMMIT around the block, ROLLBACK if it raises; joins an enclosing transaction().
    A ControlDB (ledger.control_db, either engine) opens its own transaction the same way."""
    if getattr(conn, "dialect", None) is not None:  # a ControlDB
        with conn.transaction():
            yield conn
        return
    if conn in _open:
        yield conn
        return
    # `distributed`: the control rows commit in PostgreSQL right after the file's rows, and not at
    # all if those fail (docs/deployment.md, "commit order").
    control = bound_control(conn)
    with control.transaction() if control is not None else contextlib.nullcontext():
        conn.execute("BEGIN TRANSACTION")
        _open.add(conn)
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            # A failed COMMIT has already ended the transaction; then there is nothing to roll back.
            with contextlib.suppress(duckdb.TransactionException):
                conn.execute("ROLLBACK")
            raise
        finally:
            _open.discard(conn)
        if control is not None:
            publish = bound_publisher(conn)
            if publish is not None:  # the store's new version, moved with the control rows
                publish(conn, control)
            for hook in BETWEEN_COMMITS:
                hook()
