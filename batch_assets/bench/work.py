"""What runs inside the benchmark's child processes: setup steps, the real stages, their floors.

Every function takes the child's `Probe` first and wraps exactly the part to be measured in
`probe.measure()`. Stages call the product's own stage functions (never copies of their SQL); the
floors are the plain DuckDB statements they are compared with, over the same data.
Imported by the forkserver before it forks (see proc.py), so keep module-level work cheap.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from batch_assets.bench import floors, synth
from batch_assets.bench.probe import Probe
from batch_assets.bench.profile import ProfilingWarehouse
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.ingest import ingest_files
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.freeze.source import drop_source, load_source
from batch_assets.pipeline.govern.budget import check_budget
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.providers.registry import wire_format
from batch_assets.spec.resolve import ResolvedTask, load_all_tasks

TASK_NAME = "ticket_triage"


def warehouse(
    workdir: str, profile: bool = False, database: str | None = None, memory_limit: str | None = None
) -> Warehouse:
    """The run's warehouse. Stages get the product's pool (memory_limit None: the environment's or
    the default); setup and the checks, which are not measured, get the floors' larger one."""
    root = Path(workdir)
    cls = ProfilingWarehouse if profile else Warehouse
    return cls.at(Path(database) if database else root / "warehouse.duckdb", root / "data", memory_limit)


def _unmeasured(workdir: str) -> Warehouse:
    return warehouse(workdir, memory_limit=floors.FLOOR_MEMORY_LIMIT)


def _profiled(wh: Warehouse, result: dict, probe: Probe | None = None) -> dict:
    if isinstance(wh, ProfilingWarehouse):
        result["statements"] = wh.top(7, probe.wall_s if probe else None)
    return result


def bench_task() -> ResolvedTask:
    return load_all_tasks()[TASK_NAME]


def _task_id() -> str:
    return bench_task().task_id(synth.PARTITION_DATE)


def _asdict(obj) -> dict:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else dict(obj)


# --- setup (not stages) ---------------------------------------------------------------------------


def setup_source(probe: Probe, workdir: str, items: int) -> dict:
    wh = _unmeasured(workdir)
    with probe.measure(), wh.connect() as conn:  # connect() creates the ledger (migrations)
        rows = synth.create_source_table(conn, items)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {floors.SCHEMA}")
        stats = conn.execute(
            """
            SELECT count(*) FILTER (language = 'zh'), count(*) FILTER (body = ''),
                   min(strlen(body)) FILTER (body <> ''), avg(strlen(body)), max(strlen(body)),
                   count(*) FILTER (contains(body, $mark) OR contains(subject, $mark))
            FROM main.support_tickets""",
            {"mark": synth.ADDRESS_MARK},
        ).fetchone()
    return {
        "rows": rows,
        "zh_rows": stats[0],
        "empty_bodies": stats[1],
        "body_bytes_min": stats[2],
        "body_bytes_avg": round(stats[3] or 0, 1),
        "body_bytes_max": stats[4],
        "addressed_rows": stats[5],
        "expected_empty_bodies": synth.expected_empty_bodies(items),
    }


def setup_provider_outputs(probe: Probe, workdir: str) -> dict:
    wh, task = _unmeasured(workdir), bench_task()
    with probe.measure():
        out = synth.write_provider_outputs(wh, task, synth.PARTITION_DATE)
        jobs = synth.register_terminal_jobs(wh, task, out, synth.PARTITION_DATE)
    return {
        "jobs": jobs,
        "files": out.files,
        "output_lines": out.output_lines,
        "error_lines": out.error_lines,
        "schema_breaks": out.schema_breaks,
        "length_cuts": out.length_cuts,
        "bytes": sum(f["bytes"] for f in out.files),
    }


# --- stages: the product's functions ----------------------------------------------------------------


