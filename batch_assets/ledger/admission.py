"""Quota admission: whether a shard may take a provider account's batch slot and enqueued tokens now.

A job holds a place of its account while it is *reserved*: an intent being created (its claim is
live), a create whose outcome is unknown, or a batch in flight. Nothing is counted in memory: every
admission reads the reservations in the transaction that records the intent, after touching the
account's `quota_account` row, so two admissions for one account never decide on the same view
(DuckDB serializes writing processes and a second transaction on the row conflicts and is retried;
PostgreSQL makes the second wait for the row's lock and then read what the first committed).
A place is given back when the job ends, its claim expires, or its create is refused or found absent.

A shard that does not fit waits (`shard.deferred_at`, `wait_priority`, `wait_reason`): admission
serves the waiting queue by effective priority — its priority plus one step per `ageing_s` waited —
so urgent work goes first and low priority is never starved. A waiter nobody asked for within
`WAIT_STALE_S` does not hold the queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from batch_assets.ledger.control_db import ControlDB, as_control, seconds_ago_sql
from batch_assets.ledger.states import JobState, in_flight_sql

PRIORITY_RANKS = {"low": 0, "normal": 1, "high": 2, "urgent": 3}
DEFAULT_AGEING_S = 1800.0  # a waiter gains one priority step per 30 minutes
WAIT_STALE_S = 3600.0
CONFLICT_RETRIES = 20
RATE_MARK = "/min)"  # ends the reason of a wait for the creation cap (see `is_rate_wait`)


def reserved_sql(alias: str = "j") -> str:
    """Predicate on provider_job `alias`: the job holds a place of its account."""
    a = alias
    return f"""(coalesce({a}.create_outcome, '') NOT IN ('abandoned', 'failed') AND (
        {in_flight_sql(a)}
        OR ({a}.provider_batch_id IS NULL AND {a}.state = '{JobState.CREATED.value}'
            AND ({a}.create_outcome = 'unknown'
                 OR ({a}.claimed_by IS NOT NULL AND {a}.claim_expires_at >= now()::TIMESTAMP)))))"""


def is_rate_wait(reason: str | None) -> bool:
    """The recorded wait reason is the creation cap's: room comes back with time, not an event."""
    return bool(reason) and reason.endswith(RATE_MARK)


@dataclass(frozen=True)
class Wait:
    """Why a shard waits: `kind` is the limit (jobs, task_jobs, tokens, task_tokens, rate) or
    `queue` (a waiter goes first); `account_full` says no shard of the account fits now either."""

    kind: str
    reason: str

    @property
    def account_full(self) -> bool:
        return self.kind in ("jobs", "task_jobs", "rate", "queue")


@dataclass(frozen=True)
class QuotaLimits:
    """The limits one admission is checked against: the account's (the provider's limits) and the
    task's own lower ones (None: the account's apply)."""

    max_jobs: int
    max_tokens: int
    max_creates_per_minute: int | None = None
    task_max_jobs: int | None = None
    task_max_tokens: int | None = None


@dataclass(frozen=True)
class Candidate:
    provider: str
    account: str
    model: str
    task_name: str
    shard_id: str
    est_tokens: int
    priority: int  # PRIORITY_RANKS value


@dataclass(frozen=True)
class Usage:
    """What an account holds now (reservations), as admission sees it."""

    jobs: int
    tokens: int  # of the candidate's model
    task_jobs: int
    task_tokens: int
    created_last_minute: int


def usage(conn: duckdb.DuckDBPyConnection | ControlDB, c: Candidate, exclude_job_key: str | None = None) -> Usage:
    row = (
        as_control(conn)
        .execute(
            f"""
        WITH reserved AS (
            SELECT j.job_key, s.model, s.est_tokens, t.task_name
            FROM ledger.provider_job j
            JOIN ledger.shard s USING (shard_id)
            JOIN ledger.batch_task t ON t.task_id = j.task_id
            WHERE j.provider = $provider AND coalesce(j.account, 'default') = $account
              AND j.job_key IS DISTINCT FROM $self AND {reserved_sql("j")}
        )
        SELECT count(*),
               coalesce(sum(est_tokens) FILTER (WHERE model = $model), 0),
               count(*) FILTER (WHERE task_name = $task),
               coalesce(sum(est_tokens) FILTER (WHERE task_name = $task AND model = $model), 0),
               (SELECT count(*) FROM ledger.provider_job
                WHERE provider = $provider AND coalesce(account, 'default') = $account
                  AND job_key IS DISTINCT FROM $self
                  AND created_at > {seconds_ago_sql(60)})
        FROM reserved""",
            {
                "provider": c.provider,
                "account": c.account,
                "model": c.model,
                "task": c.task_name,
                "self": exclude_job_key,
            },
        )
        .one()
    )
    return Usage(*(int(v) for v in row))


def why_no_room(u: Usage, c: Candidate, limits: QuotaLimits) -> Wait | None:
    """None when the candidate fits; else the limit it would exceed, said plainly."""
    if u.jobs >= limits.max_jobs:
        return Wait("jobs", f"account {c.account}: {u.jobs} of {limits.max_jobs} concurrent batches in use")
    if limits.task_max_jobs is not None and u.task_jobs >= limits.task_max_jobs:
        return Wait(
            "task_jobs", f"task {c.task_name}: {u.task_jobs} of its {limits.task_max_jobs} concurrent batches in use"
        )
    # With nothing of the model enqueued a shard always fits: shards are cut within the limit.
    if u.tokens and u.tokens + c.est_tokens > limits.max_tokens:
        return Wait(
            "tokens",
            f"account {c.account}, model {c.model}: {u.tokens:,} + {c.est_tokens:,} enqueued tokens "
            f"would exceed {limits.max_tokens:,}",
        )
    if limits.task_max_tokens is not None and u.task_tokens and u.task_tokens + c.est_tokens > limits.task_max_tokens:
        return Wait(
            "task_tokens",
            f"task {c.task_name}: {u.task_tokens:,} + {c.est_tokens:,} enqueued tokens > {limits.task_max_tokens:,}",
        )
    if limits.max_creates_per_minute is not None and u.created_last_minute >= limits.max_creates_per_minute:
        return Wait(
            "rate",
            f"account {c.account}: {u.created_last_minute} batches created in the last minute "
            f"(cap {limits.max_creates_per_minute}{RATE_MARK}",
        )
    return None


