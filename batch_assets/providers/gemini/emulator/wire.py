"""Shared pieces of the Gemini Developer API ("mldev") wire format.

Google's JSON conventions: camelCase on output, either camelCase or snake_case accepted on input
(proto3 JSON parsing), RFC 3339 timestamps, int64 values as strings with zero values omitted, and
errors as `{"error": {"code": <http>, "message": ..., "status": <canonical code name>}}`.
Errors are raised as the shared `ApiError`, with the canonical status name in `ApiError.code`.
"""

from __future__ import annotations

import base64
import re
import secrets
import string
from datetime import UTC, datetime
from typing import Any

from batch_assets.emulator.errors import ApiError

VERSIONS = ("v1", "v1beta")
_ID_ALPHABET = string.ascii_lowercase + string.digits
# Resource ids: lowercase alphanumerics and dashes, at most 40, not starting or ending with a dash.
RESOURCE_ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")
_CAMEL_HUMP = re.compile(r"([A-Z])")

# HTTP status -> google.rpc.Code name, as the Google front end pairs them.
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    408: "DEADLINE_EXCEEDED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# google.rpc.Code numbers, used where a google.rpc.Status sits inside a long-running operation.
GRPC_CODES = {
    "CANCELLED": 1,
    "UNKNOWN": 2,
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "UNAUTHENTICATED": 16,
}


def status_name(http_status: int) -> str:
    if http_status in _STATUS_NAMES:
        return _STATUS_NAMES[http_status]
    return "UNAVAILABLE" if http_status in (502, 503) else "UNKNOWN"


def google_error(http_status: int, message: str, status: str | None = None) -> ApiError:
    return ApiError(http_status, message, kind="google", code=status or status_name(http_status))


def invalid_argument(message: str) -> ApiError:
    return google_error(400, message, "INVALID_ARGUMENT")


def failed_precondition(message: str) -> ApiError:
    # Google sends FAILED_PRECONDITION with HTTP 400.
    return google_error(400, message, "FAILED_PRECONDITION")


def error_status(error: ApiError) -> dict[str, Any]:
    """The `{"code": <http>, "message", "status"}` object of an HTTP error body."""
    status = error.code if error.kind == "google" and error.code else status_name(error.status)
    return {"code": error.status, "message": error.message, "status": status}


def rpc_status(error: ApiError, *, with_name: bool = False) -> dict[str, Any]:
    """The error as a `google.rpc.Status`: `{"code": <gRPC code>, "message"}`, the shape of a batch
    item's `error` (JSONL line or inlined response) and of a failed operation's `error`; the SDK
    reads it as `types.JobError` (code, message, details), which has no HTTP status and no status
    name. `with_name` adds the name as `status` (the `gemini_item_error_status_names` knob)."""
    name = error.code if error.kind == "google" and error.code else status_name(error.status)
    status: dict[str, Any] = {"code": GRPC_CODES.get(name, GRPC_CODES["UNKNOWN"]), "message": error.message}
    if with_name:
        status["status"] = name
    return status


def error_body(error: ApiError) -> dict[str, Any]:
    return {"error": error_status(error)}


def field(obj: Any, camel: str, default: Any = None) -> Any:
    """`obj[camel]`, or its snake_case spelling: proto JSON parsers accept both."""
    if not isinstance(obj, dict):
        return default
    if camel in obj:
        return obj[camel]
    return obj.get(_CAMEL_HUMP.sub(lambda m: "_" + m.group(1).lower(), camel), default)


def rfc3339(instant: float) -> str:
    """`2025-07-01T00:00:05.123456Z`: UTC with microseconds, as Google's JSON renders Timestamps."""
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def int64(value: int) -> str:
    return str(int(value))


def counts(**values: int) -> dict[str, str]:
    """int64 fields as proto3 JSON writes them: strings, with zero values left out."""
    return {name: int64(value) for name, value in values.items() if value}


def random_id(length: int) -> str:
    """A resource id like Google's (`tti3ik8qob66...`): lowercase letters and digits."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(length))


def resource_id(name: str, collection: str) -> str | None:
    """The id in `collection/<id>` (or a bare id), or None when it is not a valid resource id."""
    bare = name.removeprefix(f"{collection}/")
    return bare if RESOURCE_ID.fullmatch(bare) else None


def page_token(seq: int) -> str:
    return base64.urlsafe_b64encode(f"after:{seq}".encode()).decode().rstrip("=")


def page_after(token: str | None) -> int | None:
    """The creation sequence a page token continues after; raises INVALID_ARGUMENT when malformed."""
    if not token:
        return None
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        prefix, _, seq = text.partition(":")
        if prefix == "after" and seq.isdigit():
            return int(seq)
    except ValueError:
        pass
    raise invalid_argument("Invalid page token.")


def page_size(raw: str | None, default: int, maximum: int) -> int:
    """`pageSize` as Google treats it: unset or 0 means the default, larger values are capped."""
    if raw is None or raw == "":
        return default
    try:
        size = int(raw)
    except ValueError:
        raise invalid_argument(f"Invalid value at 'page_size' (TYPE_INT32), \"{raw}\"") from None
    if size < 0:
        raise invalid_argument("page_size must not be negative.")
    return default if size == 0 else min(size, maximum)
