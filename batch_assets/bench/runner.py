"""Orchestrates the benchmark: setup, each stage and its floor in fresh child processes, checks."""

from __future__ import annotations

import dataclasses
import os
import shutil
import statistics
from collections.abc import Callable, Collection, Generator
from pathlib import Path

from batch_assets import progress
from batch_assets.bench.proc import RSS_METHOD, Measured, remove_paths, run_child
from batch_assets.bench.report import BenchReport, StageResult

DEFAULT_ITEMS = 1_000_000
DEFAULT_WORKDIR = Path("data") / "bench"
# What the benchmark creates under its workdir (and removes again unless keep=True).
_OWNED = ("warehouse.duckdb", "warehouse.duckdb.wal", "warehouse.duckdb.tmp", "data", "floor")

# (stage, product function, floor work fn, stage work fn). Floors run first, in their own child, so
# both see the same (warm) page cache; each floor persists its result like the stage (floors.py).
STAGES: list[tuple[str, str, str, str]] = [
    ("pii_scan", "pipeline.freeze.source.load_source", "floor_pii_scan", "stage_pii_scan"),
    ("manifest", "pipeline.freeze.manifest.freeze_manifest", "floor_manifest", "stage_manifest"),
    ("shards", "pipeline.send.shards.cut_shards", "floor_shards", "stage_shards"),
    ("cost", "pipeline.govern.budget.check_budget", "floor_cost", "stage_cost"),
    ("ingest", "pipeline.collect.ingest.ingest_files", "floor_ingest", "stage_ingest"),
    ("parse", "pipeline.collect.parse.parse_results", "floor_parse", "stage_parse"),
    ("apply", "pipeline.settle.apply.apply_results", "floor_apply", "stage_apply"),
    ("reconcile", "pipeline.settle.reconcile.reconcile", "floor_reconcile", "stage_reconcile"),
]
# A copy of the warehouse as a stage found it (`snapshot_before`, or each stage while `repeat` > 1):
# a repeated floor and stage start from it again, and the history benchmark measures apply on it.
_OWNED += tuple(f"before_{stage}.duckdb" for stage, *_ in STAGES)
_SETUP_AFTER = {"shards": "setup_provider_outputs"}  # provider output files are setup, not a stage
# freeze_manifest runs the sensitive-data gate inside itself: the pii_scan row shows the gate on its
# own, is not added to the total again, and the manifest stage is held to manifest + pii_scan floors.
INSIDE = {"pii_scan": "manifest"}


class BenchmarkError(AssertionError):
    """The pipeline produced a wrong result: a fast wrong pipeline is worthless."""


class NotEnoughDisk(RuntimeError):
    """The workdir's disk cannot hold what the benchmark is about to write."""


# Disk a run needs per item, measured at 10M items: the shard and result files 2.6 KB, the
# warehouse up to 1.4 KB (its largest, before reconcile), DuckDB's spill files the rest; each
# snapshot (`snapshot_before`, or the one copy `repeat` keeps) is one more warehouse.
DISK_BYTES_PER_ITEM = 4_000
SNAPSHOT_BYTES_PER_ITEM = 1_400


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def check_disk(root: Path, needed: int, what: str) -> None:
    """Refuse before writing, not halfway through a long run: a full disk also breaks whatever else
    runs on the machine (a 10M run with three snapshots filled one)."""
    free = free_bytes(root)
    if free < needed:
        raise NotEnoughDisk(
            f"{what} needs about {needed / 1e9:,.1f} GB free in {root}, which has {free / 1e9:,.1f} GB. "
            "Fix: free space there, take fewer snapshots, or pass --workdir on a larger disk"
        )


def _environment() -> dict:
    import platform

    import duckdb

    return {
        "cpus": os.cpu_count(),
        "duckdb": duckdb.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_at_end": os.getloadavg(),
    }


def snapshot_path(workdir: Path, stage: str) -> Path:
    """Where run_benchmark(snapshot_before=stage) keeps the warehouse as that stage found it."""
    return Path(workdir) / f"before_{stage}.duckdb"


