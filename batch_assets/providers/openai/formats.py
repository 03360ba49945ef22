"""OpenAI Batch line formats: chat completions, responses, embeddings.

Request line `{custom_id, method, url, body}`; result line `{id, custom_id, response: {status_code,
request_id, body} | null, error | null}`. DashScope's OpenAI-compatible batch uses the same shapes
(its formats subclass these with its own error codes).
"""

from __future__ import annotations

import fnmatch

from batch_assets.providers.wire import WireFormat, json_const, system_and_user
from batch_assets.sqltext import sql_literal

# `response` is read straight into a struct (one JSON parse per line, at scan time); its body stays JSON.
OPENAI_RESULT_COLUMNS = {
    "id": "VARCHAR",
    "custom_id": "VARCHAR",
    "response": "STRUCT(status_code INTEGER, request_id VARCHAR, body JSON)",
    "error": "JSON",
}


# Error codes OpenAI reports (per line, or for a whole batch) that mean "capacity or quota".
CAPACITY_CODES = ("rate_limit_exceeded", "insufficient_quota", "token_limit_exceeded")
# `invalid_prompt` is a 400 with type invalid_request_error, yet a policy verdict, not a malformed
# request: "Invalid prompt: your prompt was flagged as potentially violating our usage policy"
# (openai/codex#7250). Held for compliance review like any refusal, never resent unchanged.
CONTENT_POLICY_CODES = ("content_policy_violation", "content_filter", "invalid_prompt")


class OpenAIFormat(WireFormat):
    """Shared envelope: {id, custom_id, response: {status_code, request_id, body} | null, error | null}."""

    result_columns = OPENAI_RESULT_COLUMNS
    capacity_codes = CAPACITY_CODES
    content_policy_codes = CONTENT_POLICY_CODES

    def _line(self, task, request_id_col: str, body: str) -> str:
        return (
            f"CAST(json_object('custom_id', {request_id_col}, 'method', 'POST', "
            f"'url', {sql_literal(task.spec.endpoint)}, 'body', {body}) AS VARCHAR)"
        )

    def envelope_sql(self, line: str) -> str:
        return (
            f"{line}.custom_id AS request_id, {line}.id AS line_id, "
            f"{line}.response.status_code AS status_code, "
            f"{line}.response.request_id AS provider_request_id, "
            f"{line}.response.body AS body, "
            f"{self._error_sql(line)} AS error"
        )

    def _error_sql(self, line: str) -> str:
        """The line's error (JSON), as the envelope's `error` column."""
        return f"CASE WHEN json_type({line}.error) IN ('OBJECT', 'VARCHAR') THEN {line}.error END"

    @staticmethod
    def _errors(raw: str) -> str:
        return (
            f"coalesce({raw}.error ->> '$.code', {raw}.error ->> '$.type', {raw}.body ->> '$.error.code', "
            f"{raw}.body ->> '$.error.type') AS error_code, "
            f"coalesce({raw}.error ->> '$.message', {raw}.body ->> '$.error.message') AS error_message"
        )


def _messages(task, prompt_col: str) -> str:
    """[system?, user] chat messages as a SQL JSON array."""
    system, user = system_and_user(task, prompt_col)
    messages = ([f"json_object('role', 'system', 'content', {system})"] if system else []) + [
        f"json_object('role', 'user', 'content', {user})"
    ]
    return f"json_array({', '.join(messages)})"


def _usage(raw: str, input_key: str, output_key: str) -> str:
    """Tokens of the responses API: reasoning tokens are part of output_tokens, cached of input_tokens."""
    return (
        f"TRY_CAST({raw}.body ->> '$.usage.{input_key}' AS BIGINT) AS input_tokens, "
        f"TRY_CAST({raw}.body ->> '$.usage.{output_key}' AS BIGINT) AS output_tokens, "
        f"TRY_CAST({raw}.body ->> '$.usage.{output_key}_details.reasoning_tokens' AS BIGINT) AS thinking_tokens, "
        f"TRY_CAST({raw}.body ->> '$.usage.{input_key}_details.cached_tokens' AS BIGINT) AS cached_input_tokens, "
    )


