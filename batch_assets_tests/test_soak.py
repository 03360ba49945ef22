"""The soak command, small: three partitions on two providers under every fault, driven to final."""

from __future__ import annotations

from pathlib import Path

import pytest

from batch_assets.cli import main as cli_main
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.soak import SoakConfig, format_report, main, observed_item_faults, run_soak


@pytest.mark.slow
def test_fast_soak_drives_every_item_to_final_with_nothing_twice(ledger_backend, tmp_path: Path, capsys) -> None:
    # Twice the default fault rate; every round-level fault kind is injected at least once anyway.
    config = SoakConfig(
        days=1,
        providers=("openai", "gemini"),
        fault_rate=0.1,
        seed=3,
        tickets_per_day=50,
        articles_per_day=10,
        reviews_per_day=20,
        max_requests_per_shard=20,
        account_max_jobs=2,  # openai's 3 shards do not fit at once: admission binds
    )
    result = run_soak(tmp_path, config, say=lambda _msg: None)
    report = format_report(result, observed_item_faults(Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path)))
    assert result.ok, report
    assert [r["task_id"] for r in result.rows] == [
        "ticket_triage_20261120",
        "kb_embeddings_20261120",
        "triage_gemini_inline_20261120",
    ]
    assert all(r["unresolved"] == 0 and r["written_twice"] == 0 and r["balanced"] for r in result.rows), report
    assert all(
        p["untracked"] == 0 and p["created_twice"] == 0 and p["batches_at_provider"] == p["ledger_jobs"] > 0
        for p in result.provider_rows
    ), report
    peaks = {r["provider"]: r for r in result.peaks.rows()}
    assert all(r["within"] and r["max_batches"] == 2 for r in peaks.values()), report
    assert peaks["openai"]["peak_batches"] == 2 and peaks["openai"]["peak_enqueued_tokens"] > 0, report
    # Retries happened (faults were really injected) and the table names every figure.
    assert sum(r["retried"] for r in result.rows) > 0 and result.faults, report
    for column in (
        "items",
        "applied",
        "retried",
        "final_failed",
        "held",
        "unresolved",
        "batches@provider",
        "ledger_jobs",
        "written_twice",
        "faults injected by the soak",
        "peak held per provider account",
        "PASS: 3 partitions",
    ):
        assert column in report


def test_soak_flags_are_checked_before_anything_runs(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--providers", "openai,nope"])
    assert exited.value.code == 2
    assert "unknown provider(s) ['nope']" in capsys.readouterr().err
    assert cli_main(["soak", "--fault-rate", "2"]) == 2
    assert "--fault-rate must be between 0 and 1" in capsys.readouterr().err
    assert cli_main(["soak", "--help"]) == 0
    assert "--no-lost-responses" in capsys.readouterr().out
