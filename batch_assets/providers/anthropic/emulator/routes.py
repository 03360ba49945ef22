"""HTTP routes of the Anthropic Message Batches wire format, under `/v1/messages/batches`.

Flat routes, like the OpenAI ones: they share the app's `/v1` prefix without colliding with
`/v1/batches` or `/v1/files`. Every response carries a `request-id` header, as the real API's do,
and error bodies repeat it: `{"type":"error","error":{"type","message"},"request_id"}`.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from batch_assets.emulator.context import EmulatorContext
from batch_assets.emulator.errors import ApiError, Handler, guard, retryable
from batch_assets.emulator.settings import RuntimeSettings
from batch_assets.emulator.streams import file_response
from batch_assets.providers.anthropic.emulator.batches import MessageBatchService
from batch_assets.providers.anthropic.emulator.messages import error_envelope, request_id
from batch_assets.providers.anthropic.emulator.requests import MAX_BODY_BYTES, invalid

PREFIX = "/v1/messages/batches"
_LIST_LIMIT = (1, 1000, 20)  # min, max, default
_INJECTED_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _error_response(error: ApiError, rid: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = error_envelope(error.kind, error.message, rid)
    return JSONResponse(body, status_code=error.status, headers={"request-id": rid, **(headers or {})})


def _injected(status: int, rid: str) -> JSONResponse:
    kind = _INJECTED_KINDS.get(status, "api_error" if status >= 500 else "invalid_request_error")
    if status == 429:
        message = "Number of requests has exceeded your rate limit (injected by the emulator)."
    elif status == 529:
        message = "Overloaded (injected by the emulator)."
    else:
        message = f"Request failed with status {status} (injected by the emulator)."
    # `retry-after` as the real API sends it; `retry-after-ms`, which the SDK prefers, keeps its
    # automatic retries fast in tests.
    headers = {"retry-after": "1", "retry-after-ms": "10"} if retryable(status) else None
    return _error_response(ApiError(status, message, kind=kind), rid, headers)


def _authorized(request: Request) -> bool:
    """anthropic 2.x sends `Authorization: Bearer <key>`; the REST docs and older SDKs `x-api-key`."""
    if request.headers.get("x-api-key", "").strip():
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def _refusal(request: Request) -> ApiError | None:
    if not _authorized(request):
        return ApiError(401, "x-api-key header is required", kind="authentication_error")
    if not request.headers.get("anthropic-version", "").strip():
        return invalid("anthropic-version: header is required")
    return None


def _origin(request: Request) -> str:
    """This emulator as the client reached it (`http://127.0.0.1:<port>`), for `results_url`."""
    return str(request.base_url).rstrip("/")


def _limit(request: Request) -> int:
    low, high, default = _LIST_LIMIT
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise invalid("limit: Input should be a valid integer") from None
    if value < low:
        raise invalid(f"limit: Input should be greater than or equal to {low}")
    if value > high:
        raise invalid(f"limit: Input should be less than or equal to {high}")
    return value


class _Routes:
    """Service calls run in the thread pool: they take the store lock, and the event loop must not
    wait on it. Results are written by the app's worker."""

    def __init__(self, service: MessageBatchService, runtime: RuntimeSettings) -> None:
        self.service = service
        self.runtime = runtime

    def guarded(self, handler: Handler) -> Handler:
        """Auth, the version header, injected failures, request ids and error rendering."""

        async def endpoint(request: Request) -> Response:
            rid = request_id()
            guarded = guard(
                handler,
                refusal=_refusal,
                take_injected_failure=self.runtime.take_injected_failure,
                take_after_processing_fault=self.runtime.take_after_processing_fault,
                injected=lambda status: _injected(status, rid),
                render=lambda error: _error_response(error, rid),
            )
            response = await guarded(request)
            # Error responses carry it already; this adds it to the handler's own response.
            response.headers["request-id"] = rid
            return response

        return endpoint

    async def create(self, request: Request) -> Response:
        # The body goes to disk as it arrives and is read back a request at a time: a
        # 100,000-request body is never held whole.
        with self.service.receiving() as (batch_id, sink):
            size = 0
            async for piece in request.stream():
                size += len(piece)
                if size > MAX_BODY_BYTES:
                    raise ApiError(
                        413, "Request exceeds the maximum allowed number of bytes.", kind="request_too_large"
                    )
                sink.write(piece)
        return JSONResponse(await run_in_threadpool(self.service.create, batch_id, _origin(request)))

    async def retrieve(self, request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        return JSONResponse(await run_in_threadpool(self.service.retrieve, batch_id, _origin(request)))

    async def list_batches(self, request: Request) -> Response:
        query = request.query_params
        listing = await run_in_threadpool(
            self.service.list_batches, query.get("after_id"), query.get("before_id"), _limit(request), _origin(request)
        )
        return JSONResponse(listing)

    async def cancel(self, request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        return JSONResponse(await run_in_threadpool(self.service.cancel, batch_id, _origin(request)))

    async def delete(self, request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(self.service.delete, request.path_params["batch_id"]))

    async def results(self, request: Request) -> Response:
        handle = await run_in_threadpool(self.service.results, request.path_params["batch_id"])
        # The SDK asks with `Accept: application/binary`; the real content type is not recorded.
        return file_response(handle, "application/binary")

    def routes(self) -> list[Route]:
        g = self.guarded
        return [
            Route(PREFIX, g(self.create), methods=["POST"]),
            Route(PREFIX, g(self.list_batches), methods=["GET"]),
            Route(f"{PREFIX}/{{batch_id}}", g(self.retrieve), methods=["GET"]),
            Route(f"{PREFIX}/{{batch_id}}", g(self.delete), methods=["DELETE"]),
            Route(f"{PREFIX}/{{batch_id}}/cancel", g(self.cancel), methods=["POST"]),
            Route(f"{PREFIX}/{{batch_id}}/results", g(self.results), methods=["GET"]),
        ]


def routes(ctx: EmulatorContext) -> list[Route]:
    """The Message Batches routes, persisting through the app's shared store."""
    service = MessageBatchService(ctx.store, ctx.runtime, ctx.worker)
    service.resume()  # work a previous run of the emulator left unfinished
    return _Routes(service, ctx.runtime).routes()