def run_benchmark(
    items: int = DEFAULT_ITEMS,
    workdir: Path | None = None,
    keep: bool = False,
    log: Callable[[str], None] | None = None,
    profile: bool = False,
    snapshot_before: str | Collection[str] | None = None,
    repeat: int = 1,
) -> BenchReport:
    """Measure the local pipeline (manifest → shards → ingest → parse → apply → reconcile) at `items`.

    Everything is offline: synthetic source rows and synthetic provider output files in the OpenAI
    Batch format, registered in the ledger as downloaded results of completed jobs. Raises
    BenchmarkError if the reconciliation does not balance or any correctness check fails. The
    report is also written to `<workdir>/bench_report.json` (and `.md`); the warehouse and data
    files are removed afterwards unless `keep`. `profile` records each stage's slowest SQL
    statements (per-execute wall time) in the report. `snapshot_before`: a stage (or stages) whose
    input warehouse is copied to snapshot_path() before it runs (kept with the warehouse). `repeat`: each
    floor and stage runs that many times, alternating, each pair from the same copy of the warehouse;
    the report takes their medians (one run's time moves by 10-15 % on a shared machine) and
    every repeat of a stage must give the same result.
    """
    if items < 1:
        raise ValueError(f"items must be >= 1, got {items}")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    snapshots = frozenset([snapshot_before] if isinstance(snapshot_before, str) else snapshot_before or ())
    if unknown := sorted(snapshots - {s for s, *_ in STAGES}):
        raise ValueError(f"no stage {', '.join(map(repr, unknown))} to snapshot before")
    with progress.task(f"benchmark: {items:,} items", total=step_count(repeat), unit="steps", keep=True) as bar:
        return run_to_end(benchmark_steps(items, workdir, keep, log, profile, bar, snapshots, repeat))


def step_count(repeat: int = 1) -> int:
    """The child processes of one run: the source, a floor and a stage per stage, the provider outputs, the check."""
    return 2 * repeat * len(STAGES) + 3


def run_to_end(steps: Generator[tuple[str, str], None, BenchReport]) -> BenchReport:
    """Run a benchmark_steps() generator through: its report."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def _copy_synced(source: Path, target: Path) -> None:
    """Copy a closed (checkpointed) warehouse file, written back to disk before a clock starts:
    otherwise the copy's write-back runs during the next measured section."""
    target.with_name(target.name + ".wal").unlink(missing_ok=True)
    shutil.copy(source, target)
    _sync()


def _sync() -> None:
    """Write every dirty page back to disk (where the platform can)."""
    if hasattr(os, "sync"):
        os.sync()