def stage_pii_scan(probe: Probe, workdir: str, profile: bool = False) -> dict:
    """The sensitive-data gate as freeze runs it: the source query, then the policy's scan and
    redaction (its temp tables are dropped afterwards; freeze_manifest repeats this inside itself)."""
    wh, task = warehouse(workdir, profile), bench_task()
    with probe.measure(), wh.connect() as conn:
        counts = load_source(conn, task, synth.PARTITION_DATE)
        drop_source(conn)
    return _profiled(
        wh,
        {
            "redacted_items": counts.redacted_items,
            "blocked_items": counts.blocked_items,
            "by_detector": counts.by_detector,
        },
        probe,
    )


def stage_manifest(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task = warehouse(workdir, profile), bench_task()
    with probe.measure():
        summary = freeze_manifest(wh, task, synth.PARTITION_DATE)
    return _profiled(wh, _asdict(summary), probe)


def stage_shards(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task = warehouse(workdir, profile), bench_task()
    with probe.measure():
        summary = cut_shards(wh, task, synth.PARTITION_DATE)
    return _profiled(
        wh,
        {
            "task_id": summary.task_id,
            "lines": summary.lines,
            "quarantined": summary.quarantined,
            "shards": summary.total_shards,
            "bytes": sum(int(s["byte_count"]) for s in summary.new_shards),
        },
        probe,
    )


def stage_cost(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task = warehouse(workdir, profile), bench_task()
    with probe.measure():
        verdict = check_budget(wh, task, synth.PARTITION_DATE)
    return _profiled(
        wh,
        {
            "estimate": verdict.estimate,
            "pending": verdict.pending,
            "passed": verdict.passed,
            "currency": verdict.currency,
        },
        probe,
    )


def stage_ingest(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task = warehouse(workdir, profile), bench_task()
    fmt = wire_format(task.spec.provider, task.spec.endpoint)
    with probe.measure():
        files, lines = ingest_files(wh, _task_id(), fmt)
    return _profiled(wh, {"files": files, "lines": lines}, probe)


def stage_parse(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task = warehouse(workdir, profile), bench_task()
    with probe.measure():
        summary = parse_results(wh, task, synth.PARTITION_DATE)
    return _profiled(wh, _asdict(summary), probe)


def stage_apply(probe: Probe, workdir: str, profile: bool = False, database: str | None = None) -> dict:
    """`database`: another warehouse file than the workdir's (the history benchmark's)."""
    wh, task = warehouse(workdir, profile, database), bench_task()
    with probe.measure():
        summary = apply_results(wh, task, synth.PARTITION_DATE)
    return _profiled(wh, _asdict(summary), probe)


def stage_reconcile(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task_id = warehouse(workdir, profile), _task_id()  # loading the task specs is setup, like other stages
    with probe.measure():
        rec = reconcile(wh, task_id)
    return _profiled(wh, {"metadata": rec.as_metadata(), "problems": rec.problems()}, probe)


# --- floors: persisting plain DuckDB over the same data (bench/floors.py) ----------------------------


def floor_pii_scan(probe: Probe, workdir: str) -> dict:
    return floors.pii_scan(probe, workdir, bench_task())


def floor_manifest(probe: Probe, workdir: str) -> dict:
    return floors.manifest(probe, workdir)


def floor_shards(probe: Probe, workdir: str) -> dict:
    return floors.shards(probe, workdir, bench_task())


def floor_cost(probe: Probe, workdir: str) -> dict:
    return floors.cost(probe, workdir, _task_id())


def floor_ingest(probe: Probe, workdir: str) -> dict:
    return floors.ingest(probe, workdir, _task_id())


def floor_parse(probe: Probe, workdir: str) -> dict:
    return floors.parse(probe, workdir)


def floor_apply(probe: Probe, workdir: str) -> dict:
    return floors.apply(probe, workdir)


def floor_reconcile(probe: Probe, workdir: str) -> dict:
    return floors.reconcile(probe, workdir)


# --- correctness ------------------------------------------------------------------------------------


def verify(probe: Probe, workdir: str, expected: dict) -> dict:
    """Independent checks after the run; returns (check, ok, detail) rows. Not timed."""
    wh, task = _unmeasured(workdir), bench_task()
    task_id = _task_id()
    rec = reconcile(wh, task_id)
    with wh.connect() as conn:
        business_rows = conn.execute(
            f"SELECT count(*) FROM main.{task.spec.apply.table} WHERE task_id = ?", [task_id]
        ).fetchone()[0]
        ok_lines = conn.execute(
            "SELECT count(*) FROM ledger.raw_result WHERE task_id = ? AND status = 'ok'", [task_id]
        ).fetchone()[0]
        redacted = conn.execute(
            "SELECT count(DISTINCT custom_id) FROM ledger.pii_mapping WHERE task_id = ?", [task_id]
        ).fetchone()[0]
        shard_files = [
            r[0] for r in conn.execute("SELECT path FROM ledger.shard WHERE task_id = ?", [task_id]).fetchall()
        ]
        leaked = (
            conn.execute(
                "SELECT count(*) FROM read_text($files) WHERE contains(content, $mark)",
                {"files": shard_files, "mark": synth.ADDRESS_MARK},
            ).fetchone()[0]
            if shard_files
            else 0
        )
        unapplied_usable = conn.execute(
            """
            SELECT count(*) FROM ledger.parsed_result p WHERE p.task_id = ? AND p.error_class IS NULL
              AND NOT EXISTS (SELECT 1 FROM ledger.applied_result a WHERE a.custom_id = p.custom_id)""",
            [task_id],
        ).fetchone()[0]
    checks = [
        ("reconciliation balances", not rec.problems(), "; ".join(rec.problems()) or "all equations hold"),
        (
            "applied = succeeded - failed_to_parse",
            rec.applied == rec.succeeded - rec.failed_to_parse,
            f"applied {rec.applied}, succeeded {rec.succeeded}, failed_to_parse {rec.failed_to_parse}",
        ),
        (
            "manifest items = source rows",
            rec.manifest_items == expected["rows"],
            f"{rec.manifest_items} vs {expected['rows']}",
        ),
        (
            "quarantined = empty bodies",
            rec.quarantined == expected["empty_bodies"],
            f"{rec.quarantined} vs {expected['empty_bodies']}",
        ),
        (
            "provider failures = error-file lines",
            rec.failed_total == expected["error_lines"],
            f"{rec.failed_total} vs {expected['error_lines']}",
        ),
        (
            "failed_to_parse = injected bad answers",
            rec.failed_to_parse == expected["bad_answers"],
            f"{rec.failed_to_parse} vs {expected['bad_answers']}",
        ),
        (
            "every result line ingested once",
            ok_lines == rec.shard_lines and rec.orphan_lines == rec.duplicate_lines == rec.malformed_lines == 0,
            f"ok lines {ok_lines}, shard lines {rec.shard_lines}, orphan {rec.orphan_lines}, "
            f"duplicate {rec.duplicate_lines}, malformed {rec.malformed_lines}",
        ),
        ("business table rows = applied", business_rows == rec.applied, f"{business_rows} vs {rec.applied}"),
        ("no usable result left unapplied", unapplied_usable == 0, f"{unapplied_usable} left"),
        (
            "redacted items = tickets with an e-mail address",
            redacted == expected["redacted_items"],
            f"{redacted} vs {expected['redacted_items']}",
        ),
        ("no shard file holds an e-mail address", leaked == 0, f"{leaked} of {len(shard_files)} files"),
        (
            "nothing missing or in flight",
            rec.missing == 0 and rec.in_flight == 0,
            f"missing {rec.missing}, in flight {rec.in_flight}",
        ),
    ]
    return {
        "reconciliation": rec.as_metadata(),
        "problems": rec.problems(),
        "checks": [{"check": c, "ok": bool(ok), "detail": d} for c, ok, d in checks],
    }
