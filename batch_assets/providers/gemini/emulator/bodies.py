"""The result of one Gemini batch request: a GenerateContentResponse, an embedding, or an error.

Shapes follow the recorded samples in `provider_samples/gemini_*responses.jsonl`: camelCase,
`finishReason` STOP / MAX_TOKENS / SAFETY, `usageMetadata` with int32 counts as JSON numbers,
`modelVersion` without the `models/` prefix, and embeddings as `{"embedding": {"values": [...]}}`
with an int64 `tokenCount` string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batch_assets.emulator import faults, ids
from batch_assets.emulator.answers import (
    CONTENT_FILTER,
    LENGTH,
    Answer,
    embedding_vector,
    generate_answer,
    request_seed,
)
from batch_assets.emulator.errors import ApiError
from batch_assets.emulator.text import requested_sentences
from batch_assets.providers.gemini.emulator.requests import (
    EMBED,
    GENERATE,
    candidate_count,
    embedding_dimensions,
    embedding_text,
    output_format,
    prompt_of,
    request_error,
    thinking_budget,
)
from batch_assets.providers.gemini.emulator.wire import field, google_error, int64, rpc_status

_ANSWER_FAULTS = {faults.CONTENT_FILTERED: CONTENT_FILTER, faults.TRUNCATED: LENGTH}
_FINISH_REASONS = {"stop": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY"}
_HARM_CATEGORIES = (
    "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    "HARM_CATEGORY_HATE_SPEECH",
    "HARM_CATEGORY_HARASSMENT",
    "HARM_CATEGORY_DANGEROUS_CONTENT",
)
# The messages Google's front end uses for these statuses.
_INJECTED_ERRORS = {
    faults.RATE_LIMITED: (429, "Resource has been exhausted (e.g. check quota)."),
    faults.SERVER_ERROR: (
        500,
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
    faults.INJECTED_BAD_REQUEST: (400, "Request contains an invalid argument."),
}
_UNAVAILABLE = (503, "The service is currently unavailable.")
# Answer shapes drawn by the Gemini knobs (one character each, as the outcomes of `faults`):
# the prompt blocked, with `promptFeedback.blockReason` and no candidates at all (the shape
# experientiallabs/experiential#783 met in production); the output budget spent while thinking, a
# MAX_TOKENS candidate whose content has no parts (stanford-crfm/helm#3804, googleapis/python-genai#811).
PROMPT_BLOCKED = "n"
THOUGHT_OUT = "m"
BLOCK_REASON = "PROHIBITED_CONTENT"
_DEFAULT_MAX_OUTPUT_TOKENS = 1024  # [GUESS] the thoughts of a request without maxOutputTokens


@dataclass(frozen=True)
class ItemResult:
    payload: dict[str, Any]  # {"response": ...} or {"error": ...}
    ok: bool
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class UsageOptions:
    """How usageMetadata is reported, fixed per batch when it is created."""

    thinking: bool = False  # the model thinks: thoughtsTokenCount
    cached_fraction: float = 0.0  # this share of the prompt is reported as cachedContentTokenCount


def respond(
    kind: str,
    model: str,
    request: dict[str, Any],
    outcome: str,
    seed_id: str,
    *,
    status_names: bool = False,
    usage: UsageOptions = UsageOptions(),
) -> ItemResult:
    """The answer to one request whose injected outcome (see `faults`) is `outcome`.

    A failed item's `error` is a google.rpc.Status with a gRPC code (3 INVALID_ARGUMENT,
    8 RESOURCE_EXHAUSTED, 13 INTERNAL or 14 UNAVAILABLE), not an HTTP error body: the Batch API
    reference types it `Status`, and the SDK's `types.JobError` reads only code/message/details.
    """
    if outcome in faults.FAILURES:
        error = _item_error(kind, request, outcome, seed_id)
        return ItemResult({"error": rpc_status(error, with_name=status_names)}, ok=False)
    if kind == EMBED:
        return _embedding(model, request)
    if outcome in (PROMPT_BLOCKED, THOUGHT_OUT):
        return _no_answer(model, request, outcome, seed_id)
    return _generate(model, request, _ANSWER_FAULTS.get(outcome), seed_id, usage)


def _no_answer(model: str, request: dict[str, Any], outcome: str, seed_id: str) -> ItemResult:
    """A response with no text: the prompt blocked, or the output budget spent on thoughts."""
    prompt = prompt_of(GENERATE, request)
    thoughts = 0
    if outcome == THOUGHT_OUT:
        thoughts = output_format(request).max_tokens or _DEFAULT_MAX_OUTPUT_TOKENS
    usage: dict[str, Any] = {
        "promptTokenCount": prompt.tokens,
        "totalTokenCount": prompt.tokens + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt.tokens}],
    }
    response: dict[str, Any] = {}
    if outcome == PROMPT_BLOCKED:
        response["promptFeedback"] = {"blockReason": BLOCK_REASON}
    else:
        usage["thoughtsTokenCount"] = thoughts
        response["candidates"] = [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}]
    response.update(
        {
            "usageMetadata": usage,
            "modelVersion": model_version(model),
            "responseId": ids.derived_base62(23, "gemini-response", seed_id),
        }
    )
    return ItemResult({"response": response}, True, prompt.tokens, thoughts)


def _item_error(kind: str, request: dict[str, Any], outcome: str, seed_id: str) -> ApiError:
    if outcome == faults.INVALID_REQUEST:
        found = request_error(kind, request)
        assert found is not None, "outcome INVALID_REQUEST is only given to requests request_error rejects"
        return found
    if outcome == faults.PROVIDER_CANCELLED:
        # One request of a SUCCEEDED batch canceled by the service itself (issue 43: seen in real
        # traffic): rpc code 1 with the front end's text for it (google-gemini/gemini-cli#20309).
        return google_error(499, "The operation was cancelled.", "CANCELLED")
    status, message = _INJECTED_ERRORS[outcome]
    # [GUESS] server-side item failures split between INTERNAL and UNAVAILABLE by a stable draw,
    # as the Anthropic emulator splits api_error/overloaded_error.
    if outcome == faults.SERVER_ERROR and faults.unit_draw("gemini_server_error", seed_id) < 0.5:
        status, message = _UNAVAILABLE
    return google_error(status, message)


def model_version(model: str) -> str:
    return model.removeprefix("models/")


def thoughts_tokens(request: dict[str, Any], seed: str) -> int:
    """The thinking tokens of one answer of a thinking model: none when `thinkingBudget` is 0
    (thinking disabled, per the SDK's `types.ThinkingConfig`), else a stable 64..1023 capped by a
    positive budget. [GUESS] the amounts; real counts vary with the prompt."""
    budget = thinking_budget(request)
    if budget == 0:
        return 0
    tokens = 64 + int(faults.unit_draw("thoughts", seed) * 960)
    return min(tokens, budget) if budget is not None and budget > 0 else tokens


def _generate(
    model: str, request: dict[str, Any], fault: str | None, seed_id: str, options: UsageOptions = UsageOptions()
) -> ItemResult:
    prompt = prompt_of(GENERATE, request)
    fmt = output_format(request)
    seed = request_seed([model, request])
    sentences = requested_sentences(prompt.topic)
    answers = [
        generate_answer(
            seed if i == 0 else f"{seed}:{i}",
            prompt.topic,
            schema=fmt.schema,
            json_mode=fmt.json_mode,
            max_tokens=fmt.max_tokens,
            fault=fault,
            sentences=sentences,
        )
        for i in range(candidate_count(request))
    ]
    completion = sum(a.completion_tokens for a in answers)
    # Thinking models (gemini-2.5-*, names with "thinking"): `candidatesTokenCount` excludes the
    # thoughts, reported apart as `thoughtsTokenCount`; `totalTokenCount` adds all three (the
    # SDK's `types.GenerateContentResponseUsageMetadata`). Cached tokens are part of the prompt.
    thoughts = thoughts_tokens(request, seed) if options.thinking else 0
    cached = int(prompt.tokens * options.cached_fraction)
    usage: dict[str, Any] = {"promptTokenCount": prompt.tokens}
    if completion:
        usage["candidatesTokenCount"] = completion
    usage["totalTokenCount"] = prompt.tokens + completion + thoughts
    if cached:
        usage["cachedContentTokenCount"] = cached
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt.tokens}]
    if cached:
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    response = {
        "candidates": [_candidate(i, a) for i, a in enumerate(answers)],
        "usageMetadata": usage,
        "modelVersion": model_version(model),
        "responseId": ids.derived_base62(23, "gemini-response", seed_id),
    }
    return ItemResult({"response": response}, True, prompt.tokens, completion + thoughts)


def _candidate(index: int, answer: Answer) -> dict[str, Any]:
    reason = _FINISH_REASONS[answer.finish_reason]
    if answer.content is None:
        # Blocked output: no content, and the rating that blocked it.
        ratings = [{"category": c, "probability": "NEGLIGIBLE"} for c in _HARM_CATEGORIES[:-1]]
        ratings.append({"category": _HARM_CATEGORIES[-1], "probability": "HIGH", "blocked": True})
        return {"finishReason": reason, "index": index, "safetyRatings": ratings}
    return {
        "content": {"parts": [{"text": answer.content}], "role": "model"},
        "finishReason": reason,
        "index": index,
    }


def _embedding(model: str, request: dict[str, Any]) -> ItemResult:
    dims = embedding_dimensions(model, request)
    text = embedding_text(request)
    task_type, title = field(request, "taskType"), field(request, "title")
    vector = embedding_vector(request_seed([model, text, dims, task_type, title]), dims)
    tokens = prompt_of(EMBED, request).tokens
    return ItemResult({"response": {"embedding": {"values": vector}, "tokenCount": int64(tokens)}}, True, tokens, 0)
