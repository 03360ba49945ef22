"""Identifier shapes: random ones for new objects, derived ones for output that must be stable."""

from __future__ import annotations

import hashlib
import secrets
import string
import uuid

_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def random_base62(length: int) -> str:
    return "".join(secrets.choice(_BASE62) for _ in range(length))


def time_hex(created: float) -> str:
    """32 hex chars led by the creation time, like OpenAI's `batch_6780bb2f...` ids."""
    return f"{int(created):08x}{secrets.token_hex(12)}"


def random_uuid() -> str:
    return str(uuid.uuid4())


def digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def derived_hex(length: int, *parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:length]


def derived_base62(length: int, *parts: str) -> str:
    # The first `length` base-62 digits depend only on the number modulo 62**length: reducing it
    # first makes each division below cheaper.
    number = int.from_bytes(digest(*parts), "big") % 62**length
    chars = []
    for _ in range(length):
        number, index = divmod(number, 62)
        chars.append(_BASE62[index])
    return "".join(chars)


def derived_uuid(*parts: str) -> str:
    return str(uuid.UUID(bytes=digest(*parts)[:16], version=4))
