"""Reconciliation: every manifest item accounted for, every term counted from its own ledger table.

Equations (outcomes on each item's LATEST attempt; lines counted per attempt):

    manifest items = succeeded + failed (by class) + expired + canceled + quarantined + missing + unsharded
    first-attempt shard lines + unsharded = manifest items - quarantined
    retry shard lines = retry decisions whose next attempt was cut
    provider request counts = lines submitted (batches whose provider reports counts)
    outcomes taken from result lines = result lines matched to items
    applied + revoked + stale + failed-to-parse = succeeded

Each term is counted from its own table (not derived from the others), so a lost, duplicated or
tampered ledger row makes an equation fail instead of being absorbed by a remainder. For speed at
millions of items, terms over one table share its scan, and the terms that need each custom_id's
latest attempt are computed in one statement that finds it once (`_per_item`).

Finality: every item ends in exactly one final outcome — applied, revoked (applied, then taken back),
stale, quarantined, final-failed (by class, after its retries), compliance-held, canceled by an
operator. Not final: in flight (its latest attempt's batch has not ended, or its shard is not
submitted yet), collecting (its batch ended, its results are not downloaded and loaded yet), retry
pending, undecided, and unresolved (a finished batch gave it no outcome; an answer that was not
applied).
The verdict passes only when every item is final, the equations hold and final failures are within
the task's tolerance; it is `collecting` while only the results of ended batches are left to
collect, warns while other work is pending; it fails when nothing is pending and any item is
unresolved or failures exceed the tolerance. Green means done.

An empty partition (frozen, 0 items, nothing rejected: the source had no rows for the day) is final
at once: its verdict is `empty_source`, passed, warn or failed as the task's `empty_source` setting
(ok | warn | fail) says, and its final status EMPTY.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import duckdb

from batch_assets.ledger.partition_control import partition_views
from batch_assets.ledger.states import JobState, not_terminal_sql
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.collect_runs import DEFAULT_MAX_COLLECT_TRIES
from batch_assets.pipeline.settle.retry_ledger import FINAL_FAILED_ACTIONS, RETRY_ACTIONS
from batch_assets.sqltext import in_range_sql

DEFAULT_MAX_FAILED_FRACTION = 0.01
# Items per range of item numbers in the per-item pass (see _item_ranges).
RECONCILE_CHUNK = 1 << 20
# A line's shard state in the per-item pass (the latest attempt's most open line decides).
_CLOSED, _COLLECTING, _OPEN = 0, 1, 2

PASSED, WARN, FAILED = "passed", "warn", "failed"
# Every batch ended and only collecting its results is left: not final, not failed (the collect
# run is due); the check warns, the partition is under way.
COLLECTING = "collecting"
CANCELED = "canceled"  # an operator canceled the work before anything was applied: final, not done
# A partition whose source had no rows for its day: 0 items and nothing rejected. Its verdict is
# `empty_source`, weighed by the task's `empty_source` setting; its final status is EMPTY.
EMPTY_SOURCE, EMPTY = "empty_source", "EMPTY"
EMPTY_VERDICTS = {"ok": PASSED, "warn": WARN, "fail": FAILED}


@dataclass(frozen=True)
class Verdict:
    status: str  # passed | warn | failed | canceled | collecting
    reasons: tuple[str, ...]
    final_status: str | None  # the partition's final status; None while work is pending

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def label(self) -> str | None:
        """The final status, or COLLECTING while only the results of ended batches are left to collect
        (None while other work is pending): what the report pages and metadata show as the status."""
        return self.final_status or ("COLLECTING" if self.status == COLLECTING else None)


@dataclass
class Reconciliation:
    task_id: str
    manifest_items: int = 0
    source_rejects: int = 0
    quarantined: int = 0
    unsharded: int = 0  # items neither in a shard nor quarantined (shards not cut yet)
    shard_lines: int = 0  # first-attempt lines
    retry_lines: int = 0  # lines of attempts 2, 3, …
    retry_lines_expected: int = 0  # retry decisions whose next attempt was cut
    submitted_lines: int = 0  # lines of shards the provider accepted as a batch (all attempts)
    provider_counted_lines: int = 0  # of those, lines of batches whose provider reports request counts
    provider_request_total: int = 0
    succeeded: int = 0  # latest attempt answered and not refused for content
    failed: dict[str, int] = field(default_factory=dict)  # latest attempt failed, by class
    expired: int = 0
    canceled: int = 0
    missing: int = 0  # latest line without an outcome (in flight included)
    in_flight: int = 0
    # Its batch ended, its results are not downloaded and loaded yet (the collect run is due): pending.
    collecting: int = 0
    applied: int = 0
    revoked: int = 0  # applied, then taken back (`batch-assets revoke`): final
    stale: int = 0
    failed_to_parse: int = 0
    orphan_lines: int = 0
    duplicate_lines: int = 0
    malformed_lines: int = 0
    answered_lines: int = 0  # result lines matched to an item (raw_result status ok), all attempts
    parsed_from_lines: int = 0  # outcomes taken from a result line (not from the batch's end state)
    jobs: int = 0
    jobs_terminal: int = 0
    # finality of every item (one state each)
    final_failed: dict[str, int] = field(default_factory=dict)
    compliance_held: int = 0
    operator_canceled: int = 0
    retry_pending: int = 0
    undecided: int = 0
    unresolved_missing: int = 0  # a finished batch gave the item no outcome (or it was not collected)
    unapplied: int = 0  # a usable answer that was not written
    retried: int = 0  # items sent more than once
    max_attempt: int = 0
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION
    final_status: str | None = None  # as recorded in ledger.batch_task
    frozen: bool = True  # the partition's manifest is frozen (it has a ledger.batch_task row)
    empty_source: str = "warn"  # the task's `empty_source` setting: ok | warn | fail
    # The provider's own reason for each batch it failed as a whole (e.g. "too_many_tasks: …").
    batch_failures: list[str] = field(default_factory=list)
    # Shards no batch was created for because their provider account's quota is full, and why.
    waiting_shards: int = 0
    waiting_items: int = 0
    wait_reason: str | None = None

    @property
    def failed_total(self) -> int:
        return sum(self.failed.values())

    @property
    def final_failed_total(self) -> int:
        return sum(self.final_failed.values())

    @property
    def pending(self) -> int:
        """Items with work still under way: in flight, being collected, retry pending, undecided, not
        yet sharded."""
        return self.in_flight + self.collecting + self.retry_pending + self.undecided + self.unsharded

    @property
    def only_collecting(self) -> bool:
        """Every batch ended and nothing else is pending: only the results' collection is left."""
        return bool(self.collecting) and self.pending == self.collecting

    @property
    def empty(self) -> bool:
        """Frozen with no item and nothing rejected: the source had no rows for the day."""
        return self.frozen and not self.manifest_items and not self.source_rejects

    @property
    def unresolved(self) -> int:
        """Items not in a final outcome (pending ones included)."""
        return self.pending + self.unresolved_missing + self.unapplied

    def problems(self, require_applied: bool = True) -> list[str]:
        """Every equation that does not balance, spelled out with its numbers."""
        out = []
        outcome = (
            self.succeeded
            + self.failed_total
            + self.expired
            + self.canceled
            + self.quarantined
            + self.missing
            + self.unsharded
        )
        if self.manifest_items != outcome:
            out.append(
                f"manifest items {self.manifest_items} != succeeded {self.succeeded} + failed {self.failed_total} "
                f"+ expired {self.expired} + canceled {self.canceled} + quarantined {self.quarantined} "
                f"+ missing {self.missing} + unsharded {self.unsharded} (= {outcome})"
            )
        if self.shard_lines + self.unsharded != self.manifest_items - self.quarantined:
            out.append(
                f"first-attempt shard lines {self.shard_lines} + unsharded {self.unsharded} != manifest items "
                f"{self.manifest_items} - quarantined {self.quarantined}"
            )
        if self.retry_lines != self.retry_lines_expected:
            out.append(
                f"retry shard lines {self.retry_lines} != retry decisions sent again {self.retry_lines_expected}"
            )
        if self.provider_request_total != self.provider_counted_lines:
            out.append(
                f"provider request counts {self.provider_request_total} != lines submitted "
                f"{self.provider_counted_lines} (batches whose provider reports counts)"
            )
        if self.parsed_from_lines > self.answered_lines or (
            require_applied and self.parsed_from_lines != self.answered_lines
        ):
            out.append(
                f"outcomes from result lines {self.parsed_from_lines} != result lines matched to items "
                f"{self.answered_lines}"
            )
        if require_applied and self.applied + self.revoked + self.stale + self.failed_to_parse != self.succeeded:
            revoked = f" + revoked {self.revoked}" if self.revoked else ""
            out.append(
                f"applied {self.applied}{revoked} + stale {self.stale} + failed to parse "
                f"{self.failed_to_parse} != succeeded {self.succeeded}"
            )
        return out

    def quota_wait(self) -> tuple[str, ...]:
        """The verdict's line for shards waiting for quota (none when nothing waits)."""
        if not self.waiting_shards:
            return ()
        return (
            f"waiting for quota: {self.waiting_shards} shard(s), {self.waiting_items} item(s): "
            f"{self.wait_reason or 'the account is full'} (see `batch-assets quotas`)",
        )

    def verdict(self) -> Verdict:
        """passed only when every item is final, the equations hold and final failures are within
        the tolerance; warn while work is pending; failed otherwise."""
        if not self.frozen:
            return Verdict(WARN, ("not frozen yet: no manifest for this partition (run its submit job)",), None)
        problems = self.problems()
        if self.empty and not problems:
            return Verdict(
                EMPTY_VERDICTS[self.empty_source],
                (
                    f"{EMPTY_SOURCE}: the source query returned no rows for this day, 0 items frozen "
                    f"(the task's empty_source: {self.empty_source})",
                ),
                EMPTY,
            )
        if problems:
            return Verdict(FAILED, tuple(f"unbalanced: {p}" for p in problems), None if self.pending else "FAILED")
        if self.only_collecting:
            return Verdict(
                COLLECTING,
                (
                    f"{self.collecting} item(s) being collected: their batches finished, the results are "
                    "not downloaded and loaded yet (the collect run is due)",
                ),
                None,
            )
        if self.pending:
            return Verdict(
                WARN,
                (
                    f"{self.pending} item(s) not final yet: {max(self.in_flight - self.waiting_items, 0)} in "
                    f"flight, {self.collecting} being collected, {self.waiting_items} waiting for quota, "
                    f"{self.retry_pending} retry pending, {self.undecided} undecided, "
                    f"{self.unsharded} not sharded",
                    *self.quota_wait(),
                ),
                None,
            )
        reasons = []
        if self.unresolved_missing:
            reasons.append(
                f"{self.unresolved_missing} item(s) got no outcome from a finished batch "
                "(missing, orphan-only or malformed-only lines, or results not collected)"
            )
        if self.unapplied:
            reasons.append(f"{self.unapplied} usable answer(s) not applied")
        tolerance = self.max_failed_fraction * self.manifest_items
        if self.final_failed_total > tolerance:
            by_class = ", ".join(f"{c} {n}" for c, n in sorted(self.final_failed.items()) if n)
            reasons.append(
                f"{self.final_failed_total} final failure(s) ({by_class}) > tolerance "
                f"{self.max_failed_fraction:.2%} of {self.manifest_items} items"
            )
        if reasons:
            reasons += [f"provider failed batch {f}" for f in self.batch_failures]
            return Verdict(FAILED, tuple(reasons), "FAILED")
        if self.operator_canceled and not (self.applied + self.revoked + self.stale):
            reason = (
                f"canceled by an operator: {self.operator_canceled} item(s) not sent or not answered, none "
                f"applied (`batch-assets retry {self.task_id} --class canceled` sends them again)"
            )
            return Verdict(CANCELED, (reason,), "CANCELED")
        if self.final_failed_total or self.compliance_held or self.operator_canceled:
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


