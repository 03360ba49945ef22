"""Gemini Batch formats: request `{key, request}`, result `{key, response | error}`.

generateContent answers are `candidates[0].content.parts[].text`; batch embeddings answer
`embedding.values`. Inline jobs' responses are written by the adapter in this same line shape.

A failed item's `error` is a `google.rpc.Status` `{code, message}` whose `code` is a gRPC code
(3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED, ...), not an HTTP status: the envelope gives it the
HTTP status Google maps that code to (google/rpc/code.proto) and the code's name as error_code, so
the shared classification applies (8 -> 429 -> capacity; 3, 5, 7, 9, 16 -> 4xx -> validation; 2, 4,
13, 14 -> 5xx -> internal). An HTTP-style code (100-599) or a `status` name, where a line carries
one, is read as such.

1 CANCELLED on a line is the service's own cancel of that one request: a cancelled batch has no
results at all ("no results can be retrieved", Google's Batch API docs), so its items come without
lines and take the batch's outcome (an operator's or this system's cancel). A CANCELLED line sits in
a SUCCEEDED batch (seen in real traffic, issue 43): `provider_canceled`, retried, never final.
"""

from __future__ import annotations

from batch_assets.providers.wire import WireFormat, json_const, system_and_user
from batch_assets.sqltext import sql_literal

BLOCKED_FINISH = ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY")
# google.rpc status names that mean "capacity or quota", and content blocks.
CAPACITY_CODES = ("RESOURCE_EXHAUSTED",)
CONTENT_POLICY_CODES = ("SAFETY", "PROHIBITED_CONTENT")
# rpc names of a request the provider itself canceled (see the module docstring).
PROVIDER_CANCELLED_CODES = ("CANCELLED",)

# gRPC code -> (its name, the HTTP status Google maps it to), from google/rpc/code.proto.
GRPC_CODES: dict[int, tuple[str, int]] = {
    1: ("CANCELLED", 499),
    2: ("UNKNOWN", 500),
    3: ("INVALID_ARGUMENT", 400),
    4: ("DEADLINE_EXCEEDED", 504),
    5: ("NOT_FOUND", 404),
    6: ("ALREADY_EXISTS", 409),
    7: ("PERMISSION_DENIED", 403),
    8: ("RESOURCE_EXHAUSTED", 429),
    9: ("FAILED_PRECONDITION", 400),
    10: ("ABORTED", 409),
    11: ("OUT_OF_RANGE", 400),
    12: ("UNIMPLEMENTED", 501),
    13: ("INTERNAL", 500),
    14: ("UNAVAILABLE", 503),
    15: ("DATA_LOSS", 500),
    16: ("UNAUTHENTICATED", 401),
}
GRPC_NAMES = {name: code for code, (name, _) in GRPC_CODES.items()}
# Codes Google maps to a 5xx (INTERNAL, UNAVAILABLE, ...): a batch failed with one is the service's fault.
INTERNAL_CODES = tuple(name for name, http in GRPC_CODES.values() if http >= 500)


def grpc_code_name(code: int | str | None) -> str | None:
    """The name of a gRPC code (8 -> RESOURCE_EXHAUSTED); a name or an HTTP-style code is kept as text."""
    if code is None:
        return None
    try:
        number = int(code)
    except (TypeError, ValueError):
        return str(code)
    return GRPC_CODES[number][0] if number in GRPC_CODES else str(number)


def _status_code_sql(error: str) -> str:
    """HTTP status of an rpc.Status: an HTTP-style code as is, a gRPC code or `status` name mapped."""
    code = f"TRY_CAST({error} ->> '$.code' AS INTEGER)"
    by_code = " ".join(f"WHEN {c} THEN {http}" for c, (_, http) in GRPC_CODES.items())
    by_name = " ".join(
        f"WHEN {sql_literal(name)} THEN {http}" for name, http in ((n, GRPC_CODES[c][1]) for n, c in GRPC_NAMES.items())
    )
    return (
        f"CASE WHEN {code} BETWEEN 100 AND 599 THEN {code} "
        f"ELSE coalesce(CASE {code} {by_code} END, CASE upper({error} ->> '$.status') {by_name} END, "
        f"CASE WHEN {error} IS NOT NULL THEN 500 END) END"
    )


