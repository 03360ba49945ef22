"""Loads providers.yaml and merges a task's `limits:` overrides into effective limits."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

CONFIG_PATH = Path(__file__).with_name("providers.yaml")


@dataclass(frozen=True, eq=False)
class ProviderLimits:
    endpoints: dict[str, tuple[str, ...]]   # endpoint -> output kinds
    max_requests_per_shard: int
    max_shard_bytes: int
    max_line_bytes: int
    max_inline_bytes: int
    max_enqueued_tokens: int
    max_concurrent_jobs: int
    request_id_max_len: int
    request_id_pattern: str
    completion_window: str

    def with_overrides(self, overrides) -> ProviderLimits:
        """Apply a task's LimitsSpec (fields left unset keep the provider's value)."""
        changes = {k: v for k, v in overrides.model_dump().items() if v is not None}
        return replace(self, **changes)


@functools.cache
def _all_configs() -> dict[str, ProviderLimits]:
    raw = yaml.safe_load(CONFIG_PATH.read_text(encoding="utf-8"))
    return {
        name: ProviderLimits(**{**cfg, "endpoints": {e: tuple(k) for e, k in cfg["endpoints"].items()}})
        for name, cfg in raw.items()
    }


def provider_config(provider: str) -> ProviderLimits:
    configs = _all_configs()
    if provider not in configs:
        raise ValueError(f"provider {provider!r} has no entry in {CONFIG_PATH}; add one")
    return configs[provider]


def known_providers() -> tuple[str, ...]:
    return tuple(_all_configs())
