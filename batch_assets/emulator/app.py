"""The emulator's ASGI app: shared state plus the routes of each wire format."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from batch_assets.emulator.admin_routes import admin_routes
from batch_assets.emulator.context import EmulatorContext
from batch_assets.emulator.settings import EmulatorSettings, RuntimeSettings, load_settings
from batch_assets.emulator.store import Store
import batch_assets.providers.anthropic.emulator
import batch_assets.providers.dashscope.emulator
import batch_assets.providers.gemini.emulator
import batch_assets.providers.openai.emulator

log = logging.getLogger("batch_assets.emulator")
MAX_UPLOAD_BYTES = 512 * 1024 * 1024  # OpenAI's per-file upload limit


class RequestLog:
    """Logs method, path, status and duration of each request; never headers (they carry API keys)."""

    def __init__(self, app: ASGIApp, runtime: RuntimeSettings) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.runtime.current.log_requests:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            log.info("%s %s -> %d (%.1f ms)", scope["method"], scope["path"], status, elapsed_ms)


def create_app(state_dir: Path, settings: EmulatorSettings | None = None) -> Starlette:
    """The emulator app persisting under `state_dir`; settings default to `state_dir/settings.json`."""
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    runtime = RuntimeSettings(settings if settings is not None else load_settings(state_dir))
    store = Store(state_dir)
    ctx = EmulatorContext(store, runtime, state_dir)
    # Gemini before OpenAI: on the /v1 paths both serve, Gemini's routes claim only Gemini requests.
    gemini = batch_assets.providers.gemini.emulator.routes(ctx)
    app = Starlette(
        routes=[
            *admin_routes(runtime),
            *gemini,
            *batch_assets.providers.openai.emulator.routes(ctx),
            *batch_assets.providers.dashscope.emulator.routes(ctx),
            *batch_assets.providers.anthropic.emulator.routes(ctx),
        ],
        middleware=[Middleware(RequestLog, runtime=runtime)],
        max_body_size=MAX_UPLOAD_BYTES,
    )
    app.state.runtime = runtime
    app.state.store = store
    return app
