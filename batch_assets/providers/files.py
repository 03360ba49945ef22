"""Writing a streamed provider download to disk."""

from __future__ import annotations

from pathlib import Path

from batch_assets import progress


def stream_to_file(response, dest: Path, chunk_bytes: int = 1 << 20) -> int:
    """Write a streaming SDK response to dest via a .part file (never whole in memory); bytes written."""
    tmp = dest.with_suffix(dest.suffix + ".part")
    written = 0
    size = getattr(response, "headers", {}).get("content-length")
    with (
        open(tmp, "wb") as out,
        progress.task(f"download {dest.name}", total=int(size) if size else None, unit="bytes") as bar,
    ):
        for chunk in response.iter_bytes(chunk_bytes):
            out.write(chunk)
            written += len(chunk)
            bar.advance(len(chunk))
    tmp.replace(dest)
    return written
