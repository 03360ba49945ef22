"""Reading an Anthropic Message Batches create body.

Two levels of checks, as the real API makes them:
* `parse_create`: the envelope (requests list, custom_id, the params' basic types). Any problem
  rejects the whole create call synchronously with a 400 whose message names the field the
  pydantic way (`requests.0.custom_id: String should have at most 64 characters`).
* `request_error`: what the Messages API itself would refuse (e.g. a "system" role message). In a
  batch this does not fail the create call; that one request ends as an `errored` result.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from batch_assets.emulator.errors import ApiError
from batch_assets.emulator.text import count_tokens, requested_sentences, text_of

MAX_REQUESTS = 100_000
MAX_BODY_BYTES = 256 * 1024 * 1024
CUSTOM_ID_PATTERN = "^[a-zA-Z0-9_-]{1,64}$"
_CUSTOM_ID = re.compile(CUSTOM_ID_PATTERN)
_ROLES = ("user", "assistant")
# Rough framing costs, fitted to recorded usage ("Hello, world" -> 10 input tokens).
_BASE_TOKENS, _PER_MESSAGE_TOKENS, _SYSTEM_TOKENS = 4, 3, 3


def invalid(message: str) -> ApiError:
    return ApiError(400, message)  # kind defaults to invalid_request_error, Anthropic's name too


def parse_create(body: Any, max_requests: int = MAX_REQUESTS) -> list[tuple[str, dict[str, Any]]]:
    """The (custom_id, params) pairs of a create body, in input order; raises a 400 `ApiError`."""
    if not isinstance(body, dict):
        raise invalid("body: Input should be a valid dictionary")
    if "requests" not in body:
        raise invalid("requests: Field required")
    requests = body["requests"]
    if not isinstance(requests, list):
        raise invalid("requests: Input should be a valid list")
    if not requests:
        raise invalid("requests: List should have at least 1 item after validation, not 0")
    if len(requests) > max_requests:
        raise invalid(f"requests: List should have at most {max_requests} items after validation, not {len(requests)}")
    parsed: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for index, item in enumerate(requests):
        parsed.append(_check_item(item, index, seen))
    return parsed


def _check_item(item: Any, index: int, seen: set[str]) -> tuple[str, dict[str, Any]]:
    where = f"requests.{index}"
    if not isinstance(item, dict):
        raise invalid(f"{where}: Input should be a valid dictionary")
    custom_id = _check_custom_id(item, where)
    if "params" not in item:
        raise invalid(f"{where}.params: Field required")
    params = item["params"]
    if not isinstance(params, dict):
        raise invalid(f"{where}.params: Input should be a valid dictionary")
    _check_params(params, f"{where}.params")
    if custom_id in seen:
        # [GUESS] the wording; that duplicates are refused on create is documented.
        raise invalid(
            f"{where}.custom_id: Duplicate custom_id '{custom_id}'; "
            "each request in a Message Batch needs a unique custom_id."
        )
    seen.add(custom_id)
    return custom_id, params


def read_create(
    source: BinaryIO, on_request: Callable[[str, dict[str, Any]], None], max_requests: int = MAX_REQUESTS
) -> int:
    """`parse_create` over a create body read from `source` a piece at a time: each request is
    decoded, checked and handed to `on_request(custom_id, params)` on its own, so a body of
    100,000 requests is never held whole, as bytes or as objects. Raises the same 400s as
    `parse_create`, after reading the whole body (the item count is checked before the items);
    returns the number of requests."""
    count = 0
    first_error: ApiError | None = None
    seen: set[str] = set()
    for index, item in enumerate(_requests_of(_JsonReader(source))):
        count += 1
        if first_error is not None or count > max_requests:
            continue  # keep counting: a body over the limit is refused for its size first
        try:
            custom_id, params = _check_item(item, index, seen)
        except ApiError as error:
            first_error = error
            continue
        on_request(custom_id, params)
    if not count:
        raise invalid("requests: List should have at least 1 item after validation, not 0")
    if count > max_requests:
        raise invalid(f"requests: List should have at most {max_requests} items after validation, not {count}")
    if first_error is not None:
        raise first_error
    return count


def checked_requests(source: BinaryIO) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (custom_id, params) pairs of a create body `read_create` has accepted, read again a
    request at a time without repeating its checks."""
    for item in _requests_of(_JsonReader(source)):
        yield item["custom_id"], item["params"]


class _JsonReader:
    """JSON values read one at a time from a binary stream, through a window of at most a few MB."""

    _CHUNK = 1 << 20

    def __init__(self, source: BinaryIO) -> None:
        self.source = source
        self.decode = codecs.getincrementaldecoder("utf-8")().decode
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.decoder = json.JSONDecoder()

    def _fill(self) -> bool:
        if self.eof:
            return False
        raw = self.source.read(self._CHUNK)
        self.eof = not raw
        self.buf = self.buf[self.pos :] + self.decode(raw, final=self.eof)
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-blank character ("" at the end)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf) or not self._fill():
                return self.buf[self.pos : self.pos + 1]

    def take(self, char: str) -> bool:
        if self.peek() != char:
            return False
        self.pos += 1
        return True

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self._fill():
                    continue
                raise invalid(f"There was an issue with your request body: invalid JSON ({exc.msg}).") from exc
            if end == len(self.buf) and not self.eof and not isinstance(value, (dict, list, str)):
                self._fill()  # a number or literal may go on in the next piece
                continue
            self.pos = end
            return value


