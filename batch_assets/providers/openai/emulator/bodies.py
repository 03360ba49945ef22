"""The response body of one batch request, in the shape the real endpoint returns."""

from __future__ import annotations

import base64
import struct
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
from batch_assets.emulator.text import count_tokens
from batch_assets.providers.openai.emulator.flavor import Flavor
from batch_assets.providers.openai.emulator.requests import (
    EMBEDDINGS,
    RESPONSES,
    embedding_inputs,
    output_format,
    prompt_of,
    request_error,
)

_ANSWER_FAULTS = {faults.CONTENT_FILTERED: CONTENT_FILTER, faults.TRUNCATED: LENGTH}
# A refusal instead of an answer (`openai_refusal_rate`): 200, the refusal text in chat's
# `message.refusal` with `content` null (the structured-outputs guide, "Refusals"), in a `refusal`
# content part on /v1/responses. One character, as the outcomes of `faults`.
REFUSED = "y"
REFUSAL_TEXT = "I'm sorry, but I can't assist with that request."
INVALID_PROMPT_MESSAGE = (
    "Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a "
    "different prompt: https://platform.openai.com/docs/guides/reasoning#advice-on-prompting"
)


@dataclass(frozen=True)
class Result:
    status_code: int
    body: dict[str, Any]
    input_tokens: int = 0
    output_tokens: int = 0


def respond(flavor: Flavor, endpoint: str, body: dict[str, Any], outcome: str, seed_id: str, created: int) -> Result:
    """The answer to one request whose injected outcome (see `faults`) is `outcome`."""
    if outcome in faults.FAILURES:
        return _error_result(flavor, endpoint, body, outcome)
    if endpoint == EMBEDDINGS:
        return _embeddings(flavor, body)
    fault = _ANSWER_FAULTS.get(outcome)
    if endpoint == RESPONSES:
        result = _responses(flavor, body, fault, seed_id, created)
        return _refused_response(result) if outcome == REFUSED else result
    result = _chat(flavor, endpoint, body, fault, seed_id, created)
    return _refused_chat(result) if outcome == REFUSED else result


def _refused_chat(result: Result) -> Result:
    """The chat completion with a refusal where the answer was."""
    refusal_tokens = count_tokens(REFUSAL_TEXT)
    for choice in result.body["choices"]:
        choice["message"].update(content=None, refusal=REFUSAL_TEXT)
        choice["finish_reason"] = "stop"
    usage = result.body["usage"]
    reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
    usage["completion_tokens"] = reasoning + refusal_tokens * len(result.body["choices"])
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return Result(200, result.body, result.input_tokens, usage["completion_tokens"])


def _refused_response(result: Result) -> Result:
    """The /v1/responses body with a refusal content part where the answer was."""
    for item in result.body["output"]:
        if item.get("type") == "message":
            item["content"] = [{"type": "refusal", "refusal": REFUSAL_TEXT}]
    usage = result.body["usage"]
    usage["output_tokens"] = usage["output_tokens_details"]["reasoning_tokens"] + count_tokens(REFUSAL_TEXT)
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return Result(200, result.body, result.input_tokens, usage["output_tokens"])


def _error_result(flavor: Flavor, endpoint: str, body: dict[str, Any], outcome: str) -> Result:
    model = body.get("model", "the model")
    if outcome == faults.RATE_LIMITED:
        error = ApiError(
            429,
            f"Rate limit reached for {model} in organization org-emulator on requests per min (RPM): "
            "Limit 500, Used 500, Requested 1. Please try again in 120ms.",
            kind="requests",
            code="rate_limit_exceeded",
        )
    elif outcome == faults.SERVER_ERROR:
        message = "The server had an error while processing your request. Sorry about that!"
        error = ApiError(500, message, kind="server_error")
    elif outcome == faults.FLAGGED_PROMPT:
        # The reasoning models' usage-policy screen, as users quote it (openai/codex#7250) with the
        # code and type of its error body (invalid_request_error, invalid_prompt).
        error = ApiError(400, INVALID_PROMPT_MESSAGE, code="invalid_prompt")
    elif outcome == faults.INVALID_REQUEST:
        found = request_error(
            endpoint, body, flavor.max_embedding_dimensions, flavor.reasons(str(body.get("model", "")))
        )
        assert found is not None, "outcome INVALID_REQUEST is only given to bodies request_error rejects"
        error = found
    else:
        error = ApiError(400, "Invalid request (injected by the emulator's item_error_rate).", code="invalid_value")
    return Result(error.status, error_body(error))


