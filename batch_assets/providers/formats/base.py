"""What every wire format provides, and the SPEC §6 classification shared by all of them.

A wire format knows one provider endpoint's request line and result line. It renders request
lines as SQL, and turns result lines into one normalized form:

  envelope (ingest):  request_id, line_id, status_code, provider_request_id, body (JSON), error (JSON)
  answer (parse):     content (text), vector (JSON array), finish_reason (stop | length |
                      content_filter | other), refusal, input_tokens, output_tokens,
                      error_code, error_message

so parsing, classification and apply are the same SQL for every provider.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from batch_assets.sqltext import sql_literal

if TYPE_CHECKING:
    from batch_assets.spec.resolve import ResolvedTask

# Provider error codes/types that mean "capacity or quota": retry later, smaller.
CAPACITY_CODES = ("rate_limit_exceeded", "insufficient_quota", "token_limit_exceeded", "rate_limit_error",
                  "overloaded_error", "billing_error", "RESOURCE_EXHAUSTED", "Throttling", "Arrearage")
CONTENT_POLICY_CODES = ("content_policy_violation", "content_filter", "data_inspection_failed",
                        "DataInspectionFailed", "SAFETY", "PROHIBITED_CONTENT")

# SPEC §6 class of a provider-level failure, from the normalized status_code / error_code.
FAILURE_CLASS_SQL = f"""
    CASE
        WHEN error_code IN ('batch_expired', 'expired') THEN 'expired'
        WHEN error_code IN ('batch_cancelled', 'canceled', 'cancelled') THEN 'canceled'
        WHEN status_code = 429 OR error_code IN ({", ".join(map(sql_literal, CAPACITY_CODES))}) THEN 'rate_or_capacity_error'
        WHEN error_code IN ({", ".join(map(sql_literal, CONTENT_POLICY_CODES))}) THEN 'content_policy_error'
        WHEN status_code BETWEEN 400 AND 499 AND status_code NOT IN (408, 409) THEN 'validation_error'
        ELSE 'internal_error'
    END
"""


class WireFormat:
    """One provider endpoint's request and result line formats (subclasses fill these in)."""

    #: columns (and DuckDB types) read from every result line with read_json
    result_columns: dict[str, str] = {}

    def request_line_sql(self, task: ResolvedTask, request_id_col: str, prompt_col: str) -> str:
        raise TypeError(f"{type(self).__name__} renders no request lines")

    def envelope_sql(self, line: str) -> str:
        raise TypeError(f"{type(self).__name__} reads no result lines")

    def answer_sql(self, raw: str) -> str:
        raise TypeError(f"{type(self).__name__} extracts no answers")


def system_and_user(task: ResolvedTask, prompt_col: str) -> tuple[str | None, str]:
    """SQL for the system text (or None) and the user text."""
    system = task.spec.prompt.system
    return (sql_literal(system) if system else None), prompt_col


def json_const(value) -> str:
    """A constant JSON value (e.g. the output schema) as a SQL JSON expression."""
    return f"{sql_literal(json.dumps(value, ensure_ascii=False, separators=(',', ':')))}::JSON"
