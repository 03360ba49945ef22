"""`batch-assets retry <task_id> [--class C …] [--dry-run]`: send failed items of a partition again.

With --class, items whose latest attempt is final-failed (or waits for an operator) with that class
are reopened first — e.g. `--class validation_error` after fixing the prompt or the schema. Then
every retry that is due is cut into new shards (attempt n+1) and submitted, exactly as the
submissions asset would: through the same gate (`may_send`: model, prompt, dry run, budget,
sensitive data). --dry-run only counts, and says what the gate would refuse.
"""

from __future__ import annotations

from batch_assets.cli import context
from batch_assets.cli.errors import CliError


def cmd_retry(args) -> int:
    from batch_assets.ledger.tasks import task_row
    from batch_assets.pipeline.govern.send_gate import failed_gates, may_send
    from batch_assets.pipeline.send.shards import cut_shards, verify_shards
    from batch_assets.pipeline.settle.retry_ledger import due_retries_sql, reopen_for_operator
    from batch_assets.spec.resolve import load_tasks
    from batch_assets.sqltext import sql_literal

    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        task = task_row(conn, args.task_id)
        row = (task["task_name"], task["day"]) if task else None
    if row is None:
        raise CliError(f"no batch task {args.task_id!r}; list them with `batch-assets report`")
    task_name, partition = row
    task = load_tasks().get(task_name)  # a broken task file: its one-line error; another's does not matter
    if task is None:
        raise CliError(f"task {task_name!r} of {args.task_id} is no longer defined in batch_assets/defs/tasks")
    refused = [] if args.dry_run else failed_gates(wh, task, partition)  # the submissions asset's gate
    if refused:
        raise CliError(f"{args.task_id}: {refused[0].check} failed, nothing reopened or sent: {refused[0].reason}")
    providers = context.providers(wh)
    if not args.dry_run:  # before anything is reopened: a stopped emulator fails here, naming its URL
        context.check_reachable(wh, providers, task.spec.provider)
    classes = tuple(args.failure_class or ())
    try:
        reopened = reopen_for_operator(wh, args.task_id, classes, dry_run=args.dry_run) if classes else {}
    except ValueError as exc:
        raise CliError(str(exc)) from None
    with context.connect(wh, read_only=args.dry_run) as conn:
        due = dict(
            conn.execute(
                f"SELECT error_class, count(*) FROM ({due_retries_sql(sql_literal(args.task_id))}) GROUP BY 1"
            ).fetchall()
        )
    if args.dry_run:
        for verdict in may_send(wh, task, partition):
            print(f"{args.task_id}: would be refused: {verdict.check} failed: {verdict.reason}")
        for cls, n in sorted(reopened.items()):
            print(f"{args.task_id}: would reopen {n} final {cls} item(s)")
        total = sum(due.values()) + sum(reopened.values())
        print(
            f"{args.task_id}: would send {total} item(s) again "
            f"({', '.join(f'{c} {n}' for c, n in sorted({**due, **reopened}.items())) or 'none due'})"
        )
        return 0
    for cls, n in sorted(reopened.items()):
        print(f"{args.task_id}: reopened {n} final {cls} item(s)")
    cut = cut_shards(wh, task, partition)
    problems, _ = verify_shards(wh, task, partition)
    if problems:
        raise CliError(f"{args.task_id}: shards failed their checks, nothing sent: {problems[0]}")
    if cut.lines == 0:
        print(f"{args.task_id}: no retry is due (see `batch-assets report --task {args.task_id}`)")
        return 0
    summary = _submit(wh, task, partition, providers)
    print(
        f"{args.task_id}: {cut.lines} item(s) in {len(cut.new_shards)} new shard(s), "
        f"{len(summary.submitted)} batch(es) submitted, {summary.waiting_for_capacity} waiting for capacity"
    )
    return 0


def _submit(wh, task, partition: str, providers):
    """Submit the partition's pending shards; a refusal or an unreachable provider is one line."""
    from batch_assets.pipeline.govern.send_gate import SendRefused
    from batch_assets.pipeline.send.submit import submit_pending

    try:
        with context.reaching(wh, providers, task.spec.provider):
            return submit_pending(wh, task, partition, providers.adapter(task.spec.provider))
    except SendRefused as refused:
        raise CliError(f"{refused} (the reopened items stay due; retry again after the fix)") from None
    except CliError as unreachable:
        raise CliError(f"{unreachable} (the reopened items stay due; retry again when it answers)") from None
