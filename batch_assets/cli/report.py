"""`batch-assets report`: what happened to every item of every (or the chosen) task partition.

Table (default): the reconciliation table the demo prints. JSON: one array, one object per task
partition sorted by task_id, with the final outcomes, retries, what is still open, whether the
equations balance and the partition's final status. CSV: the same with `final_failed` spread over
`final_failed_<class>` columns; `reparsed` / `parse_generations` count the current outcomes a
`batch-assets reparse` gave and the re-parses that changed any (named after the table). Exits 0
whatever the figures say (it reports; the reconciliation check gates), 1 when --task selects no
known task or names a task folder that does not load (its one-line error), and 1 when, reporting
every task, a task folder does not load: the others are reported and each broken one is named
after the table (`BROKEN <folder>: <error>`, as `batch-assets tasks` prints it). Partitions
that are not done are named after the table (on stderr with --format json/csv, so stdout stays
machine-readable), and so is a provider account
paused by an account error (PAUSED, with its fix). Each partition's queue, run and total time are
the figures its report page and the `report` asset show (`partition_report.durations`): a third
table, or queue_time_s, run_time_s, total_time_s in JSON and CSV. With --html, each partition's report
page (outcomes, retries, tokens, cost, time in each state, with charts) is also written to
`<data dir>/reports/<task_id>.html`, as the `report` asset writes it; the paths are listed after
the table (on stderr with --format json/csv).
"""

from __future__ import annotations

import sys

from batch_assets.cli import context
from batch_assets.cli.output import Field, render

SUMMARY_FIELDS = (
    "task_id",
    "items",
    "applied",
    "revoked",
    "stale",
    "quarantined",
    "rejected",
    "canceled",
    "compliance_held",
    "final_failed",
    "retried",
    "max_attempt",
    "reparsed",
    "parse_generations",
    "in_flight",
    "collecting",
    "retry_pending",
    "unresolved",
    "balanced",
    "status",
    "check",
    "pii_redacted",
    "pii_blocked",
    "cost_estimated",
    "cost_actual",
    "currency",
    "thinking_tokens",
    "cached_input_tokens",
    "queue_time_s",
    "run_time_s",
    "total_time_s",
    "problems",
)
# The partition's times, in seconds, as its report page and the report asset show them.
TIME_FIELDS = ("queue_time_s", "run_time_s", "total_time_s")
GATE_FIELDS = (
    "pii_redacted",
    "pii_blocked",
    "cost_estimated",
    "cost_actual",
    "currency",
    "thinking_tokens",
    "cached_input_tokens",
)


def fields(fmt: str) -> list[Field]:
    from batch_assets.spec.failure_classes import FAILURE_CLASSES

    if fmt == "csv":
        names = [n for n in SUMMARY_FIELDS if n != "final_failed"]
        names[names.index("retried") : names.index("retried")] = [f"final_failed_{c}" for c in FAILURE_CLASSES]
        return [Field(n) for n in names]
    return [Field(n) for n in SUMMARY_FIELDS]


def record(rec, gate=None) -> dict:
    """One partition's Reconciliation (and its sensitive-data and cost figures, `PartitionGate`) as a
    report record."""
    from batch_assets.spec.failure_classes import FAILURE_CLASSES

    verdict = rec.verdict()
    final_failed = {c: rec.final_failed.get(c, 0) for c in FAILURE_CLASSES}
    return {
        "task_id": rec.task_id,
        "items": rec.manifest_items,
        "applied": rec.applied,
        "revoked": rec.revoked,
        "stale": rec.stale,
        "quarantined": rec.quarantined,
        "rejected": rec.source_rejects,
        "canceled": rec.operator_canceled,
        "compliance_held": rec.compliance_held,
        "final_failed": final_failed,
        **{f"final_failed_{c}": n for c, n in final_failed.items()},
        "retried": rec.retried,
        "max_attempt": rec.max_attempt,
        "reparsed": 0,
        "parse_generations": 0,
        "in_flight": rec.in_flight,
        "collecting": rec.collecting,
        "retry_pending": rec.retry_pending,
        "unresolved": rec.unresolved,
        "balanced": not rec.problems(),
        "status": rec.final_status,
        "check": verdict.status,
        **{k: (gate.as_dict()[k] if gate is not None else None) for k in GATE_FIELDS},
        **dict.fromkeys(TIME_FIELDS),
        "problems": list(verdict.reasons) if not verdict.passed else [],
    }


def _with_gate(rec: dict, gate) -> dict:
    """The record with the partition's sensitive-data and cost figures filled in (same key order)."""
    return rec | {k: gate.as_dict()[k] for k in GATE_FIELDS} if gate is not None else rec


def _with_times(rec: dict, times) -> dict:
    """The record with the partition's queue, run and total seconds (`partition_report.Durations`),
    rounded as the report asset's numbers are."""
    values = (times.queue_s, times.run_s, times.total_s)
    return rec | {k: None if v is None else round(v, 6) for k, v in zip(TIME_FIELDS, values, strict=True)}


def _with_reparse(rec: dict, figures: dict | None) -> dict:
    """The record with the partition's re-parse figures (`batch-assets reparse`): the current
    outcomes that came from a re-parse, and the re-parses that changed any."""
    if not figures:
        return rec
    return rec | {"reparsed": figures["reparsed"], "parse_generations": figures["parse_generations"]}


