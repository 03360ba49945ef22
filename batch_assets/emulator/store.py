"""Persistent emulator state: JSON records by kind plus raw blobs, all under one directory.

Every record is kept in memory and written through to disk, so a restarted emulator on the same
directory knows all its files and batches. Ids are only ever used as dict keys or as names the
emulator generated itself, never joined into paths from request input.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

Record = dict[str, Any]


class Store:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._records_dir = self.root / "records"
        self._blobs_dir = self.root / "blobs"
        self._records_dir.mkdir(parents=True, exist_ok=True)
        self._blobs_dir.mkdir(parents=True, exist_ok=True)
        # Re-entrant: a service holds it across a read-modify-write that calls other methods.
        self._lock = threading.RLock()
        self._records: dict[str, dict[str, Record]] = {}
        self._next_seq = 1
        self._load()

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            yield

    def _load(self) -> None:
        for kind_dir in sorted(p for p in self._records_dir.iterdir() if p.is_dir()):
            records = [json.loads(p.read_text(encoding="utf-8")) for p in kind_dir.glob("*.json")]
            records.sort(key=lambda r: r["seq"])
            self._records[kind_dir.name] = {r["id"]: r for r in records}
            if records:
                self._next_seq = max(self._next_seq, records[-1]["seq"] + 1)

    def add(self, kind: str, record: Record) -> Record:
        """Store a new record; `seq` gives the creation order, which outlives restarts."""
        with self._lock:
            record["seq"] = self._next_seq
            self._next_seq += 1
            self._records.setdefault(kind, {})[record["id"]] = record
            self._write(kind, record)
            return record

    def save(self, kind: str, record: Record) -> None:
        with self._lock:
            self._write(kind, record)

    def get(self, kind: str, record_id: str) -> Record | None:
        with self._lock:
            return self._records.get(kind, {}).get(record_id)

    def remove(self, kind: str, record_id: str) -> None:
        with self._lock:
            self._records.get(kind, {}).pop(record_id, None)
            (self._records_dir / kind / f"{record_id}.json").unlink(missing_ok=True)

    def all(self, kind: str) -> list[Record]:
        """Records of `kind`, oldest first."""
        with self._lock:
            return list(self._records.get(kind, {}).values())

    def _write(self, kind: str, record: Record) -> None:
        kind_dir = self._records_dir / kind
        kind_dir.mkdir(exist_ok=True)
        _atomic_write(kind_dir / f"{record['id']}.json", json.dumps(record, ensure_ascii=False).encode())

    def blob_path(self, name: str) -> Path:
        return self._blobs_dir / name

    def put_blob(self, name: str, data: bytes) -> None:
        _atomic_write(self.blob_path(name), data)

    @contextmanager
    def blob_writer(self, name: str) -> Iterator[BinaryIO]:
        """Write blob `name` in pieces: it appears whole, by rename, when the block ends without
        an error (never half-written, even if the emulator is killed mid-way)."""
        path = self.blob_path(name)
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        try:
            with tmp.open("wb") as sink:
                yield sink
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def open_blob(self, name: str) -> BinaryIO:
        """The blob for reading; the open file outlives a later `drop_blob` (POSIX unlink)."""
        return self.blob_path(name).open("rb")

    def move_blob(self, source: str, target: str) -> None:
        os.replace(self.blob_path(source), self.blob_path(target))

    def read_blob(self, name: str) -> bytes:
        return self.blob_path(name).read_bytes()

    def copy_blob(self, source: str, target: str) -> None:
        """Give `target` the bytes of `source` (a hard link when the filesystem allows one)."""
        target_path = self.blob_path(target)
        target_path.unlink(missing_ok=True)
        try:
            os.link(self.blob_path(source), target_path)
        except OSError:
            shutil.copyfile(self.blob_path(source), target_path)

    def drop_blob(self, name: str) -> None:
        self.blob_path(name).unlink(missing_ok=True)


def _atomic_write(path: Path, data: bytes) -> None:
    # Write-then-rename so a killed emulator never leaves a half-written record behind.
    tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