def _median_run(runs: list[tuple[Measured, Measured]]) -> tuple[Measured, Measured]:
    """The floors' and the stages' runs each folded into one: median wall and CPU time, the highest
    peak (the rest from the run with the median wall time). A single run comes back as it was."""

    def median_of(ms: list[Measured]) -> Measured:
        return dataclasses.replace(
            sorted(ms, key=lambda m: m.wall_s)[(len(ms) - 1) // 2],
            wall_s=statistics.median(m.wall_s for m in ms),
            cpu_s=statistics.median(m.cpu_s for m in ms),
            peak_rss_mb=max(m.peak_rss_mb for m in ms),
        )

    return median_of([f for f, _ in runs]), median_of([s for _, s in runs])


def _comparable(value):
    """A stage's answer with floats to 10 significant digits: a parallel sum adds in any order."""
    if isinstance(value, float):
        return float(f"{value:.10g}")
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value


def _same_results(stage: str, runs: list[Measured]) -> None:
    """Every repeat of a stage, from the same warehouse, must give the same answer (the profile's
    statement timings aside)."""
    answers = [_comparable({k: v for k, v in (m.result or {}).items() if k != "statements"}) for m in runs]
    if any(a != answers[0] for a in answers[1:]):
        raise BenchmarkError(
            f"the {stage} stage answered differently on repeats of the same input: "
            + " / ".join(repr(a) for a in answers)
        )


def benchmark_steps(
    items: int,
    workdir: Path | None,
    keep: bool,
    log: Callable[[str], None] | None,
    profile: bool,
    bar: progress.Bar,
    snapshots: frozenset[str] = frozenset(),
    repeat: int = 1,
    tag: str = "",
) -> Generator[tuple[str, str], None, BenchReport]:
    """run_benchmark's work, stage by stage: yields ("ready", stage) once the stage's input is in
    place (the setup before it done) and ("measured", stage) once its floor and it ran; returns the
    report. So several runs can be advanced side by side (bench/growth.py measures a stage in each
    run back to back). `tag` prefixes this run's log lines."""
    from batch_assets.bench.floors import FLOOR_SQL

    say = log or (lambda _msg: None)
    root = Path(workdir if workdir is not None else DEFAULT_WORKDIR).resolve()
    root.mkdir(parents=True, exist_ok=True)
    remove_paths(*(root / p for p in _OWNED))
    copies = len(snapshots) + (1 if repeat > 1 else 0)
    check_disk(
        root,
        items * (DISK_BYTES_PER_ITEM + copies * SNAPSHOT_BYTES_PER_ITEM),
        f"the benchmark at {items:,} items" + (f" with {copies} warehouse snapshot(s)" if copies else ""),
    )
    wd = str(root)

    def step(label: str, fn: str, **kwargs) -> Measured:
        bar.update(description=f"benchmark: {label}")
        # What earlier steps wrote is written back now, before this step's clock starts: on a large run
        # the ingest floor leaves gigabytes dirty, whose write-back would run inside the next stage.
        _sync()
        m = run_child(fn, **kwargs)
        bar.advance()
        rss = f", peak RSS {m.peak_rss_mb:,.0f} MB" if m.peak_rss_mb else ""
        disk = (
            f", disk read {m.disk_read_mb:,.0f} MB, written {m.disk_write_mb:,.0f} MB"
            if m.disk_read_mb is not None
            else ""
        )
        say(f"  {tag}{label:<28} {m.wall_s:8.2f} s (cpu {m.cpu_s:.1f} s){rss}{disk}, load {m.load_avg:.1f}")
        return m

    say(f"benchmark: {items:,} items in {root}")
    setup: dict[str, dict] = {}
    src = step("setup: source table", "setup_source", workdir=wd, items=items)
    setup["source_table"] = {"wall_s": round(src.wall_s, 3), **src.result}
    outputs: dict = {}
    stages: list[StageResult] = []
    try:
        floor_of: dict[str, Measured] = {}
        for stage, function, floor_fn, stage_fn in STAGES:
            yield "ready", stage
            snapshot = snapshot_path(root, stage)
            runs: list[tuple[Measured, Measured]] = []
            for r in range(repeat):
                suffix = f" ({r + 1}/{repeat})" if repeat > 1 else ""
                if r > 0:  # the warehouse as the first run found it
                    _copy_synced(snapshot, root / "warehouse.duckdb")
                floor = step(f"floor: {stage}{suffix}", floor_fn, workdir=wd)
                if r == 0 and (repeat > 1 or stage in snapshots):
                    # Room for the copy and for the stages after it (their writes and spill files),
                    # in case the estimate up front was low.
                    size = (root / "warehouse.duckdb").stat().st_size
                    check_disk(
                        root,
                        size + items * DISK_BYTES_PER_ITEM // 4,
                        f"the snapshot of the warehouse before {stage} ({size / 1e9:,.1f} GB) and the stages after it",
                    )
                    # every child has closed (and checkpointed) the warehouse; the floor wrote only
                    # its own schema, which the next repeat's floor replaces
                    _copy_synced(root / "warehouse.duckdb", snapshot)
                runs.append((floor, step(f"stage: {stage}{suffix}", stage_fn, workdir=wd, profile=profile)))
            _same_results(stage, [m for _, m in runs])
            if stage not in snapshots:
                remove_paths(snapshot)
            floor, measured = _median_run(runs)
            floor_of[stage] = floor
            inner = [floor_of[s] for s, outer in INSIDE.items() if outer == stage and s in floor_of]
            stages.append(
                StageResult(
                    stage=stage,
                    function=f"batch_assets.{function}",
                    wall_s=measured.wall_s,
                    cpu_s=measured.cpu_s,
                    items_per_s=items / measured.wall_s if measured.wall_s else 0.0,
                    peak_rss_mb=measured.peak_rss_mb,
                    base_rss_mb=measured.base_rss_mb,
                    floor=" + ".join([FLOOR_SQL[stage]] + [f"the {s} floor" for s, o in INSIDE.items() if o == stage]),
                    floor_wall_s=floor.wall_s + sum(f.wall_s for f in inner),
                    floor_peak_rss_mb=max([floor.peak_rss_mb] + [f.peak_rss_mb for f in inner]),
                    load_avg=measured.load_avg,
                    result=measured.result,
                    inside=INSIDE.get(stage),
                    floor_cpu_s=floor.cpu_s + sum(f.cpu_s for f in inner),
                    disk_read_mb=measured.disk_read_mb,
                    runs=[{"wall_s": round(m.wall_s, 3), "floor_wall_s": round(f.wall_s, 3)} for f, m in runs],
                )
            )
            yield "measured", stage
            if stage in _SETUP_AFTER:
                gen = step("setup: provider outputs", _SETUP_AFTER[stage], workdir=wd)
                setup["provider_outputs"] = {
                    "wall_s": round(gen.wall_s, 3),
                    "files": len(gen.result["files"]),
                    "bytes": gen.result["bytes"],
                    "jobs": gen.result["jobs"],
                }
                outputs = gen.result
        expected = {
            "rows": src.result["rows"],
            "empty_bodies": src.result["empty_bodies"],
            "redacted_items": src.result["addressed_rows"],
            "error_lines": outputs["error_lines"],
            "bad_answers": outputs["schema_breaks"] + outputs["length_cuts"],
        }
        checked = run_child("verify", workdir=wd, expected=expected).result
        bar.advance()
        report = BenchReport(
            items=items,
            workdir=wd,
            environment=_environment(),
            rss_method=RSS_METHOD,
            setup=setup,
            stages=stages,
            outputs=outputs,
            reconciliation=checked["reconciliation"],
            checks=checked["checks"],
        )
        report.write(root)
    finally:
        if not keep:
            remove_paths(*(root / p for p in _OWNED))
    if not report.correct:
        failed = [f"{c['check']}: {c['detail']}" for c in report.checks if not c["ok"]]
        raise BenchmarkError(
            "the benchmark run is wrong, so its timings mean nothing:\n  "
            + "\n  ".join(failed)
            + f"\n(report: {report.report_path})"
        )
    return report