def batch_failure_reason(code: str | None, message: str | None) -> str:
    """The provider's reason for failing a batch as every surface shows it (the check, the report page)."""
    return f"{code or 'no code'}: {message or 'no detail'}"


# An item superseded by a refreeze no longer counts anywhere. (Rows of ids unknown to the manifest
# still count, so a stray or tampered row unbalances the equation instead of vanishing.)
ACTIVE = (
    "custom_id NOT IN (SELECT custom_id FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NOT NULL)"
)


def _active(any_superseded: bool, alias: str = "") -> str:
    # With nothing superseded (the usual case) the filter is TRUE for every row — `x NOT IN (empty)` is
    # true even for NULL — so it is left out: testing it reads every custom_id of the table.
    return f"{alias}{ACTIVE}" if any_superseded else "TRUE"


def _table_terms(any_superseded: bool, any_revocation: bool) -> list[str]:
    """One single-row query per table; each column is the Reconciliation field it fills. Terms over
    the same table share its scan, and no term is derived from another table's rows."""
    active = _active(any_superseded)
    # Like ACTIVE: `x IN (empty)` is false for every x, so with no revocation at all it is left out.
    revoked = "custom_id IN (SELECT custom_id FROM ledger.revocation)" if any_revocation else "FALSE"
    return [
        "SELECT coalesce(sum(row_count), 0) AS source_rejects FROM ledger.source_reject WHERE task_id = $t",
        f"SELECT count(*) AS quarantined FROM ledger.quarantine WHERE task_id = $t AND {active}",
        f"""SELECT count(*) FILTER (attempt = 1) AS shard_lines, count(*) FILTER (attempt > 1) AS retry_lines
            FROM ledger.shard_line WHERE task_id = $t AND {active}""",
        f"""SELECT count(*) AS retry_lines_expected FROM ledger.retry_decision d
            WHERE d.task_id = $t AND d.action IN {RETRY_ACTIONS} AND {_active(any_superseded, "d.")}
              AND EXISTS (SELECT 1 FROM ledger.shard_line sl WHERE sl.task_id = $t AND sl.custom_id = d.custom_id
                          AND sl.attempt = d.next_attempt)""",
        # Gemini reports no request counts to the SDK; batches still validating report 0.
        """SELECT coalesce(sum(s.line_count) FILTER (j.provider_batch_id IS NOT NULL), 0) AS submitted_lines,
                  coalesce(sum(s.line_count) FILTER (j.request_total > 0), 0) AS provider_counted_lines
           FROM part_shard s JOIN part_job j USING (shard_id) WHERE s.task_id = $t""",
        """SELECT coalesce(sum(request_total) FILTER (request_total > 0), 0) AS provider_request_total,
                  count(*) AS jobs, count(terminal_at) AS jobs_terminal
           FROM part_job WHERE task_id = $t""",
        # Its own WHERE: only failed batches' errors are read as JSON.
        f"""SELECT list({{'job_key': job_key, 'code': provider_errors::JSON ->> '$[0].code',
                         'message': provider_errors::JSON ->> '$[0].message'}} ORDER BY job_key) AS batch_failures
           FROM part_job WHERE task_id = $t AND state = '{JobState.FAILED.value}'""",
        f"""SELECT count(*) FILTER (o = 'applied') AS applied, count(*) FILTER (o = 'revoked') AS revoked,
                  count(*) FILTER (o = 'stale') AS stale
           FROM (SELECT CASE WHEN outcome = 'applied' AND {revoked} THEN 'revoked' ELSE outcome END AS o
                 FROM ledger.applied_result WHERE task_id = $t AND {active})""",
        f"""SELECT count(*) FILTER (status = 'orphan') AS orphan_lines,
                  count(*) FILTER (status = 'duplicate') AS duplicate_lines,
                  count(*) FILTER (status = 'malformed') AS malformed_lines,
                  count(*) FILTER (status = 'ok' AND {active}) AS answered_lines
           FROM ledger.raw_result WHERE task_id = $t""",
        f"SELECT count(*) AS parsed_from_lines FROM ledger.parsed_result WHERE task_id = $t AND from_line AND {active}",
        "SELECT max(final_status) AS final_status, count(*) > 0 AS frozen FROM part_task WHERE task_id = $t",
        # Shards admission held back (ledger.admission) that have no batch yet.
        """SELECT count(*) AS waiting_shards, coalesce(sum(s.line_count), 0) AS waiting_items,
                  arg_max(s.wait_reason, coalesce(s.wait_seen_at, s.deferred_at)) AS wait_reason
           FROM part_shard s WHERE s.task_id = $t AND s.deferred_at IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM part_job j
                             WHERE j.shard_id = s.shard_id AND j.provider_batch_id IS NOT NULL)""",
    ]


