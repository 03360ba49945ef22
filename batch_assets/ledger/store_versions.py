"""A partition store's versions in object storage, the current one named in the control ledger.

With $BATCH_ASSETS_STORAGE_URL set, `data/partitions/<task_id>.duckdb` is only this machine's copy
of the partition's store. `ledger.partition_store` names the version every run starts from (its
object key ends in the file's sha256). A writer, holding the partition's lease:

1. pulls: downloads the current version unless its copy is that version already (a copy of a
   version never recorded, left by a run whose commit failed, is replaced);
2. works, and after each transaction's DuckDB commit — inside the PostgreSQL transaction of the
   control rows it recorded, before that commits — checkpoints the file, uploads it under its
   hash and moves the pointer by compare-and-set from the version it started from. So a version
   counts exactly when the control rows that go with it commit; an upload whose transaction did
   not commit is an orphan (`collect_garbage` deletes it).

A compare-and-set that finds another version (another run moved it: this one's lease had lapsed)
fails the transaction with StoreVersionConflict and drops the copy; the run's stage is run again
from the winner's version and redoes its work idempotently.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb

from batch_assets.storage.objects import ObjectStorage, file_sha256

log = logging.getLogger(__name__)

STORES_PREFIX = "stores"
ORPHAN_GRACE = dt.timedelta(hours=1)  # an upload younger than this may still be committing


class StoreVersionConflict(RuntimeError):
    """Another run moved the partition store's version since this run started from it."""


@dataclass(frozen=True)
class Version:
    object_key: str
    sha256: str
    version: int


def object_key(task_id: str, sha256: str) -> str:
    return f"{STORES_PREFIX}/{task_id}/{sha256}.duckdb"


def current(db, task_id: str) -> Version | None:
    row = db.execute(
        "SELECT object_key, sha256, version FROM ledger.partition_store WHERE task_id = ?", [task_id]
    ).one()
    return Version(*row) if row else None


class SyncedStore:
    """This machine's copy of one partition's store, kept at the version the ledger names."""

    def __init__(self, storage: ObjectStorage, task_id: str, path: Path):
        self.storage, self.task_id, self.path = storage, task_id, path
        self.base: str | None = None  # the sha256 of the version this copy started from (None: new store)
        self.lost = False  # a compare-and-set found another version: this copy is dropped when closed

    @property
    def _sidecar(self) -> Path:
        return self.path.with_name(f"{self.path.name}.version")

    def _copy_sha(self) -> str | None:
        """The copy's sha256: from the sidecar while the file is unchanged since it was written, else hashed."""
        if not self.path.exists():
            return None
        stat = self.path.stat()
        try:
            noted = json.loads(self._sidecar.read_text(encoding="utf-8"))
            if noted["size"] == stat.st_size and noted["mtime_ns"] == stat.st_mtime_ns:
                return noted["sha256"]
        except (OSError, ValueError, KeyError):
            pass
        return file_sha256(self.path)

    def _note(self, sha: str) -> None:
        stat = self.path.stat()
        self._sidecar.write_text(
            json.dumps({"sha256": sha, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}), encoding="utf-8"
        )

    def drop_copy(self) -> None:
        for p in (self.path, self.path.with_name(f"{self.path.name}.wal"), self._sidecar):
            p.unlink(missing_ok=True)

    def pull(self, db) -> None:
        """Make the copy the current version (downloaded when it is not); none yet: start empty."""
        version = current(db, self.task_id)
        if version is None:
            self.drop_copy()  # a copy of a version never recorded
            self.base = None
            return
        if self._copy_sha() != version.sha256 or self.path.with_name(f"{self.path.name}.wal").exists():
            self.drop_copy()
            self.storage.get_file(version.object_key, self.path)
            self._note(version.sha256)
        self.base = version.sha256

    def publish(self, conn: duckdb.DuckDBPyConnection, db) -> None:
        """After a DuckDB commit, inside `db`'s (PostgreSQL) transaction: upload the store and move
        the pointer from `base` to it, unless it is unchanged. StoreVersionConflict when it moved."""
        if self.lost:
            raise StoreVersionConflict(f"partition {self.task_id}: this run lost its store to another run")
        conn.execute("CHECKPOINT")  # everything committed is in the file, none in its WAL
        sha = file_sha256(self.path)
        if sha == self.base:
            return
        key = object_key(self.task_id, sha)
        self.storage.put_file(self.path, key)
        size = self.path.stat().st_size
        if self.base is None:
            moved = db.execute(
                """INSERT INTO ledger.partition_store (task_id, object_key, sha256, version, byte_count, updated_at)
                   VALUES (?, ?, ?, 1, ?, now()::TIMESTAMP) ON CONFLICT (task_id) DO NOTHING""",
                [self.task_id, key, sha, size],
            ).rowcount
        else:
            moved = db.execute(
                """UPDATE ledger.partition_store
                   SET object_key = ?, sha256 = ?, version = version + 1, byte_count = ?, updated_at = now()::TIMESTAMP
                   WHERE task_id = ? AND sha256 = ?""",
                [key, sha, size, self.task_id, self.base],
            ).rowcount
        if not moved:
            self.lost = True
            won = current(db, self.task_id)
            raise StoreVersionConflict(
                f"partition {self.task_id}: its store was moved to version {won.version if won else '?'} by another "
                "run since this one started from its version; this run's changes are dropped: run the stage again"
            )
        self.base = sha
        self._note(sha)


def collect_garbage(
    storage: ObjectStorage, db, *, grace: dt.timedelta = ORPHAN_GRACE, dry_run: bool = False
) -> list[str]:
    """Delete the store objects no partition's pointer names (orphaned uploads, superseded versions)
    older than `grace`; returns their keys."""
    keep = {r[0] for r in db.execute("SELECT object_key FROM ledger.partition_store").rows}
    cutoff = dt.datetime.now(dt.UTC) - grace
    gone = sorted(key for key, modified in storage.objects(STORES_PREFIX) if key not in keep and modified <= cutoff)
    if not dry_run:
        for key in gone:
            storage.delete(key)
    return gone


READ_CACHE = ".read"  # under the stores' folder: immutable copies of versions, for readers


def read_copies(storage: ObjectStorage, db, folder: Path, task_ids=None) -> list[Path]:
    """Local read-only copies of the current versions of these partitions' stores (every one with a
    version when None), downloaded once per version into `folder/.read/` (named by their hash, so a
    writer's copy is never read half-written); a partition's older copies there are deleted."""
    if task_ids is None:
        rows = db.execute("SELECT task_id, object_key, sha256 FROM ledger.partition_store ORDER BY task_id").rows
    else:
        rows = db.execute(
            "SELECT task_id, object_key, sha256 FROM ledger.partition_store WHERE task_id = ANY(?) ORDER BY task_id",
            [sorted(set(task_ids))],
        ).rows
    cache = folder / READ_CACHE
    out = []
    for task_id, key, sha in rows:
        path = cache / f"{task_id}.{sha}.duckdb"
        if not path.exists():
            storage.get_file(key, path)
            for old in cache.glob(f"{task_id}.*.duckdb"):
                if old != path:
                    old.unlink(missing_ok=True)  # an open reader keeps its file until it closes
        out.append(path)
    return out
