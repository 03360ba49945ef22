"""The floors: the plainest set-based DuckDB statements that still PERSIST each stage's result.

The same statements as the independent `../shared/tools/floors_bench.py` (CREATE TABLE AS / COPY /
INSERT ... ON CONFLICT, each followed by a CHECKPOINT like a stage's commit), over the bench's own
source rows and provider output files, chained like the stages: the manifest floor's table feeds
the shards, ingest and reconcile floors, ingest's feeds parse, parse's feeds apply. The tables live
in schema `bench_floor` of the benchmark warehouse.

Each floor runs in its own child process like its stage (see proc.py) and the measured section
is the whole of it: open the file, set the same memory limit as the product's connections, run the
statement, CHECKPOINT, close. Two floors cover stages floors_bench.py does not have:

* pii_scan: every detector's pattern (one combined RE2 alternation) over the template's text
  columns of the partition, the matches of each row that has any persisted with CREATE TABLE AS;
* cost: the partition's estimated cost (sum of the frozen per-item estimates over its shard lines)
  persisted with CREATE TABLE AS.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from batch_assets.bench import synth
from batch_assets.bench.probe import Probe
from batch_assets.policy.detectors import default_detectors
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal

SCHEMA = "bench_floor"
# The independent floors_bench.py gives DuckDB 2 GB; so do these, whatever the product's limit is.
FLOOR_MEMORY_LIMIT = "2GB"
CATEGORIES = ("billing", "technical", "account")

FLOOR_SQL = {
    "pii_scan": "CREATE TABLE AS SELECT id, regexp_extract_all(text, <all detectors>) WHERE regexp_matches(...)",
    "manifest": "CREATE TABLE AS SELECT id, prompt, sha256(prompt), custom_id FROM the partition's source rows",
    "shards": "COPY (SELECT custom_id, method, url, {model, messages, ..., response_format} FROM manifest) TO .jsonl",
    "cost": "CREATE TABLE AS SELECT sum(est_cost) FROM shard_line JOIN manifest_item",
    "ingest": "CREATE TABLE AS SELECT fields FROM read_json(<output files>) LEFT JOIN manifest_item",
    "parse": "CREATE TABLE AS SELECT json_extract_string(body, [content, finish_reason, usage...]), answer fields",
    "apply": "INSERT INTO business table SELECT answer fields ... ON CONFLICT (key) DO UPDATE",
    "reconcile": "CREATE TABLE AS SELECT counts of manifest, lines, orphans, duplicates, parsed, applied",
}


def _connect(workdir: str) -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect(str(Path(workdir) / "warehouse.duckdb"))
    conn.execute("SET memory_limit = ?", [FLOOR_MEMORY_LIMIT])
    return conn


def _run(probe: Probe, workdir: str, sql: str, prepare: str | None = None) -> None:
    """Prepare (not timed), then the measured floor: open, statement, CHECKPOINT, close."""
    with _connect(workdir) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        if prepare:
            conn.execute(prepare)
        conn.execute("CHECKPOINT")
    with probe.measure():
        conn = _connect(workdir)
        try:
            conn.execute(sql)
            conn.execute("CHECKPOINT")  # persisted, like a stage's commit
        finally:
            conn.close()


def _count(workdir: str, sql: str) -> int:
    with _connect(workdir) as conn:
        return conn.execute(sql).fetchone()[0]


def _task_tag() -> str:
    return "ticket_triage_" + synth.PARTITION_DATE.replace("-", "")


def pii_scan(probe: Probe, workdir: str, task: ResolvedTask) -> dict:
    pattern = "|".join(f"(?:{d.pattern})" for d in default_detectors(task.spec.policy.phone_regions))
    text = " || chr(10) || ".join(f"coalesce({c}, '')" for c in task.template_columns)
    _run(
        probe,
        workdir,
        f"""
        CREATE OR REPLACE TABLE {SCHEMA}.pii AS
        SELECT ticket_id, regexp_extract_all(t, {sql_literal(pattern)}) AS found
        FROM (SELECT ticket_id, {text} AS t FROM main.support_tickets
              WHERE created_date = DATE {sql_literal(synth.PARTITION_DATE)})
        WHERE regexp_matches(t, {sql_literal(pattern)})
    """,
    )
    return {"rows": _count(workdir, f"SELECT count(*) FROM {SCHEMA}.pii")}


def manifest(probe: Probe, workdir: str) -> dict:
    day, tag = synth.PARTITION_DATE, _task_tag()
    _run(
        probe,
        workdir,
        f"""
        CREATE OR REPLACE TABLE {SCHEMA}.manifest AS
        SELECT ticket_id AS business_id, prompt_text, sha256('v1|gpt-4o-mini|t0|m200|' || prompt_text) AS input_hash,
               '{tag}:ticket:' || ticket_id || ':'
                   || left(sha256('v1|gpt-4o-mini|t0|m200|' || prompt_text), 8) AS custom_id
        FROM (SELECT ticket_id, 'Subject: ' || subject || chr(10) || chr(10) || body AS prompt_text
              FROM main.support_tickets WHERE created_date = DATE '{day}' AND body <> '')
    """,
    )
    return {"rows": _count(workdir, f"SELECT count(*) FROM {SCHEMA}.manifest")}


def shards(probe: Probe, workdir: str, task: ResolvedTask) -> dict:
    schema = json.dumps(task.output_schema, separators=(",", ":"))
    out = Path(workdir) / "floor" / "requests.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(
        probe,
        workdir,
        f"""
        COPY (SELECT custom_id, 'POST' AS method, '/v1/chat/completions' AS url,
          {{'model': 'gpt-4o-mini', 'messages': [{{'role': 'system', 'content': 'Classify the support ticket.'}},
                                                  {{'role': 'user', 'content': prompt_text}}],
            'temperature': 0.0, 'max_tokens': 200,
            'response_format': {{'type': 'json_schema', 'json_schema': {{'name': 'triage', 'strict': true,
                                 'schema': {sql_literal(schema)}::JSON}}}}}} AS body
          FROM {SCHEMA}.manifest) TO {sql_literal(str(out))} (FORMAT json)
    """,
    )
    size = out.stat().st_size
    out.unlink()
    return {"bytes": size}


def cost(probe: Probe, workdir: str, task_id: str) -> dict:
    _run(
        probe,
        workdir,
        f"""
        CREATE OR REPLACE TABLE {SCHEMA}.cost AS
        SELECT sum(m.est_cost) AS estimate, count(*) AS lines
        FROM ledger.shard_line sl JOIN ledger.manifest_item m USING (custom_id)
        WHERE sl.task_id = {sql_literal(task_id)}
    """,
    )
    return {"lines": _count(workdir, f"SELECT lines FROM {SCHEMA}.cost")}


def ingest(probe: Probe, workdir: str, task_id: str) -> dict:
    # Joined to the product's manifest rows: the floor manifest's custom_ids are not the ones sent.
    with _connect(workdir) as conn:
        paths = [
            r[0]
            for r in conn.execute(
                "SELECT path FROM ledger.raw_file WHERE task_id = ? ORDER BY file_key", [task_id]
            ).fetchall()
        ]
    files = "[" + ", ".join(sql_literal(p) for p in paths) + "]"
    _run(
        probe,
        workdir,
        f"""
        CREATE OR REPLACE TABLE {SCHEMA}.raw AS
        SELECT r.custom_id, r.id AS line_id, r.response.status_code AS status_code, r.response.request_id AS request_id,
               to_json(r.response.body) AS body, r.error, m.business_id, m.input_hash
        FROM read_json({files}, format = 'newline_delimited') r
        LEFT JOIN (SELECT custom_id, business_id, input_hash FROM ledger.manifest_item
                   WHERE task_id = {sql_literal(task_id)}) m USING (custom_id)
    """,
    )
    return {"rows": _count(workdir, f"SELECT count(*) FROM {SCHEMA}.raw"), "files": len(paths)}


def parse(probe: Probe, workdir: str) -> dict:
    _run(
        probe,
        workdir,
        f"""
        CREATE OR REPLACE TABLE {SCHEMA}.parsed AS
        SELECT custom_id, business_id, input_hash, v[1] AS content, v[2] AS finish_reason,
               TRY_CAST(v[3] AS BIGINT) AS tokens_in, TRY_CAST(v[4] AS BIGINT) AS tokens_out,
               -- the bench's answers include cut-off JSON (finish_reason length), which must not abort it
               CASE WHEN json_valid(v[1]) THEN json_extract_string(v[1], ['$.category', '$.confidence', '$.reason'])
               END AS a
        FROM (SELECT custom_id, business_id, input_hash,
                     json_extract_string(body, ['$.choices[0].message.content', '$.choices[0].finish_reason',
                                                '$.usage.prompt_tokens', '$.usage.completion_tokens']) AS v
              FROM {SCHEMA}.raw)
    """,
    )
    return {"rows": _count(workdir, f"SELECT count(*) FROM {SCHEMA}.parsed")}


def apply(probe: Probe, workdir: str) -> dict:
    cats = ", ".join(sql_literal(c) for c in CATEGORIES)
    _run(
        probe,
        workdir,
        f"""
        INSERT INTO {SCHEMA}.ticket_labels
        SELECT business_id, a[1], TRY_CAST(a[2] AS DOUBLE), a[3], custom_id, input_hash FROM {SCHEMA}.parsed
        WHERE a[1] IN ({cats})
        ON CONFLICT (ticket_id) DO UPDATE SET category = excluded.category, confidence = excluded.confidence,
           reason = excluded.reason, custom_id = excluded.custom_id, input_hash = excluded.input_hash
    """,
        prepare=f"""
        CREATE OR REPLACE TABLE {SCHEMA}.ticket_labels (ticket_id VARCHAR, category VARCHAR, confidence DOUBLE,
            reason VARCHAR, custom_id VARCHAR, input_hash VARCHAR, PRIMARY KEY (ticket_id))
    """,
    )
    return {"rows": _count(workdir, f"SELECT count(*) FROM {SCHEMA}.ticket_labels")}


def reconcile(probe: Probe, workdir: str) -> dict:
    s = SCHEMA
    _run(
        probe,
        workdir,
        f"""
        CREATE OR REPLACE TABLE {s}.recon AS SELECT
          (SELECT count(*) FROM {s}.manifest) AS items, (SELECT count(*) FROM {s}.raw) AS lines,
          (SELECT count(*) FROM {s}.raw WHERE business_id IS NULL) AS orphans,
          (SELECT count(*) - count(DISTINCT custom_id) FROM {s}.raw) AS duplicates,
          (SELECT count(*) FROM {s}.parsed WHERE a[1] IS NOT NULL) AS parsed,
          (SELECT count(*) FROM {s}.ticket_labels) AS applied
    """,
    )
    with _connect(workdir) as conn:
        row = conn.execute(f"SELECT * FROM {s}.recon").fetchone()
    return {"recon": list(row)}
