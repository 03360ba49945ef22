"""Polling many jobs of one provider by listing its batches instead of retrieving each one.

Every service lists batches newest first, a page at a time behind a cursor (OpenAI/DashScope
`after` + `has_more`, Anthropic `after_id` + `has_more`, Gemini `pageToken`). A listed batch
carries everything a retrieve does, so a page of 100 costs one HTTP call instead of 100 (and one
request against the rate limit instead of 100). An adapter supplies its pages; this module walks
them, keeps the wanted batches' snapshots, and stops as soon as it has them all, the page reaches
batches created before the oldest wanted one, or the tick's deadline passes. Whatever the listing
did not show is for the caller to poll one by one (`contract.poll_listed`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from batch_assets.providers.contract import JobSnapshot, JobState


def list_snapshots(
    pages: Iterator[Sequence[Any]],
    wanted: Mapping[str, JobState],
    *,
    batch_id: Callable[[Any], str],
    created_unix: Callable[[Any], float | None],
    snapshot: Callable[[Any, JobState], JobSnapshot],
    created_after_unix: float,
    deadline: float,
) -> dict[str, JobSnapshot]:
    """Snapshots of the `wanted` batches (batch id -> previously recorded state) found in `pages`
    (newest first; the next page is fetched only when asked for). `snapshot(batch, previous)` is
    the adapter's own per-job snapshot function, so both paths apply the same rules."""
    found: dict[str, JobSnapshot] = {}
    if not wanted:
        return found
    for page in pages:
        older = False
        for batch in page:
            bid = batch_id(batch)
            if bid in wanted and bid not in found:
                found[bid] = snapshot(batch, wanted[bid])
            created = created_unix(batch)
            older = older or (created is not None and created < created_after_unix)
        # Newest first: a page reaching batches older than every wanted one ends the walk.
        if older or len(found) == len(wanted) or time.monotonic() > deadline:
            break
    return found


def sdk_pages(first_page: Any) -> Iterator[Sequence[Any]]:
    """The items of an official SDK's paginated list (OpenAI's and Anthropic's SDKs share the
    `.data` / `has_next_page()` / `get_next_page()` interface), a page at a time: the next page is
    fetched only when the walk asks for it."""
    page = first_page
    while True:
        yield page.data
        if not page.has_next_page():
            return
        page = page.get_next_page()