def reconcile_conn(
    conn: duckdb.DuckDBPyConnection,
    task_id: str,
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION,
    empty_source: str = "warn",
) -> Reconciliation:
    with partition_views(conn, task_id):
        return _reconcile(conn, task_id, max_failed_fraction, empty_source)


def _reconcile(conn: duckdb.DuckDBPyConnection, task_id: str, max_failed_fraction: float, empty_source: str):
    r = Reconciliation(task_id, max_failed_fraction=max_failed_fraction, empty_source=empty_source)
    params = {"t": task_id}
    r.manifest_items, superseded, revocations, lo, hi = conn.execute(
        """
        SELECT count(*) FILTER (superseded_at IS NULL), count(*) FILTER (superseded_at IS NOT NULL),
               (SELECT count(*) FROM ledger.revocation), min(item_no), max(item_no)
        FROM ledger.manifest_item WHERE task_id = $t""",
        params,
    ).fetchone()
    # One statement each: as one statement (a cross product of the single-row queries) they are slower.
    terms = {}
    for sql in _table_terms(superseded > 0, revocations > 0):
        cur = conn.execute(sql, params)
        terms.update(zip((d[0] for d in cur.description), cur.fetchone()))
    final_status, failures = terms.pop("final_status"), terms.pop("batch_failures") or []
    r.wait_reason = terms.pop("wait_reason")
    r.frozen = bool(terms.pop("frozen"))
    for name, value in terms.items():
        setattr(r, name, int(value or 0))
    r.batch_failures = [f"{f['job_key']}: {batch_failure_reason(f['code'], f['message'])}" for f in failures]
    _per_item(conn, task_id, r, manifest_rows=r.manifest_items + superseded, numbers=(lo, hi))
    r.final_status = final_status if r.manifest_items or r.source_rejects or final_status == EMPTY else None
    return r


