"""Emulator of Anthropic Message Batches, under `/v1/messages/batches`.

`routes(ctx)` gives the app its routes; `requests` reads create bodies, `messages` renders each
request's result, `batches` runs the batches on the shared clock.
"""

from batch_assets.providers.anthropic.emulator.routes import routes

# Where the app mounts these routes among the providers' (lower first). Its paths collide with
# no other provider's, so the default.
ROUTE_ORDER = 100

__all__ = ["ROUTE_ORDER", "routes"]
