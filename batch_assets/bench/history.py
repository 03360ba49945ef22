"""`batch-assets bench --history N`: do the per-partition checks cost what the partition costs, or
what the ledger's whole history costs?

A ledger keeps every partition ever run. The pipeline benchmark's finished partition (`--items M`)
is copied into a second warehouse next to N-1 earlier partitions: every ledger row of the
partition again under another day (each VARCHAR holding the day's `YYYYMMDD` rewritten, so
task_ids, custom_ids, shard ids and job keys are new; the earlier partitions' jobs marked
collected, as a ledger that has been running would have them). Then the queries that run per
partition or on every sensor tick are timed on both warehouses, each twice (the faster kept), and
their answers compared: the reconciliation, the search for pending collections (from scratch:
collected marks cleared on the benchmark's partition), pending retries and the budget check.
The ratio N-partition / 1-partition is the figure: 1.0x means the history costs nothing.

The apply stage is measured the same way, as the pipeline benchmark runs it (a process of its own,
one run each, since it changes what it runs on): the partition as apply found it, alone and with
the earlier partitions finished beside it, whose business-table rows (the table's primary key holds
every day's) and source rows are copied too. The history warehouse is that second run's result.
"""

from __future__ import annotations

import dataclasses
import datetime
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from batch_assets.bench import synth
from batch_assets.bench.proc import run_child
from batch_assets.bench.runner import run_benchmark, snapshot_path
from batch_assets.bench.work import TASK_NAME
from batch_assets.ledger.history import copy_partition_rows, shifted_copy_sql, shifted_sql
from batch_assets.ledger.jobs import unmark_collected
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.collect_runs import pending_jobs
from batch_assets.pipeline.govern.budget import check_budget
from batch_assets.pipeline.settle.business_table import ensure_target_table
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.pipeline.settle.retry_ledger import pending_retries
from batch_assets.spec.resolve import load_all_tasks
from batch_assets.sqltext import quote_ident, sql_literal

SOURCE_TABLE = "support_tickets"  # the benchmark's source (bench.synth)


@dataclasses.dataclass(frozen=True)
class HistoryRow:
    check: str
    one_s: float
    history_s: float
    same_answer: bool

    @property
    def ratio(self) -> float:
        return self.history_s / self.one_s if self.one_s > 0 else float("inf")


def add_history(path: Path, partitions: int, finished: Path) -> dict[str, int]:
    """Add partitions-1 earlier copies of the benchmark's finished partition (in the warehouse at
    `finished`) to the warehouse at `path`: its ledger rows, its business-table rows and its source
    rows, each key rewritten for the day. Returns each ledger table's row count afterwards."""
    first = datetime.date.fromisoformat(synth.PARTITION_DATE)
    days = [(first - datetime.timedelta(days=k)).isoformat() for k in range(1, partitions)]
    wh = Warehouse.at(path, path.parent / "data")
    with wh.connect() as conn:
        conn.execute(f"ATTACH {sql_literal(str(finished))} AS finished (READ_ONLY)")
        try:
            counts = copy_partition_rows(conn, synth.PARTITION_DATE, days, source="finished")
            _copy_main_rows(conn, synth.PARTITION_DATE, days)
        finally:
            conn.execute("DETACH finished")
    return counts


def _copy_main_rows(conn: duckdb.DuckDBPyConnection, day: str, days: list[str]) -> None:
    """The finished partition's business-table rows and source rows again under each of `days`, ids
    rewritten like the ledger's (ledger.history) and the source's dates moved to the day."""
    task = load_all_tasks()[TASK_NAME]
    ensure_target_table(conn, task)  # apply creates it: the partition may not have been applied here
    for table in (task.spec.apply.table, SOURCE_TABLE):
        cols = conn.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = 'finished' "
            "AND schema_name = 'main' AND table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()
        dates = {
            c: f"CAST({shifted_sql(c, day)} AS {t})"
            for c, t in cols
            if table == SOURCE_TABLE and t in ("DATE", "TIMESTAMP")
        }
        sql = shifted_copy_sql(f"main.{quote_ident(table)}", f"finished.main.{quote_ident(table)}", cols, day, dates)
        for other in days:  # a statement per day: each commit stays within the memory limit
            conn.execute(sql, [other])


def _apply_row(workdir: Path, alone: Path, with_history: Path) -> HistoryRow:
    """Apply, in a process of its own as the pipeline benchmark runs it, on the partition alone and
    with the history (one run each: it changes what it runs on)."""
    one = run_child("stage_apply", workdir=str(workdir), database=str(alone))
    many = run_child("stage_apply", workdir=str(workdir), database=str(with_history))
    return HistoryRow("apply (the partition; a stage process)", one.wall_s, many.wall_s, one.result == many.result)