def _requests_of(reader: _JsonReader) -> Iterator[Any]:
    """The items of the body's `requests` list, one at a time; the body's other checks as `parse_create`'s."""
    if not reader.take("{"):
        reader.value()  # not an object (or not JSON): refused either way
        raise invalid("body: Input should be a valid dictionary")
    found = False
    if not reader.take("}"):
        found = yield from _members(reader)
    if reader.peek():
        raise invalid("There was an issue with your request body: invalid JSON (extra data).")
    if not found:
        raise invalid("requests: Field required")


def _members(reader: _JsonReader) -> Generator[Any, None, bool]:
    """Read the body object's members up to and including its closing `}`, yielding the items of a
    `requests` list; returns whether one was found."""
    found = False
    while True:
        key = reader.value()
        if not isinstance(key, str) or not reader.take(":"):
            raise invalid("There was an issue with your request body: invalid JSON (expecting a property name).")
        if key == "requests" and reader.take("["):
            found = True
            yield from _list_items(reader)
        else:
            value = reader.value()
            if key == "requests":
                parse_create({"requests": value})  # not a list: refused as parse_create refuses it
        if reader.take("}"):
            return found
        if not reader.take(","):
            raise invalid("There was an issue with your request body: invalid JSON (expecting ',').")


def _list_items(reader: _JsonReader) -> Iterator[Any]:
    """The items of a list whose `[` has been read, up to and including its closing `]`."""
    if reader.take("]"):
        return
    while True:
        yield reader.value()
        if reader.take("]"):
            return
        if not reader.take(","):
            raise invalid("There was an issue with your request body: invalid JSON (expecting ',').")


def _check_custom_id(item: dict[str, Any], where: str) -> str:
    if "custom_id" not in item:
        raise invalid(f"{where}.custom_id: Field required")
    custom_id = item["custom_id"]
    if not isinstance(custom_id, str):
        raise invalid(f"{where}.custom_id: Input should be a valid string")
    if not custom_id:
        raise invalid(f"{where}.custom_id: String should have at least 1 character")
    if len(custom_id) > 64:
        raise invalid(f"{where}.custom_id: String should have at most 64 characters")
    if not _CUSTOM_ID.match(custom_id):
        raise invalid(f"{where}.custom_id: String should match pattern '{CUSTOM_ID_PATTERN}'")
    return custom_id


def _check_params(params: dict[str, Any], where: str) -> None:
    for name in ("model", "max_tokens", "messages"):
        if name not in params:
            raise invalid(f"{where}.{name}: Field required")
    model = params["model"]
    if not isinstance(model, str):
        raise invalid(f"{where}.model: Input should be a valid string")
    if not model:
        raise invalid(f"{where}.model: String should have at least 1 character")
    max_tokens = params["max_tokens"]
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise invalid(f"{where}.max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        raise invalid(f"{where}.max_tokens: Input should be greater than or equal to 1")
    if not isinstance(params["messages"], list):
        raise invalid(f"{where}.messages: Input should be a valid list")
    if params.get("stream") not in (None, False):
        raise invalid(f"{where}.stream: Input should be False")


def request_error(params: dict[str, Any]) -> str | None:
    """The message of the 400 the Messages API would answer this request with, or None."""
    messages = params["messages"]
    if not messages:
        return "messages: at least one message is required"
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{index}: Input should be a valid dictionary"
        role = message.get("role")
        if role == "system":
            # Verbatim from a recorded errored result (provider_samples/anthropic_results.jsonl).
            return (
                'messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, '
                'not "system" as an input message role.'
            )
        if role not in _ROLES:
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if "content" not in message:
            return f"messages.{index}.content: Field required"
        if message["content"] in ("", []) and not (index == len(messages) - 1 and role == "assistant"):
            return (
                f"messages.{index}: all messages must have non-empty content "
                "except for the optional final assistant message"
            )
    temperature = params.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 1
    ):
        return "temperature: Input should be a number between 0 and 1"
    return _format_error(params)


def _format_error(params: dict[str, Any]) -> str | None:
    for name, fmt in _format_params(params):
        if fmt is None:
            continue
        if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
            return f"{name}.type: Input should be 'json_schema'"
        if not isinstance(fmt.get("schema"), dict):
            return f"{name}.schema: Field required"
    return None


def _format_params(params: dict[str, Any]) -> list[tuple[str, Any]]:
    """`output_config.format` (GA structured outputs) and `output_format` (its earlier beta spelling)."""
    config = params.get("output_config")
    found = [("output_config.format", config.get("format") if isinstance(config, dict) else None)]
    return [*found, ("output_format", params.get("output_format"))]


def output_schema(params: dict[str, Any]) -> Any:
    """The JSON Schema the answer must conform to, or None for free text."""
    for _, fmt in _format_params(params):
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            return fmt.get("schema")
    return None


@dataclass(frozen=True)
class Prompt:
    tokens: int  # rough input token count, framing included
    topic: str  # the text answers should relate to: the last user turn
    sentences: int | None  # sentences the prompt asks for ("... in two sentences"), if any


def prompt_of(params: dict[str, Any]) -> Prompt:
    system = text_of(params.get("system"))
    turns = [
        (str(m.get("role")), text_of(m.get("content"))) for m in params.get("messages") or [] if isinstance(m, dict)
    ]
    tokens = _BASE_TOKENS + sum(count_tokens(text) + _PER_MESSAGE_TOKENS for _, text in turns)
    if system:
        tokens += count_tokens(system) + _SYSTEM_TOKENS
    user_turns = [text for role, text in turns if role == "user"]
    topic = user_turns[-1] if user_turns else " ".join(text for _, text in turns)
    return Prompt(tokens, topic, requested_sentences("\n".join([system, *user_turns])))
