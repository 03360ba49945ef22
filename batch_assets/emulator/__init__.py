"""Local provider emulator: a loopback HTTP server the unmodified provider SDKs work against.

Shared parts: `settings` (knobs), `store` (persistence), `clock` (simulated batch timeline),
`answers`/`text`/`schema_values` (deterministic output), `faults` (injected failures).
Wire formats: `openai_*` (OpenAI Batch at /v1 and DashScope at /compatible-mode/v1),
`gemini_*` (Gemini Developer API batches and files at /v1 and /v1beta; `gemini_routes` tells
Gemini requests from OpenAI ones on the /v1 paths both use).
Entry points: `app.create_app`, `server.serve`/`server.main`, `testing.running_emulator`.
"""

from batch_assets.emulator.app import create_app
from batch_assets.emulator.settings import EmulatorSettings

__all__ = ["EmulatorSettings", "create_app"]
