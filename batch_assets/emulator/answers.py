"""Deterministic fake model output, shared by every wire format.

The same seed (a hash of the request) always gives the same answer, across restarts.
"""

from __future__ import annotations

import array
import json
import math
import random
from dataclasses import dataclass
from typing import Any

from batch_assets.emulator.ids import digest
from batch_assets.emulator.schema_values import value_for_schema
from batch_assets.emulator.text import Topic, count_tokens, cut_to_tokens

STOP, LENGTH, CONTENT_FILTER = "stop", "length", "content_filter"


@dataclass(frozen=True)
class Prompt:
    """What an answer is generated from, as a wire format's request reader extracts it."""

    tokens: int  # rough prompt token count, message overhead included
    topic: str  # the text answers should relate to: the last user turn


@dataclass(frozen=True)
class OutputFormat:
    """The shape a request asks its answer to take."""

    schema: Any = None  # a JSON Schema the answer must conform to
    json_mode: bool = False
    max_tokens: int | None = None


@dataclass(frozen=True)
class Answer:
    content: str | None
    finish_reason: str  # stop | length | content_filter
    completion_tokens: int


def rng_for(seed: str) -> random.Random:
    return random.Random(int.from_bytes(digest(seed), "big"))


def request_seed(body: Any) -> str:
    """A stable seed for a request body: equal bodies give equal answers."""
    return digest(json.dumps(body, sort_keys=True, ensure_ascii=False)).hex()


def generate_answer(
    seed: str,
    topic_text: str,
    *,
    schema: Any = None,
    json_mode: bool = False,
    max_tokens: int | None = None,
    fault: str | None = None,
    sentences: int | None = None,
) -> Answer:
    """A text answer: JSON conforming to `schema`, a small JSON object in `json_mode`, else prose.

    `fault` is None, "content_filter" (no content) or "length" (cut off mid-way, so JSON breaks).
    `sentences` asks prose for exactly that many sentences (see `text.requested_sentences`).
    A `max_tokens` smaller than the answer also cuts it off, as a real model would.
    """
    if fault == CONTENT_FILTER:
        return Answer(None, CONTENT_FILTER, 0)
    rng = rng_for(seed)
    topic = Topic(topic_text)
    if schema is not None:
        content = json.dumps(value_for_schema(schema, rng, topic), ensure_ascii=False, separators=(",", ":"))
    elif json_mode:
        content = json.dumps({"answer": topic.sentence(rng)}, ensure_ascii=False, separators=(",", ":"))
    else:
        content = topic.paragraph(rng, sentences)
    finish_reason = STOP
    if fault == LENGTH:
        content = content[: max(1, len(content) // 2)]
        finish_reason = LENGTH
    if max_tokens is not None and count_tokens(content) > max_tokens:
        content = cut_to_tokens(content, max_tokens)
        finish_reason = LENGTH
    return Answer(content, finish_reason, count_tokens(content))


def embedding_vector(seed: str, dimensions: int) -> list[float]:
    """A deterministic unit vector (to within 1e-6) with 8-decimal components like OpenAI's.

    Built from random int16s with C-level norm and truncation, which keeps thousands of
    1536-d vectors fast; `round()` per component was several times slower.
    """
    raw = array.array("h", rng_for(seed).randbytes(2 * dimensions))
    scale = 1e8 / (math.hypot(*raw) or 1.0)
    return [int(v * scale) / 1e8 for v in raw]
