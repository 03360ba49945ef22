"""Emulator of the OpenAI Batch API (files and batches), under `/v1`.

`routes(ctx)` gives the app its routes. The modules serve every dialect ("flavor") of the OpenAI
Batch wire format: `flavor` defines OpenAI's and the hooks another provider's dialect overrides
(DashScope's compatible mode mounts `routes.flavor_routes` with its own). `validation` checks an
input file, `requests` reads one request body, `bodies` renders its answer, `files` and `batches`
are the two services.
"""

from batch_assets.providers.openai.emulator.routes import routes

# Where the app mounts these routes among the providers' (lower first). Its `/v1/files...` and
# `/v1/batches...` routes answer every request on those paths, so providers sharing the paths
# (Gemini) must come before it.
ROUTE_ORDER = 100

__all__ = ["ROUTE_ORDER", "routes"]
