"""Run files — frozen manifests, shard files, raw result files — where every stage can read them.

`local` (no $BATCH_ASSETS_STORAGE_URL): a file stays where its stage wrote it,
`<data_dir>/<kind>/<task_id>/<name>`, and the ledger records that absolute path.

With object storage, a stage writes a new file under `<data_dir>/cache/new/`, then `keep` moves it
into this machine's cache and uploads it under `<kind>/<task_id>/<sha256>/<name>` (create-only:
the same bytes again are a no-op, so a re-run reuses the key), and the ledger records the object's
s3:// URL. The upload comes before the ledger row's commit: the file counts once that commits, and
an upload whose row never committed is an orphan (`collect_garbage`). A reader on any machine asks
`local(location)` and gets the cached copy, downloaded once (objects never change, so a copy named
by its key is that object).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from batch_assets.spec.errors import SettingError
from batch_assets.storage.objects import STORAGE_URL_VAR, ObjectStorage, file_sha256

CACHE_DIR = "cache"  # with object storage, everything of ours under data/ is in here: copies, deletable
KINDS = ("manifests", "shards", "raw")
ORPHAN_GRACE = dt.timedelta(hours=1)  # an upload younger than this may still be committing


def is_object(location: str | None) -> bool:
    return bool(location) and location.startswith("s3://")


@dataclass(frozen=True)
class RunFiles:
    data_dir: Path
    storage: ObjectStorage | None = None

    @property
    def cache(self) -> Path:
        return self.data_dir / CACHE_DIR

    @property
    def own_root(self) -> Path:
        """The folder of files only this machine uses: the data directory, its cache with object storage."""
        return self.data_dir if self.storage is None else self.cache

    @property
    def scratch(self) -> Path:
        """Where a stage spools temporary files (removed when it ends)."""
        return self.own_root / "tmp"

    def publish(self, path: Path, key: str) -> str:
        """Where a page rewritten each time (an HTML report) at `path` can be read: the path itself
        (`local`), or the URL of object `key`, replaced by this upload."""
        if self.storage is None:
            return str(path.absolute())
        self.storage.replace_file(path, key)
        return self.storage.url(key)

    def new_path(self, kind: str, task_id: str, name: str) -> Path:
        """Where a stage writes a new file of `kind` (parent folders made); `keep` it once written."""
        folder = self.new_dir(kind, task_id)
        return folder / name

    def new_dir(self, kind: str, task_id: str) -> Path:
        """The folder new files of `kind` for `task_id` are written into (made)."""
        base = self.data_dir if self.storage is None else self.cache / "new"
        folder = base / kind / task_id
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def keep(self, path: Path, kind: str, task_id: str, sha256: str | None = None) -> str:
        """The location to record for a file just written at `path`: its absolute path (`local`), or
        the URL of the object it was uploaded as (the file moves into the cache under the key)."""
        if self.storage is None:
            return str(path.absolute())
        key = f"{kind}/{task_id}/{sha256 or file_sha256(path)}/{path.name}"
        cached = self._cached(key)
        cached.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, cached)
        self.storage.put_file(cached, key)
        return self.storage.url(key)

    def local(self, location: str) -> Path:
        """A local file with the content recorded at `location`: the path itself (`local`), or the
        object's cached copy, downloaded first when this machine has none."""
        if not is_object(location):
            return Path(location).absolute()
        key = self._storage_for(location).key_of(location)
        cached = self._cached(key)
        if not cached.is_file():
            self._storage_for(location).get_file(key, cached)
        return cached

    def exists(self, location: str) -> bool:
        if not is_object(location):
            return Path(location).absolute().is_file()
        storage = self._storage_for(location)
        return storage.exists(storage.key_of(location))

    def remove(self, location: str) -> None:
        """Delete the file (`local`), or the object and this machine's copy of it."""
        if not is_object(location):
            Path(location).absolute().unlink(missing_ok=True)
            return
        storage = self._storage_for(location)
        key = storage.key_of(location)
        storage.delete(key)
        self._cached(key).unlink(missing_ok=True)

    def collect_garbage(
        self, recorded: Iterable[str], *, grace: dt.timedelta = ORPHAN_GRACE, dry_run: bool = False
    ) -> list[str]:
        """Delete the run-file objects no `recorded` location names (uploads whose ledger row never
        committed) older than `grace`; returns their keys. Nothing to do without object storage."""
        if self.storage is None:
            return []
        keep = {self.storage.key_of(r) for r in recorded if is_object(r)}
        cutoff = dt.datetime.now(dt.UTC) - grace
        gone = sorted(
            key
            for kind in KINDS
            for key, modified in self.storage.objects(kind)
            if key not in keep and modified <= cutoff
        )
        if not dry_run:
            for key in gone:
                self.storage.delete(key)
                self._cached(key).unlink(missing_ok=True)
        return gone

    def _cached(self, key: str) -> Path:
        return self.cache / "objects" / key

    def _storage_for(self, location: str) -> ObjectStorage:
        if self.storage is None:
            raise SettingError(
                f"{location} is in object storage but {STORAGE_URL_VAR} is not set; set it (and its "
                "endpoint and credentials) as on the machines that wrote the ledger"
            )
        return self.storage
