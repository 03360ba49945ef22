"""Reading one Gemini batch request: a GenerateContentRequest or an EmbedContentRequest.

Field names are accepted in camelCase or snake_case, as Google's proto JSON parser accepts both
(the docs' JSONL examples use `generation_config`, the SDK sends `generationConfig`). A request
error is what `models.generateContent` / `models.embedContent` would answer with HTTP 400; in a
batch it becomes an error line (or inlined error), not a batch failure.
"""

from __future__ import annotations

from typing import Any

from batch_assets.emulator.answers import OutputFormat, Prompt
from batch_assets.emulator.errors import ApiError
from batch_assets.emulator.text import count_tokens
from batch_assets.providers.gemini.emulator.wire import field, invalid_argument

GENERATE, EMBED = "generate", "embed"
MAX_EMBEDDING_DIMENSIONS = 3072
_MEDIA_PART_TOKENS = 258  # what Gemini bills per image (and per second of video) part
_MIME_TYPES = frozenset({"text/plain", "application/json", "application/xml", "application/yaml", "text/x.enum"})
_SCHEMA_MIME_TYPES = frozenset({"application/json", "text/x.enum"})
_MAX_CANDIDATES = 8
# OpenAPI Schema fields that are int64 (so may arrive as strings) in Gemini's `responseSchema`.
_INT64_SCHEMA_FIELDS = frozenset({"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"})


def default_embedding_dimensions(model: str) -> int:
    """gemini-embedding-* models return 3072 values unless asked for fewer; older ones 768."""
    return MAX_EMBEDDING_DIMENSIONS if model.removeprefix("models/").startswith("gemini-embedding") else 768


def is_embedding_model(model: str) -> bool:
    return "embedding" in model


# --- contents ----------------------------------------------------------------------------------


def _parts(content: Any) -> list[Any]:
    parts = field(content, "parts")
    return parts if isinstance(parts, list) else []


def _part_text(part: Any) -> str | None:
    text = field(part, "text")
    return text if isinstance(text, str) else None


def content_text(content: Any) -> str:
    return "\n".join(t for t in (_part_text(p) for p in _parts(content)) if t is not None)


def _part_tokens(part: Any) -> int:
    text = _part_text(part)
    return count_tokens(text) if text is not None else _MEDIA_PART_TOKENS


def _contents(request: dict[str, Any]) -> list[Any]:
    contents = field(request, "contents")
    return contents if isinstance(contents, list) else []


def prompt_of(kind: str, request: dict[str, Any]) -> Prompt:
    if kind == EMBED:
        content = field(request, "content")
        title = field(request, "title")
        text = content_text(content)
        tokens = sum(_part_tokens(p) for p in _parts(content)) + (count_tokens(title) if isinstance(title, str) else 0)
        return Prompt(max(tokens, 1), text)
    contents = _contents(request)
    system = field(request, "systemInstruction")
    tokens = sum(_part_tokens(p) for c in [*contents, system] if c is not None for p in _parts(c))
    user_turns = [content_text(c) for c in contents if field(c, "role", "user") == "user"]
    topic = next((t for t in reversed(user_turns) if t), " ".join(content_text(c) for c in contents))
    return Prompt(max(tokens, 1), topic)


def embedding_text(request: dict[str, Any]) -> str:
    return content_text(field(request, "content"))


def embedding_dimensions(model: str, request: dict[str, Any]) -> int:
    dims = _as_int(field(request, "outputDimensionality"))
    return dims if dims is not None else default_embedding_dimensions(model)


# --- generation config ---------------------------------------------------------------------------


def _generation_config(request: dict[str, Any]) -> dict[str, Any]:
    config = field(request, "generationConfig")
    return config if isinstance(config, dict) else {}


def thinking_budget(request: dict[str, Any]) -> int | None:
    """`generationConfig.thinkingConfig.thinkingBudget`: 0 disables thinking, -1 is automatic."""
    return _as_int(field(field(_generation_config(request), "thinkingConfig"), "thinkingBudget"))


def candidate_count(request: dict[str, Any]) -> int:
    return _as_int(field(_generation_config(request), "candidateCount")) or 1


def output_format(request: dict[str, Any]) -> OutputFormat:
    config = _generation_config(request)
    mime = field(config, "responseMimeType") or "text/plain"
    schema = field(config, "responseJsonSchema")
    if schema is None and field(config, "responseSchema") is not None:
        schema = json_schema_from_openapi(field(config, "responseSchema"))
    wants_json = mime == "application/json"
    return OutputFormat(
        schema if wants_json else None,
        wants_json and schema is None,
        _as_int(field(config, "maxOutputTokens")),
    )


