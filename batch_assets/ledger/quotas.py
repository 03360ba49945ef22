"""Reads of provider quota as admission counts it: what each account holds now and who waits.

`batch-assets quotas`, the sensor (it asks for submit runs when a waiting account has room again)
and the report read these; admission itself (`ledger.admission`) decides inside its transaction.
"""

from __future__ import annotations

from batch_assets.ledger.admission import DEFAULT_AGEING_S, PRIORITY_RANKS, WAIT_STALE_S, reserved_sql
from batch_assets.ledger.control_db import as_control, day_sql, epoch_sql, seconds_ago_sql

PRIORITY_NAMES = {rank: name for name, rank in PRIORITY_RANKS.items()}
DEFAULT_ACCOUNT = "default"


def account_holdings(conn) -> list[dict]:
    """Per provider account and model: reserved batches and enqueued tokens, and the account's
    batches created in the last minute (the creation cap's window). One row per (provider, account,
    model) with a reservation, plus (model NULL) accounts that only created or only wait."""
    return (
        as_control(conn)
        .execute(
            f"""
        WITH reserved AS (
            SELECT j.provider, coalesce(j.account, '{DEFAULT_ACCOUNT}') AS account, s.model,
                   count(*) AS jobs, coalesce(sum(s.est_tokens), 0) AS tokens
            FROM ledger.provider_job j JOIN ledger.shard s USING (shard_id)
            WHERE {reserved_sql("j")}
            GROUP BY 1, 2, 3
        ), created AS (
            SELECT provider, coalesce(account, '{DEFAULT_ACCOUNT}') AS account, count(*) AS created_last_minute
            FROM ledger.provider_job WHERE created_at > {seconds_ago_sql(60)}
            GROUP BY 1, 2
        ), waiting AS (
            SELECT DISTINCT provider, wait_account AS account FROM ledger.shard WHERE deferred_at IS NOT NULL
                AND wait_account IS NOT NULL
        ), accounts AS (
            SELECT provider, account FROM reserved UNION SELECT provider, account FROM created
            UNION SELECT provider, account FROM waiting
        )
        SELECT a.provider, a.account, r.model, coalesce(r.jobs, 0) AS jobs, coalesce(r.tokens, 0) AS tokens,
               coalesce(c.created_last_minute, 0) AS created_last_minute,
               sum(coalesce(r.jobs, 0)) OVER (PARTITION BY a.provider, a.account) AS account_jobs
        FROM accounts a
        LEFT JOIN reserved r USING (provider, account)
        LEFT JOIN created c USING (provider, account)
        ORDER BY a.provider, a.account, r.model NULLS FIRST"""
        )
        .dicts()
    )


def waiting_partitions(conn, ageing_s: float = DEFAULT_AGEING_S) -> list[dict]:
    """The waiting queue by partition, first served first: task, partition, provider account, model,
    priority (and its effective value after ageing), shards and tokens waiting (the smallest shard's
    too: what must fit), since when, the latest reason, and whether a submitter still asks for it."""
    waited = f"{epoch_sql('now()::TIMESTAMP')} - {epoch_sql('s.deferred_at')}"
    rows = (
        as_control(conn)
        .execute(
            f"""
        SELECT t.task_name, {day_sql("t.partition_date")} AS partition_date, t.task_id,
               s.provider, coalesce(s.wait_account, '{DEFAULT_ACCOUNT}') AS account, s.model,
               max(s.wait_priority) AS priority_rank,
               max(coalesce(s.wait_priority, 1) + floor(({waited}) / $ageing)) AS effective_priority,
               count(*) AS shards, sum(s.est_tokens) AS tokens, min(s.est_tokens) AS smallest_shard_tokens,
               min(s.deferred_at) AS waiting_since,
               (array_agg(s.wait_reason ORDER BY coalesce(s.wait_seen_at, s.deferred_at) DESC))[1] AS reason,
               coalesce(max(s.wait_seen_at) > {seconds_ago_sql(WAIT_STALE_S)}, false) AS asked_for
        FROM ledger.shard s JOIN ledger.batch_task t USING (task_id)
        WHERE s.deferred_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM ledger.provider_job j WHERE j.shard_id = s.shard_id
                          AND (j.provider_batch_id IS NOT NULL OR {reserved_sql("j")}))
        GROUP BY t.task_name, t.partition_date, t.task_id, s.provider, coalesce(s.wait_account, '{DEFAULT_ACCOUNT}'),
                 s.model
        ORDER BY effective_priority DESC, waiting_since, task_name, partition_date""",
            {"ageing": float(ageing_s)},
        )
        .dicts()
    )
    for r in rows:
        r["priority"] = PRIORITY_NAMES.get(r.pop("priority_rank"), "normal")
        r["effective_priority"] = int(r["effective_priority"])
        r["asked_for"] = bool(r["asked_for"])
    return rows
