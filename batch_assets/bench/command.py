"""`batch-assets bench`: its options, and which benchmark they run (pipeline, growth, history, sensor)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from batch_assets.bench import claims, distributed, growth, history, sensor
from batch_assets.bench.proc import ChildFailed
from batch_assets.bench.runner import DEFAULT_ITEMS, DEFAULT_WORKDIR, BenchmarkError, NotEnoughDisk, run_benchmark


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="batch-assets bench",
        description=("The benchmark: the local pipeline at N items against plain-DuckDB floors, offline."),
    )
    p.add_argument(
        "--items", type=int, default=DEFAULT_ITEMS, help=f"items in the partition (default {DEFAULT_ITEMS:,})"
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help=f"where the warehouse, files and report go (default {DEFAULT_WORKDIR}); 1M items need ~4 GB of disk",
    )
    p.add_argument("--keep", action="store_true", help="keep the warehouse and files after the run")
    p.add_argument("--strict", action="store_true", help="exit 1 when a performance target is missed")
    p.add_argument("--profile", action="store_true", help="also list each stage's slowest SQL statements")
    sensor.add_arguments(p)
    claims.add_arguments(p)
    distributed.add_arguments(p)
    p.add_argument(
        "--history",
        type=int,
        default=None,
        metavar="N",
        help="after the pipeline run: time the per-partition and per-tick checks with N partitions "
        "in the ledger (N-1 earlier copies of this one) against one",
    )
    p.add_argument(
        "--growth-from",
        type=int,
        default=None,
        metavar="S",
        help="run the benchmark at S items, at --items, and at S items again, and compare each "
        "stage's growth with its items' (bench/growth.py)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="K",
        help="run each floor and stage K times (each pair from the same copy of the warehouse) and "
        "report their medians; needs one more copy of the warehouse on disk (default 1)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.repeat != 1 and (args.sensor_jobs is not None or args.history is not None):
        parser.error("--repeat applies to the pipeline benchmark (not to --sensor-jobs or --history)")
    if args.growth_from is not None and (args.repeat != 1 or args.sensor_jobs is not None or args.history is not None):
        parser.error(
            "--growth-from runs the pipeline benchmark once per size (not with --repeat, --sensor-jobs or --history)"
        )
    # The benchmarks other than the pipeline's, by the option that asks for each.
    for asked, benchmark in (
        (args.distributed, distributed),
        (args.claims is not None, claims),
        (args.sensor_jobs is not None, sensor),
    ):
        if asked:
            return benchmark.main(args)
    if args.growth_from is not None:
        if not 1 <= args.growth_from < args.items:
            parser.error(
                f"--growth-from must be at least 1 and below --items ({args.items:,}), got {args.growth_from:,}"
            )

        return growth.main(args)
    if args.history is not None:
        return history.main(args)
    if args.items < 1:
        parser.error(f"--items must be at least 1, got {args.items}")
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    started = time.perf_counter()
    try:
        report = run_benchmark(
            args.items,
            args.workdir,
            args.keep,
            log=lambda m: print(m, flush=True),
            profile=args.profile,
            repeat=args.repeat,
        )
    except (BenchmarkError, ChildFailed, NotEnoughDisk) as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        return 2
    print()
    print(report.text())
    print()
    print(report.markdown())
    print(f"\n(benchmark wall time incl. setup and floors: {time.perf_counter() - started:.1f} s)")
    if args.strict and not report.targets_met:
        return 1
    return 0
