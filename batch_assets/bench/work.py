"""What runs inside the benchmark's child processes: setup steps, the real stages, their floors.

Every function takes the child's `Probe` first and wraps exactly the part to be measured in
`probe.measure()`. Stages call the product's own stage functions (never copies of their SQL); the
floors are the plain DuckDB statements they are compared with, over the same data.
Imported by the forkserver before it forks (see proc.py), so keep module-level work cheap.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import duckdb

from batch_assets.bench import synth
from batch_assets.bench.proc import Probe
from batch_assets.bench.profile import ProfilingWarehouse
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.apply import apply_results
from batch_assets.pipeline.ingest import ingest_files
from batch_assets.pipeline.manifest import freeze_manifest
from batch_assets.pipeline.parse import parse_results
from batch_assets.pipeline.reconcile import reconcile
from batch_assets.sqltext import sql_literal
from batch_assets.pipeline.shards import cut_shards
from batch_assets.providers.registry import wire_format
from batch_assets.spec.resolve import ResolvedTask, load_all_tasks

TASK_NAME = "ticket_triage"
FLOOR_SCHEMA = "bench_floor"


def warehouse(workdir: str, profile: bool = False) -> Warehouse:
    root = Path(workdir)
    cls = ProfilingWarehouse if profile else Warehouse
    return cls.at(root / "warehouse.duckdb", root / "data")


def _profiled(wh: Warehouse, result: dict, probe: Probe | None = None) -> dict:
    if isinstance(wh, ProfilingWarehouse):
        result["statements"] = wh.top(7, probe.wall_s if probe else None)
    return result


def bench_task() -> ResolvedTask:
    return load_all_tasks()[TASK_NAME]


def _task_id() -> str:
    return bench_task().task_id(synth.PARTITION_DATE)


def _connect(workdir: str) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(warehouse(workdir).database))


def _asdict(obj) -> dict:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else dict(obj)


# --- setup (not stages) ---------------------------------------------------------------------------

def setup_source(probe: Probe, workdir: str, items: int) -> dict:
    wh = warehouse(workdir)
    with probe.measure(), wh.connect() as conn:  # connect() creates the ledger (migrations)
        rows = synth.create_source_table(conn, items)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {FLOOR_SCHEMA}")
        stats = conn.execute("""
            SELECT count(*) FILTER (language = 'zh'), count(*) FILTER (body = ''),
                   min(strlen(body)) FILTER (body <> ''), avg(strlen(body)), max(strlen(body))
            FROM main.support_tickets""").fetchone()
    return {"rows": rows, "zh_rows": stats[0], "empty_bodies": stats[1], "body_bytes_min": stats[2],
            "body_bytes_avg": round(stats[3] or 0, 1), "body_bytes_max": stats[4],
            "expected_empty_bodies": synth.expected_empty_bodies(items)}


def setup_provider_outputs(probe: Probe, workdir: str) -> dict:
    wh, task = warehouse(workdir), bench_task()
    with probe.measure():
        out = synth.write_provider_outputs(wh, task, synth.PARTITION_DATE)
        jobs = synth.register_terminal_jobs(wh, task, out, synth.PARTITION_DATE)
    return {"jobs": jobs, "files": out.files, "output_lines": out.output_lines, "error_lines": out.error_lines,
            "schema_breaks": out.schema_breaks, "length_cuts": out.length_cuts,
            "bytes": sum(f["bytes"] for f in out.files)}


# --- stages: the product's functions ----------------------------------------------------------------

def stage_manifest(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task = warehouse(workdir, profile), bench_task()
    with probe.measure():
        summary = freeze_manifest(wh, task, synth.PARTITION_DATE)
    return _profiled(wh, _asdict(summary), probe)


def stage_shards(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task = warehouse(workdir, profile), bench_task()
    with probe.measure():
        summary = cut_shards(wh, task, synth.PARTITION_DATE)
    return _profiled(wh, {"task_id": summary.task_id, "lines": summary.lines, "quarantined": summary.quarantined,
                          "shards": summary.total_shards, "bytes": sum(int(s["byte_count"]) for s in summary.new_shards)},
                     probe)


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


def stage_apply(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh, task = warehouse(workdir, profile), bench_task()
    with probe.measure():
        summary = apply_results(wh, task, synth.PARTITION_DATE)
    return _profiled(wh, _asdict(summary), probe)


def stage_reconcile(probe: Probe, workdir: str, profile: bool = False) -> dict:
    wh = warehouse(workdir, profile)
    with probe.measure():
        rec = reconcile(wh, _task_id())
    return _profiled(wh, {"metadata": rec.as_metadata(), "problems": rec.problems()}, probe)


# --- floors: plain DuckDB over the same data --------------------------------------------------------

def _timed_floor(probe: Probe, workdir: str, sql: str, params: list | None = None, cleanup: str | None = None):
    """Open the file, run the statement, fetch, close: the whole thing is measured (like a stage)."""
    with probe.measure():
        conn = _connect(workdir)
        try:
            row = conn.execute(sql, params or []).fetchall()
        finally:
            conn.close()
    if cleanup:
        with _connect(workdir) as conn:
            conn.execute(cleanup)
    return row


FLOOR_SQL = {
    "manifest": "CREATE TABLE AS SELECT the partition's source rows with a sha256 per row",
    "shards": "COPY (SELECT custom_id, method, url, json_object(body)) FROM the manifest TO .jsonl (FORMAT json)",
    "ingest": "SELECT count(*), count(custom_id) FROM read_json(<output files>, format='newline_delimited')",
    "parse": "SELECT aggregates of the answer/usage/error fields pulled from ledger.raw_result with one multi-path "
             "json_extract_string",
    "apply": "INSERT INTO a fresh table SELECT the answer fields of the usable ledger.parsed_result rows",
    "reconcile": "SELECT count(*) FROM ledger.manifest_item for the task",
}


def floor_manifest(probe: Probe, workdir: str) -> dict:
    task = bench_task()
    cols = ", ".join(["ticket_id", *task.template_columns])
    rows = _timed_floor(probe, workdir, f"""
        CREATE OR REPLACE TABLE {FLOOR_SCHEMA}.manifest AS
        SELECT *, sha256(concat_ws(chr(31), {cols})) AS row_sha256
        FROM main.support_tickets WHERE created_date = DATE {sql_literal(synth.PARTITION_DATE)}
    """, cleanup=f"DROP TABLE {FLOOR_SCHEMA}.manifest")
    return {"rows": rows[0][0]}


def floor_shards(probe: Probe, workdir: str) -> dict:
    task = bench_task()
    spec = task.spec
    with _connect(workdir) as conn:
        uri = conn.execute("SELECT manifest_uri FROM ledger.batch_task WHERE task_id = ?", [_task_id()]).fetchone()[0]
    response_format = json.dumps({"type": "json_schema", "json_schema": {
        "name": spec.output.name, "strict": True, "schema": task.output_schema}}, separators=(",", ":"))
    system = (f"json_object('role', 'system', 'content', {sql_literal(spec.prompt.system)}), "
              if spec.prompt.system else "")
    out = Path(workdir) / "floor" / "requests.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = _timed_floor(probe, workdir, f"""
        COPY (SELECT custom_id, 'POST' AS method, {sql_literal(spec.endpoint)} AS url,
                     json_object('model', {sql_literal(spec.model)},
                                 'messages', json_array({system}json_object('role', 'user', 'content', prompt_text)),
                                 'temperature', {float(spec.params.temperature)!r},
                                 'max_tokens', {int(spec.params.max_tokens)},
                                 'response_format', {sql_literal(response_format)}::JSON) AS body
              FROM read_parquet({sql_literal(uri)}))
        TO {sql_literal(str(out))} (FORMAT json)
    """)
    size = out.stat().st_size
    out.unlink()
    return {"rows": rows[0][0], "bytes": size}


def floor_ingest(probe: Probe, workdir: str) -> dict:
    with _connect(workdir) as conn:
        paths = [r[0] for r in conn.execute(
            "SELECT path FROM ledger.raw_file WHERE task_id = ? ORDER BY file_key", [_task_id()]).fetchall()]
    files = "[" + ", ".join(sql_literal(p) for p in paths) + "]"
    rows = _timed_floor(probe, workdir,
                        f"SELECT count(*), count(custom_id) FROM read_json({files}, format='newline_delimited')")
    return {"rows": rows[0][0], "with_custom_id": rows[0][1], "files": len(paths)}


def floor_parse(probe: Probe, workdir: str) -> dict:
    # One multi-path json_extract_string parses each body once (per-path ->> would parse it once
    # per field, ~5x the CPU): the cheapest plain way to pull the same fields out.
    rows = _timed_floor(probe, workdir, """
        SELECT count(*), count(v[1]), count(v[2]), count(v[3]), sum(TRY_CAST(v[4] AS BIGINT)),
               sum(TRY_CAST(v[5] AS BIGINT)), count(coalesce(error ->> '$.code', v[6])),
               count(coalesce(error ->> '$.message', v[7]))
        FROM (SELECT error, json_extract_string(body, ['$.choices[0].message.content', '$.choices[0].finish_reason',
                                                       '$.choices[0].message.refusal', '$.usage.prompt_tokens',
                                                       '$.usage.completion_tokens', '$.error.code',
                                                       '$.error.message']) AS v
              FROM ledger.raw_result WHERE task_id = ?)
    """, [_task_id()])
    return {"rows": rows[0][0]}


def floor_apply(probe: Probe, workdir: str) -> dict:
    with _connect(workdir) as conn:
        conn.execute(f"""CREATE OR REPLACE TABLE {FLOOR_SCHEMA}.applied
                         (custom_id VARCHAR, category VARCHAR, confidence DOUBLE, reason VARCHAR)""")
    rows = _timed_floor(probe, workdir, f"""
        INSERT INTO {FLOOR_SCHEMA}.applied
        SELECT custom_id, j ->> '$.category', CAST(j ->> '$.confidence' AS DOUBLE), j ->> '$.reason'
        FROM (SELECT custom_id, output_json::JSON AS j FROM ledger.parsed_result
              WHERE task_id = ? AND provider_succeeded AND error_class IS NULL)
    """, [_task_id()], cleanup=f"DROP TABLE {FLOOR_SCHEMA}.applied")
    return {"rows": rows[0][0]}


def floor_reconcile(probe: Probe, workdir: str) -> dict:
    rows = _timed_floor(probe, workdir, "SELECT count(*) FROM ledger.manifest_item WHERE task_id = ?", [_task_id()])
    return {"rows": rows[0][0]}


# --- correctness ------------------------------------------------------------------------------------

def verify(probe: Probe, workdir: str, expected: dict) -> dict:
    """Independent checks after the run; returns (check, ok, detail) rows. Not timed."""
    wh, task = warehouse(workdir), bench_task()
    task_id = _task_id()
    rec = reconcile(wh, task_id)
    with wh.connect() as conn:
        business_rows = conn.execute(
            f"SELECT count(*) FROM main.{task.spec.apply.table} WHERE task_id = ?", [task_id]).fetchone()[0]
        ok_lines = conn.execute(
            "SELECT count(*) FROM ledger.raw_result WHERE task_id = ? AND status = 'ok'", [task_id]).fetchone()[0]
        unapplied_usable = conn.execute("""
            SELECT count(*) FROM ledger.parsed_result p WHERE p.task_id = ? AND p.error_class IS NULL
              AND NOT EXISTS (SELECT 1 FROM ledger.applied_result a WHERE a.custom_id = p.custom_id)""",
            [task_id]).fetchone()[0]
    checks = [
        ("reconciliation balances", not rec.problems(), "; ".join(rec.problems()) or "all equations hold"),
        ("applied = succeeded - failed_to_parse", rec.applied == rec.succeeded - rec.failed_to_parse,
         f"applied {rec.applied}, succeeded {rec.succeeded}, failed_to_parse {rec.failed_to_parse}"),
        ("manifest items = source rows", rec.manifest_items == expected["rows"],
         f"{rec.manifest_items} vs {expected['rows']}"),
        ("quarantined = empty bodies", rec.quarantined == expected["empty_bodies"],
         f"{rec.quarantined} vs {expected['empty_bodies']}"),
        ("provider failures = error-file lines", rec.failed_total == expected["error_lines"],
         f"{rec.failed_total} vs {expected['error_lines']}"),
        ("failed_to_parse = injected bad answers", rec.failed_to_parse == expected["bad_answers"],
         f"{rec.failed_to_parse} vs {expected['bad_answers']}"),
        ("every result line ingested once", ok_lines == rec.shard_lines and rec.orphan_lines == rec.duplicate_lines
         == rec.malformed_lines == 0,
         f"ok lines {ok_lines}, shard lines {rec.shard_lines}, orphan {rec.orphan_lines}, "
         f"duplicate {rec.duplicate_lines}, malformed {rec.malformed_lines}"),
        ("business table rows = applied", business_rows == rec.applied, f"{business_rows} vs {rec.applied}"),
        ("no usable result left unapplied", unapplied_usable == 0, f"{unapplied_usable} left"),
        ("nothing missing or in flight", rec.missing == 0 and rec.in_flight == 0,
         f"missing {rec.missing}, in flight {rec.in_flight}"),
    ]
    return {"reconciliation": rec.as_metadata(), "problems": rec.problems(),
            "checks": [{"check": c, "ok": bool(ok), "detail": d} for c, ok, d in checks]}
