"""HTTP routes of the OpenAI Batch wire format (files and batches), for one flavor under its prefix:
OpenAI's under `/v1`; DashScope mounts its own flavor under `/compatible-mode/v1` with
`flavor_routes`.

Routes are flat (no catch-all Mount) so that other wire formats can add their own `/v1/...`
paths to the same app.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from batch_assets.emulator.context import EmulatorContext
from batch_assets.emulator.errors import ApiError, Handler, guard, invalid_value, missing_parameter, retryable
from batch_assets.emulator.settings import RuntimeSettings
from batch_assets.emulator.streams import file_response
from batch_assets.providers.openai.emulator.batches import BatchService
from batch_assets.providers.openai.emulator.bodies import error_body
from batch_assets.providers.openai.emulator.files import FileService
from batch_assets.providers.openai.emulator.flavor import OPENAI, Flavor


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(error), status_code=error.status, headers=headers)


def _injected(status: int) -> JSONResponse:
    if status == 429:
        message = "Rate limit reached (injected by the emulator)."
        error = ApiError(429, message, kind="requests", code="rate_limit_exceeded")
    elif status >= 500:
        message = "The server had an error while processing your request (injected by the emulator)."
        error = ApiError(status, message, kind="server_error")
    else:
        error = ApiError(status, f"Request failed with status {status} (injected by the emulator).")
    # A short retry-after-ms keeps the SDK's automatic retries fast in tests.
    return error_response(error, {"retry-after-ms": "10"} if retryable(status) else None)


def _authorized(request: Request) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def _refusal(request: Request) -> ApiError | None:
    if _authorized(request):
        return None
    return ApiError(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization "
        "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
    )


def _int_query(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value: int | None = int(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise invalid_value(name, f"Invalid value for '{name}': must be an integer from {low} to {high}.")
    return value


class _Routes:
    """The handlers for one flavor (OpenAI or DashScope), all sharing one store.

    Service calls run in the thread pool: they take the store lock, and the event loop must not
    wait on it. The slow work (reading inputs, writing results) runs on the app's worker.
    """

    def __init__(self, flavor: Flavor, files: FileService, batches: BatchService, runtime: RuntimeSettings) -> None:
        self.flavor = flavor
        self.files = files
        self.batches = batches
        self.runtime = runtime

    def guarded(self, handler: Handler) -> Handler:
        """Auth, injected failures and error rendering around one handler."""
        return guard(
            handler,
            refusal=_refusal,
            take_injected_failure=self.runtime.take_injected_failure,
            take_after_processing_fault=self.runtime.take_after_processing_fault,
            injected=_injected,
            render=error_response,
        )

    async def create_file(self, request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != "multipart/form-data":
            raise ApiError(400, "Invalid body: expected multipart/form-data with fields 'purpose' and 'file'.")
        # The multipart parser spools the file part to a temporary file as it arrives (in memory
        # up to 1 MB); the upload is then copied to the store in chunks.
        try:
            form = await request.form(max_part_size=1 << 30)
        except Exception as exc:  # python-multipart's parse errors
            raise ApiError(400, f"Invalid multipart/form-data body: {exc}.") from exc
        try:
            upload = form.get("file")
            fields = {k: v for k, v in form.items() if isinstance(v, str)}
            if "purpose" not in fields:
                raise missing_parameter("purpose")
            if upload is None or isinstance(upload, str):
                raise missing_parameter("file")
            anchor, seconds = fields.get("expires_after[anchor]"), fields.get("expires_after[seconds]")
            expires_after = None if anchor is None and seconds is None else {"anchor": anchor, "seconds": seconds}
            return JSONResponse(
                await run_in_threadpool(
                    self.files.upload,
                    self.flavor,
                    upload.filename or "upload.jsonl",
                    fields["purpose"],
                    upload.file,
                    expires_after,
                )
            )
        finally:
            await form.close()

    async def retrieve_file(self, request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(self.files.retrieve, self.flavor, request.path_params["file_id"]))

    async def file_content(self, request: Request) -> Response:
        handle = await run_in_threadpool(self.files.open_content, self.flavor, request.path_params["file_id"])
        return file_response(handle, "application/octet-stream")

    async def delete_file(self, request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(self.files.delete, self.flavor, request.path_params["file_id"]))

    async def list_files(self, request: Request) -> Response:
        order = request.query_params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise invalid_value("order", "Invalid value for 'order': must be 'asc' or 'desc'.")
        listing = await run_in_threadpool(
            self.files.list_files,
            self.flavor,
            request.query_params.get("after"),
            _int_query(request, "limit", 10_000, 1, 10_000),
            order,
            request.query_params.get("purpose"),
        )
        return JSONResponse(listing)

    async def create_batch(self, request: Request) -> Response:
        params = await _json_object(request)
        return JSONResponse(await run_in_threadpool(self.batches.create, self.flavor, params))

    async def retrieve_batch(self, request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        return JSONResponse(await run_in_threadpool(self.batches.retrieve, self.flavor, batch_id))

    async def cancel_batch(self, request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        return JSONResponse(await run_in_threadpool(self.batches.cancel, self.flavor, batch_id))

    async def list_batches(self, request: Request) -> Response:
        after = request.query_params.get("after")
        limit = _int_query(request, "limit", 20, 1, 100)
        return JSONResponse(await run_in_threadpool(self.batches.list_batches, self.flavor, after, limit))

    def routes(self) -> list[Route]:
        p, g = self.flavor.prefix, self.guarded
        return [
            Route(f"{p}/files", g(self.create_file), methods=["POST"]),
            Route(f"{p}/files", g(self.list_files), methods=["GET"]),
            Route(f"{p}/files/{{file_id}}", g(self.retrieve_file), methods=["GET"]),
            Route(f"{p}/files/{{file_id}}", g(self.delete_file), methods=["DELETE"]),
            Route(f"{p}/files/{{file_id}}/content", g(self.file_content), methods=["GET"]),
            Route(f"{p}/batches", g(self.create_batch), methods=["POST"]),
            Route(f"{p}/batches", g(self.list_batches), methods=["GET"]),
            Route(f"{p}/batches/{{batch_id}}", g(self.retrieve_batch), methods=["GET"]),
            Route(f"{p}/batches/{{batch_id}}/cancel", g(self.cancel_batch), methods=["POST"]),
        ]


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        params = json.loads(await request.body())
    except ValueError:
        params = None
    if not isinstance(params, dict):
        raise ApiError(
            400,
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
            "HTTP library correctly. The OpenAI API expects a JSON payload.)",
        )
    return params


def flavor_routes(ctx: EmulatorContext, flavor: Flavor) -> list[Route]:
    """The file and batch routes of one flavor under its prefix.

    The services keep no state of their own: every flavor's read and write the app's one store,
    under its lock, and tag records with the flavor's name.
    """
    files = FileService(ctx.store)
    batches = BatchService(ctx.store, files, ctx.runtime, ctx.worker)
    batches.resume(flavor)  # work a previous run of the emulator left unfinished
    return _Routes(flavor, files, batches, ctx.runtime).routes()


def routes(ctx: EmulatorContext) -> list[Route]:
    """OpenAI's file and batch routes, under `/v1`."""
    return flavor_routes(ctx, OPENAI)
