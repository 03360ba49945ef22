"""Local provider emulator: a loopback HTTP server the unmodified provider SDKs work against.

This package is the shared core: `settings` (knobs), `store` (persistence), `clock` (simulated
batch timeline), `answers`/`text`/`schema_values` (deterministic output), `faults` (injected
failures), `errors`, `ids`, `admin_routes`, and `context` (what each provider's routes get).
Each provider's wire format lives with the provider, in `batch_assets.providers.<name>.emulator`
(OpenAI Batch at /v1, DashScope at /compatible-mode/v1, Gemini at /v1 and /v1beta, Anthropic at
/v1/messages/batches); `app` mounts them, in the order its `provider_routes` explains.
Entry points: `app.create_app`, `server.serve`/`server.main`, `testing.running_emulator`.
"""

from batch_assets.emulator.app import create_app
from batch_assets.emulator.settings import EmulatorSettings

__all__ = ["EmulatorSettings", "create_app"]
