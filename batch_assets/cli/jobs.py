"""`batch-assets jobs`: provider jobs with where they went (`mode` emulator | live; `endpoint_url`
and the `request_options` their lines were rendered with in --format json/csv), their state, request
counts, whether they are stuck (over
their state's SLA: `stuck`, or what the stuck policy did, e.g. `cancel_requested`) or their
collection failed (`collect_error`, after `collect_attempts` collect runs), and where their
provider-side files stand (`remote`: deleted, a failed deletion waiting for its retry, on provider); `jobs adopt` and
`jobs abandon` settle an undecided job (a create whose outcome the provider cannot tell).

An undecided job is an intent (state CREATED, no batch id) whose create got no answer and whose
lookup could not decide: submit runs never create it again on their own. The operator either
adopts the provider batch that is the job's (`jobs adopt JOB_KEY BATCH_ID`), or abandons the
intent (`jobs abandon JOB_KEY`): the next submit run sends the shard again under a new job key.
"""

from __future__ import annotations

import json

from batch_assets.cli import context
from batch_assets.cli.errors import CliError
from batch_assets.cli.output import Field, print_total, render, row_limit

FIELDS = [
    Field("job_key"),
    Field("task_id", in_table=False),
    Field("provider"),
    Field("endpoint_mode", header="mode"),
    Field("endpoint_url", in_table=False),
    Field("request_options", in_table=False),
    Field("provider_batch_id", header="batch_id"),
    Field("state"),
    Field("raw_status", header="raw"),
    Field("request_total", header="total"),
    Field("request_completed", header="done"),
    Field("request_failed", header="failed"),
    Field("cancel_requested", in_table=False),
    Field("submitted_at", header="submitted"),
    Field("terminal_at", header="terminal"),
    Field("create_outcome", in_table=False),
    Field("create_error", in_table=False),
    Field("claimed_by", in_table=False),
    Field("claim_expires_at", in_table=False),
    Field("note"),
    Field("stuck"),
    Field("stuck_at", in_table=False),
    Field("collect_attempts", in_table=False),
    Field("collect_error"),
    Field("remote_files", header="remote"),
    Field("remote_delete_error", in_table=False),
]


def cmd_jobs(args) -> int:
    """The jobs oldest first; with a limit, the newest N of them (still oldest first), and on stderr
    how many of how many are shown."""
    from batch_assets.ledger.job_reads import job_listing

    limit = row_limit(args)
    with context.connect(context.warehouse(args), read_only=True) as conn:
        task_ids = context.match_task_ids(context.known_task_ids(conn), args.task)
        rows, total = job_listing(conn, task_ids, limit)
    for row in rows:  # an object in --format json (a few jobs, for display)
        row.pop("created_at")
        row["request_options"] = json.loads(row["request_options"]) if row["request_options"] else None
    render(rows, FIELDS, args.format)
    print_total(len(rows), total, "job(s)" + (" (the newest)" if total > len(rows) else ""))
    return 0


def _job(conn, job_key: str) -> dict:
    from batch_assets.ledger.job_reads import job_with_shard

    job = job_with_shard(conn, job_key)
    if job is None:
        raise CliError(f"no provider job {job_key!r}: list them with `batch-assets jobs`")
    return job


def cmd_jobs_adopt(args) -> int:
    """Record BATCH_ID as the job's batch: polled through the provider first; refused when the
    batch belongs to another job (in the ledger, or by the job key it carries) or its request count
    differs from the shard's."""
    from batch_assets.ledger.job_reads import job_of_batch
    from batch_assets.ledger.jobs import JobNotSettled, adopt_job
    from batch_assets.providers.contract import JOB_KEY_METADATA, JobRef, JobState

    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        job = _job(conn, args.job_key)
        other = job_of_batch(conn, args.batch_id, args.job_key)
    if job["provider_batch_id"]:
        raise CliError(f"job {args.job_key} already has provider batch {job['provider_batch_id']}: nothing to adopt")
    if other:
        raise CliError(f"batch {args.batch_id} is already recorded for job {other}: a batch belongs to one job")
    providers = context.providers(wh)
    context.check_reachable(wh, providers, job["provider"])
    with context.reaching(wh, providers, job["provider"]):
        snap = providers.adapter(job["provider"]).poll(JobRef(args.batch_id), JobState.CREATED)
    tagged = snap.metadata.get(JOB_KEY_METADATA)
    if tagged and tagged != args.job_key:
        raise CliError(f"batch {args.batch_id} carries job key {tagged}: not the batch of {args.job_key}")
    lines = int(job["line_count"])
    if snap.request_total and snap.request_total != lines:
        raise CliError(
            f"batch {args.batch_id} holds {snap.request_total} requests but the shard of {args.job_key} has "
            f"{lines} lines: not this job's batch"
        )
    counted = "request count checked" if snap.request_total else f"{job['provider']} reports no request count yet"
    detail = f"batch {snap.provider_batch_id} ({snap.raw_status}, {counted})"
    try:
        with context.connect(wh, read_only=False) as conn:
            adopt_job(conn, args.job_key, snap, detail)
    except JobNotSettled as exc:
        raise CliError(f"not adopted: {exc}") from exc
    print(f"{args.job_key}: adopted {detail}; state {snap.state.value}")
    return 0


def cmd_jobs_abandon(args) -> int:
    """Give up the job's intent: the next submit run sends its shard under a new job key."""
    from batch_assets.ledger.jobs import JobNotSettled, abandon_job

    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        job = _job(conn, args.job_key)
    if job["provider_batch_id"]:
        raise CliError(
            f"job {args.job_key} has provider batch {job['provider_batch_id']}: only a job without a batch "
            "can be abandoned (cancel a running batch with `batch-assets cancel`)"
        )
    reason = args.reason or "no reason given"
    try:
        with context.connect(wh, read_only=False) as conn:
            abandon_job(conn, args.job_key, reason)
    except JobNotSettled as exc:
        raise CliError(f"not abandoned: {exc}") from exc
    print(f"{args.job_key}: abandoned ({reason}); the next submit run sends its shard under a new job key")
    return 0
