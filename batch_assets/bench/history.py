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
"""

from __future__ import annotations

import dataclasses
import datetime
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from batch_assets.bench import synth
from batch_assets.bench.runner import run_benchmark
from batch_assets.ledger.history import copy_partition_rows
from batch_assets.ledger.jobs import unmark_collected
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.budget import check_budget
from batch_assets.pipeline.collect import pending_jobs
from batch_assets.pipeline.reconcile import reconcile
from batch_assets.pipeline.retry import pending_retries
from batch_assets.spec.resolve import load_all_tasks


@dataclasses.dataclass(frozen=True)
class HistoryRow:
    check: str
    one_s: float
    history_s: float
    same_answer: bool

    @property
    def ratio(self) -> float:
        return self.history_s / self.one_s if self.one_s > 0 else float("inf")


def add_history(path: Path, partitions: int) -> dict[str, int]:
    """Add partitions-1 earlier copies of the benchmark's partition to the warehouse at `path`.
    Returns each ledger table's row count afterwards."""
    first = datetime.date.fromisoformat(synth.PARTITION_DATE)
    days = [(first - datetime.timedelta(days=k)).isoformat() for k in range(1, partitions)]
    wh = Warehouse.at(path, path.parent / "data")
    with wh.connect() as conn:
        counts = copy_partition_rows(conn, synth.PARTITION_DATE, days)
    return counts


def _time(fn: Callable[[], object]) -> tuple[float, object]:
    best, answer = float("inf"), None
    for _ in range(2):
        t0 = time.perf_counter()
        answer = fn()
        best = min(best, time.perf_counter() - t0)
    return best, answer


def _checks(wh: Warehouse) -> dict[str, Callable[[], object]]:
    task = load_all_tasks()["ticket_triage"]
    task_id = task.task_id(synth.PARTITION_DATE)

    def collections():
        with wh.connect() as conn:   # from scratch: the partition's jobs as if never found collected
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


def run_history_benchmark(items: int, partitions: int, workdir: Path, keep: bool = False,
                          log: Callable[[str], None] = print) -> tuple[list[HistoryRow], dict[str, int]]:
    if partitions < 2:
        raise ValueError(f"--history must be at least 2 (the partition and one earlier), got {partitions}")
    workdir = Path(workdir).resolve()
    log(f"history: the pipeline benchmark at {items:,} items, kept")
    run_benchmark(items, workdir, keep=True, log=log)
    one = Warehouse.at(workdir / "warehouse.duckdb", workdir / "data")
    many = Warehouse.at(workdir / "history.duckdb", workdir / "data")
    with one.connect():
        pass   # the ledger's migrations (collected_at) before the copy
    shutil.copy(one.database, many.database)
    t0 = time.perf_counter()
    counts = add_history(many.database, partitions)
    log(f"history: {partitions - 1} earlier partitions added in {time.perf_counter() - t0:.1f} s "
        f"({counts.get('shard_line', 0):,} shard lines, {counts.get('raw_result', 0):,} result lines)")
    rows = []
    try:
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
    lines = [f"| check | 1 partition s | {partitions} partitions s | ratio | same answer |",
             "|---|---:|---:|---:|---|"]
    lines += [f"| {r.check} | {r.one_s:.3f} | {r.history_s:.3f} | {r.ratio:.2f}x | {'yes' if r.same_answer else 'NO'} |"
              for r in rows]
    return "\n".join(lines) + f"\n\n({items:,} items per partition)"


def main(args) -> int:
    """`batch-assets bench --history N [--items M] [--workdir D] [--keep]`."""
    from batch_assets.bench.runner import DEFAULT_WORKDIR, BenchmarkError
    from batch_assets.bench.proc import ChildFailed

    workdir = args.workdir if args.workdir is not None else DEFAULT_WORKDIR
    try:
        rows, _ = run_history_benchmark(args.items, args.history, workdir, args.keep, log=lambda m: print(m, flush=True))
    except (BenchmarkError, ChildFailed, ValueError) as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        return 2
    print()
    print(report_markdown(rows, args.items, args.history))
    if not all(r.same_answer for r in rows):
        print("\nFAILED: a check answered differently with the history in the ledger", file=sys.stderr)
        return 2
    return 0
