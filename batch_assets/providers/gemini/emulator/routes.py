"""HTTP routes of the Gemini Developer API batch wire format, under `/v1` (the SDK's
default) and `/v1beta`, plus `/upload/{v}/files` and `/download/{v}/files/...`.

Paths carry Google's `:verb` suffixes (`models/{m}:batchGenerateContent`, `batches/{id}:cancel`,
`files/{id}:download`); Starlette's default path parameter matches `:` too, so each route takes
the whole last segment and splits the verb off itself.

Dispatch on the paths both wire formats serve: `/v1/files`, `/v1/files/{x}`, `/v1/batches` and
`/v1/batches/{x}` are also OpenAI's. The Gemini routes for them are listed before the OpenAI
routes and match only requests that `speaks_gemini` claims; every other request falls through
to the OpenAI routes, which therefore behave exactly as before.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import Scope

from batch_assets.emulator.context import EmulatorContext
from batch_assets.emulator.errors import ApiError, Handler, guard
from batch_assets.emulator.settings import RuntimeSettings
from batch_assets.emulator.streams import file_response
from batch_assets.providers.gemini.emulator.batches import GeminiBatchService
from batch_assets.providers.gemini.emulator.files import GeminiFileService, file_view
from batch_assets.providers.gemini.emulator.requests import EMBED, GENERATE
from batch_assets.providers.gemini.emulator.wire import VERSIONS, error_body, google_error, invalid_argument, page_size

INLINE_LIMIT_BYTES = 20 * 1024 * 1024  # a create call with inline requests may be at most 20 MB
_MODEL_VERBS = {"batchGenerateContent": GENERATE, "asyncBatchEmbedContent": EMBED}
_SHARED_PATHS = ("/files", "/files/{name}", "/batches", "/batches/{name}")  # under /v1, OpenAI's too
_OPENAI_ID_PREFIXES = ("batch_", "file-")
_DEFAULT_PAGE_SIZE, _MAX_PAGE_SIZE = 10, 100


def speaks_gemini(scope: Scope) -> bool:
    """Whether a request on a path both wire formats serve is a Gemini one.

    The credential decides: `x-goog-api-key` (or `?key=`) is Gemini, `Authorization` is OpenAI.
    With neither, the id decides (OpenAI's are `batch_...` / `file-...`, Gemini's never are), and
    the id-less list calls stay OpenAI's, as they were before Gemini joined the emulator. Either
    way the request reaches a handler that answers "no credentials" in its own provider's shape.
    """
    names = {name.lower() for name, _ in scope.get("headers", [])}
    if b"x-goog-api-key" in names or b"&key=" in b"&" + scope.get("query_string", b""):
        return True
    if b"authorization" in names:
        return False
    last = scope["path"].rstrip("/").rsplit("/", 1)[-1]
    if last in ("files", "batches"):
        return False
    return not last.startswith(_OPENAI_ID_PREFIXES)


class GeminiRoute(Route):
    """A route that, on a path shared with OpenAI, only matches the requests `speaks_gemini` claims."""

    def __init__(self, path: str, endpoint: Handler, *, methods: list[str], shared: bool) -> None:
        super().__init__(path, endpoint, methods=methods)
        self.shared = shared

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if self.shared and scope["type"] == "http" and not speaks_gemini(scope):
            return Match.NONE, {}
        return super().matches(scope)


def _error(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(error), status_code=error.status, headers=headers)


def _injected(status: int) -> JSONResponse:
    messages = {
        429: "Resource has been exhausted (e.g. check quota).",
        500: "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
        503: "The service is currently unavailable.",
    }
    message = messages.get(status, f"Request failed with status {status}.")
    body = error_body(google_error(status, f"{message} (injected by the emulator)"))
    if status == 429:
        body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.010s"}]
    return JSONResponse(body, status_code=status)


def _api_key(request: Request) -> str:
    return (request.headers.get("x-goog-api-key") or request.query_params.get("key") or "").strip()


def _refusal(request: Request) -> ApiError | None:
    if _api_key(request):
        return None
    return google_error(
        403,
        "Method doesn't allow unregistered callers (callers without established identity). "
        "Please use API Key or other form of API consumer identity to call this API.",
        "PERMISSION_DENIED",
    )


def _origin(request: Request) -> str:
    """The emulator's own scheme://host:port, as the client addressed it."""
    return f"{request.url.scheme}://{request.url.netloc}"


