"""Gemini Files API: resumable uploads, get, list, delete, and download of generated files.

Uploads follow Google's resumable protocol as the SDK drives it: a `start` call
with the API key opens a session and answers an absolute `x-goog-upload-url`; the bytes then go
to that URL in chunks (`upload`, the last one `upload, finalize`) without the key, each answered
with `x-goog-upload-status: active`, the last with `final` and `{"file": File}`.
Sessions and files live in the shared store, so both survive a restart.

Names: `files/<id>`, id random (12 lowercase alphanumerics, like `files/9ipl31k7go00`) unless the
uploader chose one. Unknown files answer 403 PERMISSION_DENIED, as the real API does.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import shutil
from typing import Any, BinaryIO

from batch_assets.emulator.clock import now
from batch_assets.emulator.errors import ApiError
from batch_assets.emulator.store import Record, Store
from batch_assets.providers.gemini.emulator.wire import (
    counts,
    failed_precondition,
    google_error,
    invalid_argument,
    page_after,
    page_token,
    random_id,
    resource_id,
    rfc3339,
)

KIND = "gemini_files"
UPLOADS = "gemini_uploads"
UPLOADED, GENERATED = "UPLOADED", "GENERATED"
UPLOADED_FILE_TTL_S = 48 * 3600  # uploaded files are deleted after 48 hours
_DISPLAY_NAME_MAX = 512


def blob_name(file_id: str) -> str:
    return f"gemini-file-{file_id}"


def _upload_blob(upload_id: str) -> str:
    return f"gemini-upload-{upload_id}"


def missing_file(file_id: str) -> ApiError:
    return google_error(
        403, f"You do not have permission to access the File {file_id} or it may not exist.", "PERMISSION_DENIED"
    )


class GeminiFileService:
    def __init__(self, store: Store) -> None:
        self.store = store

    # --- resumable upload ---------------------------------------------------------------------

    def start_upload(self, file: dict[str, Any], size: int | None, mime_type: str | None) -> str:
        """Open an upload session for `file` (the start call's `file` object); returns its id."""
        display_name = file.get("displayName", file.get("display_name"))
        if display_name is not None and (not isinstance(display_name, str) or len(display_name) > _DISPLAY_NAME_MAX):
            raise invalid_argument(f"* File.display_name: must be a string of at most {_DISPLAY_NAME_MAX} characters.")
        wanted = file.get("name")
        file_id = None
        if wanted is not None:
            file_id = resource_id(wanted, "files") if isinstance(wanted, str) else None
            if file_id is None:
                raise invalid_argument(
                    "* File.name: the id must be 1-40 lowercase letters, digits or dashes, "
                    "and must not start or end with a dash."
                )
        mime_type = mime_type or file.get("mimeType") or file.get("mime_type") or "application/octet-stream"
        upload_id = secrets.token_hex(16)
        with self.store.locked():
            if file_id is not None and self.store.get(KIND, file_id) is not None:
                raise google_error(409, f"File files/{file_id} already exists.", "ALREADY_EXISTS")
            self.store.put_blob(_upload_blob(upload_id), b"")
            self.store.add(
                UPLOADS,
                {
                    "id": upload_id,
                    "file_id": file_id,
                    "display_name": display_name,
                    "mime_type": mime_type,
                    "size": size,
                    "received": 0,
                },
            )
        return upload_id

    def upload_chunk(
        self, upload_id: str, command: str, offset: int | None, data: bytes | BinaryIO
    ) -> tuple[int, Record | None]:
        """Apply one upload call; returns the bytes received so far and, once the upload is
        finalized, the new file's record. `data` may be an open file, appended in pieces."""
        commands = {c.strip() for c in command.lower().split(",") if c.strip()}
        with self.store.locked():
            session = self.store.get(UPLOADS, upload_id)
            if session is None:
                raise google_error(404, "No upload session found with this upload_id.", "NOT_FOUND")
            if "query" in commands:
                return session["received"], None
            if "cancel" in commands:
                self._close(session)
                raise google_error(499, "The upload was cancelled.", "CANCELLED")
            if not commands <= {"upload", "finalize"} or not commands:
                raise invalid_argument(f"Unsupported X-Goog-Upload-Command: {command!r}.")
            if "upload" in commands:
                if offset is not None and offset != session["received"]:
                    raise invalid_argument(
                        f"X-Goog-Upload-Offset {offset} does not match the {session['received']} bytes received so far."
                    )
                with self.store.blob_path(_upload_blob(upload_id)).open("ab") as blob:
                    start = blob.tell()
                    if isinstance(data, bytes):
                        blob.write(data)
                    else:
                        shutil.copyfileobj(data, blob, 1 << 20)
                    session["received"] += blob.tell() - start
                self.store.save(UPLOADS, session)
            if "finalize" not in commands:
                return session["received"], None
            if session["size"] is not None and session["received"] != session["size"]:
                raise invalid_argument(
                    f"The upload declared {session['size']} bytes but {session['received']} were received."
                )
            file_id = session["file_id"]
            if file_id is not None and self.store.get(KIND, file_id) is not None:
                self._close(session)
                raise google_error(409, f"File files/{file_id} already exists.", "ALREADY_EXISTS")
            file_id = file_id or random_id(12)
            # The received bytes become the file by a rename: never read whole into memory.
            self.store.move_blob(_upload_blob(upload_id), blob_name(file_id))
            record = self._register(file_id, session["display_name"], session["mime_type"], UPLOADED, now())
            self._close(session)
            return session["received"], record

    def _close(self, session: Record) -> None:
        self.store.remove(UPLOADS, session["id"])
        self.store.drop_blob(_upload_blob(session["id"]))

    # --- files --------------------------------------------------------------------------------

    def adopt_generated(self, file_id: str, blob: str, display_name: str, created: float) -> Record:
        """Make the blob `blob` (results the emulator wrote) a generated file, by renaming it."""
        with self.store.locked():
            self.store.move_blob(blob, blob_name(file_id))
            return self._register(file_id, display_name, "application/jsonl", GENERATED, created)

    def _add(
        self, file_id: str, data: bytes, display_name: str | None, mime_type: str, source: str, created: float
    ) -> Record:
        self.store.put_blob(blob_name(file_id), data)
        return self._register(file_id, display_name, mime_type, source, created)

    def _register(self, file_id: str, display_name: str | None, mime_type: str, source: str, created: float) -> Record:
        """The record of the file whose bytes are already in its blob (size and hash read in chunks)."""
        digest = hashlib.sha256()
        size = 0
        with self.store.open_blob(blob_name(file_id)) as content:
            while chunk := content.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        record = {
            "id": file_id,
            "display_name": display_name,
            "mime_type": mime_type,
            "size": size,
            "sha256": digest.hexdigest(),
            "created": created,
            "source": source,
        }
        return self.store.add(KIND, record)

    def record(self, name: str) -> Record:
        file_id = name.removeprefix("files/")
        found = self.store.get(KIND, file_id)
        if found is None:
            raise missing_file(file_id)
        return found

    def content(self, name: str) -> bytes:
        with self.store.locked():  # a concurrent delete must not remove the blob mid-read
            record = self.record(name)
            if record["source"] != GENERATED:
                raise failed_precondition(f"Only generated files can be downloaded; files/{record['id']} was uploaded.")
            return self.store.read_blob(blob_name(record["id"]))

    def open_content(self, name: str) -> BinaryIO:
        """A generated file's bytes, open for streaming (a later delete does not cut the read short)."""
        with self.store.locked():
            record = self.record(name)
            if record["source"] != GENERATED:
                raise failed_precondition(f"Only generated files can be downloaded; files/{record['id']} was uploaded.")
            return self.store.open_blob(blob_name(record["id"]))

    def input_blob(self, name: str) -> str:
        """The blob holding an uploaded file's bytes, for a batch that reads it."""
        with self.store.locked():
            return blob_name(self.record(name)["id"])

    def delete(self, name: str) -> None:
        with self.store.locked():
            record = self.record(name)
            self.store.remove(KIND, record["id"])
            self.store.drop_blob(blob_name(record["id"]))

    def list_files(self, size: int, token: str | None) -> tuple[list[Record], str | None]:
        """Newest first; the token continues after the last file of the previous page."""
        after = page_after(token)
        with self.store.locked():
            records = [r for r in reversed(self.store.all(KIND)) if after is None or r["seq"] < after]
        page = records[:size]
        return page, page_token(page[-1]["seq"]) if len(records) > size else None


def file_view(record: Record, origin: str, version: str) -> dict[str, Any]:
    """The `File` resource; `origin` is the emulator's own scheme://host:port."""
    created = rfc3339(record["created"])
    view: dict[str, Any] = {"name": f"files/{record['id']}"}
    if record["display_name"]:
        view["displayName"] = record["display_name"]
    view.update({"mimeType": record["mime_type"], **counts(sizeBytes=record["size"])})
    view.update({"createTime": created, "updateTime": created})
    if record["source"] == UPLOADED:
        view["expirationTime"] = rfc3339(record["created"] + UPLOADED_FILE_TTL_S)
    # Google reports the hex digest, base64-encoded.
    view["sha256Hash"] = base64.b64encode(record["sha256"].encode()).decode()
    view["uri"] = f"{origin}/{version}/files/{record['id']}"
    if record["source"] == GENERATED:
        view["downloadUri"] = f"{origin}/download/{version}/files/{record['id']}:download?alt=media"
    view.update({"state": "ACTIVE", "source": record["source"]})
    return view
