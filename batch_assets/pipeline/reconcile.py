"""The reconciliation equation, every term an independent query over the ledger.

    manifest items = succeeded + failed (by class) + expired + canceled + quarantined + missing
    applied + stale + failed-to-parse = succeeded
    shard lines = manifest items - quarantined
    provider request counts = lines submitted
    outcomes taken from result lines = result lines matched to items

Each term is counted from its own table (not derived from the others), so a lost, duplicated or
tampered ledger row makes the equation fail instead of being absorbed by a remainder.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import duckdb

from batch_assets.ledger.states import not_terminal_sql
from batch_assets.ledger.warehouse import Warehouse

FAILURE_CLASSES = ("validation_error", "rate_or_capacity_error", "content_policy_error", "internal_error")


@dataclass
class Reconciliation:
    task_id: str
    manifest_items: int = 0
    source_rejects: int = 0
    quarantined: int = 0
    shard_lines: int = 0
    submitted_lines: int = 0          # lines of shards the provider accepted as a batch
    provider_counted_lines: int = 0   # of those, lines of batches whose provider reports request counts
    provider_request_total: int = 0
    succeeded: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    expired: int = 0
    canceled: int = 0
    missing: int = 0
    in_flight: int = 0
    applied: int = 0
    stale: int = 0
    failed_to_parse: int = 0
    orphan_lines: int = 0
    duplicate_lines: int = 0
    malformed_lines: int = 0
    answered_lines: int = 0       # result lines matched to an item (raw_result status ok)
    parsed_from_lines: int = 0    # outcomes taken from a result line (not from the batch's end state)
    jobs: int = 0
    jobs_terminal: int = 0

    @property
    def failed_total(self) -> int:
        return sum(self.failed.values())

    def problems(self, require_applied: bool = True) -> list[str]:
        """Every equation that does not balance, spelled out with its numbers."""
        out = []
        outcome = self.succeeded + self.failed_total + self.expired + self.canceled + self.quarantined + self.missing
        if self.manifest_items != outcome:
            out.append(f"manifest items {self.manifest_items} != succeeded {self.succeeded} + failed {self.failed_total} "
                       f"+ expired {self.expired} + canceled {self.canceled} + quarantined {self.quarantined} "
                       f"+ missing {self.missing} (= {outcome})")
        if self.shard_lines != self.manifest_items - self.quarantined:
            out.append(f"shard lines {self.shard_lines} != manifest items {self.manifest_items} - quarantined {self.quarantined}")
        if self.provider_request_total != self.provider_counted_lines:
            out.append(f"provider request counts {self.provider_request_total} != lines submitted "
                       f"{self.provider_counted_lines} (batches whose provider reports counts)")
        if self.parsed_from_lines > self.answered_lines or (require_applied and self.parsed_from_lines != self.answered_lines):
            out.append(f"outcomes from result lines {self.parsed_from_lines} != result lines matched to items "
                       f"{self.answered_lines}")
        if require_applied and self.applied + self.stale + self.failed_to_parse != self.succeeded:
            out.append(f"applied {self.applied} + stale {self.stale} + failed to parse {self.failed_to_parse} "
                       f"!= succeeded {self.succeeded}")
        return out

    def as_metadata(self) -> dict:
        d = asdict(self)
        failed = d.pop("failed")
        d.update({f"failed_{k}": v for k, v in failed.items()})
        d["failed_total"] = self.failed_total
        return d


# An item superseded by a refreeze no longer counts anywhere. (Rows of ids unknown to the manifest
# still count, so a stray or tampered row unbalances the equation instead of vanishing.)
ACTIVE = "custom_id NOT IN (SELECT custom_id FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NOT NULL)"


def _one(conn: duckdb.DuckDBPyConnection, sql: str, task_id: str) -> int:
    return int(conn.execute(sql, {"t": task_id}).fetchone()[0] or 0)


def reconcile_conn(conn: duckdb.DuckDBPyConnection, task_id: str) -> Reconciliation:
    r = Reconciliation(task_id)
    r.manifest_items = _one(conn, "SELECT count(*) FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NULL", task_id)
    r.source_rejects = _one(conn, "SELECT coalesce(sum(row_count), 0) FROM ledger.source_reject WHERE task_id = $t", task_id)
    r.quarantined = _one(conn, f"SELECT count(*) FROM ledger.quarantine WHERE task_id = $t AND {ACTIVE}", task_id)
    r.shard_lines = _one(conn, f"SELECT count(*) FROM ledger.shard_line WHERE task_id = $t AND {ACTIVE}", task_id)
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
        SELECT coalesce(error_class, 'succeeded') AS cls, provider_succeeded, count(*)
        FROM ledger.parsed_result WHERE task_id = $t AND {ACTIVE} GROUP BY ALL""", {"t": task_id}).fetchall()
    for cls, provider_ok, n in rows:
        if provider_ok:
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
        SELECT count(*) FROM ledger.shard_line sl
        ANTI JOIN (SELECT custom_id FROM ledger.parsed_result WHERE task_id = $t) p USING (custom_id)
        WHERE sl.task_id = $t AND sl.{ACTIVE}""", task_id)
    # Lines of jobs that have not ended, whether or not the provider has the batch yet.
    r.in_flight = _one(conn, f"""
        SELECT coalesce(sum(s.line_count), 0) FROM ledger.provider_job j JOIN ledger.shard s USING (shard_id)
        WHERE j.task_id = $t AND {not_terminal_sql('j')}""", task_id)
    applied = dict(conn.execute(f"SELECT outcome, count(*) FROM ledger.applied_result WHERE task_id = $t AND {ACTIVE} GROUP BY 1",
                                {"t": task_id}).fetchall())
    r.applied, r.stale = applied.get("applied", 0), applied.get("stale", 0)
    lines = dict(conn.execute("SELECT status, count(*) FROM ledger.raw_result WHERE task_id = $t GROUP BY 1",
                              {"t": task_id}).fetchall())
    r.orphan_lines, r.duplicate_lines, r.malformed_lines = (lines.get(k, 0) for k in ("orphan", "duplicate", "malformed"))
    r.answered_lines = _one(conn, f"SELECT count(*) FROM ledger.raw_result WHERE task_id = $t AND status = 'ok' AND {ACTIVE}", task_id)
    r.parsed_from_lines = _one(conn, f"SELECT count(*) FROM ledger.parsed_result WHERE task_id = $t AND from_line AND {ACTIVE}", task_id)
    r.jobs, r.jobs_terminal = conn.execute(
        "SELECT count(*), count(terminal_at) FROM ledger.provider_job WHERE task_id = $t", {"t": task_id}).fetchone()
    return r


def reconcile(wh: Warehouse, task_id: str) -> Reconciliation:
    with wh.connect() as conn:
        return reconcile_conn(conn, task_id)