def _json_body(raw: bytes) -> Any:
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise invalid_argument("Invalid JSON payload received. Unexpected token.") from None


class _Routes:
    """The handlers for one API version; service calls run in the thread pool (they take the store lock)."""

    def __init__(
        self, version: str, files: GeminiFileService, batches: GeminiBatchService, runtime: RuntimeSettings
    ) -> None:
        self.version = version
        self.files = files
        self.batches = batches
        self.runtime = runtime

    def guarded(self, handler: Handler) -> Handler:
        """API key, injected failures and Google error bodies around one handler."""
        return guard(
            handler,
            refusal=_refusal,
            take_injected_failure=self.runtime.take_injected_failure,
            take_after_processing_fault=self.runtime.take_after_processing_fault,
            injected=_injected,
            render=_error,
        )

    # --- files --------------------------------------------------------------------------------

    async def upload(self, request: Request) -> Response:
        """`/upload/{v}/files`: a session's start call (with the key), or its data at the upload URL."""
        if "upload_id" in request.query_params:
            return await self._upload_data(request)
        return await self.guarded(self._upload_start)(request)

    async def _upload_start(self, request: Request) -> Response:
        protocol = request.headers.get("x-goog-upload-protocol", "")
        command = request.headers.get("x-goog-upload-command", "")
        if protocol.lower() != "resumable" or command.lower() != "start":
            raise invalid_argument(
                "The emulator supports resumable uploads only: send X-Goog-Upload-Protocol: resumable "
                "and X-Goog-Upload-Command: start."
            )
        body = _json_body(await request.body())
        file = body.get("file") if isinstance(body, dict) else None
        file = file if isinstance(file, dict) else {}
        size = _int_header(request, "x-goog-upload-header-content-length")
        if size is None:
            declared = file.get("sizeBytes", file.get("size_bytes"))
            size = int(declared) if isinstance(declared, (int, str)) and str(declared).isdigit() else None
        mime_type = request.headers.get("x-goog-upload-header-content-type")
        upload_id = await run_in_threadpool(self.files.start_upload, file, size, mime_type)
        url = f"{_origin(request)}/upload/{self.version}/files?upload_id={upload_id}&upload_protocol=resumable"
        headers = {"x-goog-upload-url": url, "x-goog-upload-status": "active"}
        return Response(b"", headers=headers)

    async def _upload_data(self, request: Request) -> Response:
        # No API key here: the upload URL itself is the credential. Errors carry
        # `x-goog-upload-status: final`, or the SDK would silently resend the chunk.
        final = {"x-goog-upload-status": "final"}
        # The chunk is spooled as it arrives (in memory up to 1 MB, then on disk) and appended to
        # the upload a piece at a time.
        with tempfile.SpooledTemporaryFile(max_size=1 << 20) as chunk:
            async for piece in request.stream():
                chunk.write(piece)
            chunk.seek(0)
            try:
                offset = _int_header(request, "x-goog-upload-offset")
                received, record = await run_in_threadpool(
                    self.files.upload_chunk,
                    request.query_params["upload_id"],
                    request.headers.get("x-goog-upload-command", ""),
                    offset,
                    chunk,
                )
            except ApiError as error:
                return _error(error, final)
        if record is None:
            progress = {"x-goog-upload-status": "active", "x-goog-upload-size-received": str(received)}
            return Response(b"", headers=progress)
        return JSONResponse({"file": file_view(record, _origin(request), self.version)}, headers=final)

    async def list_files(self, request: Request) -> Response:
        size = page_size(request.query_params.get("pageSize"), _DEFAULT_PAGE_SIZE, _MAX_PAGE_SIZE)
        records, token = await run_in_threadpool(self.files.list_files, size, request.query_params.get("pageToken"))
        body: dict[str, Any] = {}
        if records:
            body["files"] = [file_view(r, _origin(request), self.version) for r in records]
        if token:
            body["nextPageToken"] = token
        return JSONResponse(body)

    async def get_file(self, request: Request) -> Response:
        file_id, verb = _split_verb(request.path_params["name"])
        if verb == "download":
            return await self._download(file_id)
        if verb:
            raise _method_not_found()
        record = await run_in_threadpool(self.files.record, file_id)
        return JSONResponse(file_view(record, _origin(request), self.version))

    async def download(self, request: Request) -> Response:
        """`/download/{v}/files/{id}:download?alt=media`, the documented spelling of the download."""
        file_id, verb = _split_verb(request.path_params["name"])
        if verb != "download":
            raise _method_not_found()
        return await self._download(file_id)

    async def _download(self, file_id: str) -> Response:
        handle = await run_in_threadpool(self.files.open_content, file_id)
        return file_response(handle, "application/octet-stream")

    async def delete_file(self, request: Request) -> Response:
        file_id, verb = _split_verb(request.path_params["name"])
        if verb:
            raise _method_not_found()
        await run_in_threadpool(self.files.delete, file_id)
        return JSONResponse({})

    # --- batches ------------------------------------------------------------------------------

    async def model_call(self, request: Request) -> Response:
        model, verb = _split_verb(request.path_params["name"])
        kind = _MODEL_VERBS.get(verb)
        if kind is None:
            raise _method_not_found()
        raw = await request.body()
        if len(raw) > INLINE_LIMIT_BYTES:
            raise invalid_argument(f"Request payload size exceeds the limit: {INLINE_LIMIT_BYTES} bytes.")
        return JSONResponse(await run_in_threadpool(self.batches.create, kind, model, _json_body(raw)))

    async def get_batch(self, request: Request) -> Response:
        batch_id, verb = _split_verb(request.path_params["name"])
        if verb:
            raise _method_not_found()
        return JSONResponse(await run_in_threadpool(self.batches.get, batch_id))

    async def list_batches(self, request: Request) -> Response:
        size = page_size(request.query_params.get("pageSize"), _DEFAULT_PAGE_SIZE, _MAX_PAGE_SIZE)
        views, token = await run_in_threadpool(self.batches.list_batches, size, request.query_params.get("pageToken"))
        body: dict[str, Any] = {}
        if views:
            body["operations"] = views
        if token:
            body["nextPageToken"] = token
        return JSONResponse(body)

    async def batch_call(self, request: Request) -> Response:
        batch_id, verb = _split_verb(request.path_params["name"])
        if verb != "cancel":
            raise _method_not_found()
        await run_in_threadpool(self.batches.cancel, batch_id)
        return JSONResponse({})

    async def delete_batch(self, request: Request) -> Response:
        batch_id, verb = _split_verb(request.path_params["name"])
        if verb:
            raise _method_not_found()
        await run_in_threadpool(self.batches.delete, batch_id)
        return JSONResponse({})

    def routes(self) -> list[Route]:
        v, g = self.version, self.guarded

        def route(path: str, handler: Handler, method: str) -> Route:
            shared = v == "v1" and path in _SHARED_PATHS
            return GeminiRoute(f"/{v}{path}", handler, methods=[method], shared=shared)

        return [
            Route(f"/upload/{v}/files", self.upload, methods=["POST"]),
            Route(f"/download/{v}/files/{{name}}", g(self.download), methods=["GET"]),
            route("/files", g(self.list_files), "GET"),
            route("/files/{name}", g(self.get_file), "GET"),
            route("/files/{name}", g(self.delete_file), "DELETE"),
            route("/models/{name}", g(self.model_call), "POST"),
            route("/batches", g(self.list_batches), "GET"),
            route("/batches/{name}", g(self.get_batch), "GET"),
            route("/batches/{name}", g(self.batch_call), "POST"),
            route("/batches/{name}", g(self.delete_batch), "DELETE"),
        ]


def _split_verb(segment: str) -> tuple[str, str]:
    """`abc:cancel` -> ("abc", "cancel"); `abc` -> ("abc", "")."""
    name, _, verb = segment.rpartition(":")
    return (name, verb) if name else (segment, "")


def _method_not_found() -> ApiError:
    return google_error(404, "Method not found.", "NOT_FOUND")


def _int_header(request: Request, name: str) -> int | None:
    raw = request.headers.get(name)
    if raw is None:
        return None
    if not raw.strip().isdigit():
        raise invalid_argument(f"Invalid {name} header: {raw!r}.")
    return int(raw)


def routes(ctx: EmulatorContext) -> list[Route]:
    """The routes of both API versions. Mount them before the OpenAI routes (see the module docstring)."""
    files = GeminiFileService(ctx.store)
    batches = GeminiBatchService(ctx.store, files, ctx.runtime, ctx.worker)
    batches.resume()  # work a previous run of the emulator left unfinished
    return [route for version in VERSIONS for route in _Routes(version, files, batches, ctx.runtime).routes()]
