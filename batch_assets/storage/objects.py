"""Objects in S3-compatible storage ($BATCH_ASSETS_STORAGE_URL=s3://bucket/prefix), through obstore.

Objects are immutable and keyed by content: a file goes up under a key that ends in its sha256, put
only if no object has that key (a second upload of the same content is a no-op), and comes down
streamed into a temporary file renamed into place, so a reader never sees half a file. Unset, there
is no object storage and every file stays on the machine's disk (`local`, the default).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from batch_assets.spec.errors import SettingError

STORAGE_URL_VAR = "BATCH_ASSETS_STORAGE_URL"
ENDPOINT_VAR = "BATCH_ASSETS_S3_ENDPOINT"
_CHUNK = 8 * 2**20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class ObjectStorage:
    """A bucket and key prefix on an S3 API (AWS, or a server at `endpoint`)."""

    bucket: str
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ObjectStorage | None:
        """$BATCH_ASSETS_STORAGE_URL (s3://bucket/prefix) with $BATCH_ASSETS_S3_ENDPOINT and the
        AWS_* credentials, or None when unset. A bad value raises SettingError naming it."""
        env = os.environ if environ is None else environ
        url = env.get(STORAGE_URL_VAR, "").strip()
        if not url:
            return None
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise SettingError(
                f"{STORAGE_URL_VAR}={url!r} is not an s3://bucket/prefix URL; unset it to keep the run files on disk"
            )
        endpoint = env.get(ENDPOINT_VAR, "").strip() or None
        if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
            raise SettingError(f"{ENDPOINT_VAR}={endpoint!r} is not an http(s):// URL of an S3 API")
        return cls(
            bucket=parts.netloc,
            prefix=parts.path.strip("/"),
            endpoint=endpoint,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            access_key=env.get("AWS_ACCESS_KEY_ID") or None,
            secret_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env.get("AWS_SESSION_TOKEN") or None,
        )

    @property
    def where(self) -> str:
        """s3://bucket/prefix (at the endpoint), without credentials."""
        at = f" at {self.endpoint}" if self.endpoint else ""
        return f"s3://{self.bucket}/{self.prefix}{at}"

    def url(self, key: str) -> str:
        """The object's s3:// URL, as the ledger records it (no endpoint, no credentials)."""
        return f"s3://{self.bucket}/{self.prefix}/{key}" if self.prefix else f"s3://{self.bucket}/{key}"

    def key_of(self, url: str) -> str:
        """The key of an s3:// URL this storage made; SettingError when it names another bucket or prefix."""
        base = self.url("")
        if not url.startswith(base):
            raise SettingError(
                f"{url} is not under {STORAGE_URL_VAR}={base.rstrip('/')}; "
                "set it to the storage the ledger's files were written to"
            )
        return url[len(base) :]

    @functools.cached_property
    def _store(self):
        from obstore.store import S3Store

        config = {
            k: v
            for k, v in {
                "region": self.region,
                "access_key_id": self.access_key,
                "secret_access_key": self.secret_key,
                "session_token": self.session_token,
            }.items()
            if v
        }
        options = {"allow_http": True} if self.endpoint and self.endpoint.startswith("http://") else {}
        return S3Store(
            self.bucket,
            prefix=self.prefix or None,
            endpoint=self.endpoint,
            client_options=options,
            **config,
        )

    def put_file(self, path: Path, key: str) -> bool:
        """Upload `path` as `key` unless that key exists (keys are content hashes: the same bytes).
        Returns whether it was uploaded now."""
        import obstore
        from obstore.exceptions import AlreadyExistsError

        try:
            with open(path, "rb") as f:
                obstore.put(self._store, key, f, mode="create")
        except AlreadyExistsError:
            return False
        return True

    def replace_file(self, path: Path, key: str) -> None:
        """Upload `path` as `key`, replacing what is there (a page rewritten each time, not a run file)."""
        import obstore

        with open(path, "rb") as f:
            obstore.put(self._store, key, f, mode="overwrite")

    def get_file(self, key: str, dest: Path) -> None:
        """Download `key` to `dest`: streamed into a temporary file beside it, then renamed."""
        import obstore
        from obstore.exceptions import NotFoundError

        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(f".{dest.name}.partial")
        try:
            with open(partial, "wb") as f:
                for chunk in obstore.get(self._store, key).stream(min_chunk_size=_CHUNK):
                    f.write(chunk)
        except NotFoundError:
            partial.unlink(missing_ok=True)
            raise FileNotFoundError(f"no object {key} in {self.where}") from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, dest)

    def exists(self, key: str) -> bool:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            obstore.head(self._store, key)
        except (NotFoundError, FileNotFoundError):
            return False
        return True

    def delete(self, key: str) -> None:
        import obstore

        obstore.delete(self._store, key)

    def objects(self, prefix: str) -> Iterator[tuple[str, dt.datetime]]:
        """(key, last modified) of every object under `prefix`."""
        import obstore

        for batch in obstore.list(self._store, prefix=prefix):
            for meta in batch:
                yield meta["path"], meta["last_modified"]
