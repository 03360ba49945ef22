"""The two dialects of the OpenAI Batch wire format: OpenAI itself and DashScope's compatible mode.

Same endpoints and shapes; they differ in id styles, accepted completion windows, endpoints,
and a few fields (reference §4). Objects created under one prefix are invisible under the other.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from batch_assets.emulator import ids

_DASHSCOPE_WINDOW = re.compile(r"(\d+)([hd])")


@dataclass(frozen=True)
class Flavor:
    name: str
    prefix: str
    endpoints: tuple[str, ...]
    dashscope: bool
    default_embedding_dimensions: int
    max_embedding_dimensions: int

    def file_id(self, role: str) -> str:
        """`role` is "input", "output" or "error"."""
        if not self.dashscope:
            return f"file-{ids.random_base62(22)}"
        kind = {"input": "batch", "output": "batch_output", "error": "batch_error"}[role]
        return f"file-{kind}-{secrets.token_hex(16)}"

    def batch_id(self, created: float) -> str:
        return f"batch_{ids.random_uuid()}" if self.dashscope else f"batch_{ids.time_hex(created)}"

    def line_ids(self, batch_id: str, index: int) -> tuple[str, str]:
        """(output line id, request id) for one input line; stable for a given batch."""
        if self.dashscope:
            # DashScope uses one UUID for both (reference §4 samples).
            same = ids.derived_uuid("line", batch_id, str(index))
            return same, same
        return (
            f"batch_req_{ids.derived_hex(32, 'line', batch_id, str(index))}",
            f"req_{ids.derived_hex(32, 'request', batch_id, str(index))}",
        )

    def window_seconds(self, completion_window: str) -> int | None:
        """Seconds of a completion window, or None when this provider does not accept it."""
        if not self.dashscope:
            return 86_400 if completion_window == "24h" else None
        match = _DASHSCOPE_WINDOW.fullmatch(completion_window)
        if not match:
            return None
        hours = int(match.group(1)) * (24 if match.group(2) == "d" else 1)
        return hours * 3600 if 24 <= hours <= 336 else None


OPENAI = Flavor(
    name="openai",
    prefix="/v1",
    endpoints=("/v1/chat/completions", "/v1/responses", "/v1/embeddings"),
    dashscope=False,
    default_embedding_dimensions=1536,
    max_embedding_dimensions=3072,
)
DASHSCOPE = Flavor(
    name="dashscope",
    prefix="/compatible-mode/v1",
    endpoints=("/v1/chat/completions", "/v1/embeddings", "/v1/chat/ds-test"),
    dashscope=True,
    default_embedding_dimensions=1024,
    max_embedding_dimensions=2048,
)
FLAVORS = {flavor.name: flavor for flavor in (OPENAI, DASHSCOPE)}
