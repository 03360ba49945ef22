"""Google Gemini Batch: adapter, wire formats, limits."""

from pathlib import Path

from batch_assets.providers.contract import ProviderDefinition
from batch_assets.providers.gemini.formats import EmbedContent, GenerateContent

PROVIDER = ProviderDefinition(
    name="gemini",
    adapter="batch_assets.providers.gemini.adapter:GeminiBatchAdapter",
    formats={"generateContent": GenerateContent(), "embedContent": EmbedContent()},
    limits_path=Path(__file__).with_name("limits.yaml"),
    emulator_path="",
    live_base_url=None,
    live_host="https://generativelanguage.googleapis.com",  # the SDK default's host
)