def error_body(error: ApiError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.kind, "param": error.param, "code": error.code}}


def _answers(endpoint: str, body: dict[str, Any], fault: str | None, topic: str) -> list[Answer]:
    fmt = output_format(endpoint, body)
    n = body.get("n") if isinstance(body.get("n"), int) and body.get("n", 0) > 1 else 1
    seed = request_seed(body)
    return [
        generate_answer(
            seed if i == 0 else f"{seed}:{i}",
            topic,
            schema=fmt.schema,
            json_mode=fmt.json_mode,
            max_tokens=fmt.max_tokens,
            fault=fault,
        )
        for i in range(n)
    ]


def reasoning_tokens(flavor: Flavor, body: dict[str, Any]) -> int:
    """The reasoning tokens of a reasoning model's answer: a stable 64..1023 per request. [GUESS]
    the amounts; real counts vary with the prompt and `reasoning_effort`."""
    if not flavor.reasons(str(body.get("model", ""))):
        return 0
    return 64 + int(faults.unit_draw("reasoning", request_seed(body)) * 960)


def _chat(flavor: Flavor, endpoint: str, body: dict[str, Any], fault: str | None, seed_id: str, created: int) -> Result:
    prompt = prompt_of(endpoint, body)
    answers = flavor.canned_answers(endpoint)
    if answers is None:
        answers = _answers(endpoint, body, fault, prompt.topic)
    reasoning = reasoning_tokens(flavor, body)
    completion = sum(a.completion_tokens for a in answers) + reasoning
    model = body["model"]
    own = flavor.chat_body(endpoint, answers, prompt.tokens, model, seed_id, created)
    if own is not None:
        return Result(200, own, prompt.tokens, completion)
    chat = {
        "id": f"chatcmpl-{ids.derived_base62(29, 'chatcmpl', seed_id)}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": a.content, "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": a.finish_reason,
            }
            for i, a in enumerate(answers)
        ],
        "usage": {
            "prompt_tokens": prompt.tokens,
            "completion_tokens": completion,
            "total_tokens": prompt.tokens + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": f"fp_{ids.derived_hex(10, 'fingerprint', model)}",
    }
    return Result(200, chat, prompt.tokens, completion)


def _responses(flavor: Flavor, body: dict[str, Any], fault: str | None, seed_id: str, created: int) -> Result:
    prompt = prompt_of(RESPONSES, body)
    answer = _answers(RESPONSES, body, fault, prompt.topic)[0]
    reasoning = reasoning_tokens(flavor, body)
    output_tokens = answer.completion_tokens + reasoning
    incomplete = {CONTENT_FILTER: "content_filter", LENGTH: "max_output_tokens"}.get(answer.finish_reason)
    status = "incomplete" if incomplete else "completed"
    output = []
    if answer.content is not None:
        output.append(
            {
                "id": f"msg_{ids.derived_hex(48, 'msg', seed_id)}",
                "type": "message",
                "status": status,
                "content": [{"type": "output_text", "annotations": [], "text": answer.content}],
                "role": "assistant",
            }
        )
    fmt = body.get("text") if isinstance(body.get("text"), dict) else {"format": {"type": "text"}}
    response = {
        "id": f"resp_{ids.derived_hex(48, 'resp', seed_id)}",
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body["model"],
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": body.get("temperature", 1.0),
        "text": fmt,
        "tool_choice": "auto",
        "tools": [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": {
            "input_tokens": prompt.tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt.tokens + output_tokens,
        },
        "user": None,
        "metadata": {},
    }
    return Result(200, response, prompt.tokens, output_tokens)


def _embeddings(flavor: Flavor, body: dict[str, Any]) -> Result:
    model = body["model"]
    dims = body.get("dimensions") or flavor.default_embedding_dimensions
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(embedding_inputs(body)):
        vector: Any = embedding_vector(request_seed([model, text, dims]), dims)
        if as_base64:
            # Little-endian float32, as OpenAI sends them.
            vector = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = prompt_of(EMBEDDINGS, body).tokens
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return Result(200, {"object": "list", "data": data, "model": model, "usage": usage}, tokens, 0)
