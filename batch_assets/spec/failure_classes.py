"""The failure classes: every way an item's attempt can fail, named once.

The providers' adapters map their codes onto these (providers/wire.py, each formats.py), the retry
ledger gives each class an action (a task's `retry.actions` may override it), the reconciliation
counts final failures by class, and `batch-assets retry --class` takes them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FailureClass:
    name: str
    short: str  # a column header in the plain-text tables
    default_action: str  # retry | final_failed | compliance_hold | await_operator
    meaning: str


CLASSES = (
    FailureClass("validation_error", "valid", "await_operator", "the provider refused the request as malformed"),
    FailureClass("rate_or_capacity_error", "rate", "retry", "rate limit, quota or capacity: retry later, smaller"),
    FailureClass("content_policy_error", "policy", "compliance_hold", "refused or blocked by a content policy"),
    FailureClass("internal_error", "internal", "retry", "the provider failed on its side"),
    FailureClass("parse_error", "parse", "retry", "the answer does not match the output schema"),
    FailureClass("expired", "expired", "retry", "the batch's window ended before the request ran"),
    FailureClass("canceled", "canceled", "retry", "canceled with its batch (final when an operator canceled)"),
    FailureClass("provider_canceled", "pcancel", "retry", "the provider canceled this one request on its own"),
    FailureClass("missing_result", "missing", "retry", "the job finished but returned no line for the request"),
    FailureClass(
        "unmatched_result", "unmatch", "retry", "answered without its request key: resent as a file, no attempt charged"
    ),
    FailureClass(
        "account_error", "account", "await_operator", "the provider account cannot be used (key, access, billing)"
    ),
)
FAILURE_CLASSES = tuple(c.name for c in CLASSES)
DEFAULT_ACTIONS = {c.name: c.default_action for c in CLASSES}
SHORT_CLASS = {c.name: c.short for c in CLASSES}


def unknown_classes_error(classes) -> ValueError | None:
    """The error for names that are not failure classes, or None when all are."""
    unknown = sorted(set(classes) - set(FAILURE_CLASSES))
    if not unknown:
        return None
    return ValueError(f"unknown failure class(es) {unknown}; use: {', '.join(FAILURE_CLASSES)}")
