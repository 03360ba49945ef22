"""The field names a Gemini batch request may carry, derived from the google-genai SDK.

A JSONL request file holds REST requests (`GenerateContentRequest` / `EmbedContentRequest`);
the real service parses them as proto JSON and fails the whole batch on any field it does not
know at that level (UKGovernmentBEIS/inspect_ai#3257: `thinking_config` at the request's top
level instead of inside `generationConfig` -> batch FAILED). The names are read from the SDK's
own request converters (`google.genai.batches._*_to_mldev`: what the SDK itself sends for an
inlined request, where) and types (`types.ThinkingConfig`), so they follow the installed SDK.
Proto JSON accepts each name in camelCase or snake_case.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

from batch_assets.providers.gemini.emulator.requests import EMBED

_SETV = re.compile(r"setv\(\s*(parent_object|to_object),\s*\[((?:\s*'[^']*'\s*,?)*)\s*\]")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _paths(function: Any) -> list[tuple[str, list[str]]]:
    """(target, path) of every `setv(target, [path...])` in an SDK converter."""
    found = []
    for target, raw in _SETV.findall(inspect.getsource(function)):
        found.append((target, re.findall(r"'([^']*)'", raw)))
    return found


@functools.cache
def allowed_fields() -> dict[str, frozenset[str]]:
    """Level -> the camelCase names allowed there: `generate` and `embed` (a request's top level),
    `generationConfig` and `thinkingConfig`."""
    from google.genai import batches, types

    generate_top = {path[1] for _, path in _paths(batches._InlinedRequest_to_mldev) if path[:1] == ["request"]}
    generation_config = set()
    for target, path in _paths(batches._GenerateContentConfig_to_mldev):
        (generate_top if target == "parent_object" else generation_config).add(path[0])
    embed_top = {path[2] for _, path in _paths(batches._EmbedContentBatch_to_mldev) if path[1:2] == ["request"]}
    embed_top |= {path[1] for _, path in _paths(batches._EmbedContentConfig_to_mldev) if path[:1] == ["requests[]"]}
    # `model` is a documented field of both REST requests (the batch's model is used regardless).
    return {
        "generate": frozenset(generate_top | {"model"}),
        "embed": frozenset(embed_top | {"model"}),
        "generationConfig": frozenset(generation_config),
        "thinkingConfig": frozenset(camel(name) for name in types.ThinkingConfig.model_fields),
    }


def unknown_field(kind: str, request: dict[str, Any]) -> tuple[str, str] | None:
    """(field as written, where) of the first field not allowed at its level, or None."""
    allowed = allowed_fields()
    top = "embed" if kind == EMBED else "generate"
    for name in request:
        if camel(name) not in allowed[top]:
            return name, "request"
    for config_name in ("generationConfig", "generation_config"):
        config = request.get(config_name)
        if not isinstance(config, dict):
            continue
        for name, value in config.items():
            if camel(name) not in allowed["generationConfig"]:
                return name, f"request.{config_name}"
            if camel(name) == "thinkingConfig" and isinstance(value, dict):
                for inner in value:
                    if camel(inner) not in allowed["thinkingConfig"]:
                        return inner, f"request.{config_name}.{name}"
    return None
