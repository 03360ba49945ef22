"""`/_emulator/settings`: read and change knobs while the emulator runs (tests, live demos).

Changes last until the emulator stops; to keep knobs across restarts, write them to
`<state_dir>/settings.json`.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from batch_assets.emulator.settings import RuntimeSettings


def admin_routes(runtime: RuntimeSettings) -> list[Route]:
    async def read(_: Request) -> Response:
        return JSONResponse(runtime.current.to_dict())

    async def change(request: Request) -> Response:
        try:
            changes = json.loads(await request.body())
        except ValueError:
            changes = None
        if not isinstance(changes, dict):
            return JSONResponse({"error": "expected a JSON object of settings"}, status_code=400)
        try:
            updated = runtime.configure(**changes)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(updated.to_dict())

    return [
        Route("/_emulator/settings", read, methods=["GET"]),
        Route("/_emulator/settings", change, methods=["POST"]),
    ]
