"""Stage 2 — render, validate and cut provider-ready JSONL shards.

Every manifest item not yet in a shard is rendered into the provider's request line and validated
on its own; a bad line is quarantined with its reason and fix instead of failing the file. Valid
lines are cut into shards that respect the provider's limits (requests, bytes, enqueued tokens).

Cutting packs lines greedily in manifest order (the row order of the frozen Parquet, fixed at
freeze): each shard takes as many lines as fit all three limits. Bytes and tokens are running totals
(a DuckDB window over the row numbers), streamed to Python in chunks, and each shard's end is found by
binary search on them (polars), so the work per shard is O(log n), nothing loops over lines in Python
and memory stays one chunk however large the partition. A shard is a range of manifest rows, so its
file is written from that range alone; the wide rendered rows are never sorted.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from batch_assets.ledger import shards as ledger_shards
from batch_assets.ledger.states import TaskStatus
from batch_assets.ledger.tasks import set_task_status
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts, scalar
from batch_assets.pipeline.gate import BLOCKED_CODE
from batch_assets.pipeline.render import request_id_sql, request_line_sql
from batch_assets.pipeline.retry import due_retries_sql
from batch_assets.sqltext import sql_literal
from batch_assets.spec.resolve import ResolvedTask

FIRST_ATTEMPT = 1


@dataclass(frozen=True)
class ShardSummary:
    task_id: str
    new_shards: list[dict]
    lines: int
    quarantined: int
    total_shards: int


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _quarantine_rules(task: ResolvedTask) -> list[tuple[str, str, str]]:
    """(reason_code, condition over _lines, reason text SQL) in priority order."""
    limits = task.limits
    line_cap = min(limits.max_line_bytes, limits.max_shard_bytes - 1)
    return [
        # The sensitive-data policy's verdict at freeze (detector and column, never the value).
        (BLOCKED_CODE, "blocked_reason IS NOT NULL", "blocked_reason"),
        ("empty_input", "len(blank_columns) > 0",
         "'required column(s) ' || array_to_string(blank_columns, ', ') || ' empty for ' || business_id "
         "|| '; fix the source row or adjust source.required_columns'"),
        ("over_token_budget", f"est_input_tokens > {task.spec.max_input_tokens}",
         f"'estimated ' || est_input_tokens || ' input tokens > max_input_tokens {task.spec.max_input_tokens}; "
         "shorten the input or raise max_input_tokens in the task spec'"),
        ("line_too_large", f"line_bytes > {line_cap}",
         f"'request line of ' || line_bytes || ' bytes > provider limit {line_cap} bytes; "
         "shorten the input or override limits.max_line_bytes'"),
        ("over_enqueued_token_limit", f"est_tokens > {limits.max_enqueued_tokens}",
         f"'estimated ' || est_tokens || ' tokens > max_enqueued_tokens {limits.max_enqueued_tokens}; "
         "shorten the input or lower params.max_tokens'"),
        ("invalid_line", "NOT line_valid",
         "'rendered request line is not valid JSON; report this as a bug with the custom_id'"),
    ]


def rendered_lines_sql(conn, task: ResolvedTask, manifest_uri: str, todo: str, keep_line: bool = True) -> str:
    """The request lines of the items in `todo` (custom_id, attempt), rendered exactly as they are
    sent (from the frozen, redacted prompt text), measured and validated, with their quarantine
    reason (NULL: sendable). The one rendering path of shards and `batch-assets dry-run`.

    Without `keep_line` the rendered line itself is dropped after measuring: shards render it again
    when a shard is written, so the request's constant parts (system prompt, output schema) never
    fill the temp table — a fraction of its size at a million items."""
    rules = _quarantine_rules(task)
    reason_code = "CASE " + " ".join(f"WHEN {cond} THEN '{code}'" for code, cond, _ in rules) + " END"
    reason = "CASE " + " ".join(f"WHEN {cond} THEN {text}" for _, cond, text in rules) + " END"
    # Manifests frozen before the sensitive-data gate have no blocked_reason column.
    has_blocked = "blocked_reason" in {r[0] for r in conn.execute(
        f"DESCRIBE SELECT * FROM read_parquet({sql_literal(manifest_uri)})").fetchall()}
    blocked = "p.blocked_reason" if has_blocked else "NULL::VARCHAR AS blocked_reason"
    line = "line, " if keep_line else ""
    return f"""
        SELECT *, {reason_code} AS reason_code, {reason} AS reason
        FROM (SELECT custom_id, attempt, row_no, business_id, request_id, blank_columns, blocked_reason, est_input_tokens,
                     est_input_tokens + {int(task.spec.params.max_tokens)} AS est_tokens,
                     prompt_text, {line}strlen(line) AS line_bytes, json_valid(line) AS line_valid
              FROM (SELECT *, {request_line_sql(task)} AS line
                    FROM (SELECT *, {request_id_sql(task)} AS request_id
                          -- Everything comes from the frozen Parquet (it holds the business id too): a
                          -- second hash join over every item's custom_id (with ledger.manifest_item) ran
                          -- out of memory at 10M items.
                          FROM (SELECT t.custom_id, t.attempt, p.file_row_number AS row_no, p.business_id,
                                       p.prompt_text, p.blank_columns, {blocked}, p.est_input_tokens
                                FROM {todo} t
                                JOIN read_parquet({sql_literal(manifest_uri)}, file_row_number = true) p USING (custom_id)))))
    """


CUMULATIVE_CHUNK_ROWS = 1 << 20  # lines per chunk of running totals held in Python at once


def shard_starts(cumulative: Iterable[tuple[pl.Series, pl.Series]], max_bytes: int, max_tokens: int,
                 max_requests: int) -> list[int]:
    """The index of each shard's first line, packing greedily in order within all three limits.

    `cumulative`: the lines' running byte and token totals in line order, in consecutive chunks; a
    shard may span chunks, so memory stays one chunk however many lines there are. Every single
    line must fit on its own (the quarantine rules guarantee it)."""
    starts: list[int] = []
    start = 0                      # the open shard's first line
    base_b = base_t = 0            # running totals before it
    offset = 0                     # index of the chunk's first line
    before_b = before_t = 0        # running totals at the line before the chunk
    for cum_b, cum_t in cumulative:
        n = len(cum_b)
        if n == 0:
            continue
        if not starts:
            starts.append(0)
        while True:
            # Where the open shard must end: a limit crossed inside this chunk is known; one not
            # crossed here lies at or beyond the chunk's end.
            ends = [start + max_requests]
            i_b = int(cum_b.search_sorted(base_b + max_bytes, side="right"))
            i_t = int(cum_t.search_sorted(base_t + max_tokens, side="right"))
            ends += [offset + i for i in (i_b, i_t) if i < n]
            end = min(ends)
            if end > offset + n:
                break              # the open shard goes on into the next chunk
            start = max(end, start + 1)
            starts.append(start)
            k = start - 1 - offset  # the new shard's totals start after line start-1
            base_b, base_t = (int(cum_b[k]), int(cum_t[k])) if k >= 0 else (before_b, before_t)
        offset += n
        before_b, before_t = int(cum_b[-1]), int(cum_t[-1])
    if starts and starts[-1] >= offset:
        starts.pop()               # a shard closed exactly at the last line opens none after it
    return starts


def _running_totals(conn, relation: str) -> Iterator[tuple[pl.Series, pl.Series]]:
    """(cumulative bytes, cumulative tokens) of `relation`'s lines in idx order, streamed in chunks."""
    reader = conn.sql(f"SELECT cum_bytes, cum_tokens FROM {relation} ORDER BY idx").to_arrow_reader(CUMULATIVE_CHUNK_ROWS)
    for batch in reader:
        yield pl.Series(batch.column(0)), pl.Series(batch.column(1))


