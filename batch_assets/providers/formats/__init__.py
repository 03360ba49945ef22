"""Wire formats by (provider, endpoint): how request lines are rendered and result lines read."""

from __future__ import annotations

from batch_assets.providers.formats.anthropic import Messages
from batch_assets.providers.formats.base import FAILURE_CLASS_SQL, WireFormat
from batch_assets.providers.formats.gemini import EmbedContent, GenerateContent
from batch_assets.providers.formats.openai import ChatCompletions, Embeddings, Responses

_FORMATS: dict[tuple[str, str], WireFormat] = {
    ("openai", "/v1/chat/completions"): ChatCompletions(),
    ("openai", "/v1/responses"): Responses(),
    ("openai", "/v1/embeddings"): Embeddings(),
    ("dashscope", "/v1/chat/completions"): ChatCompletions(),
    ("dashscope", "/v1/chat/ds-test"): ChatCompletions(),
    ("dashscope", "/v1/embeddings"): Embeddings(),
    ("anthropic", "/v1/messages"): Messages(),
    ("gemini", "generateContent"): GenerateContent(),
    ("gemini", "embedContent"): EmbedContent(),
}


def wire_format(provider: str, endpoint: str) -> WireFormat:
    try:
        return _FORMATS[(provider, endpoint)]
    except KeyError:
        raise ValueError(f"no wire format for {provider} {endpoint}") from None


__all__ = ["FAILURE_CLASS_SQL", "WireFormat", "wire_format"]
