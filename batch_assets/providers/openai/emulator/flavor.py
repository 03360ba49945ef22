"""Dialects ("flavors") of the OpenAI Batch wire format. `Flavor` is OpenAI's own.

Other providers that speak the format (DashScope's compatible mode, in
`batch_assets.providers.dashscope.emulator.flavor`) subclass it: same endpoints and shapes under
their own path prefix, with their own id styles, accepted completion windows, endpoints and a
few fields. Objects created under one prefix are invisible under another.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from batch_assets.emulator import ids
from batch_assets.emulator.answers import Answer


@dataclass(frozen=True)
class Flavor:
    name: str  # what the flavor's records are tagged with in the store
    prefix: str  # the path the routes are mounted under
    endpoints: tuple[str, ...]  # accepted batch `endpoint` values
    default_embedding_dimensions: int
    max_embedding_dimensions: int

    # Fields OpenAI reports and another dialect may leave out.
    files_expire: ClassVar[bool] = True  # file objects carry `expires_at`
    batches_report_model_and_usage: ClassVar[bool] = True  # batch objects carry `model` and `usage`
    expiry_before_validation: ClassVar[bool] = True  # `expires_at` is set while a batch still validates

    # Models that reason before answering: their usage counts the reasoning tokens apart
    # (`completion_tokens_details.reasoning_tokens`, `output_tokens_details.reasoning_tokens`), and
    # completion/output tokens include them (openai SDK `types/completion_usage.py`; the recorded
    # o3-mini lines in provider_samples/openai_output.jsonl report 448 and 2112).
    reasoning_models: ClassVar[tuple[str, ...]] = ("o1*", "o3*", "o4*", "gpt-5*")

    def reasons(self, model: str) -> bool:
        return any(fnmatch.fnmatchcase(model, pattern) for pattern in self.reasoning_models)

    def file_id(self, role: str) -> str:
        """`role` is "input", "output" or "error"."""
        return f"file-{ids.random_base62(22)}"

    def batch_id(self, created: float) -> str:
        return f"batch_{ids.time_hex(created)}"

    def line_ids(self, batch_id: str, index: int) -> tuple[str, str]:
        """(output line id, request id) for one input line; stable for a given batch."""
        return (
            f"batch_req_{ids.derived_hex(32, 'line', batch_id, str(index))}",
            f"req_{ids.derived_hex(32, 'request', batch_id, str(index))}",
        )

    def window_seconds(self, completion_window: str) -> int | None:
        """Seconds of a completion window, or None when this provider does not accept it."""
        return 86_400 if completion_window == "24h" else None

    def canned_answers(self, endpoint: str) -> list[Answer] | None:
        """Fixed answers for a test endpoint of this dialect, or None to generate them."""
        return None

    def chat_body(
        self, endpoint: str, answers: list[Answer], prompt_tokens: int, model: str, seed_id: str, created: int
    ) -> dict[str, Any] | None:
        """This dialect's own chat completion body, or None for OpenAI's (`bodies`)."""
        return None

    def item_error(
        self, outcome: str, message: str, ordinal: int, settings: Mapping[str, Any]
    ) -> dict[str, str] | None:
        """This dialect's own error for a failed request, written as the line's `error` with no
        `response`; None for OpenAI's (an HTTP error response in the line). `outcome` is the injected
        fault (`faults`), `message` OpenAI's text for it, `ordinal` how many failed lines came before
        in the file, `settings` the batch's settings snapshot."""
        return None


OPENAI = Flavor(
    name="openai",
    prefix="/v1",
    endpoints=("/v1/chat/completions", "/v1/responses", "/v1/embeddings"),
    default_embedding_dimensions=1536,
    max_embedding_dimensions=3072,
)
