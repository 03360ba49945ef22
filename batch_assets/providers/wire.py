"""What every wire format provides, and the helpers the providers' formats share.

A wire format knows one provider endpoint's request line and result line. It renders request
lines as SQL, and turns result lines into one normalized form:

  envelope (ingest):  request_id, line_id, status_code, provider_request_id, body (JSON), error (JSON)
  answer (parse):     content (text), vector (JSON array), finish_reason (stop | length |
                      content_filter | other), refusal, input_tokens, output_tokens,
                      thinking_tokens (part of output_tokens), cached_input_tokens (part of
                      input_tokens), error_code, error_message

so parsing, classification and apply are the same SQL for every provider. Each format also
carries its provider's failure classification (`failure_class_sql`), built by
`failure_class_sql` below from the error codes that provider emits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from batch_assets.sqltext import sql_literal

if TYPE_CHECKING:
    from batch_assets.spec.resolve import ResolvedTask

# Codes the pipeline itself writes for items of a batch that ended before they ran (and the
# result types some providers use for the same): the same for every provider.
EXPIRED_CODES = ("batch_expired", "expired")
CANCELLED_CODES = ("batch_cancelled", "canceled", "cancelled")


def _in_list(codes: Sequence[str]) -> str:
    return ", ".join(map(sql_literal, codes))


def failure_class_sql(
    capacity_codes: Sequence[str], content_policy_codes: Sequence[str], cancelled_codes: Sequence[str] = ()
) -> str:
    """The class of a provider-level failure, from the normalized status_code / error_code.

    Classes: expired, canceled (also the provider's own cancelled codes), rate_or_capacity_error (HTTP 429
    or one of the provider's capacity or quota codes: retry later, smaller), content_policy_error (one of
    its content-policy codes),
    validation_error (any other 4xx except 408 and 409), internal_error (everything else).
    """
    whens = [
        f"WHEN error_code IN ({_in_list(EXPIRED_CODES)}) THEN 'expired'",
        f"WHEN error_code IN ({_in_list((*CANCELLED_CODES, *cancelled_codes))}) THEN 'canceled'",
        "WHEN status_code = 429"
        + (f" OR error_code IN ({_in_list(capacity_codes)})" if capacity_codes else "")
        + " THEN 'rate_or_capacity_error'",
    ]
    if content_policy_codes:
        whens.append(f"WHEN error_code IN ({_in_list(content_policy_codes)}) THEN 'content_policy_error'")
    whens += [
        "WHEN status_code BETWEEN 400 AND 499 AND status_code NOT IN (408, 409) THEN 'validation_error'",
        "ELSE 'internal_error'",
    ]
    return "\n    CASE\n        " + "\n        ".join(whens) + "\n    END\n"


class WireFormat:
    """One provider endpoint's request and result line formats (subclasses fill these in)."""

    #: columns (and DuckDB types) read from every result line with read_json
    result_columns: dict[str, str] = {}
    #: error codes of this provider meaning "capacity or quota" (also used for whole-batch failures)
    capacity_codes: tuple[str, ...] = ()
    #: error codes of this provider meaning "blocked by its content policy"
    content_policy_codes: tuple[str, ...] = ()
    #: error codes of this provider meaning "cancelled" (besides the pipeline's own)
    cancelled_codes: tuple[str, ...] = ()
    #: error codes of a whole failed batch meaning "the provider's own fault" (internal_error, retried
    #: with backoff); any other code of a failed batch is a validation_error unless it means capacity
    internal_codes: tuple[str, ...] = ()
    #: error codes of this provider meaning "the account cannot be used" (account_error: the provider
    #: account is paused until an operator resumes it, see ledger.accounts)
    account_codes: tuple[str, ...] = ()

    def account_fix(self, code: str | None) -> str:
        """What the operator does about an account-level error `code` before resuming the account."""
        return "fix the provider account (API key, access or billing), then resume it"

    @property
    def failure_class_sql(self) -> str:
        """SQL CASE classifying a failed line (columns status_code, error_code) for this provider."""
        return failure_class_sql(self.capacity_codes, self.content_policy_codes, self.cancelled_codes)

    def request_line_sql(self, task: ResolvedTask, request_id_col: str, prompt_col: str) -> str:
        raise TypeError(f"{type(self).__name__} renders no request lines")

    def request_options(self, task: ResolvedTask) -> dict[str, str | int]:
        """The options the task's request lines are rendered with that matter when comparing
        runs (which structured-output field, which embedding size), recorded on each provider job."""
        return {}

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
