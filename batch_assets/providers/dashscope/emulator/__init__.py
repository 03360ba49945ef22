"""Emulator of DashScope's OpenAI-compatible batch mode, under `/compatible-mode/v1`.

DashScope speaks the OpenAI Batch wire format, so it mounts the OpenAI emulator's routes with its
own dialect (`flavor.DASHSCOPE`). It shares the app's store with OpenAI, but each flavor's
files and batches are invisible under the other's prefix.
"""

from __future__ import annotations

from starlette.routing import Route

from batch_assets.emulator.context import EmulatorContext
from batch_assets.providers.dashscope.emulator.flavor import DASHSCOPE
from batch_assets.providers.openai.emulator.routes import flavor_routes

# Where the app mounts these routes among the providers' (lower first). Its prefix is its own,
# so the default.
ROUTE_ORDER = 100


def routes(ctx: EmulatorContext) -> list[Route]:
    """DashScope's file and batch routes, under `/compatible-mode/v1`."""
    return flavor_routes(ctx, DASHSCOPE)


__all__ = ["ROUTE_ORDER", "routes"]
