"""DashScope (Alibaba Bailian) batch formats: OpenAI's line shapes, with DashScope's own error codes.

Its OpenAI-compatible mode writes request and result lines exactly like OpenAI's Batch API, so the
classes are OpenAI's; what differs is the codes a failed line carries. Those are the codes of Model
Studio's error-code list (https://help.aliyun.com/en/model-studio/error-code, also
https://www.alibabacloud.com/help/en/model-studio/error-code), and a result line carries them as
`error: {code, message}` with no response, so no HTTP status decides the class: the code does.

| codes (the list's)                                              | class                  |
|-----------------------------------------------------------------|------------------------|
| Arrearage (overdue payment), AccessDenied[.*], InvalidApiKey    | account_error          |
| DataInspectionFailed, data_inspection_failed (moderation)       | content_policy_error   |
| Throttling, Throttling.* (RateQuota, AllocationQuota, ...)      | rate_or_capacity_error |
| InternalError[.*], SystemError                                  | internal_error         |
| InvalidParameter[.*], BadRequest.*, InvalidURL, ModelNotFound,  | validation_error       |
| the other 400s of the list, and the batch checks' own codes     |                        |

An account error pauses the provider account (`ledger.account_pause`, see `pipeline.govern.send_gate`)
until an operator resumes it. OpenAI's own codes keep OpenAI's classes.

Error-file lines come in more than one shape: OpenAI's (`error: {code, message}` or the error in
`response.body.error`), and DashScope's own field names `error_code` / `error_msg` (on the line, in
its `error` object, or in `response.body`, where a DashScope-native body also carries `code` /
`message`). The codes are settled by the list above; [GUESS] which of these shapes the live service
writes where: its batch page shows `error: {code, message}`, its own CSV script reads
`error.error_code` / `error.error_message`, its native APIs answer `{code, message, request_id}`;
not confirmed on a live error file. The envelope folds every shape into one `error: {code,
message}`, keeping the message.
"""

from __future__ import annotations

from batch_assets.providers.openai import formats as openai_formats
from batch_assets.providers.wire import failure_class_sql
from batch_assets.sqltext import sql_literal

ACCOUNT_CODES = ("Arrearage", "AccessDenied", "access_denied", "InvalidApiKey", "invalid_api_key")
CONTENT_POLICY_CODES = (*openai_formats.CONTENT_POLICY_CODES, "DataInspectionFailed", "data_inspection_failed")
CAPACITY_CODES = (
    *openai_formats.CAPACITY_CODES,
    "Throttling",
    "Throttling.RateQuota",
    "Throttling.AllocationQuota",
    "Throttling.AllocationQuota.FreeTierOnly",
)
INTERNAL_CODES = ("InternalError", "InternalError.Algo", "InternalError.Timeout", "SystemError")
VALIDATION_CODES = (
    "InvalidParameter",
    "invalid_parameter_error",
    "InvalidURL",
    "UnsupportedOperation",
    "InvalidSchema",
    "InvalidSchemaFormat",
    "FlowNotPublished",
    "ModelNotFound",
    "model_not_found",
    "NotFound",
    # The batch checks' own codes, per line (the error-code page's batch section).
    "mismatched_model",
    "duplicate_custom_id",
    "mismatched_test_url",
)
# Families the list names by prefix (e.g. Throttling.AllocationQuota, InvalidParameter.*,
# BadRequest.EmptyInput, AccessDenied.Unpurchased, InternalError.Algo), by class.
PREFIXES = (
    ("AccessDenied.", "account_error"),
    ("DataInspectionFailed.", "content_policy_error"),
    ("Throttling.", "rate_or_capacity_error"),
    ("InternalError.", "internal_error"),
    ("InvalidParameter.", "validation_error"),
    ("BadRequest.", "validation_error"),
)
# What the operator does before `batch-assets resume dashscope`, per account code.
ACCOUNT_FIXES = {
    "Arrearage": "settle the Alibaba Cloud account's overdue payment (Expenses and Costs in the console)",
    "AccessDenied": "give the API key's account access to the model and the Batch API (activate Model Studio)",
    "InvalidApiKey": "set a valid DashScope API key for the region of the base URL (DASHSCOPE_API_KEY)",
}

DASHSCOPE_RESULT_COLUMNS = {**openai_formats.OPENAI_RESULT_COLUMNS, "error_code": "VARCHAR", "error_msg": "VARCHAR"}


def _in(codes) -> str:
    return ", ".join(map(sql_literal, codes))


def dashscope_failure_class_sql() -> str:
    """SQL CASE: the class of a failed DashScope line from its error_code (then status_code)."""
    prefixes = " ".join(f"WHEN starts_with(error_code, {sql_literal(p)}) THEN '{c}'" for p, c in PREFIXES)
    generic = failure_class_sql(CAPACITY_CODES, CONTENT_POLICY_CODES)
    return f"""
    CASE
        WHEN error_code IN ({_in(ACCOUNT_CODES)}) THEN 'account_error'
        WHEN error_code IN ({_in(CONTENT_POLICY_CODES)}) THEN 'content_policy_error'
        WHEN error_code IN ({_in(CAPACITY_CODES)}) THEN 'rate_or_capacity_error'
        WHEN error_code IN ({_in(INTERNAL_CODES)}) THEN 'internal_error'
        WHEN error_code IN ({_in(VALIDATION_CODES)}) THEN 'validation_error'
        {prefixes}
        ELSE {generic}
    END
"""


class _DashScopeErrors:
    """Reads DashScope's `error_code` / `error_msg` besides OpenAI's error shapes, and classes its codes."""

    result_columns = DASHSCOPE_RESULT_COLUMNS
    capacity_codes = CAPACITY_CODES
    content_policy_codes = CONTENT_POLICY_CODES
    internal_codes = INTERNAL_CODES
    account_codes = ACCOUNT_CODES

    @property
    def failure_class_sql(self) -> str:
        return dashscope_failure_class_sql()

    def account_fix(self, code: str | None) -> str:
        """What to do about an account-level error before resuming the account."""
        base = (code or "").split(".")[0]
        return ACCOUNT_FIXES.get(base) or "fix the DashScope account (key, access or billing) in the console"

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
