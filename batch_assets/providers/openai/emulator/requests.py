"""Reading one OpenAI-format request body: its prompt, requested output format, and request errors.

A request error is what the model endpoint itself would answer with HTTP 400; in a batch it
becomes an error-file line, not a batch failure.
"""

from __future__ import annotations

from typing import Any

from batch_assets.emulator.answers import OutputFormat, Prompt
from batch_assets.emulator.errors import ApiError, invalid_value, missing_parameter
from batch_assets.emulator.text import count_tokens, text_of

CHAT, RESPONSES, EMBEDDINGS = "/v1/chat/completions", "/v1/responses", "/v1/embeddings"
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def _turns(body: dict[str, Any], endpoint: str) -> list[tuple[str, str]]:
    if endpoint == RESPONSES:
        turns = [("system", body["instructions"])] if isinstance(body.get("instructions"), str) else []
        items = body.get("input")
        if isinstance(items, str):
            return [*turns, ("user", items)]
        messages = items if isinstance(items, list) else []
    else:
        turns, messages = [], body.get("messages") if isinstance(body.get("messages"), list) else []
    return turns + [(str(m.get("role")), text_of(m.get("content"))) for m in messages if isinstance(m, dict)]


def embedding_inputs(body: dict[str, Any]) -> list[str]:
    """Each input as text; token-id arrays are rendered as their numbers."""
    raw = body.get("input")
    if isinstance(raw, str):
        return [raw]
    if not isinstance(raw, list):
        return []
    if raw and all(isinstance(v, int) for v in raw):
        return [" ".join(map(str, raw))]
    return [v if isinstance(v, str) else " ".join(map(str, v)) for v in raw if isinstance(v, (str, list))]


def prompt_of(endpoint: str, body: dict[str, Any]) -> Prompt:
    if endpoint == EMBEDDINGS:
        texts = embedding_inputs(body)
        return Prompt(sum(count_tokens(t) for t in texts), " ".join(texts))
    turns = _turns(body, endpoint)
    # About three tokens of framing per message plus three for the reply, as OpenAI counts them.
    tokens = sum(count_tokens(text) + 3 for _, text in turns) + 3
    topic = next((text for role, text in reversed(turns) if role == "user"), " ".join(t for _, t in turns))
    return Prompt(tokens, topic)


def output_format(endpoint: str, body: dict[str, Any]) -> OutputFormat:
    if endpoint == RESPONSES:
        fmt = _responses_format(body) or {}
        schema = fmt.get("schema", {}) if fmt.get("type") == "json_schema" else None
        return OutputFormat(schema, fmt.get("type") == "json_object", body.get("max_output_tokens"))
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema", {}) if fmt.get("type") == "json_schema" else None
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    return OutputFormat(schema, fmt.get("type") == "json_object", max_tokens)


def request_error(endpoint: str, body: dict[str, Any], max_dimensions: int, reasons: bool = False) -> ApiError | None:
    """The 400 the model endpoint would return for this body, or None when it is acceptable.
    `reasons`: the body's model is a reasoning model (see `Flavor.reasons`)."""
    if endpoint == EMBEDDINGS:
        if "input" not in body:
            return missing_parameter("input")
        if not embedding_inputs(body) or any(not t for t in embedding_inputs(body)):
            return invalid_value("input", "'$.input' is invalid. Please check the API reference.")
        dims = body.get("dimensions")
        valid_dims = isinstance(dims, int) and not isinstance(dims, bool) and 1 <= dims <= max_dimensions
        if dims is not None and not valid_dims:
            return invalid_value("dimensions", f"Invalid value for 'dimensions': {dims!r}.")
        return None
    limit_error = _token_limit_error(endpoint, body) or (_reasoning_error(endpoint, body) if reasons else None)
    if limit_error:
        return limit_error
    if endpoint == RESPONSES:
        return missing_parameter("input") if body.get("input") in (None, "", []) else _format_error(endpoint, body)
    messages = body.get("messages")
    if messages is None:
        return missing_parameter("messages")
    if not isinstance(messages, list) or not messages:
        return ApiError(
            400,
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            param="messages",
            code="empty_array",
        )
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            param = f"messages[{index}].role"
            return invalid_value(param, f"Invalid value for '{param}': expected one of {sorted(_ROLES)}.")
    return _format_error(endpoint, body)


def _reasoning_error(endpoint: str, body: dict[str, Any]) -> ApiError | None:
    """What a reasoning model (o-series, gpt-5) refuses: chat's `max_tokens`, and any temperature but 1.
    Messages and codes as real responses show them (griptape-ai/ComfyUI-Griptape#312,
    gabrii/Cursor-Azure-GPT-5#33, OpenHands/OpenHands#4131). [GUESS] that the responses endpoint
    refuses temperature the same way (reported for gpt-5 via Azure and litellm, not recorded here)."""
    if endpoint != RESPONSES and "max_tokens" in body:
        return ApiError(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            param="max_tokens",
            code="unsupported_parameter",
        )
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return ApiError(
            400,
            f"Unsupported value: 'temperature' does not support {temperature} with this model. "
            "Only the default (1) value is supported.",
            param="temperature",
            code="unsupported_value",
        )
    return None


def _token_limit_error(endpoint: str, body: dict[str, Any]) -> ApiError | None:
    names = ("max_output_tokens",) if endpoint == RESPONSES else ("max_tokens", "max_completion_tokens")
    for name in names:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return invalid_value(name, f"Invalid value for '{name}': expected a positive integer.")
    return None


def _format_error(endpoint: str, body: dict[str, Any]) -> ApiError | None:
    fmt = _responses_format(body) if endpoint == RESPONSES else body.get("response_format")
    if fmt is None:
        return None
    param = "text.format" if endpoint == RESPONSES else "response_format"
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        return invalid_value(param, f"Invalid value for '{param}'.")
    holder = fmt if endpoint == RESPONSES else fmt.get("json_schema")
    if fmt["type"] == "json_schema" and not (isinstance(holder, dict) and isinstance(holder.get("schema"), dict)):
        return missing_parameter(f"{param}.schema" if endpoint == RESPONSES else f"{param}.json_schema.schema")
    return None


def _responses_format(body: dict[str, Any]) -> Any:
    text = body.get("text")
    return text.get("format") if isinstance(text, dict) else None