def _item_ranges(lo: int | None, hi: int | None) -> list[tuple[int | None, int | None]]:
    """The per-item pass's ranges of item numbers, [lo, hi) (None: unbounded), each about
    RECONCILE_CHUNK of the partition's numbers (`lo`..`hi`, its lowest and highest; None: it has
    none); together they cover every number once.

    The pass joins five tables by item number. Over a whole large partition each join's hash table
    holds every item and the statement grows faster than the partition; over ranges each statement
    stays the size of a range, and the tables, stored in about item order, are read by range (zone maps)."""
    if lo is None:
        return [(None, None)]
    marks = list(range(lo + RECONCILE_CHUNK, hi + 1, RECONCILE_CHUNK))
    return list(zip([None, *marks], [*marks, None]))


def _per_item(
    conn: duckdb.DuckDBPyConnection,
    task_id: str,
    r: Reconciliation,
    manifest_rows: int,
    numbers: tuple[int | None, int | None],
) -> None:
    """The terms that need each item's latest attempt, from one pass over the ids: outcomes of
    latest attempts (parsed results by class, lines without one), unsharded items, and the finality
    state of every manifest item. The latest attempt is found once; each table is read once.

    The tables are matched by item number (`item_no`, given at freeze and carried by every row
    written for the item), not by custom_id: DuckDB hashes and compares 8-byte integers faster than
    the id strings, and on a large partition their hash tables fit in memory where the strings' spill.
    A row of an id the manifest does not know has no number; when the partition has such lines they
    are told apart by custom_id (`unknown_id`), so each still counts as its own id.
    `manifest_rows`: the partition's manifest rows (superseded ones too); `numbers`: their lowest and
    highest item number."""
    params = {"t": task_id}
    # A shard whose batches all ended is being collected until its results are downloaded and loaded
    # (or its collection given up): between the provider's end and the collect run its items are
    # `collecting`, neither in flight nor missing.
    closed_shards = f"""closed_shards AS (  -- every (not abandoned) batch of the shard has ended; none yet: open
            SELECT j.shard_id, bool_or(coalesce(
                       j.collected_at IS NULL AND coalesce(j.collect_attempts, 0) < {DEFAULT_MAX_COLLECT_TRIES}
                       AND (j.downloaded_at IS NULL OR f.job_key IS NOT NULL), false)) AS collecting
            FROM part_job j
            LEFT JOIN (SELECT DISTINCT job_key FROM ledger.raw_file WHERE task_id = $t AND ingested_at IS NULL) f
                   USING (job_key)
            WHERE j.task_id = $t AND coalesce(j.create_outcome, '') <> 'abandoned'
            GROUP BY j.shard_id HAVING NOT bool_or(coalesce({not_terminal_sql("j")}, false))
        )"""
    # What the partition's lines hold, from their integer columns and their shards (cheap): lines of
    # ids the manifest does not know, of attempts other than the first, of shards still open or collecting.
    unknown_lines, other_attempts, open_lines = conn.execute(
        f"""
        WITH {closed_shards}
        SELECT coalesce(bool_or(sl.item_no IS NULL), false), coalesce(bool_or(sl.attempt <> 1), false),
               coalesce(bool_or(c.shard_id IS NULL OR c.collecting), false)
        FROM ledger.shard_line sl LEFT JOIN closed_shards c USING (shard_id) WHERE sl.task_id = $t""",
        params,
    ).fetchone()
    # By ranges of item numbers, unless a line has none (then in one statement: such lines are told
    # apart by custom_id and belong to no range).
    ranges = [(None, None)] if unknown_lines else _item_ranges(*numbers)
    if unknown_lines:  # rare (a line of an id the manifest does not know): key (item_no, unknown_id)

        def unknown(alias: str) -> str:
            return f"CASE WHEN {alias}item_no IS NULL THEN {alias}custom_id END AS unknown_id"

        def same(a: str, b: str) -> str:
            return (
                f"{a}.item_no IS NOT DISTINCT FROM {b}.item_no AND {a}.unknown_id IS NOT DISTINCT FROM {b}.unknown_id"
            )

        line_key, result_key, line_group = (
            f"sl.item_no, {unknown('sl.')}",
            f"item_no, {unknown('')}",
            "sl.item_no, unknown_id",
        )
    else:  # every line is a manifest item's: its number alone is the key (exactly equivalent)

        def same(a: str, b: str) -> str:
            return f"{a}.item_no = {b}.item_no"

        line_key, result_key, line_group = "sl.item_no", "item_no", "sl.item_no"
    # How many lines an item has at its latest attempt: at attempt 1 the first-attempt count; lines
    # of other attempts are few (retries), counted apart and only when there are any. With every
    # line at attempt 1, results and decisions are matched on the item alone, at attempt 1 (one
    # integer key instead of two; exactly equivalent).
    if other_attempts:
        retry_counts = f"""LEFT JOIN (SELECT {result_key}, attempt, count(*) AS lines FROM ledger.shard_line
                                      WHERE task_id = $t AND attempt <> 1 AND {{in_range}} GROUP BY ALL) rl
                                 ON {same("rl", "l")} AND rl.attempt = l.attempt"""
        latest_lines = "CASE WHEN l.attempt = 1 THEN l.first_lines ELSE coalesce(rl.lines, 0) END"
        at_attempt, attempt_filter = " AND {0}.attempt = l.attempt", ""
    else:
        retry_counts, latest_lines = "", "l.first_lines"
        at_attempt, attempt_filter = "", " AND attempt = 1"

    def statement(lines: str, lo: int | None, hi: int | None) -> str:
        """The per-item statement over `lines` (per item of the partition's lines: its key, latest
        attempt, open_key, first_lines; `{in_range}` where its rows are limited to the range) for
        the item numbers in [lo, hi): one row per combination of terms and flags (`listed`: the
        outer join's manifest rows, apart from its other rows), with the combination's row count.
        Every table is read for the range only: all of them are joined by item number."""
        in_range = in_range_sql("item_no", lo, hi)
        return f"""
            WITH {closed_shards},
            lines AS (  -- per item of the task's lines: the latest attempt, and its lines' count and state
                {lines.format(in_range=in_range_sql("sl.item_no", lo, hi))}
            ),
            latest AS (  -- the latest attempt with its parsed result and retry decision (if any)
                -- Only the partition's own results and decisions are joined: the ledger holds every
                -- earlier partition's too, and matching against all of them made reconcile grow with
                -- the ledger's history (a result filed under another task_id is then missing here,
                -- which the result-lines equation reports).
                SELECT l.item_no, l.attempt, l.open_key - l.attempt::BIGINT * 4 AS line_state,
                       {latest_lines} AS latest_lines,
                       o.attempt IS NOT NULL AS answered, o.error_class,
                       o.provider_succeeded, d.action, d.error_class AS decided_class
                FROM lines l
                LEFT JOIN (SELECT {result_key}, attempt, error_class, provider_succeeded FROM ledger.parsed_result
                           WHERE task_id = $t{attempt_filter} AND {in_range}) o
                       ON {same("o", "l")}{at_attempt.format("o")}
                LEFT JOIN (SELECT {result_key}, attempt, action, error_class FROM ledger.retry_decision
                           WHERE task_id = $t{attempt_filter} AND {in_range}) d
                       ON {same("d", "l")}{at_attempt.format("d")}
                {retry_counts.format(in_range=in_range)}
            ),
            ids AS (  -- manifest rows (superseded ones mark their ids inactive) and ids only lines know
                SELECT coalesce(m.listed AND NOT m.superseded, false) AS item,
                       coalesce(m.superseded, false) AS superseded,
                       m.listed IS NOT NULL AS listed,
                       m.after_cut, q.item_no IS NOT NULL AS quarantined, a.outcome, l.* EXCLUDE (item_no)
                -- Booleans, not the timestamps: the smaller the rows of a hash table, the less it spills.
                FROM (SELECT item_no, true AS listed, superseded_at IS NOT NULL AS superseded,
                             frozen_at >= coalesce((SELECT max(created_at) FROM part_shard WHERE task_id = $t),
                                                   frozen_at) AS after_cut
                      FROM ledger.manifest_item WHERE task_id = $t AND {in_range}) m
                FULL JOIN latest l ON l.item_no = m.item_no
                LEFT JOIN (SELECT item_no FROM ledger.quarantine WHERE task_id = $t AND {in_range}) q
                       ON q.item_no = m.item_no
                LEFT JOIN (SELECT item_no, outcome FROM ledger.applied_result WHERE task_id = $t AND {in_range}) a
                       ON a.item_no = m.item_no
            ),
            terms AS (
                SELECT item, attempt, listed,
                       CASE WHEN NOT item THEN NULL
                            WHEN quarantined THEN 'quarantined'
                            WHEN outcome IS NOT NULL THEN outcome
                            WHEN attempt IS NULL THEN 'unsharded'
                            WHEN NOT answered THEN CASE line_state WHEN {_OPEN} THEN 'in_flight'
                                                   WHEN {_COLLECTING} THEN 'collecting' ELSE 'missing' END
                            WHEN error_class IS NULL THEN 'unapplied'
                            WHEN action IN {RETRY_ACTIONS} THEN 'retry_pending'
                            WHEN action = 'compliance_hold' THEN 'compliance_held'
                            WHEN action = 'canceled' THEN 'operator_canceled'
                            WHEN action IN {FINAL_FAILED_ACTIONS} THEN 'final_failed'
                            ELSE 'undecided'
                       END AS state,
                       CASE WHEN item THEN coalesce(decided_class, error_class) END AS cls,
                       answered AND NOT superseded AS counted_result,
                       CASE WHEN attempt IS NOT NULL AND NOT answered AND NOT superseded THEN latest_lines ELSE 0 END
                           AS missing_lines,
                       item AND NOT quarantined AND attempt IS NULL AND after_cut AS unsharded,
                       coalesce(error_class, 'succeeded') AS result_cls, provider_succeeded
                FROM ids
            )
            -- The flags are grouping keys, not filtered counts: one count per group instead of six
            -- filtered aggregates per row (the groups stay a handful).
            SELECT state, cls,
                   CASE WHEN counted_result THEN result_cls END, CASE WHEN counted_result THEN provider_succeeded END,
                   item, counted_result, item AND attempt > 1, unsharded, listed,
                   count(*), max(attempt) FILTER (item), sum(missing_lines)
            FROM terms GROUP BY ALL
        """

    if other_attempts or open_lines:
        lines = f"""SELECT {line_key}, max(sl.attempt) AS attempt,
                   -- attempt * 4 + the line's shard state: the max is the latest attempt's most open one
                   max(sl.attempt::BIGINT * 4 + CASE WHEN c.shard_id IS NULL THEN {_OPEN}
                                                     WHEN c.collecting THEN {_COLLECTING}
                                                     ELSE {_CLOSED} END) AS open_key,
                   count(*) FILTER (sl.attempt = 1) AS first_lines
            FROM ledger.shard_line sl LEFT JOIN closed_shards c USING (shard_id)
            WHERE sl.task_id = $t AND {{in_range}} GROUP BY {line_group}"""
    else:  # every line at attempt 1 and in a closed shard (a finished partition): only the count is left
        lines = f"""SELECT {line_key}, 1 AS attempt, 4 AS open_key, count(*) AS first_lines
            FROM ledger.shard_line sl WHERE sl.task_id = $t AND {{in_range}} GROUP BY {line_group}"""
        # Usually each item has one line: the lines are then taken as they are, without grouping
        # them (a hash aggregate over every line). Exactly equivalent when every row of the outer
        # join is a manifest row's and there are as many as manifest rows (no item met two lines);
        # checked from the same statement's counts, else it runs grouped.
        if not unknown_lines:
            ungrouped = (
                "SELECT sl.item_no, 1 AS attempt, 4 AS open_key, 1 AS first_lines "
                "FROM ledger.shard_line sl WHERE sl.task_id = $t AND {in_range}"
            )
            rows = [row for lo, hi in ranges for row in conn.execute(statement(ungrouped, lo, hi), params).fetchall()]
            groups = [(row[8], row[9]) for row in rows]  # (listed: a manifest row's, rows of the group)
            if sum(n for listed, n in groups if listed) == manifest_rows and all(listed for listed, _ in groups):
                _add_terms(r, rows)
                return
    _add_terms(r, [row for lo, hi in ranges for row in conn.execute(statement(lines, lo, hi), params).fetchall()])


