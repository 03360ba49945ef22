"""Deterministic fault injection per item, and the order in which items are processed.

Draws hash the item's custom_id with the input file's sha256: the same file always fails the
same items (across restarts), while a retry shard holding the item gets a fresh draw.
"""

from __future__ import annotations

import random

from batch_assets.emulator.ids import digest
from batch_assets.emulator.settings import EmulatorSettings

# One character per item, so a batch's outcomes fit in one compact string.
OK = "."
RATE_LIMITED = "r"  # HTTP 429
SERVER_ERROR = "s"  # HTTP 500
INJECTED_BAD_REQUEST = "b"  # HTTP 400 from fault injection
INVALID_REQUEST = "v"  # HTTP 400 because the request body itself is wrong
CONTENT_FILTERED = "f"  # 200, finish_reason content_filter
TRUNCATED = "t"  # 200, finish_reason length
FAILURES = frozenset({RATE_LIMITED, SERVER_ERROR, INJECTED_BAD_REQUEST, INVALID_REQUEST})
_HTTP_ROTATION = (RATE_LIMITED, SERVER_ERROR, INJECTED_BAD_REQUEST)


def unit_draw(*parts: str) -> float:
    """A number in [0, 1) determined by `parts`."""
    return int.from_bytes(digest(*parts)[:8], "big") / 2**64


class FaultPlan:
    """Decides each item's injected outcome for one input file under one settings snapshot."""

    def __init__(self, file_sha: str, settings: EmulatorSettings) -> None:
        self.file_sha = file_sha
        self.settings = settings
        self._http_failures = 0

    def outcome(self, custom_id: str) -> str:
        """Call once per item, in input order: HTTP failures rotate 429 -> 500 -> 400."""
        s = self.settings
        if unit_draw("item_error", self.file_sha, custom_id) < s.item_error_rate:
            code = _HTTP_ROTATION[self._http_failures % len(_HTTP_ROTATION)]
            self._http_failures += 1
            return code
        if unit_draw("content_filter", self.file_sha, custom_id) < s.content_filter_rate:
            return CONTENT_FILTERED
        if unit_draw("truncate", self.file_sha, custom_id) < s.truncate_rate:
            return TRUNCATED
        return OK


def duplicated(file_sha: str, custom_id: str, rate: float) -> bool:
    """Whether this item's output line is written a second time."""
    return unit_draw("duplicate", file_sha, custom_id) < rate


def processing_order(count: int, file_sha: str, shuffle: bool) -> list[int]:
    """Input-line indexes in the order the batch processes (and writes) them."""
    order = list(range(count))
    if shuffle:
        random.Random(int.from_bytes(digest("order", file_sha), "big")).shuffle(order)
    return order
