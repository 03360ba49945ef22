"""A deterministic value that conforms to a JSON Schema, as a structured-output model would give.

Covers what structured outputs use: object (properties, required, additionalProperties), string
(enum, const, minLength, maxLength, common formats), number/integer (minimum, maximum, exclusive
bounds, multipleOf), boolean, null, array (items, prefixItems, minItems, maxItems, uniqueItems),
anyOf/oneOf/allOf and local `$ref`s (`#/$defs/...`, as pydantic emits). `pattern` is not honoured.
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

from batch_assets.emulator.text import Topic

# Recursive schemas: below _MAX_DEPTH only required properties, minItems and null options are
# generated; below _GIVE_UP_DEPTH (an unsatisfiable, endlessly required recursion) null is returned.
_MAX_DEPTH = 12
_GIVE_UP_DEPTH = 64
_SENTENCE_FIELD = re.compile(
    r"reason|summary|explanation|rationale|justification|description|comment|analysis|note|feedback|answer",
    re.IGNORECASE,
)


def value_for_schema(schema: Any, rng: random.Random, topic: Topic) -> Any:
    return _Generator(schema, rng, topic).value(schema, "", 0)


class _Generator:
    def __init__(self, root: Any, rng: random.Random, topic: Topic) -> None:
        self.root = root
        self.rng = rng
        self.topic = topic

    def resolve(self, schema: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
            target = self._pointer(schema["$ref"])
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest} if isinstance(target, dict) else target
            seen += 1
        return schema

    def _pointer(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return {}
        node = self.root
        for token in (t for t in ref[1:].split("/") if t):
            token = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or token not in node:
                return {}
            node = node[token]
        return node

    def value(self, schema: Any, name: str, depth: int) -> Any:
        if depth > _GIVE_UP_DEPTH:
            return None
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return self.string({}, name)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return self.enum(schema["enum"])
        for key in ("anyOf", "oneOf"):
            options = [self.resolve(o) for o in schema.get(key) or []]
            if options:
                return self.alternative(options, name, depth)
        if schema.get("allOf"):
            return self.value(self._merge(schema), name, depth + 1)
        return self.typed(schema, name, depth)

    def enum(self, options: list[Any]) -> Any:
        # An option the prompt's content names (e.g. "account" in an account ticket) wins,
        # so classifications look plausible; otherwise a deterministic draw.
        named = [
            v
            for v in options
            if isinstance(v, str) and len(v) >= 3 and re.search(rf"\b{re.escape(v.lower())}\b", self.topic.focus)
        ]
        if named and self.rng.random() < 0.85:  # not always: repeated draws (uniqueItems) still vary
            return named[0]
        return self.rng.choice(options)

    def alternative(self, options: list[Any], name: str, depth: int) -> Any:
        """A value for one of anyOf/oneOf's (resolved) `options`; null near the depth limit when allowed."""
        non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if depth >= _MAX_DEPTH and len(non_null) < len(options):
            return None
        return self.value(self.rng.choice(non_null or options), name, depth + 1)

    def typed(self, schema: dict[str, Any], name: str, depth: int) -> Any:
        """A value for a schema that is neither a constant, an enum nor a combination: by its type."""
        kind = self._type(schema)
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            return self.array(schema, name, depth)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self.string(schema, name)

    def _merge(self, schema: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in (self.resolve(p) for p in schema["allOf"]):
            if not isinstance(part, dict):
                continue
            for key, val in part.items():
                if key == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **val}
                elif key == "required":
                    merged["required"] = [*merged.get("required", []), *val]
                else:
                    merged.setdefault(key, val)
        return merged

    @staticmethod
    def _type(schema: dict[str, Any]) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            return kinds[0] if kinds else "null"
        if kind:
            return kind
        if "properties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        return "string"

    def object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        result: dict[str, Any] = {}
        for key in [*properties, *(r for r in required if r not in properties)]:
            if depth >= _MAX_DEPTH and key not in required:
                continue
            result[key] = self.value(properties.get(key, {}), key, depth + 1)
        return result

    def array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        low = max(schema.get("minItems", 0), len(prefix))
        high = schema.get("maxItems", low + 3)
        count = low if depth >= _MAX_DEPTH else self.rng.randint(min(max(low, 1), high), min(high, low + 3))
        result = [self.value(p, name, depth + 1) for p in prefix[:count]]
        if not schema.get("uniqueItems"):
            return result + [self.value(items, name, depth + 1) for _ in range(count - len(result))]
        seen = {json.dumps(v, sort_keys=True) for v in result}
        for _ in range(count * 8):
            if len(result) >= count:
                break
            candidate = self.value(items, name, depth + 1)
            key = json.dumps(candidate, sort_keys=True)
            if key not in seen:
                seen.add(key)
                result.append(candidate)
        return result

    def _bounds(self, schema: dict[str, Any], default_span: float) -> tuple[float, float, bool, bool]:
        low, high = schema.get("minimum"), schema.get("maximum")
        ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        # Draft 4 spells exclusive bounds as booleans next to minimum/maximum.
        low_open = ex_low is True
        high_open = ex_high is True
        if isinstance(ex_low, (int, float)) and not isinstance(ex_low, bool):
            low, low_open = ex_low, True
        if isinstance(ex_high, (int, float)) and not isinstance(ex_high, bool):
            high, high_open = ex_high, True
        if low is None and high is None:
            low, high = 0, default_span
        elif low is None:
            low = high - 100
        elif high is None:
            high = low + 100
        return float(low), float(high), low_open, high_open

    def integer(self, schema: dict[str, Any]) -> int:
        low, high, low_open, high_open = self._bounds(schema, 100)
        low_int = math.floor(low) + 1 if low_open else math.ceil(low)
        high_int = math.ceil(high) - 1 if high_open else math.floor(high)
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            first, last = math.ceil(low_int / step), math.floor(high_int / step)
            return self.rng.randint(first, max(first, last)) * step
        return self.rng.randint(low_int, max(low_int, high_int))

    def number(self, schema: dict[str, Any]) -> float:
        low, high, low_open, high_open = self._bounds(schema, 1)
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and step > 0:
            first, last = math.ceil(low / step), math.floor(high / step)
            return self.rng.randint(first, max(first, last)) * step
        value = round(self.rng.uniform(low, high), 2)
        too_low = value < low or (low_open and value == low)
        too_high = value > high or (high_open and value == high)
        return (low + high) / 2 if too_low or too_high else value

    def string(self, schema: dict[str, Any], name: str) -> str:
        fmt = schema.get("format")
        if fmt in _FORMATS:
            return _FORMATS[fmt](self.rng, self.topic)
        text = self.topic.sentence(self.rng) if _SENTENCE_FIELD.search(name) else self.topic.word(self.rng)
        min_length, max_length = schema.get("minLength", 0), schema.get("maxLength")
        while len(text) < min_length:
            text = f"{text} {self.topic.word(self.rng)}"
        if max_length is not None and len(text) > max_length:
            text = text[:max_length].rstrip() or text[:max_length]
        return text.ljust(min_length, "x")


def _date(rng: random.Random, _: Topic) -> str:
    return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _time(rng: random.Random, _: Topic) -> str:
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"


_FORMATS = {
    "date": _date,
    "time": _time,
    "date-time": lambda rng, topic: f"{_date(rng, topic)}T{_time(rng, topic)}",
    "email": lambda rng, _: f"user{rng.randint(1, 9999)}@example.com",
    "uri": lambda rng, _: f"https://example.com/item/{rng.randint(1, 99999)}",
    "uuid": lambda rng, _: "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}".format(
        rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12), rng.getrandbits(12), rng.getrandbits(48)
    ),
}
