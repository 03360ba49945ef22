"""Alibaba Bailian / DashScope batch (OpenAI-compatible mode): adapter, wire formats, limits."""

from pathlib import Path

from batch_assets.providers.contract import ProviderDefinition
from batch_assets.providers.dashscope.formats import ChatCompletions, Embeddings

PROVIDER = ProviderDefinition(
    name="dashscope",
    adapter="batch_assets.providers.dashscope.adapter:DashScopeBatchAdapter",
    formats={
        "/v1/chat/completions": ChatCompletions(),
        "/v1/chat/ds-test": ChatCompletions(),
        "/v1/embeddings": Embeddings(),
    },
    limits_path=Path(__file__).with_name("limits.yaml"),
    emulator_path="/compatible-mode/v1",
    live_base_url="https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
)