def _error_code_sql(error: str) -> str:
    """The rpc.Status name (from `status`, else from the gRPC code), or an HTTP-style code as text."""
    by_code = " ".join(f"WHEN {c} THEN {sql_literal(name)}" for c, (name, _) in GRPC_CODES.items())
    return (
        f"coalesce({error} ->> '$.status', CASE TRY_CAST({error} ->> '$.code' AS INTEGER) {by_code} END, "
        f"{error} ->> '$.code')"
    )


class GeminiFormat(WireFormat):
    result_columns = {"key": "VARCHAR", "response": "JSON", "error": "JSON"}
    capacity_codes = CAPACITY_CODES
    content_policy_codes = CONTENT_POLICY_CODES
    internal_codes = INTERNAL_CODES

    @property
    def failure_class_sql(self) -> str:
        """The shared classification, but a CANCELLED line is the provider's own cancel."""
        cancelled = ", ".join(map(sql_literal, PROVIDER_CANCELLED_CODES))
        return f"(CASE WHEN error_code IN ({cancelled}) THEN 'provider_canceled' ELSE {super().failure_class_sql} END)"

    def envelope_sql(self, line: str) -> str:
        error = f"(CASE WHEN json_type({line}.error) = 'OBJECT' THEN {line}.error END)"
        return (
            f"{line}.key AS request_id, {line}.response ->> '$.responseId' AS line_id, "
            f"CASE WHEN {line}.response IS NOT NULL AND json_type({line}.response) = 'OBJECT' THEN 200 "
            f"ELSE {_status_code_sql(error)} END AS status_code, "
            f"{line}.response ->> '$.responseId' AS provider_request_id, "
            f"{line}.response AS body, "
            f"{error} AS error"
        )

    @staticmethod
    def _errors(raw: str) -> str:
        return f"{_error_code_sql(f'{raw}.error')} AS error_code, {raw}.error ->> '$.message' AS error_message"


def response_schema(json_schema: dict) -> dict:
    """A JSON Schema as Gemini's OpenAPI Schema subset (generationConfig.responseSchema), converted by
    the SDK itself (`types.Schema.from_json_schema`): upper-case types, camelCase names, and keywords
    the subset lacks dropped."""
    from google.genai import types

    schema = types.Schema.from_json_schema(
        json_schema=types.JSONSchema.model_validate(json_schema), api_option="GEMINI_API"
    )
    return schema.model_dump(mode="json", by_alias=True, exclude_none=True)


def schema_config_sql(task) -> str:
    """The generationConfig entry carrying the output schema, in the form the task chose
    (`provider_options.gemini_schema_field`)."""
    if task.spec.provider_options.gemini_schema_field == "response_schema":
        return "'responseSchema', " + json_const(response_schema(task.output_schema))
    return "'responseJsonSchema', " + json_const(task.output_schema)


def _output_tokens_sql(raw: str) -> str:
    """Billed output: the answer's tokens plus a thinking model's thoughts, which usageMetadata counts
    apart (`thoughtsTokenCount`, not included in `candidatesTokenCount`; total = prompt + candidates
    + thoughts). NULL only when the response reports neither."""
    candidates = f"TRY_CAST({raw}.body ->> '$.usageMetadata.candidatesTokenCount' AS BIGINT)"
    thoughts = f"TRY_CAST({raw}.body ->> '$.usageMetadata.thoughtsTokenCount' AS BIGINT)"
    return (
        f"CASE WHEN {candidates} IS NULL AND {thoughts} IS NULL THEN NULL "
        f"ELSE coalesce({candidates}, 0) + coalesce({thoughts}, 0) END"
    )


def _usage_count_sql(raw: str, field: str) -> str:
    """A usageMetadata count that the service leaves out when it is zero (proto3 JSON omits default
    values: a model that did not think has no `thoughtsTokenCount`): 0 when the response reports
    usage without it, NULL when it reports no usage at all."""
    return (
        f"CASE WHEN json_type({raw}.body, '$.usageMetadata') = 'OBJECT' "
        f"THEN coalesce(TRY_CAST({raw}.body ->> '$.usageMetadata.{field}' AS BIGINT), 0) END"
    )


