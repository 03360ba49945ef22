"""The emulator's ASGI app: shared state, the admin routes, and the routes of each provider.

Each emulated provider has an emulator package, `batch_assets.providers.<name>.emulator`, with
`routes(ctx)` and `ROUTE_ORDER`; this module is the only part of the core that imports them.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from batch_assets.emulator.admin_routes import admin_routes
from batch_assets.emulator.context import EmulatorContext
from batch_assets.emulator.settings import EmulatorSettings, RuntimeSettings, load_settings
from batch_assets.emulator.store import Store
from batch_assets.providers.registry import PROVIDERS

log = logging.getLogger("batch_assets.emulator")
MAX_UPLOAD_BYTES = 512 * 1024 * 1024  # OpenAI's per-file upload limit
# The providers the emulator serves: every provider the registry knows (one folder each, with an
# `emulator` package); mount order is each package's ROUTE_ORDER, not this order.
EMULATED_PROVIDERS = PROVIDERS


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


def emulator_package(provider: str) -> ModuleType:
    """`batch_assets.providers.<provider>.emulator`: its `routes(ctx)` and `ROUTE_ORDER`."""
    return importlib.import_module(f"batch_assets.providers.{provider}.emulator")


def provider_routes(ctx: EmulatorContext, providers: Iterable[str] = EMULATED_PROVIDERS) -> list[Route]:
    """The routes of every provider, mounted by `ROUTE_ORDER` (lower first; ties keep list order).

    The order matters where providers share paths, because the first route that matches answers:
    Gemini and OpenAI both serve `/v1/files...` and `/v1/batches...`. Gemini's routes there claim
    only Gemini requests and so come first (its `ROUTE_ORDER` is 0); OpenAI's, which answer any
    request on them, after. This holds whatever order `providers` lists them in.
    """
    packages = sorted((emulator_package(name) for name in providers), key=lambda package: package.ROUTE_ORDER)
    return [route for package in packages for route in package.routes(ctx)]


def create_app(state_dir: Path, settings: EmulatorSettings | None = None) -> Starlette:
    """The emulator app persisting under `state_dir`; settings default to `state_dir/settings.json`."""
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    runtime = RuntimeSettings(settings if settings is not None else load_settings(state_dir))
    ctx = EmulatorContext(Store(state_dir), runtime, state_dir)
    app = Starlette(
        routes=[*admin_routes(runtime), *provider_routes(ctx)],
        middleware=[Middleware(RequestLog, runtime=runtime)],
        max_body_size=MAX_UPLOAD_BYTES,
    )
    app.state.runtime = runtime
    app.state.store = ctx.store
    return app