def cut_shards(wh: Warehouse, task: ResolvedTask, partition_date: str, retries: bool = True) -> ShardSummary:
    """Cut every manifest item not yet in a shard (attempt 1) and, with `retries`, every item whose
    retry is due (its next attempt, from the retry ledger) into new shards. Retry shards hold at
    most `retry.shrink`^(attempt-1) of the provider's requests per shard."""
    spec, limits = task.spec, task.limits
    task_id = task.task_id(partition_date)
    tid = sql_literal(task_id)
    with wh.connect() as conn, _scratch(conn) as scratch:
        uri = scalar(conn, "SELECT manifest_uri FROM ledger.batch_task WHERE task_id = ?", [task_id])
        if uri is None:
            raise ValueError(f"task {task_id}: no frozen manifest; materialize the manifest asset for {partition_date} first")
        due = f"UNION ALL SELECT custom_id, next_attempt AS attempt FROM ({due_retries_sql(tid)})" if retries else ""
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _todo AS
            SELECT m.custom_id, {FIRST_ATTEMPT} AS attempt
            FROM ledger.manifest_item m
            WHERE m.task_id = {tid} AND m.superseded_at IS NULL
              AND m.custom_id NOT IN (SELECT custom_id FROM ledger.quarantine)
              AND m.custom_id NOT IN (SELECT custom_id FROM ledger.shard_line WHERE task_id = {tid})
            {due}
        """)
        lines_table = f"{scratch}.lines"
        conn.execute(f"CREATE TABLE {lines_table} AS {rendered_lines_sql(conn, task, uri, '_todo', keep_line=False)}")
        attempts = [r[0] for r in conn.execute(
            f"SELECT DISTINCT attempt FROM {lines_table} WHERE reason_code IS NULL ORDER BY 1").fetchall()]
        shards: list[dict] = []
        conn.execute("CREATE OR REPLACE TEMP TABLE _cut2 (row_no BIGINT, custom_id VARCHAR, attempt INTEGER, "
                     "request_id VARCHAR, line_bytes BIGINT, est_tokens BIGINT, idx BIGINT, shard_no BIGINT, line_no BIGINT)")
        for attempt in attempts:
            shards += _pack_attempt(conn, wh, task, task_id, attempt, lines_table)
        with transaction(conn):
            quarantined = ledger_shards.insert_quarantine(
                conn, task_id, f"SELECT custom_id, reason_code, reason FROM {lines_table} WHERE reason_code IS NOT NULL")
            for s in shards:
                ledger_shards.insert_shard(
                    conn, shard_id=s["shard_id"], task_id=task_id, provider=spec.provider, endpoint=spec.endpoint,
                    model=spec.model, attempt=s["attempt"], shard_no=s["shard_no"], path=s["path"],
                    line_count=s["line_count"], byte_count=s["byte_count"], est_tokens=s["est_tokens"],
                    sha256=s["sha256"])
            for attempt in attempts:
                ledger_shards.insert_shard_lines(conn, task_id, attempt, f"""
                    SELECT printf('%s_a%d_s%04d', {tid}, {attempt}, shard_no) AS shard_id,
                           line_no, custom_id, request_id, line_bytes, est_tokens
                    FROM _cut2 WHERE attempt = {attempt}
                """)
            # Only a partition that has not been submitted yet moves to SHARDED (never backwards).
            set_task_status(conn, task_id, TaskStatus.SHARDED, only_from=TaskStatus.FROZEN)
        lines = sum(s["line_count"] for s in shards)
        total = scalar(conn, "SELECT count(*) FROM ledger.shard WHERE task_id = ?", [task_id])
        conn.execute("DROP TABLE _cut2; DROP TABLE _todo;")
        return ShardSummary(task_id, shards, lines, quarantined, total)


@contextlib.contextmanager
def _scratch(conn) -> Iterator[str]:
    """The name of an in-memory database for this call's rendered lines. Unlike a TEMP table it is
    seen by the other cursors of the connection's database, so the shard files are written by
    parallel cursors (one small COPY runs on one thread); it spills to disk like temp tables."""
    name = f"_shards_{uuid.uuid4().hex[:12]}"
    conn.execute(f"ATTACH ':memory:' AS {name}")
    try:
        yield name
    finally:
        conn.execute(f"DETACH {name}")


def _pack_attempt(conn, wh: Warehouse, task: ResolvedTask, task_id: str, attempt: int, lines_table: str) -> list[dict]:
    """Pack one attempt's valid lines of `lines_table` into shards (rows appended to _cut2), write
    the shard files; returns the shards (not yet recorded)."""
    limits = task.limits
    max_requests = limits.max_requests_per_shard
    if attempt > FIRST_ATTEMPT:  # retries go in smaller shards (e.g. the unfinished rest of an expired batch)
        max_requests = max(1, int(max_requests * task.spec.retry.shrink ** (attempt - 1)))
    next_shard_no = scalar(conn, "SELECT coalesce(max(shard_no) + 1, 0) FROM ledger.shard WHERE task_id = ? AND attempt = ?",
                           [task_id, attempt])
    conn.execute(f"""
        CREATE OR REPLACE TEMP TABLE _ordered AS
        SELECT row_no, custom_id, attempt, request_id, line_bytes, est_tokens,
               row_number() OVER w - 1 AS idx,
               sum(line_bytes + 1) OVER w AS cum_bytes,  -- + 1: the newline
               sum(est_tokens) OVER w AS cum_tokens
        FROM {lines_table} WHERE reason_code IS NULL AND attempt = {int(attempt)}
        WINDOW w AS (ORDER BY row_no ROWS UNBOUNDED PRECEDING)
    """)
    starts = shard_starts(_running_totals(conn, "_ordered"), limits.max_shard_bytes, limits.max_enqueued_tokens,
                          max_requests)
    # A few hundred shard starts, not a row per line: each line finds its shard by an ASOF join.
    conn.register("_starts", pl.DataFrame({"start_idx": starts, "shard_offset": range(len(starts))},
                                          schema={"start_idx": pl.Int64, "shard_offset": pl.Int64}))
    conn.execute(f"""
        INSERT INTO _cut2 BY NAME
        SELECT o.* EXCLUDE (cum_bytes, cum_tokens), {next_shard_no} + s.shard_offset AS shard_no,
               o.idx - s.start_idx + 1 AS line_no
        FROM _ordered o ASOF JOIN _starts s ON o.idx >= s.start_idx
    """)
    conn.unregister("_starts")
    conn.execute("DROP TABLE _ordered")
    shards = fetch_dicts(conn, f"""
        SELECT shard_no, count(*) AS line_count, sum(line_bytes + 1) AS byte_count, sum(est_tokens) AS est_tokens,
               min(row_no) AS first_row, max(row_no) AS last_row
        FROM _cut2 WHERE attempt = {int(attempt)} GROUP BY shard_no ORDER BY shard_no
    """)
    for s in shards:
        s["attempt"] = attempt
        s["shard_id"] = f"{task_id}_a{attempt}_s{s['shard_no']:04d}"
        s["path"] = str(wh.path("shards", task_id, f"{s['shard_id']}.jsonl"))
    _write_shard_files(conn, task, lines_table, attempt, shards)
    return shards


def _write_shard_files(conn, task: ResolvedTask, lines_table: str, attempt: int, shards: list[dict]) -> None:
    """Write each shard's file (and its sha256) from its range of manifest rows, on as many
    cursors in parallel as DuckDB has threads: a shard's COPY reads one row group, so it runs on
    one thread and alone would leave the other cores idle."""
    line_sql = request_line_sql(task)
    local, cursors, lock = threading.local(), [], threading.Lock()

    def write(s: dict) -> None:
        cur = getattr(local, "cursor", None)
        if cur is None:
            cur = local.cursor = conn.cursor()
            with lock:
                cursors.append(cur)
        # The shard's lines are exactly the attempt's sendable lines in its range of manifest rows.
        cur.execute(f"""
            COPY (SELECT {line_sql} AS line FROM {lines_table}
                  WHERE row_no BETWEEN {s['first_row']} AND {s['last_row']} AND reason_code IS NULL
                    AND attempt = {int(attempt)} ORDER BY row_no)
            TO {sql_literal(s['path'])} (FORMAT csv, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\x1f')
        """)
        s["sha256"] = file_sha256(Path(s["path"]))

    threads = int(conn.execute("SELECT current_setting('threads')").fetchone()[0])
    try:
        with ThreadPoolExecutor(max(1, min(threads, len(shards)))) as pool:
            list(pool.map(write, shards))
    finally:
        for cur in cursors:
            cur.close()


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def verify_shards(wh: Warehouse, task: ResolvedTask, partition_date: str) -> tuple[list[str], dict]:
    """The pre-submission gate: every shard file intact and within limits, and every manifest item
    either in a first-attempt shard or quarantined (retry shards are counted per attempt and
    checked file by file). Returns (problems, counts)."""
    limits = task.limits
    task_id = task.task_id(partition_date)
    problems: list[str] = []
    with wh.connect() as conn:
        shards = fetch_dicts(conn, """
            SELECT s.*, (SELECT count(*) FROM ledger.shard_line l WHERE l.shard_id = s.shard_id) AS ledger_lines
            FROM ledger.shard s WHERE task_id = ? ORDER BY shard_no""", [task_id])
        items = scalar(conn, "SELECT count(*) FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [task_id])
        quarantined = scalar(conn, "SELECT count(*) FROM ledger.quarantine WHERE task_id = ?", [task_id])
        # Lines of items a refreeze superseded stay in their (already cut) shards but are no items.
        superseded_lines = scalar(conn, """
            SELECT count(*) FROM ledger.shard_line WHERE task_id = $t AND attempt = 1 AND custom_id IN
                (SELECT custom_id FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NOT NULL)""",
                                  {"t": task_id})
        superseded_quarantined = scalar(conn, """
            SELECT count(*) FROM ledger.quarantine WHERE task_id = $t AND custom_id IN
                (SELECT custom_id FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NOT NULL)""",
                                        {"t": task_id})
    for s in shards:
        path, sid = Path(s["path"]), s["shard_id"]
        if s.get("purged_at") is not None:
            continue  # purged by retention after the partition was final: its hash stays in the ledger
        if not path.is_file():
            problems.append(f"{sid}: file {path} is missing; re-materialize shards after restoring it")
            continue
        if file_sha256(path) != s["sha256"]:
            problems.append(f"{sid}: file {path} changed after it was cut (sha256 mismatch)")
        if path.stat().st_size != s["byte_count"] or s["byte_count"] > limits.max_shard_bytes:
            problems.append(f"{sid}: {path.stat().st_size} bytes on disk, {s['byte_count']} recorded, limit {limits.max_shard_bytes}")
        lines = _count_lines(path)
        if not (lines == s["line_count"] == s["ledger_lines"]) or lines > limits.max_requests_per_shard:
            problems.append(f"{sid}: {lines} lines on disk, {s['line_count']} recorded, {s['ledger_lines']} in shard_line, "
                            f"limit {limits.max_requests_per_shard}")
        if s["est_tokens"] > limits.max_enqueued_tokens:
            problems.append(f"{sid}: {s['est_tokens']} estimated tokens > max_enqueued_tokens {limits.max_enqueued_tokens}")
    shard_lines = sum(s["ledger_lines"] for s in shards if s["attempt"] == FIRST_ATTEMPT) - superseded_lines
    retry_lines = sum(s["ledger_lines"] for s in shards if s["attempt"] != FIRST_ATTEMPT)
    quarantined -= superseded_quarantined
    if shard_lines + quarantined != items:
        problems.append(f"shard lines {shard_lines} + quarantined {quarantined} != manifest items {items}")
    return problems, {"manifest_items": items, "shard_lines": shard_lines, "retry_lines": retry_lines,
                      "quarantined": quarantined, "shards": len(shards)}
