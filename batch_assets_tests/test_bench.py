"""The benchmark harness at a small size: it runs, measures every stage, and checks itself.

No assertion on speed here: the benchmark is run at 1,000,000 items by `make bench`, not in tests.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from batch_assets.bench import BenchReport, main, run_benchmark
from batch_assets.bench.runner import STAGES

from .conftest import SAMPLES, shared_file

ITEMS = 3000
STAGE_NAMES = [s[0] for s in STAGES]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[BenchReport, Path]:
    workdir = tmp_path_factory.mktemp("bench")
    return run_benchmark(items=ITEMS, workdir=workdir, keep=True), workdir


def test_every_stage_measured_against_its_floor(bench):
    report, _ = bench
    assert [s.stage for s in report.stages] == STAGE_NAMES
    for s in report.stages:
        assert s.wall_s > 0 and s.cpu_s >= 0 and s.items_per_s > 0, s
        assert s.floor_wall_s > 0 and s.ratio > 0, s
        assert s.peak_rss_mb > 0 and s.base_rss_mb > 0 and s.peak_rss_mb >= s.base_rss_mb * 0.9, s
        assert s.function.startswith("batch_assets.pipeline."), s
    # The sensitive-data scan runs inside the manifest freeze: shown on its own, counted once.
    assert report.stage("pii_scan").inside == "manifest"
    counted = [s for s in report.stages if not s.inside]
    assert report.total_wall_s == pytest.approx(sum(s.wall_s for s in counted))
    assert report.floor_total_s == pytest.approx(sum(s.floor_wall_s for s in counted))
    assert report.total_ratio == pytest.approx(report.total_wall_s / report.floor_total_s)
    assert report.max_peak_rss_mb == max(s.peak_rss_mb for s in report.stages)
    assert all(s.floor_peak_rss_mb > 0 and s.rss_ratio > 0 for s in report.stages)
    assert report.stage("manifest").result["items"] == ITEMS
    assert report.stage("ingest").result["lines"] == report.stage("shards").result["lines"]
    assert report.stage("cost").result["estimate"] > 0
    if Path("/proc/self/io").exists():  # what each stage read from storage (page-cache misses)
        assert all(s.disk_read_mb is not None and s.disk_read_mb >= 0 for s in report.stages)


def test_the_probe_counts_what_a_section_reads_from_and_writes_to_storage(tmp_path):
    """A read the page cache cannot serve is counted (the file's pages dropped first); a read it can
    serve is not; what the section wrote and synced is."""
    import os

    from batch_assets.bench.probe import Probe, _io_bytes

    if _io_bytes() is None:
        pytest.skip("no /proc/self/io on this platform")
    size = 8 << 20
    path = tmp_path / "blob"
    before = _io_bytes()
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
    if _io_bytes()[1] == before[1]:
        pytest.skip(f"the filesystem of {tmp_path} does not go through a block device (tmpfs)")

    def read_all() -> None:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass

    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the file's pages leave the page cache
    os.close(fd)
    cold = Probe()
    with cold.measure():
        read_all()
    warm = Probe()
    with warm.measure():
        read_all()
    assert cold.disk_read_mb >= 0.9 * size / 2**20 and warm.disk_read_mb < 1
    written = Probe()
    with written.measure():
        with open(tmp_path / "more", "wb") as f:
            f.write(os.urandom(size))
            f.flush()
            os.fsync(f.fileno())
    assert written.disk_write_mb >= 0.9 * size / 2**20


def test_floors_persist_their_results(bench):
    import duckdb

    _, workdir = bench
    with duckdb.connect(str(workdir / "warehouse.duckdb"), read_only=True) as conn:
        tables = {
            r[0]
            for r in conn.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'bench_floor'").fetchall()
        }
        assert {"pii", "manifest", "cost", "raw", "parsed", "ticket_labels", "recon"} <= tables
        items, lines, orphans, duplicates, _parsed, applied = conn.execute("SELECT * FROM bench_floor.recon").fetchone()
        assert items == ITEMS - 1 and lines == ITEMS - 1 and orphans == duplicates == 0 and applied > 0


def test_pipeline_result_is_correct(bench):
    report, _ = bench
    assert report.correct, report.checks
    rec = report.reconciliation
    assert rec["manifest_items"] == ITEMS
    assert rec["applied"] == rec["succeeded"] - rec["failed_to_parse"]
    assert rec["failed_to_parse"] > 0 and rec["failed_total"] > 0 and rec["quarantined"] > 0
    assert not report.stage("reconcile").result["problems"]
    # The sources hold e-mail addresses: the gate redacted them all and no shard line holds one.
    checks = {c["check"]: c for c in report.checks}
    assert report.stage("pii_scan").result["redacted_items"] > 0
    assert checks["redacted items = tickets with an e-mail address"]["ok"]
    assert checks["no shard file holds an e-mail address"]["ok"]


def test_report_written_as_json_and_markdown(bench):
    report, workdir = bench
    data = json.loads((workdir / "bench_report.json").read_text(encoding="utf-8"))
    assert data["items"] == ITEMS and data["correct"] is True
    assert [s["stage"] for s in data["stages"]] == STAGE_NAMES
    assert {
        "wall_s",
        "items_per_s",
        "peak_rss_mb",
        "floor_wall_s",
        "floor_peak_rss_mb",
        "ratio",
        "rss_ratio",
        "verdict",
    } <= set(data["stages"][0])
    assert {"floor_total_s", "total_ratio", "max_floor_peak_rss_mb"} <= set(data)
    assert data["total_verdict"] in ("PASS", "MISS") and data["peak_verdict"] in ("PASS", "MISS")
    md = (workdir / "bench_report.md").read_text(encoding="utf-8")
    for name in STAGE_NAMES:
        assert f"| {name} |" in md
    assert "stage/floor" in report.text()


def _keys(obj, prefix=""):
    """Every key path of a JSON object (list items under '[]')."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(prefix + k)
            out |= _keys(v, prefix + k + ".")
    elif isinstance(obj, list):
        for v in obj:
            out |= _keys(v, prefix + "[].")
    return out


def test_generated_output_lines_have_the_openai_batch_format(bench, ticket_task):
    report, _ = bench
    files = report.outputs["files"]
    outputs = [f for f in files if f["kind"] == "output"]
    errors = [f for f in files if f["kind"] == "error"]
    assert outputs and errors
    ok_lines = [json.loads(line) for line in Path(outputs[0]["path"]).read_text(encoding="utf-8").splitlines()[:20]]
    err_lines = [json.loads(line) for line in Path(errors[0]["path"]).read_text(encoding="utf-8").splitlines()[:5]]
    for line in ok_lines:
        assert list(line) == ["id", "custom_id", "response", "error"]
        assert line["id"].startswith("batch_req_") and line["error"] is None
        resp = line["response"]
        assert set(resp) == {"status_code", "request_id", "body"} and resp["status_code"] == 200
        body = resp["body"]
        assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
        choice = body["choices"][0]
        assert choice["message"]["role"] == "assistant" and choice["finish_reason"] in ("stop", "length")
        assert {"prompt_tokens", "completion_tokens", "total_tokens"} <= set(body["usage"])
        if choice["finish_reason"] == "stop":
            answer = json.loads(choice["message"]["content"])
            if answer["category"] in ticket_task.output_schema["properties"]["category"]["enum"]:
                assert set(answer) == set(ticket_task.output_schema["required"])
    # Same key structure as the real recorded OpenAI output lines (chat completions).
    real = [
        json.loads(line)
        for line in shared_file(SAMPLES / "openai_output.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    real_chat = [r for r in real if r["response"]["body"].get("object") == "chat.completion"]
    if real_chat:
        assert _keys(real_chat[0]) - {"response.body.choices.[].message.annotations"} <= _keys(ok_lines[0]) | {
            "response.body.choices.[].logprobs"
        }
    # Lines are not in input (shard) order.
    custom_ids = [line["custom_id"] for line in ok_lines]
    assert custom_ids != sorted(custom_ids)
    for line in err_lines:
        assert list(line) == ["id", "custom_id", "response", "error"] and line["error"] is None
        assert line["response"]["status_code"] in (429, 500)
        assert set(line["response"]["body"]["error"]) == {"message", "type", "param", "code"}


def test_main_prints_the_table_and_cleans_up(tmp_path, capsys):
    assert main(["--items", "200", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "stage/floor" in out and "| manifest |" in out
    assert (tmp_path / "bench_report.json").is_file()
    assert not (tmp_path / "warehouse.duckdb").exists() and not (tmp_path / "data").exists()


def test_repeats_report_the_median_of_runs_from_the_same_warehouse(tmp_path, capsys):
    """`bench --repeat K`: every floor and stage runs K times from one copy of the warehouse, the
    table holds the medians, each run is listed, and the copies are removed afterwards."""
    import statistics

    assert main(["--items", "200", "--repeat", "3", "--workdir", str(tmp_path), "--keep"]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "bench_report.json").read_text())
    for s in report["stages"]:
        assert len(s["runs"]) == 3, s["stage"]
        assert s["wall_s"] == pytest.approx(statistics.median(r["wall_s"] for r in s["runs"]), abs=1e-3)
    manifest = next(s for s in report["stages"] if s["stage"] == "manifest")
    pii = next(s for s in report["stages"] if s["stage"] == "pii_scan")
    assert manifest["floor_wall_s"] == pytest.approx(
        statistics.median(r["floor_wall_s"] for r in manifest["runs"])
        + statistics.median(r["floor_wall_s"] for r in pii["runs"]),
        abs=2e-3,
    )
    assert "Each floor and stage ran 3 times" in out and "- apply: " in out
    assert report["correct"] and not list(tmp_path.glob("before_*.duckdb"))


def test_a_stage_answering_differently_on_a_repeat_fails_the_run():
    from batch_assets.bench.proc import Measured
    from batch_assets.bench.runner import BenchmarkError, _same_results

    def run(applied: int, seconds: float) -> Measured:
        return Measured(
            "stage_apply",
            {"applied": applied, "statements": [{"seconds": seconds}]},
            seconds,
            seconds,
            100.0,
            200.0,
            True,
            0.1,
            seconds,
        )

    _same_results("apply", [run(10, 1.0), run(10, 2.0)])  # the profile's timings may differ
    # and a parallel sum's last digits (its terms add in any order)
    cost = [
        Measured("stage_cost", {"estimate": e}, 1.0, 1.0, 1.0, 1.0, True, 0.1, 1.0)
        for e in (80.06142735001254, 80.06142735001256)
    ]
    _same_results("cost", cost)
    with pytest.raises(BenchmarkError):
        _same_results(
            "cost", cost + [Measured("stage_cost", {"estimate": 80.0614}, 1.0, 1.0, 1.0, 1.0, True, 0.1, 1.0)]
        )
    with pytest.raises(BenchmarkError, match="apply stage answered differently"):
        _same_results("apply", [run(10, 1.0), run(9, 1.0)])


def test_repeat_is_refused_where_it_does_not_apply(tmp_path, capsys):
    small = ["--items", "1", "--workdir", str(tmp_path)]  # should a refusal break, the run stays short
    for argv in (["--repeat", "0"], ["--repeat", "2", "--history", "3"], ["--repeat", "2", "--sensor-jobs", "10"]):
        with pytest.raises(SystemExit):
            main(small + argv)
    assert "--repeat" in capsys.readouterr().err


def test_the_history_mode_times_each_check_with_and_without_earlier_partitions(tmp_path, capsys):
    """`bench --history N`: the per-partition and per-tick checks, and the apply stage, answer the
    same with N-1 earlier partitions in the ledger (their rows copied under other days, and their
    business-table and source rows), and each is timed both ways."""
    assert main(["--items", "200", "--history", "3", "--workdir", str(tmp_path), "--keep"]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.endswith(("| yes |", "| NO |"))]
    assert len(table) == 5 and all(line.endswith("| yes |") for line in table), out
    assert table[0].startswith("| apply (the partition; a stage process) |")
    import duckdb

    with duckdb.connect(str(tmp_path / "history.duckdb"), read_only=True) as conn:
        per_task = dict(conn.execute("SELECT task_id, count(*) FROM ledger.manifest_item GROUP BY 1").fetchall())
        dates = [
            r[0]
            for r in conn.execute(
                "SELECT strftime(partition_date, '%Y%m%d') FROM ledger.batch_task ORDER BY 1"
            ).fetchall()
        ]
        collected = conn.execute(
            "SELECT count(*) FILTER (collected_at IS NULL), count(*) FROM ledger.provider_job "
            "WHERE task_id <> 'ticket_triage_20261120'"
        ).fetchone()
        # The business table: every day's answers, this partition's written by the timed apply.
        business = dict(conn.execute("SELECT task_id, count(*) FROM main.ticket_labels GROUP BY 1").fetchall())
        applied = dict(
            conn.execute(
                "SELECT task_id, count(*) FILTER (outcome = 'applied') FROM ledger.applied_result GROUP BY 1"
            ).fetchall()
        )
        sources = dict(
            conn.execute(
                "SELECT strftime(created_date, '%Y%m%d'), count(DISTINCT ticket_id) "
                "FROM main.support_tickets GROUP BY 1"
            ).fetchall()
        )
    assert dates == ["20261118", "20261119", "20261120"]
    assert per_task == {f"ticket_triage_{d}": 200 for d in dates}
    assert collected[0] == 0 and collected[1] > 0  # the earlier partitions' jobs are long collected
    assert business == applied and set(business) == set(per_task) and len(set(business.values())) == 1
    assert sources == {d: 200 for d in dates}


def test_the_growth_mode_brackets_each_large_stage_by_two_small_ones(tmp_path, capsys):
    """`bench --items L --growth-from S`: the benchmark at S, L and S items again, side by side: each
    stage (its floor, then it) runs in the three runs back to back, with no run's setup in between;
    its growth is its L-item time over the mean of its S-item times, and the report says which
    stages grew past 1.1 x L/S and whether the large run's peak stayed at the small runs'."""
    assert main(["--items", "400", "--growth-from", "200", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    steps = [
        line.split(None, 2)[:2] + [line.split(":")[1].split()[0]] for line in out.splitlines() if line.startswith("  [")
    ]  # [tag, "floor:"/"stage:"/"setup:", what]
    measured = [(tag, kind, what) for tag, kind, what in steps if kind != "setup:"]
    assert measured == [
        (f"[{run}]", kind, stage)
        for stage in STAGE_NAMES
        for run in ("before", "large", "after")
        for kind in ("floor:", "stage:")
    ]
    at = [i for i, (_, kind, _) in enumerate(steps) if kind != "setup:"]
    for k in range(0, len(at), 6):  # a stage's six measurements are adjacent
        assert at[k + 5] - at[k] == 5
    assert sum(kind == "setup:" for _, kind, _ in steps) == 6  # source and provider outputs, per run
    report = json.loads((tmp_path / "growth_report.json").read_text())
    assert (report["small"], report["large"], report["verdict"]["limit"]) == (200, 400, pytest.approx(2.2))
    rows = {r["stage"]: r for r in report["rows"]}
    assert set(rows) == set(STAGE_NAMES) | {"total"}
    runs = [json.loads(Path(p).read_text()) for p in report["reports"]]
    assert [r["items"] for r in runs] == [200, 400, 200] and all(r["correct"] for r in runs)
    for name in STAGE_NAMES:
        before, large, after = (next(s for s in r["stages"] if s["stage"] == name) for r in runs)
        row = rows[name]
        assert row["small_s"] == [before["wall_s"], after["wall_s"]] and row["large_s"] == large["wall_s"]
        assert row["growth"] == pytest.approx(large["wall_s"] / ((before["wall_s"] + after["wall_s"]) / 2))
        assert row["cpu_growth"] == pytest.approx(large["cpu_s"] / ((before["cpu_s"] + after["cpu_s"]) / 2))
        assert row["large_disk_read_mb"] == large["disk_read_mb"]
        if before["disk_read_mb"] is not None:
            assert row["small_disk_read_mb"] == max(before["disk_read_mb"], after["disk_read_mb"])
    outer = [n for n in STAGE_NAMES if rows[n]["inside"] is None]
    assert rows["total"]["large_cpu_s"] == pytest.approx(sum(rows[n]["large_cpu_s"] for n in outer))
    assert report["verdict"]["slow_stages"] == [n for n in STAGE_NAMES if rows[n]["growth"] > 2.2]
    assert "| reconcile |" in out and "cpu growth" in out and "floor growth" in out and "disk read MB" in out
    if Path("/proc/self/io").exists():  # each step's log line says what it read from and wrote to disk
        assert all(
            re.search(r", disk read [\d,]+ MB, written [\d,]+ MB, load ", line)
            for line in out.splitlines()
            if line.startswith("  [") and ("floor:" in line or "stage:" in line)
        )
    assert (tmp_path / "growth_report.md").is_file()
    assert not list(tmp_path.glob("*/warehouse.duckdb"))  # each run's files removed after it


def test_a_growth_run_that_fails_stops_the_others_and_every_run_removes_its_files(tmp_path, capsys, monkeypatch):
    """The three runs advance side by side: when the large run's parse fails, the command fails
    with its error, no run measures another stage, and all three remove their files."""
    from batch_assets.bench import runner
    from batch_assets.bench.proc import ChildFailed

    real, ran = runner.run_child, []

    def failing(fn, **kwargs):
        ran.append((Path(kwargs.get("workdir", "")).name, fn))
        if fn == "stage_parse" and Path(kwargs["workdir"]).name == "large-400":
            raise ChildFailed("injected: the large run's parse fails")
        return real(fn, **kwargs)

    monkeypatch.setattr(runner, "run_child", failing)
    assert main(["--items", "400", "--growth-from", "200", "--workdir", str(tmp_path)]) == 2
    assert "FAILED: injected: the large run's parse fails" in capsys.readouterr().err
    assert ran[-1] == ("large-400", "stage_parse") and ("after-200", "floor_parse") not in ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["after-200", "before-200", "large-400"]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # every run's warehouse and data removed


def test_the_growth_verdict():
    from batch_assets.bench.growth import GrowthRow, verdict

    def row(stage, small, large, peaks=(1000.0, 1000.0)):
        return GrowthRow(stage, small, large, (1.0, 1.0), 10.0, *peaks)

    rows = [row("manifest", (1.0, 1.2), 12.0), row("apply", (2.0, 2.0), 22.0), row("total", (3.0, 3.2), 34.0)]
    v = verdict(rows, 1_000_000, 10_000_000)
    assert v.limit == pytest.approx(11.0) and v.slow_stages == [] and v.ok  # 12 / 1.1 = 10.9x; 22 / 2 = 11x
    slow = verdict([row("manifest", (1.0, 1.0), 11.5)], 1_000_000, 10_000_000)
    assert slow.slow_stages == ["manifest"] and not slow.ok
    higher = verdict([row("apply", (2.0, 2.0), 20.0, peaks=(1000.0, 1001.0))], 1_000_000, 10_000_000)
    assert higher.time_ok and not higher.peak_ok and not higher.ok
    assert rows[0].small_spread == pytest.approx(0.2 / 1.1)


def test_growth_is_refused_where_it_does_not_apply(tmp_path, capsys):
    small = ["--items", "2", "--workdir", str(tmp_path)]
    for argv in (
        ["--growth-from", "2"],
        ["--growth-from", "0"],
        ["--growth-from", "1", "--repeat", "2"],
        ["--growth-from", "1", "--history", "3"],
    ):
        with pytest.raises(SystemExit):
            main(small + argv)
    assert "--growth-from" in capsys.readouterr().err


# --- disk ------------------------------------------------------------------------------------------


def test_a_run_the_disk_cannot_hold_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch):
    from batch_assets.bench import runner

    monkeypatch.setattr(runner, "free_bytes", lambda path: 10**9)  # 1 GB free
    with pytest.raises(runner.NotEnoughDisk) as refused:
        run_benchmark(items=1_000_000, workdir=tmp_path, snapshot_before=["ingest", "apply"])
    # 1M items: 4 GB for the run and 1.4 GB for each of the two snapshots.
    assert "the benchmark at 1,000,000 items with 2 warehouse snapshot(s) needs about 6.8 GB free" in str(refused.value)
    assert str(tmp_path) in str(refused.value) and "1.0 GB" in str(refused.value)
    assert list(tmp_path.iterdir()) == []
    assert main(["--items", "1000000", "--workdir", str(tmp_path)]) == 2
    assert "FAILED: the benchmark at 1,000,000 items needs about 4.0 GB free" in capsys.readouterr().err
    # The growth mode checks its large run's disk before its first small run.
    assert main(["--items", "1000000", "--growth-from", "200", "--workdir", str(tmp_path)]) == 2
    assert (
        "the growth benchmark (1,000,000 items and twice 200, side by side) needs about 4.0 GB"
        in capsys.readouterr().err
    )
    assert not list(tmp_path.glob("before-*"))


def test_a_snapshot_the_disk_cannot_hold_stops_the_run_before_the_copy(tmp_path, monkeypatch):
    """The estimate up front can be low: each snapshot checks for its copy (and the stages after it)."""
    from batch_assets.bench import runner

    checks = []

    def free(path):
        checks.append(path)
        return 10**12 if len(checks) == 1 else 10**6  # plenty up front, 1 MB at the snapshot

    monkeypatch.setattr(runner, "free_bytes", free)
    with pytest.raises(runner.NotEnoughDisk, match="the snapshot of the warehouse before cost"):
        run_benchmark(items=200, workdir=tmp_path, snapshot_before="cost")
    assert len(checks) == 2
    assert not (tmp_path / "before_cost.duckdb").exists() and not (tmp_path / "warehouse.duckdb").exists()