def _finish(expr: str) -> str:
    return (
        f"CASE {expr} WHEN 'stop' THEN 'stop' WHEN 'length' THEN 'length' "
        f"WHEN 'content_filter' THEN 'content_filter' ELSE {expr} END"
    )


# Reasoning models (o-series, gpt-5) reject chat's `max_tokens` ("Unsupported parameter: 'max_tokens' is
# not supported with this model. Use 'max_completion_tokens' instead.", code unsupported_parameter) and
# any `temperature` but the default 1 ("Unsupported value: 'temperature' does not support 0 with this
# model. Only the default (1) value is supported.", code unsupported_value) — griptape-ai/ComfyUI-Griptape#312,
# teilomillet/gollm#33, OpenHands/OpenHands#4131, gabrii/Cursor-Azure-GPT-5#33. Every line of such a
# batch would fail, so these models are rendered without a temperature.
REASONING_MODELS = ("o1*", "o3*", "o4*", "gpt-5*")


def is_reasoning_model(model: str) -> bool:
    return any(fnmatch.fnmatchcase(model, pattern) for pattern in REASONING_MODELS)


def _sampling_fields(task, max_tokens_field: str) -> list[str]:
    """`temperature` (left out for reasoning models, which accept only the default) and the token cap."""
    spec = task.spec
    fields = [] if is_reasoning_model(spec.model) else [f"'temperature', {float(spec.params.temperature)!r}"]
    return [*fields, f"'{max_tokens_field}', {int(spec.params.max_tokens)}"]


def _sampling_options(task) -> dict[str, str]:
    return {"temperature": "omitted (reasoning model)"} if is_reasoning_model(task.spec.model) else {}


class ChatCompletions(OpenAIFormat):
    # OpenAI deprecated `max_tokens` for `max_completion_tokens`, which every chat model accepts and
    # reasoning models require (see REASONING_MODELS). DashScope's compatible mode documents `max_tokens`.
    max_tokens_field = "max_completion_tokens"

    def request_line_sql(self, task, request_id_col: str, prompt_col: str) -> str:
        spec = task.spec
        fields = [
            f"'model', {sql_literal(spec.model)}",
            f"'messages', {_messages(task, prompt_col)}",
            *_sampling_fields(task, self.max_tokens_field),
        ]
        if spec.output.kind == "json":
            fields.append(
                "'response_format', "
                + json_const(
                    {
                        "type": "json_schema",
                        "json_schema": {"name": spec.output.name, "strict": True, "schema": task.output_schema},
                    }
                )
            )
        return self._line(task, request_id_col, f"json_object({', '.join(fields)})")

    def request_options(self, task) -> dict[str, str | int]:
        structured = {"response_format": "json_schema"} if task.spec.output.kind == "json" else {}
        return {**structured, **_sampling_options(task)}

    _PATHS = (
        "$.choices[0].message.content",
        "$.choices[0].finish_reason",
        "$.choices[0].message.refusal",
        "$.usage.prompt_tokens",
        "$.usage.completion_tokens",
        "$.error.code",
        "$.error.type",
        "$.error.message",
        # Reasoning tokens (o-series, gpt-5) are part of completion_tokens; cached ones of prompt_tokens.
        "$.usage.completion_tokens_details.reasoning_tokens",
        "$.usage.prompt_tokens_details.cached_tokens",
    )

    def answer_sql(self, raw: str) -> str:
        # One multi-path extraction; DuckDB's common-subexpression elimination parses each body once.
        v = f"json_extract_string({raw}.body, [{', '.join(sql_literal(p) for p in self._PATHS)}])"
        finish = f"({v}[2])"
        return (
            f"{v}[1] AS content, NULL::JSON AS vector, {_finish(finish)} AS finish_reason, {v}[3] AS refusal, "
            f"TRY_CAST({v}[4] AS BIGINT) AS input_tokens, TRY_CAST({v}[5] AS BIGINT) AS output_tokens, "
            f"TRY_CAST({v}[9] AS BIGINT) AS thinking_tokens, TRY_CAST({v}[10] AS BIGINT) AS cached_input_tokens, "
            f"coalesce({raw}.error ->> '$.code', {raw}.error ->> '$.type', {v}[6], {v}[7]) AS error_code, "
            f"coalesce({raw}.error ->> '$.message', {v}[8]) AS error_message"
        )


