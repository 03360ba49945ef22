"""OpenAI Batch: adapter, wire formats, limits (and, beside them, the emulator routes)."""

from pathlib import Path

from batch_assets.providers.contract import ProviderDefinition
from batch_assets.providers.openai.formats import ChatCompletions, Embeddings, Responses

PROVIDER = ProviderDefinition(
    name="openai",
    adapter="batch_assets.providers.openai.adapter:OpenAIBatchAdapter",
    formats={"/v1/chat/completions": ChatCompletions(), "/v1/responses": Responses(), "/v1/embeddings": Embeddings()},
    limits_path=Path(__file__).with_name("limits.yaml"),
    emulator_path="/v1",
    live_base_url=None,  # the SDK's own default
    live_host="https://api.openai.com",  # the SDK default's host
)
