"""OpenAI-format files: upload, retrieve, content, delete, list."""

from __future__ import annotations

import shutil
from typing import Any, BinaryIO

from batch_assets.emulator.clock import now
from batch_assets.emulator.errors import ApiError, invalid_value, not_found
from batch_assets.emulator.store import Record, Store
from batch_assets.providers.openai.emulator.flavor import Flavor

KIND = "openai_files"
DEFAULT_BATCH_FILE_TTL_S = 30 * 86_400  # purpose=batch files expire after 30 days by default
_MIN_TTL_S, _MAX_TTL_S = 3600, 2_592_000
_CHUNK = 1 << 20
_UPLOAD_PURPOSES = frozenset({"assistants", "batch", "fine-tune", "vision", "user_data", "evals"})


class FileService:
    def __init__(self, store: Store) -> None:
        self.store = store

    def upload(
        self,
        flavor: Flavor,
        filename: str,
        purpose: str,
        data: bytes | BinaryIO,
        expires_after: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """Store an upload; `data` may be an open file, copied to disk in chunks (never whole in memory)."""
        if purpose not in _UPLOAD_PURPOSES:
            raise invalid_value("purpose", f"Invalid value for 'purpose': '{purpose}'.")
        if purpose == "batch" and not filename.endswith(".jsonl"):
            raise ApiError(400, "Invalid file format for Batch API. Must be .jsonl", param="file")
        ttl = check_expires_after(expires_after, "expires_after")
        if ttl is None and purpose == "batch":
            ttl = DEFAULT_BATCH_FILE_TTL_S
        if isinstance(data, bytes):
            return self.add(flavor, "input", filename, purpose, data, ttl)
        file_id = flavor.file_id("input")
        with self.store.blob_writer(file_id) as sink:
            shutil.copyfileobj(data, sink, _CHUNK)
        return self._register(flavor, file_id, filename, purpose, ttl, None)

    def add(
        self,
        flavor: Flavor,
        role: str,
        filename: str,
        purpose: str,
        data: bytes,
        ttl: int | None,
        created: float | None = None,
    ) -> dict[str, Any]:
        """Store a file; `role` ("input", "output", "error") picks the id style."""
        file_id = flavor.file_id(role)
        self.store.put_blob(file_id, data)
        return self._register(flavor, file_id, filename, purpose, ttl, created)

    def adopt(
        self, flavor: Flavor, role: str, filename: str, purpose: str, blob: str, ttl: int | None, created: float
    ) -> dict[str, Any]:
        """Make the blob `blob` (written by the emulator itself) a file, by renaming it."""
        file_id = flavor.file_id(role)
        self.store.move_blob(blob, file_id)
        return self._register(flavor, file_id, filename, purpose, ttl, created)

    def _register(
        self, flavor: Flavor, file_id: str, filename: str, purpose: str, ttl: int | None, created: float | None
    ) -> dict[str, Any]:
        created_at = int(now() if created is None else created)
        public = {
            "id": file_id,
            "object": "file",
            "bytes": self.store.blob_path(file_id).stat().st_size,
            "created_at": created_at,
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": created_at + ttl if ttl is not None and flavor.files_expire else None,
            "status_details": None,
        }
        self.store.add(KIND, {"id": file_id, "flavor": flavor.name, "object": public})
        return public

    def record(self, flavor: Flavor, file_id: str) -> Record:
        found = self.store.get(KIND, file_id)
        if found is None or found["flavor"] != flavor.name:
            raise not_found("file", file_id)
        return found

    def retrieve(self, flavor: Flavor, file_id: str) -> dict[str, Any]:
        return self.record(flavor, file_id)["object"]

    def content(self, flavor: Flavor, file_id: str) -> bytes:
        with self.store.locked():  # a concurrent delete must not remove the blob mid-read
            self.record(flavor, file_id)
            return self.store.read_blob(file_id)

    def open_content(self, flavor: Flavor, file_id: str) -> BinaryIO:
        """The file's bytes, open for streaming; a delete after this returns does not cut the read short."""
        with self.store.locked():
            self.record(flavor, file_id)
            return self.store.open_blob(file_id)

    def delete(self, flavor: Flavor, file_id: str) -> dict[str, Any]:
        with self.store.locked():
            self.record(flavor, file_id)
            self.store.remove(KIND, file_id)
            self.store.drop_blob(file_id)
        return {"id": file_id, "object": "file", "deleted": True}

    def list_files(
        self, flavor: Flavor, after: str | None, limit: int, order: str, purpose: str | None
    ) -> dict[str, Any]:
        files = [
            r["object"]
            for r in self.store.all(KIND)
            if r["flavor"] == flavor.name and (purpose is None or r["object"]["purpose"] == purpose)
        ]
        if order == "desc":
            files.reverse()
        return page(files, after, limit)


def check_expires_after(value: dict[str, Any] | None, param: str) -> int | None:
    """Seconds of an `{"anchor": "created_at", "seconds": N}` policy, validated."""
    if value is None:
        return None
    seconds = value.get("seconds") if isinstance(value, dict) else None
    if not isinstance(value, dict) or value.get("anchor") != "created_at":
        raise ApiError(400, f"Invalid value for '{param}.anchor': must be 'created_at'.", param=f"{param}.anchor")
    if isinstance(seconds, str) and seconds.isdigit():
        seconds = int(seconds)  # multipart form fields arrive as text
    if not isinstance(seconds, int) or not _MIN_TTL_S <= seconds <= _MAX_TTL_S:
        raise ApiError(
            400,
            f"Invalid value for '{param}.seconds': must be between {_MIN_TTL_S} and {_MAX_TTL_S}.",
            param=f"{param}.seconds",
        )
    return seconds


def page(items: list[dict[str, Any]], after: str | None, limit: int) -> dict[str, Any]:
    """The list envelope for the `limit` items following the one with id `after`."""
    start = 0
    if after is not None:
        position = next((i for i, item in enumerate(items) if item["id"] == after), None)
        if position is None:
            raise ApiError(400, f"Invalid value for 'after': no object with id '{after}'.", param="after")
        start = position + 1
    data = items[start : start + limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": start + limit < len(items),
    }