def _add_terms(r: Reconciliation, rows: list[tuple]) -> None:
    """Add the per-item statement's rows (one per combination of terms) to `r`."""
    for (
        state,
        cls,
        result_cls,
        provider_ok,
        item,
        counted_result,
        retried,
        unsharded,
        _listed,
        n,
        max_attempt,
        missing,
    ) in rows:
        items, results = (n if item else 0), (n if counted_result else 0)
        r.missing += missing or 0
        r.unsharded += n if unsharded else 0
        r.retried += n if retried else 0
        r.max_attempt = max(r.max_attempt, max_attempt or 0)
        if results:  # parsed results of latest attempts, by class
            if provider_ok and result_cls != "content_policy_error":  # a refusal is not an answer
                r.succeeded += results
                if result_cls != "succeeded":
                    r.failed_to_parse += results
            elif result_cls == "expired":
                r.expired += results
            elif result_cls == "canceled":
                r.canceled += results
            else:
                r.failed[result_cls] = r.failed.get(result_cls, 0) + results
        # finality: one state per manifest item (its latest attempt)
        if state == "final_failed":
            r.final_failed[cls] = r.final_failed.get(cls, 0) + items
        elif state == "in_flight":
            r.in_flight += items
        elif state == "collecting":
            r.collecting += items
        elif state == "missing":
            r.unresolved_missing += items
        elif state in ("retry_pending", "undecided", "unapplied", "compliance_held", "operator_canceled"):
            setattr(r, state, getattr(r, state) + items)


def reconcile(
    wh: Warehouse, task_id: str, max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION, empty_source: str = "warn"
) -> Reconciliation:
    """The partition's reconciliation, read only (`settle` records its final status)."""
    wh = wh.of(task_id)  # its partition's store
    with wh.connect(read_only=True) as conn:
        return reconcile_conn(conn, task_id, max_failed_fraction, empty_source)


def settle(
    wh: Warehouse, task_id: str, max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION, empty_source: str = "warn"
) -> tuple[Reconciliation, Verdict]:
    """Reconcile the partition and record its final status (cleared again while work is pending); an
    empty partition (frozen, no item, nothing rejected) is recorded EMPTY."""
    wh = wh.of(task_id)  # its partition's store
    from batch_assets.ledger.retries import set_final_status

    with wh.connect() as conn:
        rec = reconcile_conn(conn, task_id, max_failed_fraction, empty_source)
        verdict = rec.verdict()
        if rec.frozen:
            set_final_status(conn, task_id, verdict.final_status)
            rec.final_status = verdict.final_status
    return rec, verdict
