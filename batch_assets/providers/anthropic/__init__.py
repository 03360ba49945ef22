"""Anthropic Message Batches: adapter, wire format, limits."""

from pathlib import Path

from batch_assets.providers.anthropic.formats import Messages
from batch_assets.providers.contract import ProviderDefinition

PROVIDER = ProviderDefinition(
    name="anthropic",
    adapter="batch_assets.providers.anthropic.adapter:AnthropicBatchAdapter",
    formats={"/v1/messages": Messages()},
    limits_path=Path(__file__).with_name("limits.yaml"),
    emulator_path="",
    live_base_url=None,
    live_host="https://api.anthropic.com",  # the SDK default's host
)
