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

# Where the job's provider-side files stand (retention: `delete_remote_files`): deleted, a deletion
# that failed and is retried (next collect, sensor tick, retention job), or still on the provider.
REMOTE_FILES_SQL = """
    CASE WHEN remote_deleted_at IS NOT NULL THEN 'deleted'
         WHEN coalesce(remote_delete_attempts, 0) > 0
              THEN 'delete failed x' || remote_delete_attempts || ' (retried)'
         WHEN downloaded_at IS NOT NULL THEN 'on provider'
    END"""

# What the `note` column says about a job whose create did not plainly succeed.
NOTE_SQL = """
    CASE WHEN provider_batch_id IS NULL AND create_outcome = 'unknown'
              THEN 'undecided: ' || coalesce(create_error, 'the create got no answer')
         WHEN create_outcome = 'abandoned' THEN 'abandoned (the shard goes again under a new job key)'
         WHEN provider_batch_id IS NULL AND create_outcome = 'failed'
              THEN 'refused: ' || coalesce(create_error, '')
         WHEN create_outcome = 'adopted' THEN coalesce(create_error, 'adopted')
         WHEN provider_batch_id IS NULL AND claimed_by IS NOT NULL AND claim_expires_at >= now()::TIMESTAMP
              THEN 'being submitted by ' || claimed_by
    END"""


def cmd_jobs(args) -> int:
    """The jobs oldest first; with a limit, the newest N of them (still oldest first), and on stderr
    how many of how many are shown."""
    from batch_assets.ledger.warehouse import fetch_dicts

    limit = row_limit(args)
    with context.connect(context.warehouse(args), read_only=True) as conn:
        task_ids = context.match_task_ids(context.known_task_ids(conn), args.task)
        rows = fetch_dicts(
            conn,
            f"""
            SELECT * FROM (
                SELECT job_key, task_id, provider, endpoint_mode, endpoint_url, request_options,
                       provider_batch_id, state, raw_status, request_total,
                       request_completed, request_failed, cancel_requested, submitted_at, terminal_at,
                       create_outcome, create_error, claimed_by, claim_expires_at, {NOTE_SQL} AS note,
                       CASE WHEN stuck_at IS NOT NULL THEN coalesce(stuck_action, 'stuck') END AS stuck, stuck_at,
                       coalesce(collect_attempts, 0) AS collect_attempts, collect_error,
                       {REMOTE_FILES_SQL} AS remote_files, remote_delete_error, created_at
                FROM ledger.provider_job
                WHERE list_contains($task_ids, task_id)
                ORDER BY created_at DESC, job_key DESC
                LIMIT CASE WHEN $limit > 0 THEN $limit END
            ) ORDER BY created_at, job_key""",
            {"task_ids": task_ids, "limit": limit},
        )
        total = len(rows)
        if limit and total == limit:
            total = conn.execute(
                "SELECT count(*) FROM ledger.provider_job WHERE list_contains(?, task_id)", [task_ids]
            ).fetchone()[0]
    for row in rows:  # an object in --format json (a few jobs, for display)
        row.pop("created_at")
        row["request_options"] = json.loads(row["request_options"]) if row["request_options"] else None
    render(rows, FIELDS, args.format)
    print_total(len(rows), total, "job(s)" + (" (the newest)" if total > len(rows) else ""))
    return 0


def _job(conn, job_key: str) -> dict:
    from batch_assets.ledger.warehouse import fetch_dicts

    rows = fetch_dicts(
        conn,
        """
        SELECT j.job_key, j.task_id, j.provider, j.provider_batch_id, j.create_outcome, s.line_count
        FROM ledger.provider_job j JOIN ledger.shard s USING (shard_id) WHERE j.job_key = ?""",
        [job_key],
    )
    if not rows:
        raise CliError(f"no provider job {job_key!r}: list them with `batch-assets jobs`")
    return rows[0]


def cmd_jobs_adopt(args) -> int:
    """Record BATCH_ID as the job's batch: polled through the provider first; refused when the
    batch belongs to another job (in the ledger, or by the job key it carries) or its request count
    differs from the shard's."""
    from batch_assets.ledger.jobs import JobNotSettled, adopt_job
    from batch_assets.providers.contract import JOB_KEY_METADATA, JobRef, JobState

    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        job = _job(conn, args.job_key)
        other = conn.execute(
            "SELECT job_key FROM ledger.provider_job WHERE provider_batch_id = ? AND job_key <> ?",
            [args.batch_id, args.job_key],
        ).fetchone()
    if job["provider_batch_id"]:
        raise CliError(f"job {args.job_key} already has provider batch {job['provider_batch_id']}: nothing to adopt")
    if other:
        raise CliError(f"batch {args.batch_id} is already recorded for job {other[0]}: a batch belongs to one job")
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