def cmd_report(args) -> int:
    from batch_assets.cli.console import print_table
    from batch_assets.ledger.control_db import as_control
    from batch_assets.ledger.tasks import task_names
    from batch_assets.pipeline.report.partition_tables import gate_cells, reconciliation_cells, time_cells
    from batch_assets.pipeline.report.summaries import computed_figures, partition_figures
    from batch_assets.spec.resolve import load_tasks

    load = load_tasks()  # a broken task folder is named below; the others are reported
    named = _broken_named(load, args.task)
    if named is not None:
        raise named.error_for_cli()
    # Each task's verdict settings: failure tolerance and what an empty day is (ok | warn | fail).
    tolerance = {name: (t.spec.retry.max_failed_fraction, t.spec.empty_source) for name, t in load.tasks.items()}
    wh = context.warehouse(args)
    pages = []
    # With object storage the control rows say which partitions to report and hold the final ones'
    # figures: only the others' stores are read. Elsewhere one connection reads everything.
    with context.control(wh) if wh.storage is not None else context.connect(wh, read_only=True) as conn:
        task_ids = context.match_task_ids(context.known_task_ids(conn), args.task)
        names = task_names(conn)
        now = as_control(conn).execute("SELECT now()::TIMESTAMP").scalar()  # one instant for every figure
        pauses = _account_pauses(conn, task_ids)

        def settings(task_id: str) -> tuple:
            return tolerance.get(names.get(task_id), ())

        if wh.storage is None:
            figures = computed_figures(conn, task_ids, settings, now)
            pages = _write_pages(conn, wh.files, task_ids, names, tolerance, now) if args.html else []
    if wh.storage is not None:
        figures = partition_figures(wh, task_ids, settings, now)
        if args.html:
            with wh.across(task_ids) as conn:
                pages = _write_pages(conn, wh.files, task_ids, names, tolerance, now)
    recs = [figures[t].rec for t in task_ids]
    times = {t: f.times for t, f in figures.items()}
    gates = {t: f.gate for t, f in figures.items() if f.gate is not None}
    reparsed = {t: f.reparse for t, f in figures.items() if f.reparse}
    records = [
        _with_times(
            _with_reparse(_with_gate(record(r), gates.get(r.task_id)), reparsed.get(r.task_id)), times[r.task_id]
        )
        for r in recs
    ]
    if args.format == "table":
        print_table(*reconciliation_cells(recs))
        print()
        print_table(*gate_cells([gates[r.task_id] for r in recs if r.task_id in gates]))
        print()
        print_table(*time_cells([(r.task_id, times[r.task_id]) for r in recs]))
    else:
        render(records, fields(args.format), args.format)
    notes = sys.stdout if args.format == "table" else sys.stderr
    _print_notes(args, records, pauses, pages, notes)
    if args.task is None and load.broken:
        from batch_assets.cli.tasks import broken_line

        for broken in load.broken:
            print(broken_line(broken), file=notes)
        return 1  # green means every task was reported
    return 0


def _print_notes(args, records: list[dict], pauses: list[dict], pages: list, notes) -> None:
    """What the tables have no column for: re-parses, partitions not done, paused accounts, pages."""
    if args.format == "table":  # the reconciliation table has no column for them
        for r in records:
            if r["parse_generations"]:
                print(
                    f"REPARSED {r['task_id']}: {r['reparsed']} outcome(s) from {r['parse_generations']} "
                    "re-parse(s) of kept raw results",
                    file=notes,
                )
    for r in records:
        for problem in r["problems"]:
            print(f"NOT DONE {r['task_id']}: {r['check']}: {problem}", file=notes)
    for pause in pauses:
        print(
            f"PAUSED {pause['provider']}: account paused since {pause['paused_at']:%Y-%m-%d %H:%M:%S} UTC "
            f"({pause['error_code']} on {pause['task_id']}); nothing is sent to it. Fix: {pause['fix']}, "
            f"then run `batch-assets resume {pause['provider']}`",
            file=notes,
        )
    for path in pages:
        print(f"report: {path}", file=notes)


def _broken_named(load, pattern: str | None):
    """The broken task folder `--task` names (by its declared name or folder, or one of its task_ids)."""
    import re

    for broken in load.broken if pattern else ():
        for name in {broken.name, broken.folder} - {None}:
            if pattern == name or re.fullmatch(re.escape(name) + r"_\d{8}", pattern):
                return broken
    return None


def _account_pauses(conn, task_ids) -> list[dict]:
    """The active account pauses (ledger.account_pause) of the providers of the partitions reported."""
    from batch_assets.ledger.accounts import active_pauses
    from batch_assets.ledger.tasks import providers_of

    providers = providers_of(conn, task_ids)
    return [p for p in active_pauses(conn) if p["provider"] in providers]


def _write_pages(conn, files, task_ids, names, tolerance, now) -> list:
    from batch_assets.pipeline.report.partition_report import build_report, publish_report
    from batch_assets.pipeline.settle.reconcile import DEFAULT_MAX_FAILED_FRACTION

    pages = []
    for task_id in task_ids:
        fraction, empty = tolerance.get(names.get(task_id), (DEFAULT_MAX_FAILED_FRACTION, "warn"))
        rep = build_report(conn, task_id, fraction, now=now, empty_source=empty)
        pages.append(publish_report(rep, files))
    return pages