class GenerateContent(GeminiFormat):
    def request_line_sql(self, task, request_id_col: str, prompt_col: str) -> str:
        spec = task.spec
        system, user = system_and_user(task, prompt_col)
        config = [
            f"'temperature', {float(spec.params.temperature)!r}",
            f"'maxOutputTokens', {int(spec.params.max_tokens)}",
        ]
        if spec.output.kind == "json":
            config += ["'responseMimeType', 'application/json'", schema_config_sql(task)]
        request = [
            f"'contents', json_array(json_object('role', 'user', 'parts', json_array(json_object('text', {user}))))",
            f"'generationConfig', json_object({', '.join(config)})",
        ]
        if system:
            request.append(f"'systemInstruction', json_object('parts', json_array(json_object('text', {system})))")
        return f"CAST(json_object('key', {request_id_col}, 'request', json_object({', '.join(request)})) AS VARCHAR)"

    def request_options(self, task) -> dict[str, str | int]:
        # Which schema field carried the output schema (reports conflict on which the batch endpoint honours).
        if task.spec.output.kind != "json":
            return {}
        return {"structured_output": task.spec.provider_options.gemini_schema_field}

    def answer_sql(self, raw: str) -> str:
        parts = f"CAST(json_extract({raw}.body, '$.candidates[0].content.parts[*]') AS JSON[])"
        finish = f"({raw}.body ->> '$.candidates[0].finishReason')"
        blocked = ", ".join(f"'{b}'" for b in BLOCKED_FINISH)
        return (
            "nullif(array_to_string(list_transform("
            f"list_filter({parts}, lambda p: (p ->> '$.thought') IS DISTINCT FROM 'true'), "
            f"lambda p: p ->> '$.text'), ''), '') AS content, NULL::JSON AS vector, "
            f"CASE WHEN {finish} = 'STOP' THEN 'stop' WHEN {finish} = 'MAX_TOKENS' THEN 'length' "
            f"WHEN {finish} IN ({blocked}) OR ({raw}.body ->> '$.promptFeedback.blockReason') IS NOT NULL "
            "THEN 'content_filter' "
            f"ELSE lower({finish}) END AS finish_reason, "
            f"{raw}.body ->> '$.promptFeedback.blockReason' AS refusal, "
            f"TRY_CAST({raw}.body ->> '$.usageMetadata.promptTokenCount' AS BIGINT) AS input_tokens, "
            f"{_output_tokens_sql(raw)} AS output_tokens, "
            f"{_usage_count_sql(raw, 'thoughtsTokenCount')} AS thinking_tokens, "
            f"{_usage_count_sql(raw, 'cachedContentTokenCount')} AS cached_input_tokens, " + self._errors(raw)
        )


class EmbedContent(GeminiFormat):
    def request_line_sql(self, task, request_id_col: str, prompt_col: str) -> str:
        spec = task.spec
        request = [f"'content', json_object('parts', json_array(json_object('text', {prompt_col})))"]
        if spec.output.dimensions:
            request.append(f"'outputDimensionality', {int(spec.output.dimensions)}")
        return f"CAST(json_object('key', {request_id_col}, 'request', json_object({', '.join(request)})) AS VARCHAR)"

    def request_options(self, task) -> dict[str, str | int]:
        dims = task.spec.output.dimensions
        return {"output_dimensionality": int(dims)} if dims else {}

    def answer_sql(self, raw: str) -> str:
        return (
            f"NULL::VARCHAR AS content, json_extract({raw}.body, '$.embedding.values') AS vector, "
            f"NULL::VARCHAR AS finish_reason, NULL::VARCHAR AS refusal, "
            f"TRY_CAST({raw}.body ->> '$.tokenCount' AS BIGINT) AS input_tokens, 0::BIGINT AS output_tokens, "
            f"NULL::BIGINT AS thinking_tokens, NULL::BIGINT AS cached_input_tokens, " + self._errors(raw)
        )
