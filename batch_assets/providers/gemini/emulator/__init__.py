"""Emulator of the Gemini Developer API's Batch Mode and Files API, under `/v1` and `/v1beta`.

`routes(ctx)` gives the app its routes; `wire` holds Google's JSON conventions, `requests` reads
GenerateContent / EmbedContent requests, `bodies` renders their answers, `files` and `batches`
are the Files API and the batch operations.
"""

from batch_assets.providers.gemini.emulator.routes import routes

# Where the app mounts these routes among the providers' (lower first). Gemini's file and batch
# routes share `/v1/files...` and `/v1/batches...` with OpenAI's and claim only Gemini requests
# (`routes.speaks_gemini`), so they must come before OpenAI's: mounted after, OpenAI's routes
# would answer every request on those paths.
ROUTE_ORDER = 0

__all__ = ["ROUTE_ORDER", "routes"]
