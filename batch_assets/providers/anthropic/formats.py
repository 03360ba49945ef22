"""Anthropic Message Batches formats: request `{custom_id, params}`, result
`{custom_id, result: {type: succeeded | errored | canceled | expired, …}}`.

Shards are still written as JSONL (one request per line); the adapter sends them as the
`requests` array of one create call.
"""

from __future__ import annotations

from batch_assets.providers.wire import WireFormat, json_const, system_and_user
from batch_assets.sqltext import sql_literal

# Anthropic reports error *types*; the HTTP status each stands for (their API error docs).
ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

# Error types that mean "capacity or quota": retry later, smaller.
CAPACITY_CODES = ("rate_limit_error", "overloaded_error", "billing_error")
# Anthropic reports a content refusal as stop_reason `refusal` on a success, not as an error type.
CONTENT_POLICY_CODES: tuple[str, ...] = ()
# Stop reasons of an answer that ended before it was complete: read as finish_reason 'length' (the
# item is a parse_error, asked again). `max_tokens`; `model_context_window_exceeded` (the context
# window filled up, Claude 4.5+ models); `pause_turn` (a long-running server-tool turn was paused,
# its content is partial). Anthropic's "Handling stop reasons" docs.
CUT_OFF_STOP_REASONS = ("max_tokens", "model_context_window_exceeded", "pause_turn")


def _input_tokens_sql(raw: str) -> str:
    """Every prompt token: Anthropic's `input_tokens` counts only those after the last cache
    breakpoint; cache writes and reads are counted apart (`cache_creation_input_tokens`,
    `cache_read_input_tokens`). Summed so that, as for the other providers, cached tokens are part
    of input_tokens. NULL when the message reports no usage."""
    usage = [
        f"TRY_CAST({raw}.body ->> '$.usage.{k}' AS BIGINT)"
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    return f"CASE WHEN {usage[0]} IS NOT NULL THEN {usage[0]} + coalesce({usage[1]}, 0) + coalesce({usage[2]}, 0) END"


class Messages(WireFormat):
    result_columns = {"custom_id": "VARCHAR", "result": "JSON"}
    capacity_codes = CAPACITY_CODES
    content_policy_codes = CONTENT_POLICY_CODES

    def request_line_sql(self, task, request_id_col: str, prompt_col: str) -> str:
        spec = task.spec
        system, user = system_and_user(task, prompt_col)
        params = [
            f"'model', {sql_literal(spec.model)}",
            f"'max_tokens', {int(spec.params.max_tokens)}",
            f"'temperature', {float(spec.params.temperature)!r}",
            f"'messages', json_array(json_object('role', 'user', 'content', {user}))",
        ]
        if system:
            params.append(f"'system', {system}")
        if spec.output.kind == "json":
            params.append(
                "'output_config', " + json_const({"format": {"type": "json_schema", "schema": task.output_schema}})
            )
        return (
            f"CAST(json_object('custom_id', {request_id_col}, 'params', json_object({', '.join(params)})) AS VARCHAR)"
        )

    def request_options(self, task) -> dict[str, str | int]:
        return {"output_config.format": "json_schema"} if task.spec.output.kind == "json" else {}

    def envelope_sql(self, line: str) -> str:
        kind = f"({line}.result ->> '$.type')"
        err_type = f"({line}.result ->> '$.error.error.type')"
        statuses = " ".join(f"WHEN {sql_literal(t)} THEN {code}" for t, code in ERROR_TYPE_STATUS.items())
        return (
            f"{line}.custom_id AS request_id, {line}.result ->> '$.message.id' AS line_id, "
            f"CASE {kind} WHEN 'succeeded' THEN 200 "
            f"WHEN 'errored' THEN (CASE {err_type} {statuses} ELSE 500 END) END AS status_code, "
            f"coalesce({line}.result ->> '$.error.request_id', {line}.result ->> '$.message.id') "
            "AS provider_request_id, "
            f"json_extract({line}.result, '$.message') AS body, "
            f"CASE {kind} "
            f"WHEN 'errored' THEN json_object('code', {err_type}, "
            f"'message', {line}.result ->> '$.error.error.message') "
            "WHEN 'canceled' THEN json_object('code', 'batch_cancelled', "
            "'message', 'request canceled with its batch') "
            "WHEN 'expired' THEN json_object('code', 'batch_expired', "
            "'message', 'batch expired before this request ran') "
            "WHEN 'succeeded' THEN NULL "
            "ELSE json_object('code', 'unknown_result_type', "
            f"'message', 'result type ' || coalesce({kind}, 'missing')) END AS error"
        )

    def answer_sql(self, raw: str) -> str:
        blocks = f"CAST(json_extract({raw}.body, '$.content[*]') AS JSON[])"
        text_blocks = f"list_filter({blocks}, lambda b: b ->> '$.type' = 'text')"
        text = f"array_to_string(list_transform({text_blocks}, lambda b: b ->> '$.text'), '')"
        stop = f"({raw}.body ->> '$.stop_reason')"
        return (
            f"{text} AS content, NULL::JSON AS vector, "
            f"CASE WHEN {stop} IN ('end_turn', 'stop_sequence') THEN 'stop' "
            f"WHEN {stop} = 'refusal' THEN 'content_filter' "
            f"WHEN {stop} IN ({', '.join(map(sql_literal, CUT_OFF_STOP_REASONS))}) THEN 'length' "
            f"ELSE {stop} END AS finish_reason, "
            # A structured refusal (Claude 4.5+) names its policy category in stop_details, with an
            # explanation or none and no content (Oaklight/llm-rosetta#432): the category is kept either way.
            f"CASE WHEN {stop} = 'refusal' "
            f"THEN coalesce({raw}.body ->> '$.stop_details.explanation', nullif({text}, ''), 'refused') "
            f"|| coalesce(' (category: ' || ({raw}.body ->> '$.stop_details.category') || ')', '') END AS refusal, "
            f"{_input_tokens_sql(raw)} AS input_tokens, "
            f"TRY_CAST({raw}.body ->> '$.usage.output_tokens' AS BIGINT) AS output_tokens, "
            # Extended thinking is billed as output and not counted apart in usage.
            f"NULL::BIGINT AS thinking_tokens, "
            f"TRY_CAST({raw}.body ->> '$.usage.cache_read_input_tokens' AS BIGINT) AS cached_input_tokens, "
            f"{raw}.error ->> '$.code' AS error_code, {raw}.error ->> '$.message' AS error_message"
        )