def json_schema_from_openapi(schema: Any) -> Any:
    """Gemini's OpenAPI-subset `responseSchema` (types in capitals, `nullable`, int64 strings) as
    the JSON Schema the shared value generator reads."""
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for raw_key, value in schema.items():
        key = _camel(raw_key)
        if key == "type" and isinstance(value, str):
            if value.upper() != "TYPE_UNSPECIFIED":
                result["type"] = value.lower()
        elif key == "properties" and isinstance(value, dict):
            result[key] = {name: json_schema_from_openapi(sub) for name, sub in value.items()}
        elif key == "items":
            result[key] = json_schema_from_openapi(value)
        elif key == "anyOf" and isinstance(value, list):
            result[key] = [json_schema_from_openapi(sub) for sub in value]
        elif key in _INT64_SCHEMA_FIELDS:
            result[key] = _as_int(value)
        elif key in ("minimum", "maximum") and isinstance(value, str):
            result[key] = float(value)
        elif key not in ("nullable", "propertyOrdering"):
            result[key] = value
    if field(schema, "nullable") is True and isinstance(result.get("type"), str):
        result["type"] = [result["type"], "null"]
    return result


# --- request errors ------------------------------------------------------------------------------


def request_error(kind: str, request: dict[str, Any]) -> ApiError | None:
    """The 400 the model endpoint would return for this request, or None when it is acceptable."""
    if kind == EMBED:
        return _embed_error(request)
    contents = field(request, "contents")
    if not isinstance(contents, list) or not contents:
        return invalid_argument("* GenerateContentRequest.contents: contents is not specified\n")
    for index, content in enumerate(contents):
        problem = _content_error(content, f"GenerateContentRequest.contents[{index}]")
        if problem:
            return problem
        role = field(content, "role")
        if role not in (None, "", "user", "model", "function"):
            return invalid_argument(
                f"* GenerateContentRequest.contents[{index}].role: Please use a valid role: user, model.\n"
            )
    system = field(request, "systemInstruction")
    if system is not None:
        problem = _content_error(system, "GenerateContentRequest.system_instruction")
        if problem:
            return problem
    return _config_error(request)


def _content_error(content: Any, where: str) -> ApiError | None:
    if not isinstance(content, dict):
        return invalid_argument(f"* {where}: must be a Content object.\n")
    parts = field(content, "parts")
    if not isinstance(parts, list) or not parts:
        return invalid_argument(f"* {where}.parts: contents.parts must not be empty.\n")
    for index, part in enumerate(parts):
        if not isinstance(part, dict) or not part:
            return invalid_argument(
                f"* {where}.parts[{index}].data: required oneof field 'data' must have one initialized field\n"
            )
    return None


def _config_error(request: dict[str, Any]) -> ApiError | None:
    raw = field(request, "generationConfig")
    if raw is None:
        return None
    where = "GenerateContentRequest.generation_config"
    if not isinstance(raw, dict):
        return invalid_argument(f"* {where}: must be a GenerationConfig object.\n")
    for name, low, high in (("maxOutputTokens", 1, None), ("candidateCount", 1, _MAX_CANDIDATES)):
        value = field(raw, name)
        number = _as_int(value)
        if value is not None and (number is None or number < low or (high is not None and number > high)):
            bound = f"between {low} and {high}" if high else "a positive integer"
            return invalid_argument(f"* {where}.{_snake(name)}: must be {bound}, got {value!r}.\n")
    mime = field(raw, "responseMimeType")
    if mime is not None and mime not in _MIME_TYPES:
        return invalid_argument(
            f"* {where}.response_mime_type: allowed mimetypes are `text/plain`, `application/json`, "
            "`application/xml`, `application/yaml` and `text/x.enum`.\n"
        )
    schema, json_schema = field(raw, "responseSchema"), field(raw, "responseJsonSchema")
    if schema is not None and json_schema is not None:
        return invalid_argument(f"* {where}: response_schema and response_json_schema cannot both be set.\n")
    given = schema if schema is not None else json_schema
    if given is not None and not isinstance(given, dict):
        return invalid_argument(f"* {where}.response_schema: must be a Schema object.\n")
    if given is not None and mime not in _SCHEMA_MIME_TYPES:
        return invalid_argument(
            f"* {where}.response_mime_type: When response_schema is set, response_mime_type must be one of: "
            "application/json, text/x.enum.\n"
        )
    return None


def _embed_error(request: dict[str, Any]) -> ApiError | None:
    content = field(request, "content")
    if content is None:
        return invalid_argument("* EmbedContentRequest.content: content is not specified\n")
    problem = _content_error(content, "EmbedContentRequest.content")
    if problem:
        return problem
    if not embedding_text(request).strip():
        return invalid_argument("* EmbedContentRequest.content: text content is empty.\n")
    raw = field(request, "outputDimensionality")
    dims = _as_int(raw)
    if raw is not None and (dims is None or not 1 <= dims <= MAX_EMBEDDING_DIMENSIONS):
        return invalid_argument(
            f"* EmbedContentRequest.output_dimensionality: must be between 1 and {MAX_EMBEDDING_DIMENSIONS}, "
            f"got {raw!r}.\n"
        )
    return None


# --- helpers -------------------------------------------------------------------------------------


def _as_int(value: Any) -> int | None:
    """An int32/int64 proto field: a JSON integer or a string of digits."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
