"""`batch-assets poll [--provider P] [--task T]`: poll provider batches now, as a sensor tick would.

The jobs due go through the same poll leases as the status sensors' ticks (ledger/poll_leases.py):
a job a sensor is polling at that moment is left to it and counted, never polled twice at once.
Every transition is printed; an error on one job is one line on stderr and exit 1, the others are
still recorded.
"""

from __future__ import annotations

import sys

from batch_assets.cli import context
from batch_assets.cli.errors import CliError

POLL_BUDGET_S = 60.0


def cmd_poll(args) -> int:
    from batch_assets.ledger.tasks import task_names
    from batch_assets.pipeline.collect.poll import poll_jobs
    from batch_assets.pipeline.collect.poll_scopes import PollScope

    wh = context.warehouse(args, must_exist=False)
    if wh.ledger_url is None:  # the jobs are in the warehouse file: it must be there
        wh = context.warehouse(args)
    providers = context.providers(wh)
    task_id = task_name = None
    if args.task:
        with context.control(wh) as db:
            names = task_names(db)
        if args.task in names:
            task_id = args.task
        elif args.task in names.values():
            task_name = args.task
        else:
            raise CliError(f"no task or task_id {args.task!r} in the ledger: list them with `batch-assets jobs`")
    result = poll_jobs(
        wh,
        providers.adapter,
        budget_s=POLL_BUDGET_S,
        task_id=task_id,
        task_name=task_name,
        scope=PollScope("cli", providers=tuple(args.provider) if args.provider else None),
        poller="cli",
    )
    for job_key, old, new in result.transitions:
        print(f"{job_key}: {old} -> {new}")
    for job_key, reason in result.batch_failures.items():
        print(f"{job_key}: provider batch ended {reason}")
    for provider, err in result.listing_errors.items():
        print(f"{provider}: listing its batches failed, its jobs were retrieved one by one: {err}", file=sys.stderr)
    for job_key, err in result.errors.items():
        print(f"{job_key}: poll failed: {err}", file=sys.stderr)
    held = f", {result.held_elsewhere} left to another poller polling them now" if result.held_elsewhere else ""
    print(
        f"polled {result.polled} job(s) ({result.listed} through a batch listing), "
        f"{len(result.transitions)} transition(s), {len(result.errors)} error(s){held}"
    )
    return 1 if result.errors else 0
