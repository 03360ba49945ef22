"""Reconciliation: every manifest item accounted for, every term an independent query over the ledger.

Equations (outcomes on each item's LATEST attempt; lines counted per attempt):

    manifest items = succeeded + failed (by class) + expired + canceled + quarantined + missing + unsharded
    first-attempt shard lines + unsharded = manifest items - quarantined
    retry shard lines = retry decisions whose next attempt was cut
    provider request counts = lines submitted (batches whose provider reports counts)
    outcomes taken from result lines = result lines matched to items
    applied + revoked + stale + failed-to-parse = succeeded

Each term is counted from its own table (not derived from the others), so a lost, duplicated or
tampered ledger row makes an equation fail instead of being absorbed by a remainder.

Finality: every item ends in exactly one final outcome — applied, revoked (applied, then taken back),
stale, quarantined, final-failed (by class, after its retries), compliance-held, canceled by an operator. Not final: in flight
(its latest attempt's batch has not ended, or its shard is not submitted yet), retry pending,
undecided, and unresolved (a finished batch gave it no outcome; an answer that was not applied).
The verdict passes only when every item is final, the equations hold and final failures are within
the task's tolerance; it warns while work is pending; it fails when nothing is pending and any
item is unresolved or failures exceed the tolerance. Green means done.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import duckdb

from batch_assets.ledger.states import JobState, not_terminal_sql
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.retry import FINAL_FAILED_ACTIONS, RETRY_ACTIONS

# Classes an item can be final-failed with (expired / canceled remainders are retried; an
# operator's cancel is its own outcome).
FAILURE_CLASSES = ("validation_error", "rate_or_capacity_error", "content_policy_error", "internal_error",
                   "parse_error", "expired", "canceled")
DEFAULT_MAX_FAILED_FRACTION = 0.01

PASSED, WARN, FAILED = "passed", "warn", "failed"


@dataclass(frozen=True)
class Verdict:
    status: str          # passed | warn | failed
    reasons: tuple[str, ...]
    final_status: str | None   # the partition's final status; None while work is pending

    @property
    def passed(self) -> bool:
        return self.status == PASSED


@dataclass
class Reconciliation:
    task_id: str
    manifest_items: int = 0
    source_rejects: int = 0
    quarantined: int = 0
    unsharded: int = 0                # items neither in a shard nor quarantined (shards not cut yet)
    shard_lines: int = 0              # first-attempt lines
    retry_lines: int = 0              # lines of attempts 2, 3, …
    retry_lines_expected: int = 0     # retry decisions whose next attempt was cut
    submitted_lines: int = 0          # lines of shards the provider accepted as a batch (all attempts)
    provider_counted_lines: int = 0   # of those, lines of batches whose provider reports request counts
    provider_request_total: int = 0
    succeeded: int = 0                # latest attempt answered and not refused for content
    failed: dict[str, int] = field(default_factory=dict)   # latest attempt failed, by class
    expired: int = 0
    canceled: int = 0
    missing: int = 0                  # latest line without an outcome (in flight included)
    in_flight: int = 0
    applied: int = 0
    revoked: int = 0                  # applied, then taken back (`batch-assets revoke`): final
    stale: int = 0
    failed_to_parse: int = 0
    orphan_lines: int = 0
    duplicate_lines: int = 0
    malformed_lines: int = 0
    answered_lines: int = 0       # result lines matched to an item (raw_result status ok), all attempts
    parsed_from_lines: int = 0    # outcomes taken from a result line (not from the batch's end state)
    jobs: int = 0
    jobs_terminal: int = 0
    # finality of every item (one state each)
    final_failed: dict[str, int] = field(default_factory=dict)
    compliance_held: int = 0
    operator_canceled: int = 0
    retry_pending: int = 0
    undecided: int = 0
    unresolved_missing: int = 0       # a finished batch gave the item no outcome (or it was not collected)
    unapplied: int = 0                # a usable answer that was not written
    retried: int = 0                  # items sent more than once
    max_attempt: int = 0
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION
    final_status: str | None = None   # as recorded in ledger.batch_task
    # The provider's own reason for each batch it failed as a whole (e.g. "too_many_tasks: …").
    batch_failures: list[str] = field(default_factory=list)

    @property
    def failed_total(self) -> int:
        return sum(self.failed.values())

    @property
    def final_failed_total(self) -> int:
        return sum(self.final_failed.values())

    @property
    def pending(self) -> int:
        """Items with work still under way: in flight, retry pending, undecided, not yet sharded."""
        return self.in_flight + self.retry_pending + self.undecided + self.unsharded

    @property
    def unresolved(self) -> int:
        """Items not in a final outcome (pending ones included)."""
        return self.pending + self.unresolved_missing + self.unapplied

    def problems(self, require_applied: bool = True) -> list[str]:
        """Every equation that does not balance, spelled out with its numbers."""
        out = []
        outcome = (self.succeeded + self.failed_total + self.expired + self.canceled + self.quarantined + self.missing
                   + self.unsharded)
        if self.manifest_items != outcome:
            out.append(f"manifest items {self.manifest_items} != succeeded {self.succeeded} + failed {self.failed_total} "
                       f"+ expired {self.expired} + canceled {self.canceled} + quarantined {self.quarantined} "
                       f"+ missing {self.missing} + unsharded {self.unsharded} (= {outcome})")
        if self.shard_lines + self.unsharded != self.manifest_items - self.quarantined:
            out.append(f"first-attempt shard lines {self.shard_lines} + unsharded {self.unsharded} != manifest items "
                       f"{self.manifest_items} - quarantined {self.quarantined}")
        if self.retry_lines != self.retry_lines_expected:
            out.append(f"retry shard lines {self.retry_lines} != retry decisions sent again {self.retry_lines_expected}")
        if self.provider_request_total != self.provider_counted_lines:
            out.append(f"provider request counts {self.provider_request_total} != lines submitted "
                       f"{self.provider_counted_lines} (batches whose provider reports counts)")
        if self.parsed_from_lines > self.answered_lines or (require_applied and self.parsed_from_lines != self.answered_lines):
            out.append(f"outcomes from result lines {self.parsed_from_lines} != result lines matched to items "
                       f"{self.answered_lines}")
        if require_applied and self.applied + self.revoked + self.stale + self.failed_to_parse != self.succeeded:
            revoked = f" + revoked {self.revoked}" if self.revoked else ""
            out.append(f"applied {self.applied}{revoked} + stale {self.stale} + failed to parse "
                       f"{self.failed_to_parse} != succeeded {self.succeeded}")
        return out

    def verdict(self) -> Verdict:
        """passed only when every item is final, the equations hold and final failures are within
        the tolerance; warn while work is pending; failed otherwise."""
        problems = self.problems()
        if problems:
            return Verdict(FAILED, tuple(f"unbalanced: {p}" for p in problems), None if self.pending else "FAILED")
        if self.pending:
            return Verdict(WARN, (f"{self.pending} item(s) not final yet: {self.in_flight} in flight, "
                                  f"{self.retry_pending} retry pending, {self.undecided} undecided, "
                                  f"{self.unsharded} not sharded",), None)
        reasons = []
        if self.unresolved_missing:
            reasons.append(f"{self.unresolved_missing} item(s) got no outcome from a finished batch "
                           "(missing, orphan-only or malformed-only lines, or results not collected)")
        if self.unapplied:
            reasons.append(f"{self.unapplied} usable answer(s) not applied")
        tolerance = self.max_failed_fraction * self.manifest_items
        if self.final_failed_total > tolerance:
            by_class = ", ".join(f"{c} {n}" for c, n in sorted(self.final_failed.items()) if n)
            reasons.append(f"{self.final_failed_total} final failure(s) ({by_class}) > tolerance "
                           f"{self.max_failed_fraction:.2%} of {self.manifest_items} items")
        if reasons:
            reasons += [f"provider failed batch {f}" for f in self.batch_failures]
            return Verdict(FAILED, tuple(reasons), "FAILED")
        if self.operator_canceled and not (self.applied + self.revoked + self.stale):
            final = "CANCELED"
        elif self.final_failed_total or self.compliance_held or self.operator_canceled:
            final = "COMPLETED_WITH_FAILURES"
        else:
            final = "COMPLETED"
        return Verdict(PASSED, ("every item final, all equations hold",), final)

    def as_metadata(self) -> dict:
        d = asdict(self)
        failed = d.pop("failed")
        final_failed = d.pop("final_failed")
        d.update({f"failed_{k}": v for k, v in failed.items()})
        d.update({f"final_failed_{k}": v for k, v in final_failed.items()})
        d["failed_total"] = self.failed_total
        d["final_failed_total"] = self.final_failed_total
        d["unresolved"] = self.unresolved
        d["final_status"] = d["final_status"] or "none"
        d["batch_failures"] = "\n".join(self.batch_failures) or "none"
        return d


# An item superseded by a refreeze no longer counts anywhere. (Rows of ids unknown to the manifest
# still count, so a stray or tampered row unbalances the equation instead of vanishing.)
ACTIVE = "custom_id NOT IN (SELECT custom_id FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NOT NULL)"
LATEST = "(SELECT custom_id, max(attempt) AS attempt FROM ledger.shard_line WHERE task_id = $t GROUP BY custom_id)"


def _one(conn: duckdb.DuckDBPyConnection, sql: str, task_id: str) -> int:
    return int(conn.execute(sql, {"t": task_id}).fetchone()[0] or 0)


def reconcile_conn(conn: duckdb.DuckDBPyConnection, task_id: str,
                   max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION) -> Reconciliation:
    r = Reconciliation(task_id, max_failed_fraction=max_failed_fraction)
    r.manifest_items = _one(conn, "SELECT count(*) FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NULL", task_id)
    r.source_rejects = _one(conn, "SELECT coalesce(sum(row_count), 0) FROM ledger.source_reject WHERE task_id = $t", task_id)
    r.quarantined = _one(conn, f"SELECT count(*) FROM ledger.quarantine WHERE task_id = $t AND {ACTIVE}", task_id)
    # Items frozen after the last cut wait for the next one; an older item in neither a shard nor
    # the quarantine is a lost row, so it is not counted here and unbalances the equations.
    r.unsharded = _one(conn, """
        SELECT count(*) FROM ledger.manifest_item m WHERE m.task_id = $t AND m.superseded_at IS NULL
          AND m.custom_id NOT IN (SELECT custom_id FROM ledger.quarantine WHERE task_id = $t)
          AND m.custom_id NOT IN (SELECT custom_id FROM ledger.shard_line WHERE task_id = $t)
          AND m.frozen_at >= coalesce((SELECT max(created_at) FROM ledger.shard WHERE task_id = $t), m.frozen_at)""",
                       task_id)
    r.shard_lines = _one(conn, f"SELECT count(*) FROM ledger.shard_line WHERE task_id = $t AND attempt = 1 AND {ACTIVE}", task_id)
    r.retry_lines = _one(conn, f"SELECT count(*) FROM ledger.shard_line WHERE task_id = $t AND attempt > 1 AND {ACTIVE}", task_id)
    r.retry_lines_expected = _one(conn, f"""
        SELECT count(*) FROM ledger.retry_decision d
        WHERE d.task_id = $t AND d.action IN {RETRY_ACTIONS} AND d.{ACTIVE}
          AND EXISTS (SELECT 1 FROM ledger.shard_line sl WHERE sl.task_id = $t AND sl.custom_id = d.custom_id
                      AND sl.attempt = d.next_attempt)""", task_id)
    r.submitted_lines = _one(conn, """
        SELECT coalesce(sum(s.line_count), 0) FROM ledger.shard s JOIN ledger.provider_job j USING (shard_id)
        WHERE s.task_id = $t AND j.provider_batch_id IS NOT NULL""", task_id)
    # Gemini reports no request counts to the SDK; batches still validating report 0.
    r.provider_counted_lines = _one(conn, """
        SELECT coalesce(sum(s.line_count), 0) FROM ledger.shard s JOIN ledger.provider_job j USING (shard_id)
        WHERE s.task_id = $t AND j.request_total > 0""", task_id)
    r.provider_request_total = _one(conn, """
        SELECT coalesce(sum(request_total), 0) FROM ledger.provider_job WHERE task_id = $t AND request_total > 0""", task_id)
    rows = conn.execute(f"""
        SELECT coalesce(p.error_class, 'succeeded') AS cls, p.provider_succeeded, count(*)
        FROM ledger.parsed_result p JOIN {LATEST} l USING (custom_id, attempt)
        WHERE p.task_id = $t AND p.{ACTIVE} GROUP BY ALL""", {"t": task_id}).fetchall()
    for cls, provider_ok, n in rows:
        if provider_ok and cls != "content_policy_error":  # a refusal is not an answer
            r.succeeded += n
            if cls != "succeeded":
                r.failed_to_parse += n
        elif cls == "expired":
            r.expired += n
        elif cls == "canceled":
            r.canceled += n
        else:
            r.failed[cls] = r.failed.get(cls, 0) + n
    r.missing = _one(conn, f"""
        SELECT count(*) FROM ledger.shard_line sl JOIN {LATEST} l USING (custom_id, attempt)
        WHERE sl.task_id = $t AND sl.{ACTIVE}
          AND NOT EXISTS (SELECT 1 FROM ledger.parsed_result p WHERE p.custom_id = sl.custom_id AND p.attempt = sl.attempt)""",
                     task_id)
    applied = dict(conn.execute(f"""
        SELECT CASE WHEN outcome = 'applied' AND custom_id IN (SELECT custom_id FROM ledger.revocation)
                    THEN 'revoked' ELSE outcome END, count(*)
        FROM ledger.applied_result WHERE task_id = $t AND {ACTIVE} GROUP BY 1""", {"t": task_id}).fetchall())
    r.applied, r.revoked, r.stale = applied.get("applied", 0), applied.get("revoked", 0), applied.get("stale", 0)
    lines = dict(conn.execute("SELECT status, count(*) FROM ledger.raw_result WHERE task_id = $t GROUP BY 1",
                              {"t": task_id}).fetchall())
    r.orphan_lines, r.duplicate_lines, r.malformed_lines = (lines.get(k, 0) for k in ("orphan", "duplicate", "malformed"))
    r.answered_lines = _one(conn, f"SELECT count(*) FROM ledger.raw_result WHERE task_id = $t AND status = 'ok' AND {ACTIVE}", task_id)
    r.parsed_from_lines = _one(conn, f"SELECT count(*) FROM ledger.parsed_result WHERE task_id = $t AND from_line AND {ACTIVE}", task_id)
    r.jobs, r.jobs_terminal = conn.execute(
        "SELECT count(*), count(terminal_at) FROM ledger.provider_job WHERE task_id = $t", {"t": task_id}).fetchone()
    r.batch_failures = [
        f"{job_key}: {code or 'no code'}: {message or 'no detail'}" for job_key, code, message in conn.execute(f"""
            SELECT job_key, provider_errors::JSON ->> '$[0].code', provider_errors::JSON ->> '$[0].message'
            FROM ledger.provider_job WHERE task_id = $t AND state = '{JobState.FAILED.value}' ORDER BY job_key""",
                                                                                          {"t": task_id}).fetchall()]
    _finality(conn, task_id, r)
    r.final_status = conn.execute("SELECT final_status FROM ledger.batch_task WHERE task_id = $t",
                                  {"t": task_id}).fetchone()[0] if r.manifest_items else None
    return r


def _finality(conn: duckdb.DuckDBPyConnection, task_id: str, r: Reconciliation) -> None:
    """One state per manifest item (its latest attempt), counted."""
    rows = conn.execute(f"""
        WITH items AS (SELECT custom_id FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NULL),
        latest AS {LATEST},
        open_lines AS (  -- latest lines whose batch has not ended (or is not submitted yet)
            SELECT DISTINCT sl.custom_id
            FROM ledger.shard_line sl JOIN latest USING (custom_id, attempt)
            LEFT JOIN ledger.provider_job j ON j.shard_id = sl.shard_id
                 AND coalesce(j.create_outcome, '') <> 'abandoned'
            WHERE sl.task_id = $t AND (j.job_key IS NULL OR {not_terminal_sql('j')})
        )
        SELECT CASE
                   WHEN q.custom_id IS NOT NULL THEN 'quarantined'
                   WHEN a.outcome IS NOT NULL THEN a.outcome
                   WHEN l.custom_id IS NULL THEN 'unsharded'
                   WHEN o.custom_id IS NULL THEN CASE WHEN ol.custom_id IS NOT NULL THEN 'in_flight' ELSE 'missing' END
                   WHEN o.error_class IS NULL THEN 'unapplied'
                   WHEN d.action IN {RETRY_ACTIONS} THEN 'retry_pending'
                   WHEN d.action = 'compliance_hold' THEN 'compliance_held'
                   WHEN d.action = 'canceled' THEN 'operator_canceled'
                   WHEN d.action IN {FINAL_FAILED_ACTIONS} THEN 'final_failed'
                   ELSE 'undecided'
               END AS state,
               coalesce(d.error_class, o.error_class) AS cls,
               count(*) AS n, count(*) FILTER (l.attempt > 1) AS retried, max(l.attempt) AS max_attempt
        FROM items i
        LEFT JOIN (SELECT custom_id FROM ledger.quarantine WHERE task_id = $t) q USING (custom_id)
        LEFT JOIN (SELECT custom_id, outcome FROM ledger.applied_result WHERE task_id = $t) a USING (custom_id)
        LEFT JOIN latest l USING (custom_id)
        LEFT JOIN ledger.parsed_result o ON o.custom_id = l.custom_id AND o.attempt = l.attempt
        LEFT JOIN ledger.retry_decision d ON d.custom_id = l.custom_id AND d.attempt = l.attempt
        LEFT JOIN open_lines ol ON ol.custom_id = i.custom_id
        GROUP BY ALL
    """, {"t": task_id}).fetchall()
    for state, cls, n, retried, max_attempt in rows:
        r.retried += retried
        r.max_attempt = max(r.max_attempt, max_attempt or 0)
        if state == "final_failed":
            r.final_failed[cls] = r.final_failed.get(cls, 0) + n
        elif state == "in_flight":
            r.in_flight += n
        elif state == "missing":
            r.unresolved_missing += n
        elif state in ("retry_pending", "undecided", "unapplied", "compliance_held", "operator_canceled"):
            setattr(r, state, getattr(r, state) + n)


def reconcile(wh: Warehouse, task_id: str, max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION) -> Reconciliation:
    with wh.connect() as conn:
        return reconcile_conn(conn, task_id, max_failed_fraction)


def settle(wh: Warehouse, task_id: str, max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION
           ) -> tuple[Reconciliation, Verdict]:
    """Reconcile the partition and record its final status (cleared again while work is pending)."""
    from batch_assets.ledger.retries import set_final_status

    with wh.connect() as conn:
        rec = reconcile_conn(conn, task_id, max_failed_fraction)
        verdict = rec.verdict()
        if rec.manifest_items or rec.source_rejects:
            set_final_status(conn, task_id, verdict.final_status)
            rec.final_status = verdict.final_status
    return rec, verdict
