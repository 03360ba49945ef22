"""`batch-assets quotas`: each provider account's limits and what holds them, and who waits.

Read from the ledger as admission counts it (`ledger.quotas`): per provider account its concurrent
batches in use of its limit, per model its enqueued tokens of the limit, the batches created in the
last minute against the creation cap; then the waiting queue in the order admission serves it
(effective priority, then waiting since) with each partition's reason. The limits are the account's
as the environment configures it (`<PROVIDER>_MAX_CONCURRENT_JOBS` …), else the provider's
limits.yaml. Read-only.
"""

from __future__ import annotations

import json
import sys

from batch_assets.cli import context
from batch_assets.cli.output import Field, render

ACCOUNT_FIELDS = [
    Field("provider"),
    Field("account"),
    Field("model"),
    Field("batches", header="batches (in use/limit)"),
    Field("enqueued_tokens", header="enqueued tokens (model/limit)"),
    Field("created_last_minute", header="created/min (cap)"),
    Field("batches_in_use", in_table=False),
    Field("max_concurrent_jobs", in_table=False),
    Field("model_enqueued_tokens", in_table=False),
    Field("max_enqueued_tokens", in_table=False),
    Field("creations_last_minute", in_table=False),
    Field("max_creates_per_minute", in_table=False),
]
WAITING_FIELDS = [
    Field("task_name", header="task"),
    Field("partition_date", header="partition"),
    Field("provider", in_table=False),
    Field("account"),
    Field("priority"),
    Field("effective_priority", header="effective"),
    Field("shards"),
    Field("tokens"),
    Field("waiting_since", header="since"),
    Field("reason", header="why"),
    Field("task_id", in_table=False),
    Field("model", in_table=False),
    Field("asked_for", in_table=False),
]


def account_rows(conn, limits_of) -> list[dict]:
    """One row per provider account and model it holds (every known provider's configured account
    shows, idle or not)."""
    from batch_assets.ledger.quotas import account_holdings
    from batch_assets.providers.registry import PROVIDERS

    holdings = account_holdings(conn)
    accounts = {(r["provider"], r["account"]) for r in holdings} | {(p, limits_of.account(p)) for p in PROVIDERS}
    rows = []
    for provider, account in sorted(accounts):
        limits = limits_of(provider)
        mine = [r for r in holdings if (r["provider"], r["account"]) == (provider, account)]
        jobs = sum(r["jobs"] for r in mine)
        created = mine[0]["created_last_minute"] if mine else 0
        models = [r for r in mine if r["model"] is not None] or [{"model": None, "tokens": 0}]
        for r in models:
            rows.append(
                {
                    "provider": provider,
                    "account": account,
                    "model": r["model"] or "-",
                    "batches": f"{jobs}/{limits.max_jobs}",
                    "enqueued_tokens": f"{r['tokens']:,}/{limits.max_tokens:,}",
                    "created_last_minute": f"{created}/{limits.max_creates_per_minute or '-'}",
                    "batches_in_use": jobs,
                    "max_concurrent_jobs": limits.max_jobs,
                    "model_enqueued_tokens": r["tokens"],
                    "max_enqueued_tokens": limits.max_tokens,
                    "creations_last_minute": created,
                    "max_creates_per_minute": limits.max_creates_per_minute,
                }
            )
    return rows


class _Limits:
    """The configured account and limits of each provider, as a submit run would count them."""

    def __init__(self) -> None:
        from batch_assets.resources import providers_from_env

        self._providers = providers_from_env()

    def _settings(self, provider: str):
        from batch_assets.resources import ProviderConfigurationError

        try:
            return self._providers.settings_for(provider)
        except ProviderConfigurationError:  # a live provider without its key: its defaults still apply
            return None

    def account(self, provider: str) -> str:
        settings = self._settings(provider)
        return settings.account if settings else "default"

    def __call__(self, provider: str):
        from batch_assets.pipeline.send.submit import account_limits

        return account_limits(provider, self._settings(provider))


def cmd_quotas(args) -> int:
    from batch_assets.ledger.quotas import waiting_partitions

    limits_of = _Limits()
    with context.connect(context.warehouse(args), read_only=True) as conn:
        accounts = account_rows(conn, limits_of)
        waiting = waiting_partitions(conn)
    if args.format == "json":
        from batch_assets.cli.output import _json_value

        doc = {
            "accounts": [{f.name: _json_value(r.get(f.name)) for f in ACCOUNT_FIELDS} for r in accounts],
            "waiting": [{f.name: _json_value(r.get(f.name)) for f in WAITING_FIELDS} for r in waiting],
        }
        json.dump(doc, sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
        return 0
    if args.format == "csv":  # one table per CSV: the waiting queue, what scripts act on
        render(waiting, WAITING_FIELDS, "csv")
        return 0
    print("provider accounts")
    render(accounts, ACCOUNT_FIELDS)
    print()
    if not waiting:
        print("waiting for quota: none")
        return 0
    print(f"waiting for quota: {sum(w['shards'] for w in waiting)} shard(s) of {len(waiting)} partition(s)")
    render(waiting, WAITING_FIELDS)
    return 0
