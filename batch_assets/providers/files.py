"""Writing a streamed provider download to disk."""

from __future__ import annotations

from pathlib import Path


def stream_to_file(response, dest: Path, chunk_bytes: int = 1 << 20) -> int:
    """Write a streaming SDK response to dest via a .part file (never whole in memory); bytes written."""
    tmp = dest.with_suffix(dest.suffix + ".part")
    written = 0
    with open(tmp, "wb") as out:
        for chunk in response.iter_bytes(chunk_bytes):
            out.write(chunk)
            written += len(chunk)
    tmp.replace(dest)
    return written
