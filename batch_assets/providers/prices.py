"""Price tables (`providers/<name>/prices.yaml`) and the cost arithmetic of the pipeline.

Prices are list prices per 1M tokens; every job the pipeline sends is a batch, so every cost is
`tokens / 1M x price x (1 - batch_discount)`. Thinking tokens are output tokens: the providers'
usage (and so `parsed_result.output_tokens`) already include them (Gemini's thoughtsTokenCount is
added by its wire format); `parsed_result.thinking_tokens` only shows how many they were. Input
tokens served from the provider's prompt cache (`parsed_result.cached_input_tokens`, part of
`input_tokens`) are priced at the model's `cached_input` price (the input price where the table
lists none): `((input - cached) x input + cached x cached_input + output x output) / 1M x batch factor`.
Anthropic cache writes are priced as plain input (they cost 1.25x; batches here set no cache
breakpoints, so there are none).

Estimate (at freeze): input = the offline estimate `est_input_tokens` of the prompt text (see
`pipeline.freeze.render.estimated_tokens_sql`: bytes / 4, at least one token per CJK character) plus the
request overhead (`pipeline.govern.cost.request_overhead_tokens`: the system prompt, estimated the same
way, and 10 tokens of chat framing); output = `params.max_tokens`, the most the provider can bill
(0 for embeddings) - an upper bound, not a forecast.

Measured error (`test_gate.py::test_cost_estimate_against_the_emulator_usage`, asserted within 5 %):
ticket_triage, one seeded day, 50 requests sent (English and Chinese, 40-6000 estimated tokens
each): estimated input 9,164 tokens vs 9,240 reported by the emulator (-0.8 %). The emulator's own
count is a heuristic (one token per CJK character, four characters per other token, ~3 tokens of
framing per message), so this measures agreement with that model, not with a real tokenizer: on
real tokenizers English runs ~4-4.5 characters a token and Chinese ~0.7-1.5 tokens a character,
so expect +-20 % on real input. The recorded real responses (../shared/reference/provider_samples)
carry usage but not the prompts that produced them, so they could not be used to measure the input
estimate. Output: the model answered 1,180 tokens (23.6 a request) against 200 x 50 = 10,000
estimated, so the estimated cost was 3.5x the actual (0.00369 vs 0.00105 USD): budgets checked
against the estimate are conservative, by design.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

PROVIDERS_DIR = Path(__file__).parent


@dataclass(frozen=True)
class ModelPrice:
    provider: str
    model: str
    currency: str
    input: float  # per 1M tokens, list price
    output: float
    cached_input: float
    batch_discount: float  # fraction off for batch jobs, e.g. 0.5
    effective: str

    @property
    def batch_factor(self) -> float:
        return 1.0 - self.batch_discount

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """Cost of one batched request (thinking tokens are part of `output_tokens`, cached input
        tokens part of `input_tokens`)."""
        fresh = input_tokens - cached_input_tokens
        return (
            (fresh * self.input + cached_input_tokens * self.cached_input + output_tokens * self.output)
            / 1e6
            * self.batch_factor
        )

    def cost_sql(self, input_sql: str, output_sql: str, cached_sql: str | None = None) -> str:
        """The same as SQL (DOUBLE); NULL when the input or output count is NULL (a NULL cached
        count is none cached)."""
        cached = f"coalesce(CAST({cached_sql} AS DOUBLE), 0)" if cached_sql else "0"
        return (
            f"((CAST({input_sql} AS DOUBLE) - {cached}) * {self.input!r} + {cached} * {self.cached_input!r}"
            f" + CAST({output_sql} AS DOUBLE) * {self.output!r}) / 1e6 * {self.batch_factor!r}"
        )


@functools.cache
def price_table(provider: str) -> dict[str, ModelPrice]:
    """model -> price of a provider (empty when the provider folder has no prices.yaml)."""
    path = PROVIDERS_DIR / provider / "prices.yaml"
    if not path.is_file():
        return {}
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    discount = float(raw.get("batch_discount", 0.0))
    if not 0 <= discount < 1:
        raise ValueError(f"{path}: batch_discount must be in [0, 1), got {discount}")
    out = {}
    for model, p in (raw.get("models") or {}).items():
        out[model] = ModelPrice(
            provider=provider,
            model=model,
            currency=str(raw["currency"]),
            input=float(p["input"]),
            output=float(p["output"]),
            cached_input=float(p.get("cached_input", p["input"])),
            batch_discount=discount,
            effective=str(p.get("effective", raw.get("effective", ""))),
        )
    return out


def model_price(provider: str, model: str) -> ModelPrice | None:
    """The price of `model` at `provider`, or None when the table does not list it (cost unknown)."""
    return price_table(provider).get(model)


def currency_of(provider: str, model: str) -> str | None:
    p = model_price(provider, model)
    return p.currency if p else None


def cost_sql_or_null(provider: str, model: str, input_sql: str, output_sql: str, cached_sql: str | None = None) -> str:
    p = model_price(provider, model)
    return p.cost_sql(input_sql, output_sql, cached_sql) if p else "CAST(NULL AS DOUBLE)"
