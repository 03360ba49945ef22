"""The emulator's knobs: defaults, validation, loading, and the run-time holder."""

from __future__ import annotations

import dataclasses
import json
import threading
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SETTINGS_FILE = "settings.json"
FORCED_STATUSES = ("failed", "expired", "stuck")


def _knob(default: Any, help_text: str) -> Any:
    return field(default=default, metadata={"help": help_text})


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
    content_filter_rate: float = _knob(0.0, "fraction answered 200 with finish_reason content_filter")
    truncate_rate: float = _knob(0.0, "fraction answered 200 with finish_reason length and cut-off content")
    duplicate_output_lines: float = _knob(0.0, "fraction of output-file lines written a second time")
    max_requests_per_batch: int = _knob(50_000, "more lines fail the batch with too_many_tasks")
    enqueued_token_limit: int | None = _knob(None, "per model over active batches; more fails token_limit_exceeded")
    fail_next_requests: int = _knob(0, "the next N API calls answer fail_status (one consumed per call)")
    fail_status: int = _knob(429, "HTTP status for fail_next_requests")
    force_batch_status: str | None = _knob(None, "one-shot for the next created batch: failed, expired or stuck")
    log_requests: bool = _knob(True, "log method, path and status of each request")

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
        if self.speed <= 0:
            raise ValueError("speed must be > 0")
        for name in ("queue_delay_s", "seconds_per_request", "finalize_delay_s", "cancel_delay_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.completion_window_s is not None and self.completion_window_s <= 0:
            raise ValueError("completion_window_s must be > 0")
        for name in ("item_error_rate", "content_filter_rate", "truncate_rate", "duplicate_output_lines"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        if self.max_requests_per_batch < 1:
            raise ValueError("max_requests_per_batch must be >= 1")
        if self.enqueued_token_limit is not None and self.enqueued_token_limit < 1:
            raise ValueError("enqueued_token_limit must be >= 1")
        if self.fail_next_requests < 0:
            raise ValueError("fail_next_requests must be >= 0")
        if not 400 <= self.fail_status <= 599:
            raise ValueError("fail_status must be an HTTP error status (400-599)")
        if self.force_batch_status not in (None, *FORCED_STATUSES):
            raise ValueError(f"force_batch_status must be one of {FORCED_STATUSES} or null")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _coerce(name: str, hint: Any, raw: Any) -> Any:
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

    def take_batch_settings(self) -> EmulatorSettings:
        """The settings a new batch is created with; `force_batch_status` applies to it alone."""
        with self._lock:
            taken = self._settings
            if taken.force_batch_status is not None:
                self._settings = dataclasses.replace(taken, force_batch_status=None)
            return taken
