"""`batch-assets bench --items L --growth-from S`: does every stage grow like its items?

The pipeline benchmark at S items (the run "before"), at L items and at S items again ("after"),
each in a workdir of its own (removed after it unless `--keep`), advanced side by side: each stage
is measured in the three runs back to back (S, L, S), after the setup each run needs before it. A
stage's growth is its L-item time over the mean of its two S-item times. Times taken apart measure
the machine as much as the code: on this shared 2-core host the floors' total (the same plain
DuckDB work) grew 10.8x in a run at 09:57 and 11.4x in one at 11:20, and in a run 20 minutes after
that the same 10M stages took 9-17 % longer. Run one after another, the two S runs were about 20
minutes apart and bracketed the whole L run; side by side, they bracket the stage itself, minutes
apart, and their spread is printed beside: it is the figure's noise.

Targets: every stage's growth is at most 1.1 x L/S (10M items against 1M: <= 11x), and the large
run's highest stage peak RSS is no higher than the small runs' highest. The floors' growth (plain
DuckDB doing the same work on the same machine, in the same runs) is printed too.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from batch_assets import progress
from batch_assets.bench.report import BenchReport

LINEAR_SLACK = 1.1  # a stage may grow 10 % more than its items


@dataclass(frozen=True)
class GrowthRow:
    stage: str
    small_s: tuple[float, float]  # the S-item runs before and after the large one
    large_s: float
    small_floor_s: tuple[float, float]
    large_floor_s: float
    small_peak_mb: float  # the higher of the two S-item runs
    large_peak_mb: float
    inside: str | None = None  # runs inside another stage (not in the total)
    # user+sys of the stage process: less moved than wall time by the host's IO and other load. Wall
    # growth above cpu growth is time not spent computing (waiting on reads, fewer threads busy).
    small_cpu_s: tuple[float, float] | None = None
    large_cpu_s: float | None = None
    # Read from storage by the stage process (the higher of the S runs; the L run): a page-cache miss
    # costs time the S runs, whose files the cache holds, do not pay. None where unknown.
    small_disk_read_mb: float | None = None
    large_disk_read_mb: float | None = None

    @property
    def growth(self) -> float:
        base = statistics.mean(self.small_s)
        return self.large_s / base if base else float("inf")

    @property
    def floor_growth(self) -> float:
        base = statistics.mean(self.small_floor_s)
        return self.large_floor_s / base if base else float("inf")

    @property
    def cpu_growth(self) -> float | None:
        if self.small_cpu_s is None or self.large_cpu_s is None:
            return None
        base = statistics.mean(self.small_cpu_s)
        return self.large_cpu_s / base if base else float("inf")

    @property
    def small_spread(self) -> float:
        """How far apart the two S-item runs are, relative to their mean."""
        base = statistics.mean(self.small_s)
        return abs(self.small_s[0] - self.small_s[1]) / base if base else 0.0


def growth_rows(before: BenchReport, large: BenchReport, after: BenchReport) -> list[GrowthRow]:
    """One row per stage and one for the total (the stages that do not run inside another)."""
    rows = []
    for s in large.stages:
        b, a = before.stage(s.stage), after.stage(s.stage)
        small_read = [m for m in (b.disk_read_mb, a.disk_read_mb) if m is not None]
        rows.append(
            GrowthRow(
                s.stage,
                (b.wall_s, a.wall_s),
                s.wall_s,
                (b.floor_wall_s, a.floor_wall_s),
                s.floor_wall_s,
                max(b.peak_rss_mb, a.peak_rss_mb),
                s.peak_rss_mb,
                s.inside,
                (b.cpu_s, a.cpu_s),
                s.cpu_s,
                max(small_read) if small_read else None,
                s.disk_read_mb,
            )
        )
    outer = [r for r in rows if r.inside is None]
    rows.append(
        GrowthRow(
            "total",
            tuple(sum(r.small_s[i] for r in outer) for i in (0, 1)),
            sum(r.large_s for r in outer),
            tuple(sum(r.small_floor_s[i] for r in outer) for i in (0, 1)),
            sum(r.large_floor_s for r in outer),
            max(r.small_peak_mb for r in outer),
            max(r.large_peak_mb for r in outer),
            None,
            tuple(sum(r.small_cpu_s[i] for r in outer) for i in (0, 1)),
            sum(r.large_cpu_s for r in outer),
            _sum_known([r.small_disk_read_mb for r in outer]),
            _sum_known([r.large_disk_read_mb for r in outer]),
        )
    )
    return rows


def _sum_known(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values)


@dataclass(frozen=True)
class GrowthVerdict:
    limit: float  # the largest growth allowed (1.1 x L/S)
    slow_stages: list[str]  # stages that grew more
    small_peak_mb: float
    large_peak_mb: float

    @property
    def time_ok(self) -> bool:
        return not self.slow_stages

    @property
    def peak_ok(self) -> bool:
        return self.large_peak_mb <= self.small_peak_mb

    @property
    def ok(self) -> bool:
        return self.time_ok and self.peak_ok


def verdict(rows: list[GrowthRow], small: int, large: int) -> GrowthVerdict:
    limit = LINEAR_SLACK * large / small
    stages = [r for r in rows if r.stage != "total"]
    return GrowthVerdict(
        limit,
        [r.stage for r in stages if r.growth > limit],
        max(r.small_peak_mb for r in stages),
        max(r.large_peak_mb for r in stages),
    )


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def markdown(rows: list[GrowthRow], small: int, large: int) -> str:
    v = verdict(rows, small, large)
    s, big = f"{small:,}", f"{large:,}"
    lines = [
        f"| stage | {s} s (before) | {big} s | {s} s (after) | growth | {s} runs apart | cpu growth | "
        f"floor growth | disk read MB ({s} / {big}) | {s} peak MB | {big} peak MB | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r.stage == "total":
            mark = ""
        else:
            mark = "PASS" if r.growth <= v.limit else f"FAIL (> {v.limit:.1f}x)"
            if r.inside:
                mark += f" (runs inside {r.inside}; not in the total)"
        lines.append(
            f"| {r.stage} | {r.small_s[0]:.2f} | {r.large_s:.2f} | {r.small_s[1]:.2f} | {r.growth:.2f}x | "
            f"{r.small_spread:.0%} | {'-' if r.cpu_growth is None else f'{r.cpu_growth:.2f}x'} | "
            f"{r.floor_growth:.2f}x | {_mb(r.small_disk_read_mb)} / {_mb(r.large_disk_read_mb)} | "
            f"{r.small_peak_mb:,.0f} | {r.large_peak_mb:,.0f} | "
            f"{mark} |"
        )
    lines += [
        "",
        f"Growth = the {big}-item time over the mean of the two {s}-item runs (one before it, one "
        f'after); "runs apart" = how far those two differ (the noise of the figure); cpu growth = the same '
        f"for the stage process's user+sys time (wall growth above it is time not spent computing); disk read "
        f"= what the stage process read from storage, not from the page cache (the higher {s} run / the "
        f"{big} run); the floors are plain DuckDB doing the same work in the same runs.",
        f"Every stage <= {v.limit:.1f}x: {'PASS' if v.time_ok else 'FAIL (' + ', '.join(v.slow_stages) + ')'}; "
        f"highest peak at {big} ({v.large_peak_mb:,.0f} MB) <= at {s} ({v.small_peak_mb:,.0f} MB): "
        f"{'PASS' if v.peak_ok else 'FAIL'}",
    ]
    return "\n".join(lines)


def run_growth_benchmark(
    small: int, large: int, workdir: Path, keep: bool = False, profile: bool = False, log: Callable[[str], None] = print
) -> tuple[list[GrowthRow], list[BenchReport]]:
    from batch_assets.bench.runner import DISK_BYTES_PER_ITEM, check_disk

    if not 1 <= small < large:
        raise ValueError(f"--growth-from must be at least 1 and below --items ({large:,}), got {small:,}")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    # The three runs' files exist side by side: checked up front, not half an hour into the command.
    check_disk(
        workdir,
        (large + 2 * small) * DISK_BYTES_PER_ITEM,
        f"the growth benchmark ({large:,} items and twice {small:,}, side by side)",
    )
    reports = lockstep([(small, "before"), (large, "large"), (small, "after")], workdir, keep, profile, log)
    rows = growth_rows(*reports)
    v = verdict(rows, small, large)
    (workdir / "growth_report.json").write_text(
        json.dumps(
            {
                "small": small,
                "large": large,
                "rows": [
                    asdict(r) | {"growth": r.growth, "cpu_growth": r.cpu_growth, "floor_growth": r.floor_growth}
                    for r in rows
                ],
                "verdict": asdict(v) | {"ok": v.ok},
                "reports": [r.report_path for r in reports],
            },
            indent=2,
        )
    )
    (workdir / "growth_report.md").write_text(markdown(rows, small, large) + "\n")
    return rows, reports


def lockstep(
    runs: list[tuple[int, str]], workdir: Path, keep: bool, profile: bool, log: Callable[[str], None]
) -> list[BenchReport]:
    """The benchmark at each (items, name) of `runs`, in `workdir/<name>-<items>`, advanced stage by
    stage: every run's setup for a stage, then the stage (its floor and it) in each run in turn.
    Returns the reports in the order of `runs`; a run that fails stops them all (each removes its
    files unless `keep`)."""
    from batch_assets.bench.runner import benchmark_steps, step_count

    with contextlib.ExitStack() as stack:
        steps = []
        for items, name in runs:
            bar = stack.enter_context(
                progress.task(f"benchmark: {items:,} items ({name})", total=step_count(), unit="steps", keep=True)
            )
            gen = benchmark_steps(items, workdir / f"{name}-{items}", keep, log, profile, bar, tag=f"[{name}] ")
            stack.callback(gen.close)  # a run left behind by another's failure removes its files too
            steps.append(gen)
        while True:
            ready = [_advance(gen) for gen in steps]
            if all(kind == "report" for kind, _ in ready):
                return [report for _, report in ready]
            measured = [_advance(gen) for gen in steps]
            if (
                len({stage for _, stage in ready}) != 1
                or {kind for kind, _ in ready} != {"ready"}
                or [stage for _, stage in measured] != [stage for _, stage in ready]
            ):
                raise RuntimeError(f"the growth runs fell out of step: {ready} then {measured}")


def _advance(steps) -> tuple[str, object]:
    """The next (kind, stage) of a benchmark_steps() generator, or ("report", its report) at its end."""
    try:
        return next(steps)
    except StopIteration as done:
        return "report", done.value


def main(args) -> int:
    """`batch-assets bench --items L --growth-from S [--workdir D] [--keep] [--profile] [--strict]`."""
    from batch_assets.bench.proc import ChildFailed
    from batch_assets.bench.runner import DEFAULT_WORKDIR, BenchmarkError, NotEnoughDisk

    workdir = args.workdir if args.workdir is not None else DEFAULT_WORKDIR
    try:
        rows, reports = run_growth_benchmark(
            args.growth_from, args.items, workdir, args.keep, args.profile, log=lambda m: print(m, flush=True)
        )
    except (BenchmarkError, ChildFailed, NotEnoughDisk, ValueError) as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        return 2
    for report in reports:
        print()
        print(report.markdown())
    print()
    print(markdown(rows, args.growth_from, args.items))
    if args.strict and not verdict(rows, args.growth_from, args.items).ok:
        return 1
    return 0
