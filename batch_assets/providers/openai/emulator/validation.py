"""Batch-level validation of an OpenAI-format input file.

Any error here fails the whole batch (`status: failed`, `errors.data[]`); problems the model
endpoint itself would reject become per-request error lines instead (see `requests`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

_MAX_REPORTED_ERRORS = 20
_REQUIRED = ("custom_id", "method", "url", "body")


@dataclass
class ParsedInput:
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (custom_id, body), input order
    errors: list[dict[str, Any]] = field(default_factory=list)  # BatchError objects
    model: str | None = None
    count: int = 0  # valid requests seen (kept in `requests` or handed to a callback)


def batch_error(code: str, message: str, line: int | None = None, param: str | None = None) -> dict[str, Any]:
    return {"code": code, "line": line, "message": message, "param": param}


OnRequest = Callable[[str, dict[str, Any]], None]


def parse_input(
    data: bytes | Iterable[bytes], endpoint: str, max_requests: int | None = None, on_request: OnRequest | None = None
) -> ParsedInput:
    """Check an input file given whole or as lines (an open file: read one line at a time).

    Valid requests go to `on_request(custom_id, body)` as they are read, or, without it, are
    kept in `requests`; a caller streaming a large file passes the callback and keeps only what
    it needs of each body.
    """
    parsed = ParsedInput()
    seen_ids: set[str] = set()
    lines = data.split(b"\n") if isinstance(data, bytes) else data
    for number, raw in enumerate(lines, start=1):
        if len(parsed.errors) >= _MAX_REPORTED_ERRORS:
            break
        if not raw.strip():
            continue
        problem = _check_line(raw, number, endpoint, seen_ids, parsed, on_request)
        if problem:
            parsed.errors.append(problem)
    if not parsed.count and not parsed.errors:
        parsed.errors.append(batch_error("empty_file", "The input file is empty; it has no requests."))
    if max_requests is not None and parsed.count > max_requests:
        parsed.errors.append(
            batch_error(
                "too_many_tasks",
                f"The input file has {parsed.count} requests; a batch may hold at most {max_requests}.",
            )
        )
    return parsed


def _check_line(
    raw: bytes, number: int, endpoint: str, seen_ids: set[str], parsed: ParsedInput, on_request: OnRequest | None
) -> dict[str, Any] | None:
    try:
        line = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        line = None
    if not isinstance(line, dict):
        return batch_error("invalid_json_line", "This line is not parseable as valid JSON.", number)
    problem = _envelope_error(line, number, endpoint, seen_ids) or _model_error(line["body"], number, parsed)
    if problem:
        return problem
    custom_id, body = line["custom_id"], line["body"]
    seen_ids.add(custom_id)
    parsed.count += 1
    if on_request is None:
        parsed.requests.append((custom_id, body))
    else:
        on_request(custom_id, body)
    return None


def _envelope_error(line: dict[str, Any], number: int, endpoint: str, seen_ids: set[str]) -> dict[str, Any] | None:
    """The first problem with the line's own fields (custom_id, method, url, body), or None."""
    for name in _REQUIRED:
        if name not in line:
            return batch_error("missing_required_parameter", f"Missing required parameter: '{name}'.", number, name)
    custom_id, body = line["custom_id"], line["body"]
    if not isinstance(custom_id, str) or not custom_id:
        return batch_error("invalid_type", "'custom_id' must be a non-empty string.", number, "custom_id")
    if line["method"] != "POST":
        return batch_error("invalid_value", "'method' must be 'POST'.", number, "method")
    if line["url"] != endpoint:
        return batch_error(
            "url_mismatch",
            f"The url '{line['url']}' does not match the batch endpoint '{endpoint}'.",
            number,
            "url",
        )
    if not isinstance(body, dict):
        return batch_error("invalid_type", "'body' must be a JSON object.", number, "body")
    if custom_id in seen_ids:
        return batch_error(
            "duplicate_custom_id",
            f"The custom_id '{custom_id}' appears more than once; each request needs a unique custom_id.",
            number,
            "custom_id",
        )
    return None


def _model_error(body: dict[str, Any], number: int, parsed: ParsedInput) -> dict[str, Any] | None:
    """The problem with the body's model, or None; the file's first model becomes `parsed.model`."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        message = "Missing required parameter: 'body.model'."
        return batch_error("missing_required_parameter", message, number, "body.model")
    if parsed.model is None:
        parsed.model = model
    elif model != parsed.model:
        return batch_error(
            "model_mismatch",
            f"The model '{model}' differs from '{parsed.model}' used earlier in the file; "
            "a batch may only use one model.",
            number,
            "body.model",
        )
    return None
