"""`batch-assets dry-run <task_id> [-n 5]`: N request lines of a frozen partition, exactly as they
would be sent (after redaction), with the partition's estimate; recorded in `ledger.dry_run`.

Never calls a provider and writes no shard. One recorded dry run per task and prompt version lets
partitions above the task's `gate.dry_run_threshold` through the `dry_run_recorded` check.
"""

from __future__ import annotations

import datetime as dt
import re
import sys

from batch_assets.cli import context
from batch_assets.cli.errors import CliError, UsageError
from batch_assets.cli.output import Field, render

TASK_ID_RE = re.compile(r"^([a-z][a-z0-9_]{0,47})_(\d{8})$")

ESTIMATE_FIELDS = [
    Field("task_id"),
    Field("prompt_version", header="prompt"),
    Field("items"),
    Field("est_input_tokens", header="input tokens"),
    Field("est_output_tokens", header="output tokens"),
    Field("cost_estimated", header="est. cost"),
    Field("currency"),
    Field("lines_shown", header="lines shown"),
    Field("sample_hash", in_table=False),
    Field("lines", in_table=False),
]


def parse_task_id(task_id: str) -> tuple[str, str]:
    """(task name, partition date YYYY-MM-DD) of a task_id `<task>_<YYYYMMDD>`."""
    m = TASK_ID_RE.match(task_id)
    if not m:
        raise UsageError(f"{task_id!r} is not a task_id: write <task>_<YYYYMMDD>, e.g. ticket_triage_20261120")
    try:
        day = dt.datetime.strptime(m.group(2), "%Y%m%d").date()
    except ValueError:
        raise UsageError(f"{task_id!r}: {m.group(2)} is not a date (YYYYMMDD)") from None
    return m.group(1), day.isoformat()


def cmd_dry_run(args) -> int:
    from batch_assets.pipeline.govern.dry_run import NotFrozenError, record, render_sample
    from batch_assets.pipeline.govern.send_gate import check_prompt
    from batch_assets.spec.resolve import load_tasks

    if args.n < 1:
        raise UsageError(f"-n {args.n}: show at least 1 line")
    name, day = parse_task_id(args.task_id)
    tasks = load_tasks()
    task = tasks.get(name)  # a broken task file: its one-line error; another's does not matter
    if task is None:
        raise CliError(f"no task {name!r} in batch_assets/defs/tasks (known: {', '.join(sorted(tasks.tasks))})")
    wh = context.warehouse(args)
    try:
        sample = render_sample(wh, task, day, args.n)
    except NotFrozenError as exc:
        raise CliError(str(exc)) from None
    prompt = check_prompt(wh, task, day)
    if not prompt.passed:  # the lines would not be what the task file now says
        raise CliError(f"not recorded: {prompt.reason}")
    record(wh, task, sample)
    estimate = {**sample.estimate(), "lines": [r["line"] for r in sample.lines]}
    if args.format == "table":
        for r in sample.lines:
            print(r["line"])
        print()
    render([estimate], ESTIMATE_FIELDS, args.format)
    n = len(sample.lines)
    print(
        f"recorded dry run of {task.name} prompt {sample.prompt_version!r} ({n} line{'' if n == 1 else 's'}, "
        f"sample {sample.sample_hash[:12]}); nothing was sent",
        file=sys.stderr,
    )
    return 0
