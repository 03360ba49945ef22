"""The benchmark: the local pipeline at 1,000,000 items against plain-DuckDB floors.

    from batch_assets.bench import run_benchmark, main
    report = run_benchmark(items=1_000_000, workdir=Path("/tmp/bench"), keep=False)
    main(["--items", "5000"])          # what `batch-assets bench` / `make bench` call

Each stage runs through the product's own function in a fresh child process (peak RSS measured
there), beside the plain DuckDB statement that does the same work ("floor"), in the same run.
"""

from batch_assets.bench.command import main
from batch_assets.bench.report import BenchReport, StageResult
from batch_assets.bench.runner import BenchmarkError, run_benchmark

__all__ = ["BenchReport", "BenchmarkError", "StageResult", "main", "run_benchmark"]
