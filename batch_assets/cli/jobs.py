"""`batch-assets jobs`: provider jobs with their state, request counts, and whether they are stuck
(over their state's SLA: `stuck`, or what the stuck policy did, e.g. `cancel_requested`) or their
collection failed (`collect_error`, after `collect_attempts` collect runs)."""

from __future__ import annotations

from batch_assets.cli import context
from batch_assets.cli.output import Field, render

FIELDS = [
    Field("job_key"),
    Field("task_id", in_table=False),
    Field("provider"),
    Field("provider_batch_id", header="batch_id"),
    Field("state"),
    Field("raw_status", header="raw"),
    Field("request_total", header="total"),
    Field("request_completed", header="done"),
    Field("request_failed", header="failed"),
    Field("cancel_requested", in_table=False),
    Field("submitted_at", header="submitted"),
    Field("terminal_at", header="terminal"),
    Field("stuck"),
    Field("stuck_at", in_table=False),
    Field("collect_attempts", in_table=False),
    Field("collect_error"),
]


def cmd_jobs(args) -> int:
    from batch_assets.ledger.warehouse import fetch_dicts

    with context.connect(context.warehouse(args), read_only=True) as conn:
        task_ids = context.match_task_ids(context.known_task_ids(conn), args.task)
        rows = fetch_dicts(conn, """
            SELECT job_key, task_id, provider, provider_batch_id, state, raw_status, request_total,
                   request_completed, request_failed, cancel_requested, submitted_at, terminal_at,
                   CASE WHEN stuck_at IS NOT NULL THEN coalesce(stuck_action, 'stuck') END AS stuck, stuck_at,
                   coalesce(collect_attempts, 0) AS collect_attempts, collect_error
            FROM ledger.provider_job
            WHERE list_contains(?, task_id) ORDER BY created_at, job_key""", [task_ids])
    render(rows, FIELDS, args.format)
    return 0
