"""The emulator's knobs: defaults, validation, loading, and the run-time holder."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SETTINGS_FILE = "settings.json"
FORCED_STATUSES = ("failed", "expired", "stuck")


def _knob(default: Any, help_text: str) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: json.loads(json.dumps(default)), metadata={"help": help_text})
    return field(default=default, metadata={"help": help_text})


AFTER_PROCESSING_MODES = ("lose", "error")
# The policy categories of an Anthropic refusal (the SDK's `types/refusal_stop_details.py`).
ANTHROPIC_REFUSAL_CATEGORIES = ("cyber", "bio", "frontier_llm", "reasoning_extraction", "general_harms")


@dataclass(frozen=True)
class EmulatorSettings:
    """Every duration is in simulated seconds; `speed` simulated seconds pass per real second."""

    speed: float = _knob(1.0, "simulated seconds that pass per real second")
    queue_delay_s: float = _knob(2.0, "validating -> in_progress")
    seconds_per_request: float = _knob(0.005, "in_progress: one request finishes every this often")
    finalize_delay_s: float = _knob(1.0, "finalizing -> completed")
    cancel_delay_s: float = _knob(1.0, "cancelling -> cancelled")
    completion_window_s: float | None = _knob(None, "expiry window; unset: the batch's own completion_window")
    shuffle_output: bool = _knob(True, "write output lines in a deterministic non-input order")
    item_error_rate: float = _knob(0.0, "fraction of requests answered with an HTTP 429/500/400 error line")
    item_faults_by_occurrence: bool = _knob(
        False,
        "draw each request's item fault from (provider, custom_id/key, how many earlier batches of that provider "
        "held that id) instead of (input file hash, id): a resubmitted request gets a fresh, deterministic draw",
    )
    content_filter_rate: float = _knob(0.0, "fraction answered 200 with finish_reason content_filter")
    truncate_rate: float = _knob(0.0, "fraction answered 200 with finish_reason length and cut-off content")
    duplicate_output_lines: float = _knob(0.0, "fraction of output-file lines written a second time")
    missing_output_lines: float = _knob(
        0.0,
        "OpenAI/DashScope: fraction of the requests of a completed batch that get no line in either results "
        "file (counted as completed, as a real batch that lost a line reports it)",
    )
    max_requests_per_batch: int = _knob(50_000, "more lines fail the batch with too_many_tasks")
    enqueued_token_limit: int | dict[str, int] | None = _knob(
        None,
        "enqueued tokens per model over active batches (one int for every model, or a JSON object model -> "
        "tokens; unlisted models unlimited); a batch's tokens are its input tokens plus each request's "
        "max_tokens; a new batch over the limit fails token_limit_exceeded (Gemini: RESOURCE_EXHAUSTED)",
    )
    fail_next_requests: int = _knob(0, "the next N API calls answer fail_status (one consumed per call)")
    fail_status: int = _knob(429, "HTTP status for fail_next_requests")
    after_processing_faults: list[dict[str, Any]] = _knob(
        [],
        "JSON list of rules {method, path (regex searched in the URL path), count, mode: lose|error, status}: "
        "a matching call is fully processed (e.g. the batch is created), then mode lose drops the connection "
        "without a complete response and mode error answers `status` (default 503); each match uses one count",
    )
    force_batch_status: str | None = _knob(None, "one-shot for the next created batch: failed, expired or stuck")
    log_requests: bool = _knob(True, "log method, path and status of each request")
    background_min_bytes: int = _knob(
        1 << 20,
        "a batch whose input has at least this many bytes is read and its results written by the background "
        "worker, while API calls answer at once; a smaller one within its create (and cancel) call, which "
        "takes milliseconds (0: every batch in the background)",
    )
    # --- OpenAI ---
    openai_invalid_prompt_rate: float = _knob(
        0.0,
        "OpenAI: fraction of requests answered 400 invalid_prompt (the prompt flagged as potentially violating "
        "the usage policy)",
    )
    openai_refusal_rate: float = _knob(
        0.0,
        "OpenAI: fraction of chat/responses requests answered 200 with a refusal (chat: message.refusal set, "
        "content null; responses: a refusal content part)",
    )
    openai_empty_error_file_id: bool = _knob(
        False, 'OpenAI: a finished batch without error lines reports error_file_id "" instead of null'
    )
    expired_counts_unfinished_as_failed: bool = _knob(
        True,
        "OpenAI/DashScope: an expired batch counts its unfinished requests in request_counts.failed "
        "(false: counts only the requests that ran, as a live expired batch reported {total: 10, completed: 1, "
        "failed: 0}); their batch_expired lines are in the error file either way",
    )
    # --- Gemini ---
    succeeded_before_results_s: float = _knob(
        0.0,
        "Gemini: a batch reads SUCCEEDED this long before its responses file / inlined responses appear "
        "(read live: lowering it reveals waiting results at once)",
    )
    inline_responses_shuffled: bool = _knob(False, "Gemini: inlined responses in a non-request order")
    unspecified_state_reads: int = _knob(
        0,
        "Gemini: the next N batch reads answer state BATCH_STATE_UNSPECIFIED (one consumed per read; the API's "
        "state enum has it, when the service sends it is not documented)",
    )
    inline_responses_drop_keys_rate: float = _knob(
        0.0, "Gemini: fraction of inlined responses whose metadata lacks `key`"
    )
    gemini_item_cancelled_rate: float = _knob(
        0.0,
        "Gemini: fraction of the requests of a succeeding batch answered with the per-request error "
        "{code: 1, CANCELLED} (the service canceled that one request on its own)",
    )
    gemini_prompt_blocked_rate: float = _knob(
        0.0,
        "Gemini: fraction of generateContent requests whose prompt is blocked: promptFeedback.blockReason, "
        "no candidates",
    )
    gemini_thinking_max_tokens_rate: float = _knob(
        0.0,
        "Gemini: fraction of generateContent requests that reach maxOutputTokens while thinking: finishReason "
        "MAX_TOKENS, a candidate content without parts, only thoughtsTokenCount as output",
    )
    gemini_item_error_status_names: bool = _knob(
        False, "Gemini: item errors also carry the `status` name next to the gRPC `code`"
    )
    gemini_thinking_models: list[str] = _knob(
        [], "Gemini: model name patterns (fnmatch, e.g. gemini-2.5-*) that think; names with 'thinking' always do"
    )
    gemini_cached_token_fraction: float = _knob(
        0.0, "Gemini: fraction of each prompt reported as usageMetadata.cachedContentTokenCount"
    )
    gemini_strict_request_fields: bool = _knob(
        True, "Gemini: an unknown or misplaced field in a JSONL request file fails the batch (INVALID_ARGUMENT)"
    )
    # --- DashScope ---
    dashscope_item_error_codes: list[str] = _knob(
        [],
        "DashScope: item errors (item_error_rate) answer these Model Studio error codes in turn, e.g. "
        '["InvalidParameter", "Arrearage"], each as an `error: {code, message}` line with no response; '
        "empty: Throttling.RateQuota / InternalError / InvalidParameter for the 429 / 500 / 400 draws",
    )
    # --- Anthropic ---
    anthropic_context_window_exceeded_rate: float = _knob(
        0.0, "Anthropic: fraction of succeeded results with stop_reason model_context_window_exceeded"
    )
    anthropic_pause_turn_rate: float = _knob(
        0.0, "Anthropic: fraction of succeeded results with stop_reason pause_turn"
    )
    anthropic_refusal_rate: float = _knob(0.0, "Anthropic: fraction of succeeded results with stop_reason refusal")
    anthropic_refusal_category: str | None = _knob(
        None,
        "Anthropic: refusals (content_filter_rate, anthropic_refusal_rate) name this stop_details.category "
        "(cyber, bio, frontier_llm, reasoning_extraction, general_harms) and carry no content, as structured "
        "refusals do; unset: category null, a refusal text",
    )
    anthropic_timeout_error_rate: float = _knob(
        0.0, "Anthropic: fraction of requests whose result is errored with error type timeout_error"
    )

    def replace(self, **changes: Any) -> EmulatorSettings:
        """A copy with `changes` applied; raises ValueError on an unknown knob or a bad value."""
        values = dataclasses.asdict(self)
        hints = typing.get_type_hints(EmulatorSettings)
        for name, raw in changes.items():
            if name not in hints:
                raise ValueError(f"unknown emulator setting {name!r}")
            values[name] = _coerce(name, hints[name], raw)
        return EmulatorSettings(**values)

    def __post_init__(self) -> None:
        self._check_timing()
        self._check_rates_and_sizes()
        _check_token_limit(self.enqueued_token_limit)
        _check_rules(self.after_processing_faults)
        self._check_gemini_knobs()
        self._check_dashscope_knobs()
        if self.anthropic_refusal_category not in (None, *ANTHROPIC_REFUSAL_CATEGORIES):
            raise ValueError(f"anthropic_refusal_category must be one of {ANTHROPIC_REFUSAL_CATEGORIES} or null")
        self._check_injected_faults()

    def _check_timing(self) -> None:
        if self.speed <= 0:
            raise ValueError("speed must be > 0")
        for name in ("queue_delay_s", "seconds_per_request", "finalize_delay_s", "cancel_delay_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.completion_window_s is not None and self.completion_window_s <= 0:
            raise ValueError("completion_window_s must be > 0")

    def _check_rates_and_sizes(self) -> None:
        for name in _RATES:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        if self.background_min_bytes < 0:
            raise ValueError("background_min_bytes must be >= 0")
        if self.max_requests_per_batch < 1:
            raise ValueError("max_requests_per_batch must be >= 1")

    def _check_gemini_knobs(self) -> None:
        if self.succeeded_before_results_s < 0:
            raise ValueError("succeeded_before_results_s must be >= 0")
        models = self.gemini_thinking_models
        if not isinstance(models, list) or not all(isinstance(p, str) and p for p in models):
            raise ValueError("gemini_thinking_models must be a list of non-empty strings")

    def _check_dashscope_knobs(self) -> None:
        codes = self.dashscope_item_error_codes
        if not isinstance(codes, list) or not all(isinstance(c, str) and c for c in codes):
            raise ValueError("dashscope_item_error_codes must be a list of non-empty strings")

    def _check_injected_faults(self) -> None:
        if self.fail_next_requests < 0:
            raise ValueError("fail_next_requests must be >= 0")
        if self.unspecified_state_reads < 0:
            raise ValueError("unspecified_state_reads must be >= 0")
        if not 400 <= self.fail_status <= 599:
            raise ValueError("fail_status must be an HTTP error status (400-599)")
        if self.force_batch_status not in (None, *FORCED_STATUSES):
            raise ValueError(f"force_batch_status must be one of {FORCED_STATUSES} or null")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_RATES = (
    "item_error_rate",
    "content_filter_rate",
    "truncate_rate",
    "duplicate_output_lines",
    "missing_output_lines",
    "openai_invalid_prompt_rate",
    "openai_refusal_rate",
    "inline_responses_drop_keys_rate",
    "gemini_item_cancelled_rate",
    "gemini_prompt_blocked_rate",
    "gemini_thinking_max_tokens_rate",
    "gemini_cached_token_fraction",
    "anthropic_context_window_exceeded_rate",
    "anthropic_pause_turn_rate",
    "anthropic_refusal_rate",
    "anthropic_timeout_error_rate",
)
# Knobs holding JSON structures: their values are checked by `__post_init__`, not by type.
STRUCTURED = frozenset(
    {"enqueued_token_limit", "after_processing_faults", "gemini_thinking_models", "dashscope_item_error_codes"}
)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_token_limit(limit: Any) -> None:
    if limit is None or _positive_int(limit):
        return
    if isinstance(limit, dict) and all(isinstance(k, str) and _positive_int(v) for k, v in limit.items()):
        return
    raise ValueError("enqueued_token_limit must be null, an int >= 1 or an object of model -> int >= 1")


def token_limit_for(limit: int | dict[str, int] | None, model: str | None) -> int | None:
    """The enqueued-token limit of `model` (a Gemini `models/` prefix is ignored), or None."""
    if limit is None or isinstance(limit, int):
        return limit
    if model is None:
        return None
    return limit.get(model, limit.get(model.removeprefix("models/")))


def _check_rules(rules: Any) -> None:
    if not isinstance(rules, list):
        raise ValueError("after_processing_faults must be a list of rules")
    for rule in rules:
        if not isinstance(rule, dict) or not isinstance(rule.get("path"), str):
            raise ValueError("each after_processing_faults rule needs a `path` regex")
        unknown = set(rule) - {"method", "path", "count", "mode", "status"}
        if unknown:
            raise ValueError(f"after_processing_faults: unknown rule fields {sorted(unknown)}")
        try:
            re.compile(rule["path"])
        except re.error as exc:
            raise ValueError(f"after_processing_faults: bad path regex {rule['path']!r}: {exc}") from None
        if rule.get("mode", "lose") not in AFTER_PROCESSING_MODES:
            raise ValueError(f"after_processing_faults: mode must be one of {AFTER_PROCESSING_MODES}")
        if not _positive_int(rule.get("count", 1)):
            raise ValueError("after_processing_faults: count must be an int >= 1")
        status = rule.get("status", 503)
        if not _positive_int(status) or not 500 <= status <= 599:
            raise ValueError("after_processing_faults: status must be a 5xx HTTP status")
        if rule.get("method") is not None and not isinstance(rule["method"], str):
            raise ValueError("after_processing_faults: method must be a string")


def _coerce(name: str, hint: Any, raw: Any) -> Any:
    if name in STRUCTURED:
        return raw
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint)
    if raw is None:
        if optional:
            return None
        raise ValueError(f"{name} must not be null")
    # bool is an int subclass: reject it where a number is meant, and numbers where a flag is meant.
    if base is bool:
        if isinstance(raw, bool):
            return raw
        raise ValueError(f"{name} must be true or false")
    if base is int and isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if base is float and isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if base is str and isinstance(raw, str):
        return raw
    raise ValueError(f"{name} must be of type {base.__name__}")


def load_settings(state_dir: Path) -> EmulatorSettings:
    """Defaults overlaid with `state_dir/settings.json` when that file exists."""
    path = Path(state_dir) / SETTINGS_FILE
    if not path.exists():
        return EmulatorSettings()
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object of emulator settings")
    return EmulatorSettings().replace(**data)


class RuntimeSettings:
    """The settings in force, changeable while serving; one-shot knobs are consumed atomically."""

    def __init__(self, settings: EmulatorSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()

    @property
    def current(self) -> EmulatorSettings:
        return self._settings

    def configure(self, **changes: Any) -> EmulatorSettings:
        with self._lock:
            self._settings = self._settings.replace(**changes)
            return self._settings

    def take_injected_failure(self) -> int | None:
        """The status to fail this API call with, if `fail_next_requests` says so."""
        with self._lock:
            if self._settings.fail_next_requests <= 0:
                return None
            self._settings = dataclasses.replace(
                self._settings, fail_next_requests=self._settings.fail_next_requests - 1
            )
            return self._settings.fail_status

    def take_unspecified_state_read(self) -> bool:
        """Whether this batch read answers an unspecified state (`unspecified_state_reads`; one consumed)."""
        with self._lock:
            if self._settings.unspecified_state_reads <= 0:
                return False
            self._settings = dataclasses.replace(
                self._settings, unspecified_state_reads=self._settings.unspecified_state_reads - 1
            )
            return True

    def take_after_processing_fault(self, method: str, path: str) -> dict[str, Any] | None:
        """The first `after_processing_faults` rule matching this call, one of its count consumed."""
        with self._lock:
            rules = self._settings.after_processing_faults
            for index, rule in enumerate(rules):
                wanted = rule.get("method")
                if wanted is not None and wanted.upper() != method.upper():
                    continue
                if not re.search(rule["path"], path):
                    continue
                left = rule.get("count", 1) - 1
                remaining = [*rules[:index], *([{**rule, "count": left}] if left > 0 else []), *rules[index + 1 :]]
                self._settings = dataclasses.replace(self._settings, after_processing_faults=remaining)
                return {"mode": "lose", "status": 503, **rule}
            return None

    def take_batch_settings(self) -> EmulatorSettings:
        """The settings a new batch is created with; `force_batch_status` applies to it alone."""
        with self._lock:
            taken = self._settings
            if taken.force_batch_status is not None:
                self._settings = dataclasses.replace(taken, force_batch_status=None)
            return taken
