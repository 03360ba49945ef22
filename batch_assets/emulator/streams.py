"""Streaming file bodies in and out of the emulator, so that no file is ever held whole in memory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

from starlette.responses import StreamingResponse

CHUNK_BYTES = 1 << 20


def _chunks(handle: BinaryIO) -> Iterator[bytes]:
    try:
        while chunk := handle.read(CHUNK_BYTES):
            yield chunk
    finally:
        handle.close()


def file_response(handle: BinaryIO, media_type: str, headers: dict[str, str] | None = None) -> StreamingResponse:
    """The open file `handle` as a response body, read and sent a chunk at a time (and closed after).

    The length is known, so it goes out as `content-length`, as a real download's does.
    """
    size = os.fstat(handle.fileno()).st_size
    return StreamingResponse(
        _chunks(handle), media_type=media_type, headers={"content-length": str(size), **(headers or {})}
    )
