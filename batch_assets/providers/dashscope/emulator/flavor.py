"""DashScope's compatible mode as a dialect of the OpenAI Batch wire format.

What differs from OpenAI's, per Alibaba Cloud Model Studio's batch docs and recorded responses:
the `/compatible-mode/v1` prefix; ids (`file-batch-<hex>` and friends, `batch_<uuid>`, one UUID
as both line id and request id); completion windows of 24 h to 14 days in hours or days (`36h`,
`7d`); its own test endpoint `/v1/chat/ds-test`; embeddings of 1024 dimensions by default; no
expiry on file objects; no `model` or `usage` on batch objects and no `expires_at` until the
batch is validated; its own chat completion shape; and its own error codes on result lines.

A failed request's line is `{"id", "custom_id", "response": null, "error": {"code", "message"}}`
with a code of Model Studio's error-code list (https://help.aliyun.com/en/model-studio/error-code,
mirrored at https://www.alibabacloud.com/help/en/model-studio/error-code): the emulator's 429 / 500
/ 400 draws answer Throttling.RateQuota / InternalError / InvalidParameter, and the
`dashscope_item_error_codes` knob picks any codes of that list instead (an account in arrears,
say, answers Arrearage on every line).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from batch_assets.emulator import faults, ids
from batch_assets.emulator.answers import Answer
from batch_assets.providers.openai.emulator.flavor import Flavor

DS_TEST = "/v1/chat/ds-test"
DS_TEST_ANSWER = "This is a test result."
_WINDOW = re.compile(r"(\d+)([hd])")
_MIN_WINDOW_H, _MAX_WINDOW_H = 24, 336

# Model Studio's messages for its codes, as its error-code page lists them (the live text may vary
# per scenario). The last group's texts are not on that page: the emulator's own wording.
ERROR_MESSAGES = {
    "InvalidParameter": "Required parameter(s) missing or invalid, please check the request parameters.",
    "BadRequest.EmptyInput": "Required input parameter missing from request.",
    "InvalidURL": "Invalid URL provided in your request.",
    "Throttling": "Requests throttling triggered.",
    "Throttling.RateQuota": "Requests rate limit exceeded, please try again later.",
    "Throttling.AllocationQuota": "Allocated quota exceeded, please increase your quota limit.",
    "InternalError": "An internal error has occured, please try again later or contact service support.",
    "DataInspectionFailed": "Input or output data may contain inappropriate content.",
    "Arrearage": "Access denied, please make sure your account is in good standing.",
    "InvalidApiKey": "Invalid API-key provided.",
    "SystemError": "A system error occurred, please try again later.",
    "AccessDenied": "Access denied: the account or API key has no access to this model or API.",
}
# What the emulator's generic draws (429 / 500 / 400, see `faults`) are on DashScope.
_DRAWN_CODES = {
    faults.RATE_LIMITED: "Throttling.RateQuota",
    faults.SERVER_ERROR: "InternalError",
    faults.INJECTED_BAD_REQUEST: "InvalidParameter",
    faults.INVALID_REQUEST: "InvalidParameter",
}


@dataclass(frozen=True)
class DashScopeFlavor(Flavor):
    files_expire: ClassVar[bool] = False
    batches_report_model_and_usage: ClassVar[bool] = False
    expiry_before_validation: ClassVar[bool] = False

    def file_id(self, role: str) -> str:
        kind = {"input": "batch", "output": "batch_output", "error": "batch_error"}[role]
        return f"file-{kind}-{secrets.token_hex(16)}"

    def batch_id(self, created: float) -> str:
        return f"batch_{ids.random_uuid()}"

    def line_ids(self, batch_id: str, index: int) -> tuple[str, str]:
        # One UUID for both, as in DashScope's result samples.
        same = ids.derived_uuid("line", batch_id, str(index))
        return same, same

    def window_seconds(self, completion_window: str) -> int | None:
        match = _WINDOW.fullmatch(completion_window)
        if not match:
            return None
        hours = int(match.group(1)) * (24 if match.group(2) == "d" else 1)
        return hours * 3600 if _MIN_WINDOW_H <= hours <= _MAX_WINDOW_H else None

    def item_error(
        self, outcome: str, message: str, ordinal: int, settings: Mapping[str, Any]
    ) -> dict[str, str] | None:
        # A request whose body itself is wrong keeps its own reason; drawn faults take the knob's codes in turn.
        codes = settings.get("dashscope_item_error_codes") or []
        if codes and outcome != faults.INVALID_REQUEST:
            code = codes[ordinal % len(codes)]
            return {"code": code, "message": ERROR_MESSAGES.get(code, f"{code} (emulated)")}
        code = _DRAWN_CODES.get(outcome, "InternalError")
        own = message if outcome == faults.INVALID_REQUEST and message else ERROR_MESSAGES[code]
        return {"code": code, "message": own}

    def canned_answers(self, endpoint: str) -> list[Answer] | None:
        return [Answer(DS_TEST_ANSWER, "stop", 6)] if endpoint == DS_TEST else None

    def chat_body(
        self, endpoint: str, answers: list[Answer], prompt_tokens: int, model: str, seed_id: str, created: int
    ) -> dict[str, Any]:
        # DashScope's key order, no system_fingerprint/service_tier; its test model omits the role.
        def message(answer: Answer) -> dict[str, Any]:
            if endpoint == DS_TEST:
                return {"content": answer.content}
            return {"role": "assistant", "content": answer.content}

        completion = sum(a.completion_tokens for a in answers)
        return {
            "created": created,
            "usage": {
                "completion_tokens": completion,
                "prompt_tokens": prompt_tokens,
                "completion_tokens_details": {"text_tokens": completion},
                "prompt_tokens_details": {"text_tokens": prompt_tokens},
                "total_tokens": prompt_tokens + completion,
            },
            "model": model,
            "id": f"chatcmpl-{seed_id}",
            "choices": [
                {"finish_reason": a.finish_reason, "index": i, "message": message(a)} for i, a in enumerate(answers)
            ],
            "object": "chat.completion",
        }


DASHSCOPE = DashScopeFlavor(
    name="dashscope",
    prefix="/compatible-mode/v1",
    endpoints=("/v1/chat/completions", "/v1/embeddings", DS_TEST),
    default_embedding_dimensions=1024,
    max_embedding_dimensions=2048,
)
