"""Who may write a task partition's per-item store: a lease row in the PostgreSQL control ledger.

In `distributed` each partition's per-item tables are in a DuckDB store of their own
(ledger/partition_stores.py), and the process that opens one for writing first takes the
partition's row in `ledger.partition_lease`: inserted when there is none, or taken over by one
guarded UPDATE when it is expired, already this process's, or held by a process of this host that
is gone (a killed run need not wait out its lease). While it writes, a thread renews the lease; when
it is done, the row is deleted. DuckDB's file lock guards one machine's disk; the lease is what two
machines sharing the stores (object storage next) agree on, and Dagster's tag limits cannot be it:
they only see the tags a run was launched with.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from batch_assets.ledger.control_db import ControlDB, lease_sql

log = logging.getLogger(__name__)

DEFAULT_PARTITION_LEASE_S = 60.0
_RENEW_SHARE = 3  # renewed every third of the lease


class PartitionLeaseError(RuntimeError):
    """A partition's store could not be leased, or its lease was lost (the message says who holds it)."""


@dataclass(frozen=True)
class Holder:
    owner: str
    host: str
    pid: int
    expires_at: object


def this_process() -> tuple[str, str, int]:
    """(owner, host, pid) of this process."""
    host, pid = socket.gethostname(), os.getpid()
    return f"{host}:{pid}", host, pid


def holder(db: ControlDB, task_id: str) -> Holder | None:
    row = db.execute(
        "SELECT owner, host, pid, expires_at FROM ledger.partition_lease WHERE task_id = ?", [task_id]
    ).one()
    return Holder(*row) if row else None


def _gone(h: Holder) -> bool:
    """Whether the holder is a process of this host that no longer runs (its lease can be taken now)."""
    if h.host != socket.gethostname():
        return False
    try:
        os.kill(int(h.pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # runs, as another user
        return False
    return False


def take(db: ControlDB, task_id: str, lease_s: float = DEFAULT_PARTITION_LEASE_S) -> bool:
    """Take the partition's lease for this process; False while another live holder has it."""
    owner, host, pid = this_process()
    won = db.execute(
        f"""INSERT INTO ledger.partition_lease (task_id, owner, host, pid, taken_at, expires_at)
            VALUES (?, ?, ?, ?, now()::TIMESTAMP, {lease_sql(lease_s)}) ON CONFLICT (task_id) DO NOTHING""",
        [task_id, owner, host, pid],
    ).rowcount
    if won:
        return True
    held = holder(db, task_id)
    if held is None:  # released meanwhile: the next try inserts
        return False
    takeover = held.owner if (held.owner == owner or _gone(held)) else None
    return bool(
        db.execute(
            f"""UPDATE ledger.partition_lease
                SET owner = ?, host = ?, pid = ?, taken_at = now()::TIMESTAMP, expires_at = {lease_sql(lease_s)}
                WHERE task_id = ? AND (expires_at < now()::TIMESTAMP OR owner = ?)""",
            [owner, host, pid, task_id, takeover],
        ).rowcount
    )


def renew(db: ControlDB, task_id: str, lease_s: float = DEFAULT_PARTITION_LEASE_S) -> bool:
    """Extend this process's lease; False when it is no longer this process's."""
    owner, _, _ = this_process()
    return bool(
        db.execute(
            f"UPDATE ledger.partition_lease SET expires_at = {lease_sql(lease_s)} WHERE task_id = ? AND owner = ?",
            [task_id, owner],
        ).rowcount
    )


def release(db: ControlDB, task_id: str) -> None:
    owner, _, _ = this_process()
    db.execute("DELETE FROM ledger.partition_lease WHERE task_id = ? AND owner = ?", [task_id, owner])


# This process's leases: (ledger url, task_id) -> how many open blocks use it (a stage nests connections).
_held: dict[tuple[str, str], int] = {}
_held_guard = threading.Lock()


@contextlib.contextmanager
def leased(
    open_control,
    task_id: str,
    *,
    key: str,
    timeout_s: float,
    lease_s: float = DEFAULT_PARTITION_LEASE_S,
) -> Iterator[None]:
    """Hold the partition's lease for the block: taken (waiting up to `timeout_s` for another
    holder), renewed by a thread, released after. `open_control()` opens a ControlDB (a context
    manager); `key` names the ledger, so blocks of one process nest on one lease."""
    slot = (key, task_id)
    with _held_guard:
        if _held.get(slot):
            _held[slot] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield
        finally:
            with _held_guard:
                _held[slot] -= 1
        return
    _acquire(open_control, task_id, timeout_s, lease_s)
    with _held_guard:
        _held[slot] = 1
    stop, lost = threading.Event(), threading.Event()
    renewer = threading.Thread(
        target=_keep, args=(open_control, task_id, lease_s, stop, lost), name=f"lease-{task_id}", daemon=True
    )
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()
        with _held_guard:
            del _held[slot]
        with open_control() as db:
            release(db, task_id)
    if lost.is_set():
        raise PartitionLeaseError(
            f"partition {task_id}: this process lost its store lease while writing (another process took it "
            "after it expired); run the stage again"
        )


def _acquire(open_control, task_id: str, timeout_s: float, lease_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    delay, waited = 0.05, False
    while True:
        with open_control() as db:
            if take(db, task_id, lease_s):
                return
            held = holder(db, task_id)
        if time.monotonic() > deadline:
            who = f"{held.owner} until {held.expires_at}" if held else "another process"
            raise PartitionLeaseError(
                f"partition {task_id}: its store is leased by {who}; waited {timeout_s:.0f} s. "
                "Fix: let that run finish, or stop it (its lease then expires)"
            )
        if not waited:
            waited = True
            log.info("partition %s's store is leased by %s; waiting", task_id, held.owner if held else "another")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def _keep(open_control, task_id: str, lease_s: float, stop: threading.Event, lost: threading.Event) -> None:
    while not stop.wait(lease_s / _RENEW_SHARE):
        try:
            with open_control() as db:
                if not renew(db, task_id, lease_s):
                    lost.set()
                    log.error("partition %s: store lease lost", task_id)
                    return
        except Exception as exc:  # a failed renewal is retried at the next beat; the lease still runs
            log.warning("partition %s: renewing the store lease failed: %s", task_id, exc)
