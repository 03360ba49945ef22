"""The error a request handler raises; each wire format's routes render it in their own body shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

Handler = Callable[[Request], Awaitable[Response]]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code


def not_found(what: str, object_id: str) -> ApiError:
    return ApiError(404, f"No {what} found with id '{object_id}'.")


def missing_parameter(param: str) -> ApiError:
    return ApiError(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def invalid_value(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value")


def retryable(status: int) -> bool:
    """Whether a client retries a call that failed with `status` (as the OpenAI and Anthropic SDKs do)."""
    return status in (408, 409, 429) or status >= 500


class LostResponse(Response):
    """A response that never arrives whole: the status line and headers (announcing a body) go out,
    then the handler returns without the body, and uvicorn closes the connection ("ASGI callable
    returned without completing response"). Clients see the connection drop mid-response
    (httpx: RemoteProtocolError), which every SDK reports as a connection error."""

    def __init__(self) -> None:
        super().__init__(b"")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"1024")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})


def guard(
    handler: Handler,
    *,
    refusal: Callable[[Request], ApiError | None],
    take_injected_failure: Callable[[], int | None],
    injected: Callable[[int], Response],
    render: Callable[[ApiError], Response],
    take_after_processing_fault: Callable[[str, str], dict[str, Any] | None] | None = None,
) -> Handler:
    """Wrap one route handler: refuse the request if `refusal` finds a reason (missing credentials,
    ...), else fail it if an injected failure is due, else run it; an `ApiError` from the refusal or
    the handler becomes `render(error)`, the provider's own error response.

    After a successful run, an `after_processing_faults` rule matching the call (see settings)
    replaces the answer: the work is done, but the client gets a dropped connection (mode `lose`)
    or `injected(status)` (mode `error`)."""

    async def endpoint(request: Request) -> Response:
        refused = refusal(request)
        if refused is not None:
            return render(refused)
        status = take_injected_failure()
        if status is not None:
            return injected(status)
        try:
            response = await handler(request)
        except ApiError as error:
            return render(error)
        if take_after_processing_fault is not None and response.status_code < 400:
            rule = take_after_processing_fault(request.method, request.url.path)
            if rule is not None:
                return LostResponse() if rule["mode"] == "lose" else injected(rule["status"])
        return response

    return endpoint
