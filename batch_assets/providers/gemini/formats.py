"""Gemini Batch formats: request `{key, request}`, result `{key, response | error}`.

generateContent answers are `candidates[0].content.parts[].text`; batch embeddings answer
`embedding.values`. Inline jobs' responses are written by the adapter in this same line shape.
"""

from __future__ import annotations

from batch_assets.providers.wire import WireFormat, json_const, system_and_user

BLOCKED_FINISH = ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY")
# google.rpc status names (error.status) that mean "capacity or quota", and content blocks.
CAPACITY_CODES = ("RESOURCE_EXHAUSTED",)
CONTENT_POLICY_CODES = ("SAFETY", "PROHIBITED_CONTENT")


class GeminiFormat(WireFormat):
    result_columns = {"key": "VARCHAR", "response": "JSON", "error": "JSON"}
    capacity_codes = CAPACITY_CODES
    content_policy_codes = CONTENT_POLICY_CODES

    def envelope_sql(self, line: str) -> str:
        return (
            f"{line}.key AS request_id, {line}.response ->> '$.responseId' AS line_id, "
            f"CASE WHEN {line}.response IS NOT NULL AND json_type({line}.response) = 'OBJECT' THEN 200 "
            f"ELSE TRY_CAST({line}.error ->> '$.code' AS INTEGER) END AS status_code, "
            f"{line}.response ->> '$.responseId' AS provider_request_id, "
            f"{line}.response AS body, "
            f"CASE WHEN json_type({line}.error) = 'OBJECT' THEN {line}.error END AS error"
        )

    @staticmethod
    def _errors(raw: str) -> str:
        return (f"coalesce({raw}.error ->> '$.status', {raw}.error ->> '$.code') AS error_code, "
                f"{raw}.error ->> '$.message' AS error_message")


class GenerateContent(GeminiFormat):
    def request_line_sql(self, task, request_id_col: str, prompt_col: str) -> str:
        spec = task.spec
        system, user = system_and_user(task, prompt_col)
        config = [f"'temperature', {float(spec.params.temperature)!r}", f"'maxOutputTokens', {int(spec.params.max_tokens)}"]
        if spec.output.kind == "json":
            config += ["'responseMimeType', 'application/json'", "'responseJsonSchema', " + json_const(task.output_schema)]
        request = [f"'contents', json_array(json_object('role', 'user', 'parts', json_array(json_object('text', {user}))))",
                   f"'generationConfig', json_object({', '.join(config)})"]
        if system:
            request.append(f"'systemInstruction', json_object('parts', json_array(json_object('text', {system})))")
        return f"CAST(json_object('key', {request_id_col}, 'request', json_object({', '.join(request)})) AS VARCHAR)"

    def answer_sql(self, raw: str) -> str:
        parts = f"CAST(json_extract({raw}.body, '$.candidates[0].content.parts[*]') AS JSON[])"
        finish = f"({raw}.body ->> '$.candidates[0].finishReason')"
        blocked = ", ".join(f"'{b}'" for b in BLOCKED_FINISH)
        return (
            f"nullif(array_to_string(list_transform(list_filter({parts}, lambda p: (p ->> '$.thought') IS DISTINCT FROM 'true'), "
            f"lambda p: p ->> '$.text'), ''), '') AS content, NULL::JSON AS vector, "
            f"CASE WHEN {finish} = 'STOP' THEN 'stop' WHEN {finish} = 'MAX_TOKENS' THEN 'length' "
            f"WHEN {finish} IN ({blocked}) OR ({raw}.body ->> '$.promptFeedback.blockReason') IS NOT NULL THEN 'content_filter' "
            f"ELSE lower({finish}) END AS finish_reason, "
            f"{raw}.body ->> '$.promptFeedback.blockReason' AS refusal, "
            f"TRY_CAST({raw}.body ->> '$.usageMetadata.promptTokenCount' AS BIGINT) AS input_tokens, "
            f"TRY_CAST({raw}.body ->> '$.usageMetadata.candidatesTokenCount' AS BIGINT) AS output_tokens, "
            + self._errors(raw)
        )


class EmbedContent(GeminiFormat):
    def request_line_sql(self, task, request_id_col: str, prompt_col: str) -> str:
        spec = task.spec
        request = [f"'content', json_object('parts', json_array(json_object('text', {prompt_col})))"]
        if spec.output.dimensions:
            request.append(f"'output_dimensionality', {int(spec.output.dimensions)}")
        return f"CAST(json_object('key', {request_id_col}, 'request', json_object({', '.join(request)})) AS VARCHAR)"

    def answer_sql(self, raw: str) -> str:
        return (
            f"NULL::VARCHAR AS content, json_extract({raw}.body, '$.embedding.values') AS vector, "
            f"NULL::VARCHAR AS finish_reason, NULL::VARCHAR AS refusal, "
            f"TRY_CAST({raw}.body ->> '$.tokenCount' AS BIGINT) AS input_tokens, 0::BIGINT AS output_tokens, "
            + self._errors(raw)
        )
