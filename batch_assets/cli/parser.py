"""The argparse tree of `batch-assets`: one subparser per command, each parsing only its own flags.

Importing this module (and the command modules it names) is cheap: commands import the pipeline,
Dagster and the SDKs inside their functions, so `--help` stays fast.
"""

from __future__ import annotations

import argparse

from batch_assets.cli import (
    cancel,
    check_deploy,
    demo,
    dev,
    dry_run,
    export,
    jobs,
    passthrough,
    poll,
    purge,
    quotas,
    reparse,
    report,
    resume,
    retry,
    review,
    revoke,
    sql,
    tasks,
)
from batch_assets.cli.context import DEFAULT_DATABASE, DEFAULT_LOCK_TIMEOUT_S
from batch_assets.cli.errors import EXIT_USAGE
from batch_assets.cli.output import add_format_option, add_limit_option
from batch_assets.providers.registry import PROVIDERS
from batch_assets.spec.failure_classes import FAILURE_CLASSES

# The classes `reparse --class` takes (pipeline.collect.reparse.REPARSE_CLASSES: a content-policy
# refusal waits for compliance review); named here so that `--help` does not import the pipeline.
REPARSE_CLASSES = tuple(c for c in FAILURE_CLASSES if c != "content_policy_error")

PROG = "batch-assets"
DESCRIPTION = (
    "The operator's command line for batch_assets: run the demo and the local stack, inspect "
    "provider jobs and reconciliations, export results, query the warehouse, cancel batches."
)
TASK_HELP = (
    "a task name (e.g. ticket_triage: all its partitions) or a task_id / task_id prefix "
    "(e.g. ticket_triage_20261120); default: all"
)


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (exit 2) naming the --help to read.

    With forward=True (for a command that owns its flags) it has no options of its own ('\\0'
    prefixes nothing a user types), so every word after the subcommand, --help included, lands in
    `args.forwarded` for that program's own parser.
    """

    def __init__(self, *args, forward: bool = False, **kwargs):
        if forward:
            kwargs.update(add_help=False, prefix_chars="\0")
        super().__init__(*args, **kwargs)
        if forward:
            self.add_argument("forwarded", nargs=argparse.REMAINDER)

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 1-65535")
    return port


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _global_options(parser: argparse.ArgumentParser, *, top: bool, warehouse: bool = True) -> None:
    """--database, --lock-timeout, --debug: before the subcommand, or after it (where they default to
    SUPPRESS so that a subcommand without them keeps the values given before it). Commands that keep
    their warehouse under --data-dir (demo, dev) take --debug only."""
    suppress = {} if top else {"default": argparse.SUPPRESS}
    if not top:
        parser = parser.add_argument_group("common options (also accepted before the command)")
    if warehouse:
        _warehouse_options(parser, suppress)
    parser.add_argument(
        "--debug",
        action="store_true",
        **suppress,
        help="show the full traceback of an unexpected error (or set BATCH_ASSETS_DEBUG=1)",
    )


def _warehouse_options(parser, suppress: dict) -> None:
    parser.add_argument(
        "--database",
        metavar="FILE",
        **suppress,
        help=f"the DuckDB warehouse (default: $BATCH_ASSETS_DATABASE, else {DEFAULT_DATABASE}); "
        "run files live in $BATCH_ASSETS_DATA_DIR, else the file's folder",
    )
    parser.add_argument(
        "--lock-timeout",
        metavar="SECONDS",
        type=_seconds,
        **suppress,
        help="how long to wait for another process (a Dagster run) to release the warehouse "
        f"file (default {DEFAULT_LOCK_TIMEOUT_S:g})",
    )


def _age(text: str):
    from batch_assets.pipeline.govern.retention import parse_age

    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> CliParser:
    p = CliParser(prog=PROG, description=DESCRIPTION)
    _global_options(p, top=True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, run, help: str, description: str | None = None, *, warehouse: bool = True
    ) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=description or help[0].upper() + help[1:] + ".")
        _global_options(c, top=False, warehouse=warehouse)
        c.set_defaults(run=run)
        return c

    c = command(
        "demo",
        demo.cmd_demo,
        "seed the demo data, start the emulator and run every demo task (on all four providers: OpenAI, "
        "Anthropic, Gemini, DashScope) end to end through Dagster, then print the reconciliation; "
        "exit 1 if anything fails to balance",
        "Seed the demo tables, start the provider emulator and run the five demo tasks ("
        + ", ".join(demo.DEMO_TASKS)
        + ": OpenAI, Anthropic, Gemini and DashScope) for two partitions each "
        "end to end through Dagster (submit, then the provider status sensor driving collect and retry "
        "runs), then print the reconciliation and cost tables. Exit 1 if anything fails to balance. "
        "Progress bars show on stderr when it is a terminal.",
        warehouse=False,
    )
    c.add_argument(
        "--data-dir",
        default="data",
        help="where the warehouse (DATA_DIR/warehouse.duckdb; --database does not apply), run files, "
        "emulator state and Dagster home go (default: data)",
    )
    c.add_argument("--fresh", action="store_true", help="delete the earlier demo's warehouse and files first")
    c.add_argument(
        "--task",
        dest="tasks",
        action="append",
        metavar="TASK",
        choices=demo.DEMO_TASKS,
        help="run only this demo task (repeatable); default: all five",
    )

    c = command(
        "dev",
        dev.cmd_dev,
        "the provider emulator plus the Dagster UI and daemon (dg dev), both on 127.0.0.1",
        "Start the provider emulator, then the Dagster UI and daemon (dg dev), both on 127.0.0.1, "
        "using DATA_DIR/warehouse.duckdb. Both ports are checked first: if one is taken, nothing starts.",
        warehouse=False,
    )
    c.add_argument(
        "--ui-port",
        type=_port,
        default=dev.DEFAULT_UI_PORT,
        help=f"the Dagster UI's port (default {dev.DEFAULT_UI_PORT})",
    )
    c.add_argument(
        "--emulator-port",
        type=_port,
        default=dev.DEFAULT_EMULATOR_PORT,
        help=f"the provider emulator's port (default {dev.DEFAULT_EMULATOR_PORT})",
    )
    c.add_argument(
        "--data-dir",
        default="data",
        help="warehouse (DATA_DIR/warehouse.duckdb), run files, emulator state, Dagster home (default: data)",
    )
    c.add_argument(
        "--distributed",
        action="store_true",
        help="also start throwaway PostgreSQL and S3 servers, run Dagster with deploy/dagster.local.yaml "
        "(queued runs, tag limits, pools), and carry the demo tasks to final (under DATA_DIR/distributed)",
    )

    for name, run, help in (
        (
            "emulator",
            passthrough.cmd_emulator,
            "the local provider emulator (OpenAI, DashScope, Anthropic and Gemini batch APIs) on 127.0.0.1; "
            "its own flags: `batch-assets emulator --help`",
        ),
        (
            "bench",
            passthrough.cmd_bench,
            "the offline benchmark: the pipeline at N items (default 1,000,000) against plain-DuckDB floors; "
            "its own flags: `batch-assets bench --help`",
        ),
        (
            "soak",
            passthrough.cmd_soak,
            "the reliability soak: every provider's demo task over several days against the emulator with 5 %% "
            "random faults of every kind, driven to final; exit 1 unless every item is final, nothing written "
            "twice and no provider batch created twice; its own flags: `batch-assets soak --help`",
        ),
    ):
        c = sub.add_parser(name, help=help, forward=True, usage=f"{PROG} {name} [its own flags; see --help]")
        c.set_defaults(run=run)

    c = command(
        "seed",
        demo.cmd_seed,
        "(re)create the demo business tables (support_tickets, kb_articles, product_reviews) in the "
        "warehouse, creating the file if needed",
    )
    c.add_argument("--days", type=int, default=7, help="days of data, one partition each (default 7)")

    c = command(
        "jobs",
        jobs.cmd_jobs,
        "provider jobs with their state and request counts; adopt or abandon an undecided one",
        "List provider jobs (oldest first) with their state and request counts; the note column shows "
        "undecided jobs (a create the provider cannot tell happened or not) with the reason. JSON and CSV "
        "also carry task_id, cancel_requested, create_outcome, create_error and the submit claim. "
        "`jobs adopt` and `jobs abandon` settle an undecided job.",
    )
    c.add_argument("--task", metavar="TASK", help=TASK_HELP)
    add_limit_option(c, "jobs", "the newest")
    add_format_option(c)
    settle = c.add_subparsers(dest="jobs_command", metavar="{adopt,abandon}", required=False, parser_class=CliParser)
    a = settle.add_parser(
        "adopt",
        help="record a provider batch as an undecided job's batch",
        description="Record BATCH_ID as the batch of JOB_KEY, an intent without a batch id. The "
        "batch is polled through the provider first; a batch already recorded for "
        "another job, or whose request count differs from the shard's, is refused. "
        "The decision is kept in ledger.operator_action.",
    )
    _global_options(a, top=False)
    a.add_argument("job_key", help="the undecided job (see `batch-assets jobs`)")
    a.add_argument("batch_id", help="the provider batch that is this job's (e.g. msgbatch_..., batch_..., batches/...)")
    a.set_defaults(run=jobs.cmd_jobs_adopt)
    b = settle.add_parser(
        "abandon",
        help="give up an undecided job: its shard goes again under a new job key",
        description="Mark JOB_KEY (an intent without a batch id) abandoned: the next submit run "
        "sends its shard as a new batch under a new job key (the old key is never "
        "reused). Only when you are sure the provider has no batch for it, or accept "
        "paying twice. The decision is kept in ledger.operator_action.",
    )
    _global_options(b, top=False)
    b.add_argument("job_key", help="the undecided job (see `batch-assets jobs`)")
    b.add_argument("--reason", help="why (kept with the decision)")
    b.set_defaults(run=jobs.cmd_jobs_abandon)

    c = command(
        "report",
        report.cmd_report,
        "per-partition outcomes: applied, final-failed by class, retries, what is still open",
        "Reconcile every task partition (or those --task selects): one row per partition with every "
        "item's final outcome, retries, items still in flight or unresolved, whether the equations "
        "balance and the partition's final status. Partitions that are not done are named after the "
        "table (on stderr with --format json/csv). Exits 0 whatever the figures say, 1 when a task folder "
        "does not load: each broken one is named after the table with its one-line error (as `batch-assets "
        "tasks` shows it), and a --task naming it fails with that error.",
    )
    c.add_argument("--task", metavar="TASK", help=TASK_HELP)
    add_format_option(c)
    c.add_argument(
        "--html",
        action="store_true",
        help="also write each partition's report page with charts to DATA_DIR/reports/<task_id>.html",
    )

    c = command(
        "tasks",
        tasks.cmd_tasks,
        "every task folder under batch_assets/defs/tasks with its load status (ok | broken) and, for a "
        "broken one, its one-line error; exit 1 if any is broken",
        "List every task folder under batch_assets/defs/tasks: its name, whether it loads (ok | broken), "
        "provider and model. A broken folder's error (the file, the field and the fix) follows the table "
        "as one line, `BROKEN <folder>: <error>` (JSON and CSV carry file, field, error and fix); the same "
        "line `report` prints, and the task's `<task>/task_spec` asset shows in the Dagster UI, where the "
        "other tasks and the sensor load beside it. Needs no warehouse. Exit 0 when every task loads, "
        "1 when any is broken.",
        warehouse=False,
    )
    add_format_option(c)

    c = command(
        "export",
        export.cmd_export,
        "one task partition's results merged with its inputs, as CSV (UTF-8 with BOM, for spreadsheets)",
    )
    c.add_argument("task_id", help="e.g. ticket_triage_20261120 (see `batch-assets report`)")
    c.add_argument("--out", required=True, metavar="FILE", help="the CSV file to write")

    c = command(
        "quotas",
        quotas.cmd_quotas,
        "each provider account's limits and what holds them, and the shards waiting for quota",
        "Per provider account: concurrent batches in use of its limit, enqueued tokens per model of the "
        "limit, batches created in the last minute against the creation cap (the account's limits as "
        "<PROVIDER>_MAX_CONCURRENT_JOBS, _MAX_ENQUEUED_TOKENS and _MAX_CREATES_PER_MINUTE set them, else the "
        "provider's limits.yaml). Then the waiting queue in the order admission serves it: task, partition, "
        "priority and its value after ageing, shards, tokens, waiting since and why. --format json gives both "
        "as one object, csv the waiting queue.",
    )
    add_format_option(c)

    c = command(
        "sql",
        sql.cmd_sql,
        "run one read-only SQL query over the warehouse and print the rows",
        "Run one read-only SQL query over the warehouse (business tables, and the ledger.* tables) "
        "and print the rows as a table.",
    )
    c.add_argument("query", help='e.g. "SELECT category, count(*) FROM ticket_labels GROUP BY ALL"')
    c.add_argument("--limit", type=int, default=50, help="print at most this many rows (default 50)")

    c = command(
        "retry",
        retry.cmd_retry,
        "send a partition's failed items again: due retries now, or final failures of a class after a fix",
        "Send failed items of a task partition again. With --class, items whose latest attempt is "
        "final-failed with that class (e.g. validation_error after fixing the prompt) are reopened "
        "first; then every due retry is cut into new shards (attempt n+1) and submitted.",
    )
    c.add_argument("task_id", help="e.g. ticket_triage_20261120 (see `batch-assets report`)")
    c.add_argument(
        "--class",
        dest="failure_class",
        action="append",
        metavar="CLASS",
        choices=FAILURE_CLASSES,
        help="reopen final failures of this class (repeatable)",
    )
    c.add_argument("--dry-run", action="store_true", help="only count what would be sent")

    c = command(
        "reparse",
        reparse.cmd_reparse,
        "parse a partition's kept raw results of failed items again after a parser or schema fix; sends nothing",
        "Parse the kept raw results of a task partition's failed items again (default: those that failed "
        "with parse_error), after a fix to the parser or the output schema. No provider is called. Outcomes "
        "that change replace the current ones as a new parse generation (the replaced rows are kept); "
        "answers that now parse are applied by the normal apply path (exactly once, under the stale-input "
        "guard), outcomes that still fail get their retry decision again, and the partition is settled. "
        "Items sent again already are left to their new attempt. Running it again changes nothing.",
    )
    c.add_argument("task_id", help="e.g. ticket_triage_20261120 (see `batch-assets report`)")
    c.add_argument(
        "--class",
        dest="failure_class",
        action="append",
        metavar="CLASS",
        choices=REPARSE_CLASSES,
        help="re-parse failures of this class (repeatable; default parse_error)",
    )
    c.add_argument("--dry-run", action="store_true", help="only count what would change")

    c = command(
        "resume",
        resume.cmd_resume,
        "send to a provider account again after an account error paused it (billing, access, key) and it was fixed",
        "Lift the pause a provider account got when its results said the account cannot be used (e.g. "
        "DashScope's Arrearage, AccessDenied, InvalidApiKey): until then the send gate refuses every send to "
        "that provider. Records the operator action, and makes the items the account error stopped due "
        "retries again. An account that is not paused is left as it is.",
    )
    c.add_argument("provider", choices=PROVIDERS, help="the provider whose account to resume")
    c.add_argument("--reason", help="what was fixed (kept with the action)")

    c = command(
        "check-deploy",
        check_deploy.cmd_check_deploy,
        "check Dagster instance files (deploy/dagster*.yaml) with Dagster's own config system",
        "Check each Dagster instance file as the webserver, the daemon and the run pods will read it: the "
        "instance schema, then the config of its run launcher, run coordinator, compute log manager and "
        "PostgreSQL storage. A problem is one line naming the file and the field (exit 1). Default: every "
        "dagster*.yaml in the project's deploy/ folder.",
    )
    c.add_argument("files", nargs="*", metavar="FILE", help="instance files to check (default: deploy/dagster*.yaml)")

    c = command(
        "poll",
        poll.cmd_poll,
        "poll provider batches now and record what changed, as a status sensor tick does",
        "Poll the provider batches that are running (or whose results are not fetchable yet) and record "
        "every transition in the ledger. A batch a status sensor is polling at that moment is left to it: "
        "the same poll leases keep every poller from polling one job twice at once. An error on one job "
        "does not stop the others (exit 1 if any failed).",
    )
    c.add_argument("--provider", action="append", choices=PROVIDERS, help="only this provider's batches (repeatable)")
    c.add_argument("--task", help="only this task's batches: a task name or a task_id")

    c = command(
        "cancel",
        cancel.cmd_cancel,
        "cancel running provider batches: one job_key, or every running job of a task_id",
        "Ask the provider to cancel running batches: one job_key, or every running job of a task_id. "
        "A batch that has finished since the last poll is reported and left alone; an error on one "
        "job does not stop the others (exit 1 if any failed).",
    )
    c.add_argument("target", help="a job_key or a task_id (see `batch-assets jobs`)")

    c = command(
        "dry-run",
        dry_run.cmd_dry_run,
        "show N request lines of a frozen partition exactly as they would be sent, with its estimate, "
        "and record the dry run",
        "Render N request lines of a frozen partition exactly as the shards would send them (after "
        "redaction), show them with the partition's estimate (items, tokens, cost, currency) and record "
        "the dry run in ledger.dry_run. Never calls a provider. A partition above the task's "
        "gate.dry_run_threshold (default 10,000 items) is only submitted once a dry run of its prompt "
        "version is recorded.",
    )
    c.add_argument("task_id", help="<task>_<YYYYMMDD>, e.g. ticket_triage_20261120 (the partition must be frozen)")
    c.add_argument("-n", type=int, default=5, metavar="N", help="lines to show (default 5)")
    add_format_option(c)

    c = command(
        "purge",
        purge.cmd_purge,
        "delete local shard files and compress raw result files of final partitions older than an age",
        "Purge the local files of task partitions that are final and finished longer ago than "
        "--older-than: shard files are deleted, raw result files are gzip-compressed in place (they are "
        "the only verbatim copy of the provider's answers). Ledger rows and hashes stay; running it "
        "again changes nothing. The `retention` job does the same per task (retention.local_days).",
    )
    c.add_argument("--older-than", required=True, type=_age, metavar="AGE", help="e.g. 30d (days) or 12h (hours)")
    c.add_argument("--task", metavar="NAME", help="only this task's partitions (default: all)")
    c.add_argument("--dry-run", action="store_true", help="only list what would be purged")

    c = command(
        "review",
        review.cmd_review,
        "applied answers sampled for human review: list, approve, reject",
        "Answers picked at apply for review (a task's `review:` sample_rate and always_if) wait as "
        "pending. `review list` shows them; `review approve` keeps them; `review reject` revokes them.",
    )
    decide = c.add_subparsers(
        dest="review_command", metavar="{list,approve,reject}", required=False, parser_class=CliParser
    )
    r = decide.add_parser(
        "list",
        help="review items (pending first)",
        description="List review items, pending first, with the answer and the decision.",
    )
    _global_options(r, top=False)
    r.add_argument("task", nargs="?", help="a task name or task_id prefix (default: all)")
    r.add_argument("--state", choices=("pending", "approved", "rejected", "revoked"), help="only items in this state")
    r.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"list at most N items (default {review.TABLE_LIMIT} in a table, all as json or csv; 0: all); "
        "the count shown and the total go to stderr",
    )
    add_format_option(r)
    r.set_defaults(run=review.cmd_review_list)
    for name, run, what in (
        ("approve", review.cmd_review_approve, "keep the answers"),
        ("reject", review.cmd_review_reject, "revoke the answers (removed, or the earlier one put back)"),
    ):
        r = decide.add_parser(
            name,
            help=f"{name} pending review items: {what}",
            description=f"{name.capitalize()} pending review items: {what}. Items decided "
            "earlier keep their decision; an id that is no review item, or approving an answer "
            "revoked meanwhile, is refused.",
        )
        _global_options(r, top=False)
        r.add_argument("custom_ids", nargs="+", metavar="CUSTOM_ID", help="see `batch-assets review list`")
        r.add_argument("--reason", help="why (kept with the decision)")
        r.set_defaults(run=run)

    c = command(
        "revoke",
        revoke.cmd_revoke,
        "take applied answers back: removed from the business table, or the earlier value restored",
        "Revoke applied answers: all of a partition (--task-id), chosen items (--custom-id), or the "
        "latest answer for business keys of a task (--task NAME --business-id B). Each value is removed "
        "from the business table, or the earlier answer for the key and output version is put back; "
        "recorded in ledger.revocation and counted as `revoked` by the reconciliation. Revoking twice "
        "changes nothing.",
    )
    c.add_argument("--task-id", metavar="TASK_ID", help="e.g. ticket_triage_20261120: every applied answer of it")
    c.add_argument(
        "--custom-id",
        dest="custom_ids",
        action="extend",
        nargs="+",
        metavar="CUSTOM_ID",
        help="one or more items (repeatable)",
    )
    c.add_argument("--task", metavar="NAME", help="a task name, with --business-id")
    c.add_argument(
        "--business-id",
        dest="business_ids",
        action="extend",
        nargs="+",
        metavar="B",
        help="business keys of --task (repeatable)",
    )
    c.add_argument("--reason", metavar="R", help="why (required; kept in ledger.revocation)")
    c.add_argument("--yes", action="store_true", help="revoke without asking to confirm the count")
    return p
