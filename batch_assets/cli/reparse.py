"""`batch-assets reparse <task_id> [--class C …] [--dry-run]`: parse kept raw results of failed items again.

After a parser or output-schema fix, the items whose answers failed to parse (or failed with the
classes given) are parsed again from the provider's lines the ledger keeps: no provider is called.
Outcomes that change replace the current ones as a new parse generation; answers that now parse are
applied by the normal apply path (exactly once, under the stale-input guard), outcomes that still
fail get their retry decision again, and the partition is settled. --dry-run only counts.
"""

from __future__ import annotations

from batch_assets.cli import context
from batch_assets.cli.errors import CliError


def _what(summary) -> str:
    classes = ", ".join(summary.classes)
    failing = ", ".join(f"{c} {n}" for c, n in sorted(summary.still_failed.items()))
    parts = [
        f"{summary.candidates} result(s) failed with {classes}",
        f"{summary.now_usable} now parse",
        f"{sum(summary.still_failed.values())} fail otherwise" + (f" ({failing})" if failing else ""),
        f"{summary.unchanged} unchanged",
    ]
    skipped = []
    if summary.sent_again:
        skipped.append(f"{summary.sent_again} sent again already (left to their new attempt)")
    if summary.other_version:
        skipped.append(f"{summary.other_version} frozen under another output version (not parsed as this one)")
    return ", ".join(parts) + (f"; skipped: {'; '.join(skipped)}" if skipped else "")


def cmd_reparse(args) -> int:
    from batch_assets.ledger.tasks import task_row
    from batch_assets.pipeline.collect.reparse import DEFAULT_CLASSES, reparse_partition, reparse_results
    from batch_assets.spec.resolve import load_tasks

    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        task = task_row(conn, args.task_id)
        row = (task["task_name"], task["day"]) if task else None
        known = context.known_task_ids(conn) if row is None else []
    if row is None:
        raise CliError(f"no batch task {args.task_id!r}; {context.known_tasks(known)}")
    task_name, partition = row
    task = load_tasks().get(task_name)  # a broken task file: its one-line error; another's does not matter
    if task is None:
        raise CliError(f"task {task_name!r} of {args.task_id} is no longer defined in batch_assets/defs/tasks")
    classes = tuple(args.failure_class or DEFAULT_CLASSES)
    try:
        if args.dry_run:
            summary = reparse_results(wh, task, partition, classes, dry_run=True)
            print(f"{args.task_id}: would re-parse {_what(summary)}; nothing written, no provider called")
            return 0
        run = reparse_partition(wh, task, partition, classes)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    summary = run.reparse
    if summary.generation is None:
        print(f"{args.task_id}: nothing changed: {_what(summary)}")
    else:
        print(f"{args.task_id}: parse generation {summary.generation}: {_what(summary)}")
    decided = ", ".join(f"{a} {n}" for a, n in sorted(run.decided.items()))
    print(
        f"{args.task_id}: applied {run.applied}, stale {run.stale}"
        + (f"; retry decisions: {decided}" if decided else "")
        + f"; reconciliation {run.check}, final status {run.final_status or 'none (work pending)'}"
    )
    return 0
