"""The `result` of one Message Batch request, in the shapes the real API returns.

Outcomes come from the shared fault plan (`faults`): item errors become `errored` results whose
error type rotates rate_limit_error -> api_error/overloaded_error -> invalid_request_error;
content filtering becomes a `refusal`; truncation a `max_tokens` stop.
"""

from __future__ import annotations

from typing import Any

from batch_assets.emulator import faults, ids
from batch_assets.emulator.answers import LENGTH, generate_answer, request_seed
from batch_assets.emulator.text import count_tokens
from batch_assets.providers.anthropic.emulator.requests import output_schema, prompt_of, request_error

REFUSAL_TEXT = "I can't help with that request."
# [GUESS] the wording of a structured refusal's explanation (the SDK: "not guaranteed to be stable").
REFUSAL_EXPLANATION = "This request was declined under a usage policy."
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}
# Outcomes of succeeded results with the rarer stop reasons of the SDK's `types/stop_reason.py`,
# drawn by the `anthropic_*_rate` knobs (see `batches._outcomes`); one character each, as in `faults`.
CONTEXT_WINDOW_EXCEEDED = "w"  # stop_reason model_context_window_exceeded: cut-off text
PAUSE_TURN = "p"  # stop_reason pause_turn: a long-running turn paused, partial text
REFUSAL = "x"  # stop_reason refusal, as content_filter_rate gives it
# [GUESS] the content of cut-off answers: the answer truncated as a max_tokens stop would cut it.
# `types/message.py`: pause_turn "we paused a long-running turn" (the response may be sent back
# as-is to continue), model_context_window_exceeded "we exceeded the model's context window".
_CUT_STOPS = {CONTEXT_WINDOW_EXCEEDED: "model_context_window_exceeded", PAUSE_TURN: "pause_turn"}


def message_id(batch_id: str, index: int) -> str:
    """`msg_01` + 22 base62 characters, like recorded message ids; stable for a given batch line."""
    return f"msg_01{ids.derived_base62(22, 'msg', batch_id, str(index))}"


def request_id(*parts: str) -> str:
    """`req_011C` + 20 base62 characters, like recorded request ids; derived from `parts`, else random."""
    return f"req_011C{ids.derived_base62(20, 'req', *parts) if parts else ids.random_base62(20)}"


def error_envelope(kind: str, message: str, request: str | None, details: dict[str, Any] | None = None) -> Any:
    """Anthropic's error body: the HTTP error response and the `error` of an errored result alike."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if details is not None:
        error = {"details": details, **error}
    return {"type": "error", "error": error, "request_id": request}


def result_for(
    params: dict[str, Any], outcome: str, batch_id: str, index: int, refusal_category: str | None = None
) -> dict[str, Any]:
    """The result of input line `index` whose injected outcome (see `faults`) is `outcome`;
    a refusal names `refusal_category` (the `anthropic_refusal_category` knob) when given."""
    if outcome in faults.FAILURES:
        return {"type": "errored", "error": _error(params, outcome, batch_id, index)}
    return {"type": "succeeded", "message": _message(params, outcome, message_id(batch_id, index), refusal_category)}


def _error(params: dict[str, Any], outcome: str, batch_id: str, index: int) -> dict[str, Any]:
    line_request = request_id("line", batch_id, str(index))
    model = params.get("model", "the model")
    if outcome == faults.RATE_LIMITED:
        message = (
            f"This request would exceed the rate limit for your organization of 50 requests per minute for {model}. "
            "Please reduce the request rate or try again later (injected by the emulator)."
        )
        return error_envelope("rate_limit_error", message, line_request)
    if outcome == faults.SERVER_ERROR:
        # Server-side failures are split between the two 5xx types by a stable per-line draw.
        if faults.unit_draw("server_error_kind", batch_id, str(index)) < 0.5:
            return error_envelope("api_error", "Internal server error", line_request)
        return error_envelope("overloaded_error", "Overloaded", line_request)
    if outcome == faults.TIMED_OUT:
        # An error type of errored results (the SDK's error union, GatewayTimeoutErrorObject); [GUESS]
        # the wording, which the SDK says can change.
        return error_envelope("timeout_error", "Request timed out", line_request)
    if outcome == faults.INVALID_REQUEST:
        message = request_error(params)
        assert message is not None, "outcome INVALID_REQUEST is only given to params request_error rejects"
    else:
        message = "Invalid request (injected by the emulator's item_error_rate)."
    # Recent recorded invalid_request_error results carry this `details` object.
    return error_envelope("invalid_request_error", message, line_request, {"error_visibility": "user_facing"})


def _message(params: dict[str, Any], outcome: str, msg_id: str, refusal_category: str | None = None) -> dict[str, Any]:
    prompt = prompt_of(params)
    refused = outcome in (faults.CONTENT_FILTERED, REFUSAL)
    stop_details = None
    stop_sequence = None
    if refused:
        # A structured refusal (Sonnet 4.5+) names its policy category and has no content
        # (Oaklight/llm-rosetta#432, verified against the live API; the SDK's RefusalStopDetails).
        text, stop_reason = ("" if refusal_category else REFUSAL_TEXT), "refusal"
        explanation = REFUSAL_EXPLANATION if refusal_category else None
        stop_details = {"type": "refusal", "category": refusal_category, "explanation": explanation}
    else:
        answer = generate_answer(
            request_seed(params),
            prompt.topic,
            schema=output_schema(params),
            max_tokens=params["max_tokens"],
            fault=LENGTH if outcome in (faults.TRUNCATED, *_CUT_STOPS) else None,
            sentences=prompt.sentences,
        )
        text, stop_reason = answer.content or "", _CUT_STOPS.get(outcome, _STOP_REASONS[answer.finish_reason])
        if stop_reason == "end_turn":
            text, stop_sequence = _apply_stop_sequences(text, params.get("stop_sequences"))
            if stop_sequence is not None:
                stop_reason = "stop_sequence"
    message: dict[str, Any] = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": params["model"],
        "content": [{"type": "text", "text": text}] if text or not refused else [],
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
    }
    if stop_details is not None:
        message["stop_details"] = stop_details
    message["usage"] = {
        "input_tokens": prompt.tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        # Never zero, even for an empty text, as the real API counts.
        "output_tokens": max(1, count_tokens(text)),
        "service_tier": "batch",
    }
    return message


def _apply_stop_sequences(text: str, stop_sequences: Any) -> tuple[str, str | None]:
    """`text` cut before the earliest custom stop sequence in it, and that sequence."""
    if not isinstance(stop_sequences, list):
        return text, None
    found = [(text.find(s), s) for s in stop_sequences if isinstance(s, str) and s and s in text]
    if not found:
        return text, None
    position, sequence = min(found)
    return text[:position], sequence