def _time(fn: Callable[[], object]) -> tuple[float, object]:
    best, answer = float("inf"), None
    for _ in range(2):
        t0 = time.perf_counter()
        answer = fn()
        best = min(best, time.perf_counter() - t0)
    return best, answer


def _checks(wh: Warehouse) -> dict[str, Callable[[], object]]:
    task = load_all_tasks()[TASK_NAME]
    task_id = task.task_id(synth.PARTITION_DATE)

    def collections():
        with wh.connect() as conn:  # from scratch: the partition's jobs as if never found collected
            unmark_collected(conn, task_id)
            return [(j.job_key, j.reason) for j in pending_jobs(wh, conn=conn)]

    def budget():
        v = check_budget(wh, task, synth.PARTITION_DATE)
        return round(v.estimate, 9), round(v.pending, 9), round(v.spent_today, 9)

    return {
        "reconcile (the partition)": lambda: dataclasses.asdict(reconcile(wh, task_id)),
        "pending collections (sensor tick, all partitions)": collections,
        "pending retries (sensor tick)": lambda: pending_retries(wh),
        "budget check (the partition)": budget,
    }


def run_history_benchmark(
    items: int, partitions: int, workdir: Path, keep: bool = False, log: Callable[[str], None] = print
) -> tuple[list[HistoryRow], dict[str, int]]:
    if partitions < 2:
        raise ValueError(f"--history must be at least 2 (the partition and one earlier), got {partitions}")
    workdir = Path(workdir).resolve()
    log(f"history: the pipeline benchmark at {items:,} items, kept")
    run_benchmark(items, workdir, keep=True, log=log, snapshot_before="apply")
    one = Warehouse.at(workdir / "warehouse.duckdb", workdir / "data")
    many = Warehouse.at(workdir / "history.duckdb", workdir / "data")
    before_apply = snapshot_path(workdir, "apply")
    rows = []
    try:
        shutil.copy(before_apply, many.database)  # the partition as apply found it, then the history beside it
        t0 = time.perf_counter()
        counts = add_history(many.database, partitions, finished=one.database)
        log(
            f"history: {partitions - 1} earlier partitions added in {time.perf_counter() - t0:.1f} s "
            f"({counts.get('shard_line', 0):,} shard lines, {counts.get('raw_result', 0):,} result lines)"
        )
        row = _apply_row(workdir, before_apply, many.database)
        rows.append(row)
        log(f"  {row.check:50s} {row.one_s:7.3f} s  {row.history_s:7.3f} s  {row.ratio:6.2f}x")
        for (name, check_one), check_many in zip(_checks(one).items(), _checks(many).values()):
            one_s, one_answer = _time(check_one)
            many_s, many_answer = _time(check_many)
            row = HistoryRow(name, one_s, many_s, one_answer == many_answer)
            rows.append(row)
            log(f"  {name:50s} {one_s:7.3f} s  {many_s:7.3f} s  {row.ratio:6.2f}x")
    finally:
        if not keep:
            from batch_assets.bench.proc import remove_paths
            from batch_assets.bench.runner import _OWNED

            remove_paths(many.database, *(workdir / p for p in _OWNED))
    return rows, counts


def report_markdown(rows: list[HistoryRow], items: int, partitions: int) -> str:
    lines = [f"| check | 1 partition s | {partitions} partitions s | ratio | same answer |", "|---|---:|---:|---:|---|"]
    lines += [
        f"| {r.check} | {r.one_s:.3f} | {r.history_s:.3f} | {r.ratio:.2f}x | {'yes' if r.same_answer else 'NO'} |"
        for r in rows
    ]
    return "\n".join(lines) + f"\n\n({items:,} items per partition)"


def main(args) -> int:
    """`batch-assets bench --history N [--items M] [--workdir D] [--keep]`."""
    from batch_assets.bench.proc import ChildFailed
    from batch_assets.bench.runner import DEFAULT_WORKDIR, BenchmarkError, NotEnoughDisk

    workdir = args.workdir if args.workdir is not None else DEFAULT_WORKDIR
    try:
        rows, _ = run_history_benchmark(
            args.items, args.history, workdir, args.keep, log=lambda m: print(m, flush=True)
        )
    except (BenchmarkError, ChildFailed, NotEnoughDisk, ValueError) as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        return 2
    print()
    print(report_markdown(rows, args.items, args.history))
    if not all(r.same_answer for r in rows):
        print("\nFAILED: a check answered differently with the history in the ledger", file=sys.stderr)
        return 2
    return 0
