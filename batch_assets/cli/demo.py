"""`batch-assets demo` (every demo task end to end on the emulator) and `batch-assets seed`."""

from __future__ import annotations

from pathlib import Path

from batch_assets.cli import context
from batch_assets.cli.errors import UsageError

# The tasks `demo` runs, in order; kept equal to batch_assets.demo.runner.DEMO_TASKS (a test checks),
# named here so that `--help` does not import Dagster.
DEMO_TASKS = ("ticket_triage", "ticket_summary", "kb_embeddings", "review_sentiment", "ticket_triage_anthropic")


def cmd_demo(args) -> int:
    context.reject_database_option(args, "demo")
    from batch_assets.spec.settings import partition_start

    partition_start()  # a bad $BATCH_ASSETS_PARTITION_START is named before anything is seeded or started
    from batch_assets.cli.console import print_table
    from batch_assets.demo.runner import run_demo

    tasks = tuple(dict.fromkeys(args.tasks)) if args.tasks else DEMO_TASKS
    return run_demo(Path(args.data_dir), tasks=tasks, fresh=args.fresh, print_table=print_table)


def cmd_seed(args) -> int:
    from batch_assets.demo.runner import seed_demo_tables

    if args.days < 1:
        raise UsageError("--days must be at least 1")
    wh = context.warehouse(args, must_exist=False)
    try:
        counts = seed_demo_tables(wh, lambda: context.connect(wh, read_only=False), days=args.days)
    except ValueError as exc:  # sizes the seed data cannot be built with
        raise UsageError(str(exc)) from exc
    print(
        ", ".join(f"{n} rows in {t}" for t, n in counts.items())
        + f" ({wh.database if wh.tables is None else 'PostgreSQL at ' + wh.tables.where})"
    )
    return 0
