"""Provider limits: one `limits.yaml` per provider folder, and a task's `limits:` overrides on top."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import yaml


class LimitAboveProvider(ValueError):
    """A task's limit above its provider's: `field`, `problem` and `fix` for the one-line error."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        super().__init__(f"{field}: {problem}; {fix}")
        self.field, self.problem, self.fix = field, problem, fix


@dataclass(frozen=True, eq=False)
class ProviderLimits:
    endpoints: dict[str, tuple[str, ...]]  # endpoint -> output kinds
    max_requests_per_shard: int
    max_shard_bytes: int
    max_line_bytes: int
    max_inline_bytes: int
    max_enqueued_tokens: int
    max_concurrent_jobs: int
    request_id_max_len: int
    request_id_pattern: str
    completion_window: str
    # How long a job may stay in each state, and what to do then (see pipeline.collect.stuck): {sla: {STATE:
    # duration}, policy: cancel_and_retry | notify, act_after: duration}; unset: the project defaults.
    stuck: Mapping | None = None
    # Batch creations per account per minute, shared by every submitter (None: no cap).
    max_creates_per_minute: int | None = None
    # The service's own cap on inline input: max_inline_bytes is opt-in (0 by default), so a task
    # may raise it up to this, not above (0: the provider takes files only).
    inline_service_max_bytes: int = 0

    def with_overrides(self, overrides) -> ProviderLimits:
        """Apply a task's LimitsSpec (fields left unset keep the provider's value). A task may lower a
        provider limit, never raise it: a higher value is refused, naming the field."""
        changes = {k: v for k, v in overrides.model_dump().items() if v is not None}
        for name, value in changes.items():
            ceiling = self.inline_service_max_bytes if name == "max_inline_bytes" else getattr(self, name, None)
            if isinstance(ceiling, int) and isinstance(value, int) and value > ceiling:
                raise LimitAboveProvider(
                    f"limits.{name}",
                    f"{value} is above the provider's {ceiling}",
                    f"a task may only lower a provider limit: remove it or set it to at most {ceiling}",
                )
        return replace(self, **changes)


@functools.cache
def load_limits(path: Path) -> ProviderLimits:
    """A provider's limits from its limits.yaml (read once per process)."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a mapping of provider limits")
    return ProviderLimits(**{**raw, "endpoints": {e: tuple(k) for e, k in raw["endpoints"].items()}})