def waiter_ahead(conn: duckdb.DuckDBPyConnection | ControlDB, c: Candidate, ageing_s: float) -> Wait | None:
    """The task and partition of a waiting shard of the account that goes before the candidate
    (higher effective priority, or equal and waiting longer), or None."""
    aged = "floor(extract(epoch FROM now()::TIMESTAMP - {since}) / $ageing)"
    rows = (
        as_control(conn)
        .execute(
            f"""
        WITH me AS (
            SELECT coalesce(max(deferred_at), now()::TIMESTAMP) AS since FROM ledger.shard WHERE shard_id = $shard
        ), waiting AS (
            SELECT s.shard_id, t.task_name, CAST(t.partition_date AS VARCHAR) AS day, s.deferred_at,
                   s.wait_priority + {aged.format(since="s.deferred_at")} AS effective
            FROM ledger.shard s JOIN ledger.batch_task t USING (task_id)
            WHERE s.provider = $provider AND s.wait_account = $account AND s.deferred_at IS NOT NULL
              AND s.wait_priority IS NOT NULL AND s.shard_id <> $shard
              AND s.wait_seen_at > {seconds_ago_sql(WAIT_STALE_S)}
              AND NOT EXISTS (SELECT 1 FROM ledger.provider_job j WHERE j.shard_id = s.shard_id
                              AND (j.provider_batch_id IS NOT NULL OR {reserved_sql("j")}))
        )
        SELECT w.task_name, w.day, w.effective FROM waiting w, me
        WHERE w.effective > $priority + {aged.format(since="me.since")}
           OR (w.effective = $priority + {aged.format(since="me.since")}
               AND w.deferred_at < me.since)
        ORDER BY w.effective DESC, w.deferred_at LIMIT 1""",
            {
                "shard": c.shard_id,
                "provider": c.provider,
                "account": c.account,
                "ageing": float(ageing_s),
                "priority": c.priority,
            },
        )
        .dicts()
    )
    if not rows:
        return None
    r = rows[0]
    return Wait("queue", f"waiting behind {r['task_name']} {r['day']} (effective priority {int(r['effective'])})")


def _touch_account(conn: duckdb.DuckDBPyConnection | ControlDB, provider: str, account: str) -> None:
    """Write the account's row first: a concurrent admission for the account conflicts (DuckDB) or
    waits for this transaction (PostgreSQL), so no two decide on the same view of its reservations."""
    db = as_control(conn)
    db.execute(
        "INSERT INTO ledger.quota_account (provider, account) VALUES (?, ?) ON CONFLICT (provider, account) DO NOTHING",
        [provider, account],
    )
    db.execute(
        "UPDATE ledger.quota_account SET admissions = admissions WHERE provider = ? AND account = ?",
        [provider, account],
    )


def mark_waiting(conn: duckdb.DuckDBPyConnection | ControlDB, candidates: list[Candidate], reason: str) -> None:
    """Record the shards waiting (one statement; the first time keeps its place: deferred_at)."""
    if not candidates:
        return
    c = candidates[0]
    as_control(conn).execute(
        "UPDATE ledger.shard SET deferred_at = coalesce(deferred_at, now()::TIMESTAMP), wait_account = ?, "
        "wait_priority = ?, wait_reason = ?, wait_seen_at = now()::TIMESTAMP "
        "WHERE shard_id = ANY(?)",
        [c.account, c.priority, reason, [x.shard_id for x in candidates]],
    )


def _mark_admitted(db: ControlDB, c: Candidate) -> None:
    db.execute(
        "UPDATE ledger.quota_account SET admissions = admissions + 1, admitted_at = now()::TIMESTAMP "
        "WHERE provider = ? AND account = ?",
        [c.provider, c.account],
    )
    db.execute(
        "UPDATE ledger.shard SET deferred_at = NULL, wait_account = NULL, wait_priority = NULL, "
        "wait_reason = NULL, wait_seen_at = NULL WHERE shard_id = ?",
        [c.shard_id],
    )


def admit(
    conn: duckdb.DuckDBPyConnection | ControlDB,
    c: Candidate,
    limits: QuotaLimits,
    take: Callable[[], bool],
    *,
    exclude_job_key: str | None = None,
    ageing_s: float = DEFAULT_AGEING_S,
) -> Wait | None:
    """Admit the candidate or record it waiting, in one transaction: `take()` records the intent or
    its claim (True = won) and runs only when the candidate fits and no waiter goes first. Returns
    None when admitted (or `take` lost, nothing reserved), else why it waits."""
    db = as_control(conn)
    for attempt in range(CONFLICT_RETRIES):
        try:
            with db.transaction():
                _touch_account(db, c.provider, c.account)
                wait = why_no_room(usage(db, c, exclude_job_key), c, limits) or waiter_ahead(db, c, ageing_s)
                if wait is not None:
                    mark_waiting(db, [c], wait.reason)
                    return wait
                if take():
                    _mark_admitted(db, c)
                return None
        except db.ConflictError:
            # Another admission for the account committed first: decide again on what it left.
            if attempt == CONFLICT_RETRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    return None  # pragma: no cover - the loop returns or raises
