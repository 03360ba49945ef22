"""Which adapter serves which provider."""

from __future__ import annotations

from batch_assets.providers.base import BatchAdapter, ClientSettings
from batch_assets.providers.anthropic_batch import AnthropicBatchAdapter
from batch_assets.providers.gemini_batch import GeminiBatchAdapter
from batch_assets.providers.openai_batch import DashScopeBatchAdapter, OpenAIBatchAdapter

ADAPTERS = {"openai": OpenAIBatchAdapter, "dashscope": DashScopeBatchAdapter,
            "anthropic": AnthropicBatchAdapter, "gemini": GeminiBatchAdapter}


def build_adapter(provider: str, settings: ClientSettings) -> BatchAdapter:
    try:
        return ADAPTERS[provider](settings)
    except KeyError:
        raise ValueError(f"no batch adapter for provider {provider!r}; available: {', '.join(ADAPTERS)}") from None
