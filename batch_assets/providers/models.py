"""The model allow-list of each provider (`providers/<name>/models.yaml`, key `allowed_models`).

Entries are exact model names or patterns where `*` stands for any text (`gpt-4o-mini*` allows
`gpt-4o-mini-2024-07-18`); nothing else is special. A provider without a models.yaml allows nothing.
"""

from __future__ import annotations

import fnmatch
import functools
import re

import yaml

from batch_assets.providers.prices import PROVIDERS_DIR

_ENTRY_RE = re.compile(r"^[A-Za-z0-9._:/*-]+$")


def models_file(provider: str):
    return PROVIDERS_DIR / provider / "models.yaml"


@functools.cache
def allowed_models(provider: str) -> tuple[str, ...]:
    """The provider's allow-list, as written (empty when the folder has no models.yaml)."""
    path = models_file(provider)
    if not path.is_file():
        return ()
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    entries = raw.get("allowed_models") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, str) and _ENTRY_RE.match(e) for e in entries):
        raise ValueError(
            f"{path}: allowed_models must be a list of model names or patterns "
            "(letters, digits, '.', '_', '-', ':', '/', and * for any text)"
        )
    return tuple(entries)


def matches(model: str, patterns) -> bool:
    """Whether `model` is one of `patterns` (exact names, or `*` for any text; case-sensitive)."""
    return any(fnmatch.fnmatchcase(model, p) for p in patterns)  # entries hold no [ or ? (see _ENTRY_RE)