class Responses(OpenAIFormat):
    """/v1/responses: `input` messages, `text.format` for structured output, `output[].content[]`."""

    def request_line_sql(self, task, request_id_col: str, prompt_col: str) -> str:
        spec = task.spec
        fields = [
            f"'model', {sql_literal(spec.model)}",
            f"'input', {_messages(task, prompt_col)}",
            *_sampling_fields(task, "max_output_tokens"),
        ]
        if spec.output.kind == "json":
            fields.append(
                "'text', "
                + json_const(
                    {
                        "format": {
                            "type": "json_schema",
                            "name": spec.output.name,
                            "strict": True,
                            "schema": task.output_schema,
                        }
                    }
                )
            )
        return self._line(task, request_id_col, f"json_object({', '.join(fields)})")

    def request_options(self, task) -> dict[str, str | int]:
        structured = {"text.format": "json_schema"} if task.spec.output.kind == "json" else {}
        return {**structured, **_sampling_options(task)}

    def answer_sql(self, raw: str) -> str:
        # The text is the output_text part of the (last) message item of `output`.
        text = (
            f"list_filter(CAST(json_extract({raw}.body, '$.output[*].content[*]') AS JSON[]), "
            f"lambda c: c ->> '$.type' = 'output_text')"
        )
        incomplete = f"({raw}.body ->> '$.incomplete_details.reason')"
        refusal = (
            f"list_filter(CAST(json_extract({raw}.body, '$.output[*].content[*]') AS JSON[]), "
            f"lambda c: c ->> '$.type' = 'refusal')"
        )
        return (
            f"{text}[-1] ->> '$.text' AS content, NULL::JSON AS vector, "
            f"CASE WHEN {incomplete} = 'max_output_tokens' THEN 'length' "
            f"WHEN {incomplete} = 'content_filter' THEN 'content_filter' "
            f"WHEN ({raw}.body ->> '$.status') = 'completed' THEN 'stop' "
            f"ELSE {raw}.body ->> '$.status' END AS finish_reason, "
            f"{refusal}[-1] ->> '$.refusal' AS refusal, "
            + _usage(raw, "input_tokens", "output_tokens")
            + self._errors(raw)
        )


class Embeddings(OpenAIFormat):
    def request_line_sql(self, task, request_id_col: str, prompt_col: str) -> str:
        spec = task.spec
        fields = [f"'model', {sql_literal(spec.model)}", f"'input', {prompt_col}", "'encoding_format', 'float'"]
        if spec.output.dimensions:
            fields.append(f"'dimensions', {int(spec.output.dimensions)}")
        return self._line(task, request_id_col, f"json_object({', '.join(fields)})")

    def request_options(self, task) -> dict[str, str | int]:
        dims = task.spec.output.dimensions
        return {"encoding_format": "float", **({"dimensions": int(dims)} if dims else {})}

    def answer_sql(self, raw: str) -> str:
        return (
            f"NULL::VARCHAR AS content, json_extract({raw}.body, '$.data[0].embedding') AS vector, "
            f"NULL::VARCHAR AS finish_reason, NULL::VARCHAR AS refusal, "
            f"TRY_CAST({raw}.body ->> '$.usage.prompt_tokens' AS BIGINT) AS input_tokens, 0::BIGINT AS output_tokens, "
            f"NULL::BIGINT AS thinking_tokens, NULL::BIGINT AS cached_input_tokens, " + self._errors(raw)
        )
