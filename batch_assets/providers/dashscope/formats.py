"""DashScope (Alibaba Bailian) batch formats: OpenAI's line shapes, with DashScope's own error codes.

Its OpenAI-compatible mode writes request and result lines exactly like OpenAI's Batch API, so the
classes are OpenAI's; what differs is the codes it reports for capacity (Throttling, Arrearage) and
for its content inspection (data_inspection_failed / DataInspectionFailed), besides OpenAI-style ones.
"""

from __future__ import annotations

from batch_assets.providers.openai import formats as openai_formats

CAPACITY_CODES = (*openai_formats.CAPACITY_CODES, "Throttling", "Arrearage")
CONTENT_POLICY_CODES = (*openai_formats.CONTENT_POLICY_CODES, "data_inspection_failed", "DataInspectionFailed")


class ChatCompletions(openai_formats.ChatCompletions):
    capacity_codes = CAPACITY_CODES
    content_policy_codes = CONTENT_POLICY_CODES


class Embeddings(openai_formats.Embeddings):
    capacity_codes = CAPACITY_CODES
    content_policy_codes = CONTENT_POLICY_CODES
