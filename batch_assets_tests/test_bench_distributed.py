"""`batch-assets bench --distributed` at a small size: it starts its own PostgreSQL and S3 servers and
the emulator, runs every stage of each partition in worker processes with empty data directories,
checks the invariants in the ledger and the stores, races the control plane and the sensor tick,
and leaves no process behind. No assertion on speed: the figures come from the full-size run
(docs/performance.md)."""

from __future__ import annotations

import re
import subprocess

import pytest

from batch_assets.bench import main

pytestmark = pytest.mark.slow  # starts PostgreSQL, S3, the emulator, worker processes and Dagster


def _children_named(*names: str) -> list[str]:
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listing.splitlines() if any(n in line for n in names) and "bench_distributed_" in line]


def test_a_small_distributed_run_holds_every_invariant_and_reports_each_part(capsys):
    code = main(
        ["--distributed", "--workers", "1,2", "--partitions", "2", "--items", "200", "--control-ops", "40",
         "--control-processes", "2", "--sensor-in-flight", "120"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"1 worker\(s\): \d+ items in .* items/s, CPU .*; invariants hold", out), out
    assert re.search(r"2 worker\(s\): \d+ items in .* items/s, CPU .*; invariants hold", out), out
    assert re.search(r"postgres intent claims: +[\d,]+ ops/s, each intent won once", out), out
    assert re.search(r"postgres poll leases: +[\d,]+ ops/s, no lease left held", out), out
    assert re.search(r"local \(DuckDB file\) intent claims: +[\d,]+ ops/s with [\d,]+ lock waits", out), out
    assert re.search(r"1 sensor\(s\), one tick each, at once: .* 120 of 120 jobs polled", out), out
    assert re.search(r"4 sensor\(s\), one tick each, at once: .* 120 of 120 jobs polled", out), out
    assert not _children_named("postgres", "moto_server", "batch_assets.emulator")


def test_bad_worker_counts_are_refused(capsys):
    assert main(["--distributed", "--workers", "one"]) == 2
    assert "--workers 'one': expected worker counts like 1,2,4" in capsys.readouterr().err
