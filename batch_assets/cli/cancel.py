"""`batch-assets cancel`: ask the provider to cancel running batches (one job_key, or all of a task_id).

Each job is handled on its own: one that has finished since the last poll is reported and left
alone, and an error on one job is one line on stderr while the others still go ahead.
"""

from __future__ import annotations

import sys
import traceback

from batch_assets.cli import context
from batch_assets.cli.errors import CliError, explain


class _LedgerNotUpdated(CliError):
    """The provider took the cancel; only the ledger write failed."""


def _running_jobs(wh, target: str) -> list[dict]:
    from batch_assets.ledger.job_reads import running_jobs

    with context.connect(wh, read_only=True) as conn:
        jobs = running_jobs(conn, target)
    if jobs is None:
        raise CliError(f"no provider job or task_id {target!r}: list them with `batch-assets jobs`")
    return jobs


def _job_ref(job: dict):
    from batch_assets.providers.contract import JobRef

    return JobRef(
        job["provider_batch_id"],
        output_file_id=job["output_file_id"],
        error_file_id=job["error_file_id"],
        input_file_id=job["input_file_id"],
    )


def _finished_state(adapter, job: dict) -> str | None:
    """The batch's terminal state as the provider reports it now, or None (running, or unknown)."""
    try:
        from batch_assets.providers.contract import JobState

        snap = adapter.poll(_job_ref(job), JobState(job["state"]))
    except Exception:  # the cancel call's own error is the one worth reporting
        return None
    return snap.state.value if snap.terminal else None


def _cancel_one(wh, providers, job: dict) -> str:
    from batch_assets.ledger.jobs import record_snapshot, request_cancel
    from batch_assets.providers.contract import JobState

    adapter = providers.adapter(job["provider"])
    try:
        with context.reaching(wh, providers, job["provider"]):
            snap = adapter.cancel(_job_ref(job))
    except CliError:
        raise  # the provider cannot be reached: asking it how the batch stands would fail the same way
    except Exception:
        # Providers refuse to cancel a batch that has already ended: say so rather than fail.
        finished = _finished_state(adapter, job)
        if finished is None:
            raise
        return f"{job['job_key']}: already {finished.lower()}, nothing to cancel (the next poll collects it)"
    try:
        with context.connect(wh, read_only=False) as conn:
            request_cancel(conn, job["job_key"])
            record_snapshot(conn, job["job_key"], snap)
    except Exception as exc:
        raise _LedgerNotUpdated(
            f"cancel requested at the provider ({snap.raw_status}), but the ledger was not "
            f"updated: {explain(exc)[0]}; the next poll records it"
        ) from exc
    if snap.terminal and snap.state is not JobState.CANCELLED:
        return f"{job['job_key']}: already {snap.state.value.lower()}, nothing to cancel ({snap.raw_status})"
    return f"{job['job_key']}: cancel requested ({snap.raw_status})"


def cmd_cancel(args) -> int:
    wh = context.warehouse(args)
    jobs = _running_jobs(wh, args.target)
    if not jobs:
        print(f"nothing to cancel: no provider job of {args.target!r} is still running")
        return 0
    providers = context.providers(wh)
    for provider in sorted({job["provider"] for job in jobs}):
        context.check_reachable(wh, providers, provider)
    failed = 0
    for job in jobs:
        try:
            print(_cancel_one(wh, providers, job), flush=True)
        except Exception as exc:
            failed += 1
            if getattr(args, "debug", False):
                traceback.print_exc()
            what = "" if isinstance(exc, _LedgerNotUpdated) else "cancel failed: "
            print(f"{job['job_key']}: {what}{explain(exc)[0]}", file=sys.stderr, flush=True)
    if failed:
        print(
            f"batch-assets cancel: {failed} of {len(jobs)} job(s) went wrong (see above); rerun to retry",
            file=sys.stderr,
        )
    return 1 if failed else 0
