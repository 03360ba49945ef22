"""DashScope (Alibaba Bailian) batch formats: OpenAI's line shapes, with DashScope's own error codes.

Its OpenAI-compatible mode writes request and result lines exactly like OpenAI's Batch API, so the
classes are OpenAI's; what differs is the codes it reports for capacity (Throttling, Arrearage) and
for its content inspection (data_inspection_failed / DataInspectionFailed), besides OpenAI-style ones.

Error-file lines come in more than one shape: OpenAI's (`error: {code, message}` or the error in
`response.body.error`), and DashScope's own field names `error_code` / `error_msg` (on the line, in
its `error` object, or in `response.body`, where a DashScope-native body also carries `code` /
`message`). [GUESS] which of these the live service writes where: DashScope's own APIs answer
`{code, message, request_id}` and its batch console's error files show `error_code`/`error_msg`
(help.aliyun.com model-studio batch pages); not confirmed on a live error file. The envelope folds
every shape into one `error: {code, message}`, keeping the message.
"""

from __future__ import annotations

from batch_assets.providers.openai import formats as openai_formats

CAPACITY_CODES = (*openai_formats.CAPACITY_CODES, "Throttling", "Arrearage")
CONTENT_POLICY_CODES = (*openai_formats.CONTENT_POLICY_CODES, "data_inspection_failed", "DataInspectionFailed")

DASHSCOPE_RESULT_COLUMNS = {**openai_formats.OPENAI_RESULT_COLUMNS, "error_code": "VARCHAR", "error_msg": "VARCHAR"}


class _DashScopeErrors:
    """Reads DashScope's `error_code` / `error_msg` besides OpenAI's error shapes."""

    result_columns = DASHSCOPE_RESULT_COLUMNS
    capacity_codes = CAPACITY_CODES
    content_policy_codes = CONTENT_POLICY_CODES

    def _error_sql(self, line: str) -> str:
        openai_error = super()._error_sql(line)  # type: ignore[misc]
        body = f"{line}.response.body"
        failed_body = f"(CASE WHEN coalesce({line}.response.status_code NOT BETWEEN 200 AND 299, true) THEN {body} END)"
        code = (
            f"coalesce({line}.error_code, {line}.error ->> '$.error_code', {body} ->> '$.error.code', "
            f"{body} ->> '$.error.type', {body} ->> '$.error_code', {failed_body} ->> '$.code')"
        )
        message = (
            f"coalesce({line}.error_msg, {line}.error ->> '$.error_msg', {line}.error ->> '$.message', "
            f"{body} ->> '$.error.message', {body} ->> '$.error_msg', {failed_body} ->> '$.message')"
        )
        has_openai_code = f"coalesce({line}.error ->> '$.code', {line}.error ->> '$.type') IS NOT NULL"
        return (
            f"CASE WHEN {has_openai_code} THEN {openai_error} "
            f"WHEN {code} IS NOT NULL THEN json_object('code', {code}, 'message', {message}) "
            f"ELSE {openai_error} END"
        )


class ChatCompletions(_DashScopeErrors, openai_formats.ChatCompletions):
    max_tokens_field = "max_tokens"  # what Bailian's compatible mode documents


class Embeddings(_DashScopeErrors, openai_formats.Embeddings):
    pass
