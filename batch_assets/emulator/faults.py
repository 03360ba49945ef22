"""Deterministic fault injection per item, and the order in which items are processed.

By default draws hash the item's custom_id with the input file's sha256: the same file always
fails the same items (across restarts), while a retry shard holding the item gets a fresh draw.

With `item_faults_by_occurrence`, draws hash (provider, custom_id, occurrence) instead, where the
occurrence is how many earlier batches of that provider already held that custom_id (counted in
the store, so it survives restarts): the first submission of `req-7` fails or succeeds the same
way every run, and its resubmission draws again, deterministically, whatever file carries it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from batch_assets.emulator.ids import digest
from batch_assets.emulator.settings import EmulatorSettings
from batch_assets.emulator.store import Store

# One character per item, so a batch's outcomes fit in one compact string.
OK = "."
RATE_LIMITED = "r"  # HTTP 429
SERVER_ERROR = "s"  # HTTP 500
INJECTED_BAD_REQUEST = "b"  # HTTP 400 from fault injection
INVALID_REQUEST = "v"  # HTTP 400 because the request body itself is wrong
CONTENT_FILTERED = "f"  # 200, finish_reason content_filter
TRUNCATED = "t"  # 200, finish_reason length
# Provider-specific failures, drawn by each provider's own knobs (not by `FaultPlan.outcome`).
FLAGGED_PROMPT = "i"  # OpenAI: HTTP 400 invalid_prompt, the prompt flagged by its usage policy
PROVIDER_CANCELLED = "k"  # Gemini: the provider canceled this one request (rpc code 1 CANCELLED)
TIMED_OUT = "o"  # Anthropic: an errored result of type timeout_error
FAILURES = frozenset(
    {RATE_LIMITED, SERVER_ERROR, INJECTED_BAD_REQUEST, INVALID_REQUEST, FLAGGED_PROMPT, PROVIDER_CANCELLED, TIMED_OUT}
)
_HTTP_ROTATION = (RATE_LIMITED, SERVER_ERROR, INJECTED_BAD_REQUEST)


def unit_draw(*parts: str) -> float:
    """A number in [0, 1) determined by `parts`."""
    return int.from_bytes(digest(*parts)[:8], "big") / 2**64


class FaultPlan:
    """Decides each item's injected outcome for one input file under one settings snapshot."""

    def __init__(
        self, file_sha: str, settings: EmulatorSettings, occurrences: dict[str, int] | None = None, provider: str = ""
    ) -> None:
        """`occurrences` (custom_id -> earlier batches holding it, see `Occurrences`) switches the
        draws to (provider, custom_id, occurrence); without it they hash the file."""
        self.file_sha = file_sha
        self.settings = settings
        self.occurrences = occurrences
        self.provider = provider
        self._http_failures = 0

    def draw(self, what: str, custom_id: str) -> float:
        if self.occurrences is None:
            return unit_draw(what, self.file_sha, custom_id)
        return unit_draw(what, "occurrence", self.provider, custom_id, str(self.occurrences.get(custom_id, 0)))

    def outcome(self, custom_id: str) -> str:
        """Call once per item, in input order: HTTP failures rotate 429 -> 500 -> 400."""
        s = self.settings
        # A draw is in [0, 1): at a rate of 0 it never hits, so it is not made (a hash saved per item).
        if s.item_error_rate > 0 and self.draw("item_error", custom_id) < s.item_error_rate:
            code = _HTTP_ROTATION[self._http_failures % len(_HTTP_ROTATION)]
            self._http_failures += 1
            return code
        if s.content_filter_rate > 0 and self.draw("content_filter", custom_id) < s.content_filter_rate:
            return CONTENT_FILTERED
        if s.truncate_rate > 0 and self.draw("truncate", custom_id) < s.truncate_rate:
            return TRUNCATED
        return OK


class Occurrences:
    """How many batches of one provider already held each custom_id: one store record per provider.

    Only kept while `item_faults_by_occurrence` is on (batches created with it off are not
    counted). A batch counts when it is accepted, i.e. has no batch-level error.
    """

    KIND = "request_occurrences"

    def __init__(self, store: Store, provider: str) -> None:
        self.store = store
        self.provider = provider  # a constant of the emulator ("openai", "gemini", ...), never request input

    def seen(self, custom_ids: Iterable[str]) -> dict[str, int]:
        counts = (self.store.get(self.KIND, self.provider) or {}).get("counts", {})
        return {custom_id: counts.get(custom_id, 0) for custom_id in custom_ids}

    def count(self, custom_ids: Iterable[str]) -> None:
        """Record one more processing of each id; call with the store lock held."""
        record = self.store.get(self.KIND, self.provider)
        if record is None:
            record = self.store.add(self.KIND, {"id": self.provider, "counts": {}})
        counts = record["counts"]
        for custom_id in custom_ids:
            counts[custom_id] = counts.get(custom_id, 0) + 1
        self.store.save(self.KIND, record)


def plan_for(
    store: Store, provider: str, seed_sha: str, settings: EmulatorSettings, custom_ids: list[str]
) -> tuple[FaultPlan, Occurrences | None]:
    """The fault plan of a new batch and, with `item_faults_by_occurrence`, the counter to
    `count(custom_ids)` once the batch is accepted."""
    if not settings.item_faults_by_occurrence:
        return FaultPlan(seed_sha, settings), None
    occurrences = Occurrences(store, provider)
    return FaultPlan(seed_sha, settings, occurrences.seen(custom_ids), provider), occurrences


def duplicated(file_sha: str, custom_id: str, rate: float) -> bool:
    """Whether this item's output line is written a second time."""
    return rate > 0 and unit_draw("duplicate", file_sha, custom_id) < rate


def missing(file_sha: str, custom_id: str, rate: float) -> bool:
    """Whether this item of a completed batch gets no result line at all (`missing_output_lines`)."""
    return rate > 0 and unit_draw("missing", file_sha, custom_id) < rate


def processing_order(count: int, file_sha: str, shuffle: bool) -> list[int]:
    """Input-line indexes in the order the batch processes (and writes) them."""
    order = list(range(count))
    if shuffle:
        random.Random(int.from_bytes(digest("order", file_sha), "big")).shuffle(order)
    return order
