"""Per-partition figures of the gate: sensitive data (items redacted / blocked), cost
(estimated / actual) and the usage kept apart (thinking and cached input tokens), read from the
ledger by query. No matched value is ever read here.

* estimated cost: sum of `manifest_item.est_cost` (priced at freeze, see `providers.prices`) of the
  partition's live items that are not quarantined (blocked or otherwise held back) - what the
  first attempt will cost at most; retries are not estimated. 0 when there is no such item (an empty
  day); NULL only when the model has no price.
* actual cost: sum of `parsed_result.cost` over every attempt, from the provider's usage
  (NULL usage - a failed request the provider does not bill - counts as 0), its cached input
  tokens at the model's cached-input price (`providers.prices`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import duckdb

from batch_assets.ledger.control_db import registered
from batch_assets.ledger.tasks import task_rows
from batch_assets.pipeline.govern.sensitive import BLOCKED_CODE
from batch_assets.providers.prices import cost_sql_or_null
from batch_assets.spec.resolve import ResolvedTask


@dataclass(frozen=True)
class PartitionGate:
    task_id: str
    pii_redacted: int
    pii_blocked: int
    cost_estimated: float | None
    cost_actual: float | None
    currency: str | None
    # Usage kept apart, summed over every attempt (None: no attempt reported the count).
    thinking_tokens: int | None = None  # part of the output tokens
    cached_input_tokens: int | None = None  # part of the input tokens, priced at the cached-input price

    def as_dict(self) -> dict:
        d = asdict(self)
        for k in ("cost_estimated", "cost_actual"):
            d[k] = None if d[k] is None else round(d[k], 6)
        return d


def partition_gate_sql() -> str:
    """(task_id, pii_redacted, pii_blocked, cost_estimated, cost_actual, currency, thinking_tokens,
    cached_input_tokens) of every partition in view `gate_task` (its batch_task rows)."""
    return f"""
        SELECT t.task_id,
               (SELECT count(DISTINCT p.custom_id)
                FROM ledger.pii_mapping p JOIN ledger.manifest_item m USING (custom_id)
                WHERE p.task_id = t.task_id AND m.superseded_at IS NULL) AS pii_redacted,
               (SELECT count(*) FROM ledger.quarantine q JOIN ledger.manifest_item m USING (custom_id)
                WHERE q.task_id = t.task_id AND q.reason_code = '{BLOCKED_CODE}' AND m.superseded_at IS NULL)
                   AS pii_blocked,
               -- No item to send costs 0 (not NULL: NULL means the model has no price).
               (SELECT CASE WHEN count(*) = 0 THEN 0.0 ELSE sum(m.est_cost) END FROM ledger.manifest_item m
                WHERE m.task_id = t.task_id AND m.superseded_at IS NULL
                  AND m.custom_id NOT IN (SELECT custom_id FROM ledger.quarantine WHERE task_id = t.task_id))
                   AS cost_estimated,
               CASE WHEN t.currency IS NULL THEN NULL
                    ELSE coalesce((SELECT sum(r.cost) FROM ledger.parsed_result r WHERE r.task_id = t.task_id), 0)
               END AS cost_actual,
               t.currency,
               (SELECT sum(r.thinking_tokens) FROM ledger.parsed_result r WHERE r.task_id = t.task_id)
                   AS thinking_tokens,
               (SELECT sum(r.cached_input_tokens) FROM ledger.parsed_result r WHERE r.task_id = t.task_id)
                   AS cached_input_tokens
        FROM gate_task t
    """


def partition_gates(conn: duckdb.DuckDBPyConnection, task_ids: list[str] | None = None) -> dict[str, PartitionGate]:
    with registered(conn, "gate_task", task_rows(conn, task_ids)):
        rows = conn.execute(partition_gate_sql()).fetchall()
    return {
        r[0]: PartitionGate(
            r[0],
            int(r[1]),
            int(r[2]),
            r[3],
            r[4],
            r[5],
            None if r[6] is None else int(r[6]),
            None if r[7] is None else int(r[7]),
        )
        for r in rows
    }


def expected_output_tokens(task: ResolvedTask) -> int:
    """Output tokens the estimate assumes per item: `params.max_tokens`, the most that can be billed
    (an upper bound; thinking tokens count against it), 0 for embeddings."""
    return 0 if task.spec.output.kind == "embedding" else int(task.spec.params.max_tokens)


REQUEST_FRAMING_TOKENS = 10  # per request: role markers of the system and user turns and the reply's start


def request_overhead_tokens(task: ResolvedTask) -> int:
    """Input tokens a request bills beyond its prompt text: the system prompt (estimated like the
    prompt, ~4 bytes a token) plus the chat framing. 0 for embeddings (the text is all)."""
    if task.spec.output.kind == "embedding":
        return 0
    system = (task.spec.prompt.system or "").encode("utf-8")
    return -(-len(system) // 4) + REQUEST_FRAMING_TOKENS


def est_cost_sql(task: ResolvedTask, input_tokens_sql: str = "est_input_tokens") -> str:
    """Estimated cost of one item: its prompt's offline token estimate plus the request overhead
    in, `expected_output_tokens` out, at the batch price (NULL when the model has no price)."""
    return cost_sql_or_null(
        task.spec.provider,
        task.spec.model,
        f"({input_tokens_sql} + {request_overhead_tokens(task)})",
        str(expected_output_tokens(task)),
    )
