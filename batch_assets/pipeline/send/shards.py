"""Stage 2 — render, validate and cut provider-ready JSONL shards.

Every manifest item not yet in a shard is rendered into the provider's request line and validated
on its own; a bad line is quarantined with its reason and fix instead of failing the file. Valid
lines are cut into shards that respect the provider's limits (requests, bytes, enqueued tokens).

Cutting is one streamed pass per attempt: the lines are rendered, measured and validated in
DuckDB and stream out in manifest order (the row order of the frozen Parquet, fixed at freeze) in
batches; Python quarantines the bad ones, packs the good ones greedily (each shard takes as many
lines as fit all three limits; its end is found by binary search on the running totals, so nothing
loops over lines in Python) and writes each run of a shard's lines as one slice of the batch's
buffer, hashing as it writes. A line is rendered once and never stored or sorted; memory stays one
batch however large the partition.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batch_assets.ledger import shards as ledger_shards
from batch_assets.ledger.states import TaskStatus
from batch_assets.ledger.tasks import set_task_status
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse, scalar
from batch_assets.pipeline.files import file_sha256
from batch_assets.pipeline.freeze.frozen import frozen_columns, frozen_item_no_sql, frozen_manifest
from batch_assets.pipeline.freeze.render import request_id_sql, request_line_sql
from batch_assets.pipeline.govern.sensitive import BLOCKED_CODE
from batch_assets.pipeline.settle.retry_ledger import due_retries_sql
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal

FIRST_ATTEMPT = 1


@dataclass(frozen=True)
class ShardSummary:
    task_id: str
    new_shards: list[dict]
    lines: int
    quarantined: int
    total_shards: int


def _quarantine_rules(task: ResolvedTask) -> list[tuple[str, str, str]]:
    """(reason_code, condition over _lines, reason text SQL) in priority order."""
    limits = task.limits
    line_cap = min(limits.max_line_bytes, limits.max_shard_bytes - 1)
    return [
        # The sensitive-data policy's verdict at freeze (detector and column, never the value).
        (BLOCKED_CODE, "blocked_reason IS NOT NULL", "blocked_reason"),
        (
            "empty_input",
            "len(blank_columns) > 0",
            "'required column(s) ' || array_to_string(blank_columns, ', ') || ' empty for ' || business_id "
            "|| '; fix the source row or adjust source.required_columns'",
        ),
        (
            "over_token_budget",
            f"est_input_tokens > {task.spec.max_input_tokens}",
            f"'estimated ' || est_input_tokens || ' input tokens > max_input_tokens {task.spec.max_input_tokens}; "
            "shorten the input or raise max_input_tokens in the task spec'",
        ),
        (
            "line_too_large",
            f"line_bytes > {line_cap}",
            f"'request line of ' || line_bytes || ' bytes > provider limit {line_cap} bytes; "
            "shorten the input or override limits.max_line_bytes'",
        ),
        (
            "over_enqueued_token_limit",
            f"est_tokens > {limits.max_enqueued_tokens}",
            f"'estimated ' || est_tokens || ' tokens > max_enqueued_tokens {limits.max_enqueued_tokens}; "
            "shorten the input or lower params.max_tokens'",
        ),
        (
            "invalid_line",
            "NOT line_valid",
            "'rendered request line is not valid JSON; report this as a bug with the custom_id'",
        ),
    ]


def rendered_lines_sql(
    conn, task: ResolvedTask, manifest_uri: str, todo: str | None, selected: tuple[int, str] | None = None
) -> str:
    """The request lines of the items in `todo` (custom_id, attempt), rendered exactly as they are
    sent (from the frozen, redacted prompt text), measured and validated, with their quarantine
    reason (NULL: sendable). The one rendering path of shards and `batch-assets dry-run`.

    `selected` = (attempt, variable) instead of `todo`: the frozen rows whose bit is set in the
    bitstring SQL variable (bit i: Parquet row i), all of that attempt. That is a filter, not a join,
    so the lines stream out in the Parquet's row order (a join's output order is not kept)."""
    rules = _quarantine_rules(task)
    reason_code = "CASE " + " ".join(f"WHEN {cond} THEN '{code}'" for code, cond, _ in rules) + " END"
    reason = "CASE " + " ".join(f"WHEN {cond} THEN {text}" for _, cond, text in rules) + " END"
    columns_frozen = frozen_columns(conn, manifest_uri)
    # Manifests frozen before the sensitive-data gate have no blocked_reason column, those frozen
    # before item numbers no item_no (their lines take it from ledger.manifest_item when recorded).
    blocked = "p.blocked_reason" if "blocked_reason" in columns_frozen else "NULL::VARCHAR AS blocked_reason"
    item_no = f"{frozen_item_no_sql('p')} AS item_no" if "item_no_base" in columns_frozen else "NULL::BIGINT AS item_no"
    frozen = f"read_parquet({sql_literal(manifest_uri)}, file_row_number = true) p"
    if selected is None:
        attempt, rows = "t.custom_id, t.attempt", f"{todo} t JOIN {frozen} USING (custom_id)"
    else:
        attempt = f"p.custom_id, {int(selected[0])} AS attempt"
        rows = f"{frozen} WHERE get_bit(getvariable({sql_literal(selected[1])}), p.file_row_number::INTEGER) = 1"
    columns = (
        f"{attempt}, {item_no}, p.file_row_number AS row_no, p.business_id, p.prompt_text, p.blank_columns, "
        f"{blocked}, p.est_input_tokens"
    )
    return f"""
        SELECT *, {reason_code} AS reason_code, {reason} AS reason
        FROM (SELECT custom_id, item_no, attempt, row_no, business_id, request_id, blank_columns, blocked_reason,
                     est_input_tokens,
                     est_input_tokens + {int(task.spec.params.max_tokens)} AS est_tokens,
                     prompt_text, line, strlen(line) AS line_bytes, json_valid(line) AS line_valid
              FROM (SELECT *, {request_line_sql(task)} AS line
                    FROM (SELECT *, {request_id_sql(task)} AS request_id
                          -- Everything comes from the frozen Parquet (it holds the business id too): a
                          -- hash join with ledger.manifest_item over every custom_id runs out of memory.
                          FROM (SELECT {columns} FROM {rows}))))
    """


class ShardPacker:
    """Greedy packing in line order within all three limits, fed the lines' running byte and token
    totals chunk by chunk: a shard may span chunks, so memory stays one chunk however many lines
    there are, and the work per shard is a binary search (polars), not a loop over lines. Every
    single line must fit on its own (the quarantine rules guarantee it)."""

    def __init__(self, max_bytes: int, max_tokens: int, max_requests: int):
        self.max_bytes, self.max_tokens, self.max_requests = max_bytes, max_tokens, max_requests
        self.starts: list[int] = []  # the index of each shard's first line found so far
        self.lines = 0  # lines fed so far
        self._start = 0  # the open shard's first line
        self._base_b = self._base_t = 0  # running totals before it
        self._before_b = self._before_t = 0  # running totals at the last line fed

    def feed(self, cum_b: pl.Series, cum_t: pl.Series) -> None:
        """The next chunk of running totals (cumulative over every line fed, not per chunk).
        A start found at the chunk's end (a shard closed exactly at its last line) belongs to the
        next chunk's first line; with no next chunk it opens nothing (see `closed_starts`)."""
        n, offset = len(cum_b), self.lines
        if n == 0:
            return
        if not self.starts:
            self.starts.append(0)
        while True:
            # Where the open shard must end: a limit crossed inside this chunk is known; one not
            # crossed here lies at or beyond the chunk's end.
            ends = [self._start + self.max_requests]
            i_b = int(cum_b.search_sorted(self._base_b + self.max_bytes, side="right"))
            i_t = int(cum_t.search_sorted(self._base_t + self.max_tokens, side="right"))
            ends += [offset + i for i in (i_b, i_t) if i < n]
            end = min(ends)
            if end > offset + n:
                break  # the open shard goes on into the next chunk
            self._start = max(end, self._start + 1)
            self.starts.append(self._start)
            k = self._start - 1 - offset  # the new shard's totals start after line start-1
            self._base_b, self._base_t = (int(cum_b[k]), int(cum_t[k])) if k >= 0 else (self._before_b, self._before_t)
        self.lines += n
        self._before_b, self._before_t = int(cum_b[-1]), int(cum_t[-1])

    @property
    def running_totals(self) -> tuple[int, int]:
        """(bytes, tokens) over every line fed: the next chunk's cumulative sums start from here."""
        return self._before_b, self._before_t

    def closed_starts(self) -> list[int]:
        """Every shard's first line once all lines are fed."""
        return [s for s in self.starts if s < self.lines]


def shard_starts(
    cumulative: Iterable[tuple[pl.Series, pl.Series]], max_bytes: int, max_tokens: int, max_requests: int
) -> list[int]:
    """The index of each shard's first line for the running totals `cumulative` (consecutive
    chunks, in line order), packed greedily within all three limits."""
    packer = ShardPacker(max_bytes, max_tokens, max_requests)
    for cum_b, cum_t in cumulative:
        packer.feed(cum_b, cum_t)
    return packer.closed_starts()


SELECTED_VARIABLE = "_shards_selected_rows"

# The lines stream out of DuckDB in batches of about STREAM_BATCH_BYTES (at most STREAM_BATCH_ROWS
# lines): a batch costs several times its size outside DuckDB's pool (result chunks, the Arrow batch,
# the writer thread's two), and smaller batches lower the peak at no cost in time. Sized by bytes, so
# long prompts stream in fewer lines per batch.
STREAM_BATCH_BYTES = 16 << 20
STREAM_BATCH_ROWS = 1 << 16
MIN_STREAM_BATCH_ROWS = 64
LINE_ENVELOPE_BYTES = 1024  # allowance for a line's bytes beyond its prompt text (JSON, parameters)
STREAM_SAMPLE_ROWS = 2048


def stream_batch_rows(conn, manifest_uri: str) -> int:
    """Lines per streamed batch for the frozen manifest at `manifest_uri`: about STREAM_BATCH_BYTES
    of lines, from the size of its first STREAM_SAMPLE_ROWS prompts (a read of its first row group;
    the Parquet's page sizes are no measure: repeated texts are dictionary-encoded)."""
    prompt_bytes = (
        scalar(
            conn,
            f"SELECT avg(strlen(prompt_text)) FROM (SELECT prompt_text FROM "
            f"read_parquet({sql_literal(manifest_uri)}) LIMIT {STREAM_SAMPLE_ROWS})",
        )
        or 0
    )
    per_line = prompt_bytes + LINE_ENVELOPE_BYTES
    return min(STREAM_BATCH_ROWS, max(MIN_STREAM_BATCH_ROWS, int(STREAM_BATCH_BYTES // per_line)))


def cut_shards(wh: Warehouse, task: ResolvedTask, partition_date: str, retries: bool = True) -> ShardSummary:
    """Cut every manifest item not yet in a shard (attempt 1) and, with `retries`, every item whose
    retry is due (its next attempt, from the retry ledger) into new shards. Retry shards hold at
    most `retry.shrink`^(attempt-1) of the provider's requests per shard."""
    spec = task.spec
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    tid = sql_literal(task_id)
    with wh.connect() as conn:
        uri = frozen_manifest(conn, wh.files, task_id)
        if uri is None:
            raise ValueError(
                f"task {task_id}: no frozen manifest; materialize the manifest asset for {partition_date} first"
            )
        ledger_shards.drop_unregistered_lines(conn, task_id)  # a cut cut off between its two commits
        # The items to cut, by number when the frozen Parquet numbers its rows: narrower than the
        # custom_id strings, and the frozen rows are found by an integer join.
        numbered = "item_no_base" in frozen_columns(conn, uri)  # False: frozen before item numbers
        key = "item_no" if numbered else "custom_id"
        due = f"UNION ALL SELECT {key}, next_attempt AS attempt FROM ({due_retries_sql(tid)})" if retries else ""
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _todo AS
            SELECT m.{key}, {FIRST_ATTEMPT} AS attempt
            FROM ledger.manifest_item m
            WHERE m.task_id = {tid} AND m.superseded_at IS NULL
              AND m.custom_id NOT IN (SELECT custom_id FROM ledger.quarantine)
              AND m.custom_id NOT IN (SELECT custom_id FROM ledger.shard_line WHERE task_id = {tid})
            {due}
        """)
        attempts = [r[0] for r in conn.execute("SELECT DISTINCT attempt FROM _todo ORDER BY 1").fetchall()]
        shards: list[dict] = []
        with _Spool(wh) as spool:
            for attempt in attempts:
                shards += _write_attempt(conn, wh, task, task_id, uri, attempt, spool, key)
            spool.close()
            for s in shards:  # uploaded with object storage: a crash before the commit below leaves an orphan
                s["path"] = wh.files.keep(Path(s["path"]), "shards", task_id, s["sha256"])
            # Recorded once every file is written and hashed, in one transaction.
            with transaction(conn):
                # Lines of a manifest frozen before item numbers take theirs from the manifest items.
                quarantined = ledger_shards.insert_quarantine(
                    conn,
                    task_id,
                    _with_item_no(
                        f"SELECT custom_id, item_no, reason_code, reason FROM {spool.read('quarantined')}",
                        numbered,
                        task_id,
                    ),
                )
                if shards:
                    _add_shard_costs(conn, shards, spool.read("lines"), tid, key)
                    ledger_shards.insert_shards(
                        conn,
                        task_id=task_id,
                        provider=spec.provider,
                        endpoint=spec.endpoint,
                        model=spec.model,
                        rows=pa.Table.from_pylist(
                            [{c: s[c] for c in ledger_shards.SHARD_COLUMNS} for s in shards],
                            schema=ledger_shards.SHARD_SCHEMA,
                        ),
                    )
                    # Each line takes its shard's id from the shard it was written into, looked up
                    # by number in the attempt's list of ids (a projection, not a join): the lines
                    # are recorded in the spool's order, shard after shard, so ingest finds a shard's
                    # lines in one span of the table (a join's output order is not kept).
                    for attempt in sorted({s["attempt"] for s in shards}):
                        cut = sorted((s for s in shards if s["attempt"] == attempt), key=lambda s: s["shard_no"])
                        first = cut[0]["shard_no"]
                        if [s["shard_no"] for s in cut] != list(range(first, first + len(cut))):  # by _ShardFiles
                            raise RuntimeError(f"cut {task_id}: attempt {attempt}'s shard numbers are not consecutive")
                        ledger_shards.insert_shard_lines(
                            conn,
                            task_id,
                            attempt,
                            _with_item_no(
                                f"""
                            SELECT ($shard_ids)[l.shard_no - $first_shard_no + 1] AS shard_id, l.line_no,
                                   l.custom_id, l.item_no, l.request_id, l.line_bytes, l.est_tokens
                            FROM {spool.read("lines")} l
                            WHERE l.attempt = {attempt}
                        """,
                                numbered,
                                task_id,
                            ),
                            {"shard_ids": [s["shard_id"] for s in cut], "first_shard_no": first},
                        )
                # Only a partition that has not been submitted yet moves to SHARDED (never backwards).
                set_task_status(conn, task_id, TaskStatus.SHARDED, only_from=TaskStatus.FROZEN)
        lines = sum(s["line_count"] for s in shards)
        total = ledger_shards.shard_count(conn, task_id)
        conn.execute("DROP TABLE _todo")
        return ShardSummary(task_id, shards, lines, quarantined, total)


def _add_shard_costs(conn, shards: list[dict], lines: str, tid: str, key: str) -> None:
    """Each shard's `est_cost`: the sum of its items' estimates (NULL when the model has no price),
    recorded with the shard so the budget sums shards, not every partition's lines and items."""
    cost = {
        (attempt, shard_no): est
        for attempt, shard_no, est in conn.execute(f"""
            SELECT l.attempt, l.shard_no, sum(m.est_cost)
            FROM {lines} l
            JOIN (SELECT {key}, est_cost FROM ledger.manifest_item WHERE task_id = {tid} AND superseded_at IS NULL) m
              USING ({key})
            GROUP BY ALL""").fetchall()
    }
    for shard in shards:
        shard["est_cost"] = cost.get((shard["attempt"], shard["shard_no"]))


def _with_item_no(rows: str, numbered: bool, task_id: str) -> str:
    """`rows` (with custom_id and item_no), item numbers looked up in the manifest items when the
    frozen manifest had none (frozen before item numbers)."""
    if numbered:
        return rows
    return (
        f"SELECT _r.* REPLACE (m.item_no AS item_no) FROM ({rows}) _r LEFT JOIN ledger.manifest_item m "
        f"ON m.custom_id = _r.custom_id AND m.task_id = {sql_literal(task_id)}"
    )


class _Spool:
    """Parquet files for the rows a cut records at its end: its lines (with shard and line number)
    and its quarantined items. Written batch by batch as the lines stream, so neither memory nor
    DuckDB's pool holds them (kept in DuckDB until the commit, a large cut's rows outgrow its memory
    limit); removed when the cut ends."""

    SCHEMAS = {
        "lines": pa.schema(
            [
                ("custom_id", pa.string()),
                ("item_no", pa.int64()),
                ("attempt", pa.int32()),
                ("request_id", pa.string()),
                ("line_bytes", pa.int64()),
                ("est_tokens", pa.int64()),
                ("shard_no", pa.int64()),
                ("line_no", pa.int64()),
            ]
        ),
        "quarantined": pa.schema(
            [("custom_id", pa.string()), ("item_no", pa.int64()), ("reason_code", pa.string()), ("reason", pa.string())]
        ),
    }

    def __init__(self, wh: Warehouse):
        _sweep_abandoned_spools(wh.files.scratch)
        self.folder = wh.files.scratch / f"cut-{os.getpid()}-{uuid.uuid4().hex}"
        self.folder.mkdir(parents=True)
        self.paths = {name: self.folder / f"{name}.parquet" for name in self.SCHEMAS}
        self._writers = {name: pq.ParquetWriter(self.paths[name], schema) for name, schema in self.SCHEMAS.items()}

    def write(self, name: str, table: pa.Table) -> None:
        self._writers[name].write_table(table.cast(self.SCHEMAS[name]))

    def close(self) -> None:
        while self._writers:
            self._writers.popitem()[1].close()

    def read(self, name: str) -> str:
        return f"read_parquet({sql_literal(str(self.paths[name]))})"

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _sweep_abandoned_spools(folder: Path) -> None:
    """Remove the spools of cuts whose process is gone (killed before its cleanup ran); a live
    process's spool (another partition being cut now) is left alone."""
    for spool in folder.glob("cut-*-*"):
        try:
            os.kill(int(spool.name.split("-")[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(spool, ignore_errors=True)
        except (ValueError, PermissionError):
            continue  # not ours to judge: a name we did not make, or another user's live process


class _ShardFiles:
    """The shard files of one attempt, written as the lines stream by. Each shard's lines, bytes and
    estimated tokens are counted here; the files are written and hashed on one background thread
    (both release the GIL), so DuckDB renders the next batch meanwhile. At most two batches are
    in flight: `batch_done` waits for the one before."""

    def __init__(self, wh: Warehouse, task_id: str, attempt: int, first_shard_no: int):
        self.wh, self.task_id, self.attempt, self.first_shard_no = wh, task_id, attempt, first_shard_no
        self.shards: list[dict] = []
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="shard-writer")
        self._previous: list[Future] = []
        self._current: list[Future] = []
        self._file = self._hash = self._open_shard = None  # the writer thread's

    def open_next(self) -> None:
        shard_no = self.first_shard_no + len(self.shards)
        shard_id = f"{self.task_id}_a{self.attempt}_s{shard_no:04d}"
        path = self.wh.files.new_path("shards", self.task_id, f"{shard_id}.jsonl")
        shard = {
            "shard_no": shard_no,
            "shard_id": shard_id,
            "attempt": self.attempt,
            "path": str(path),
            "line_count": 0,
            "byte_count": 0,
            "est_tokens": 0,
        }
        self.shards.append(shard)
        self._current.append(self._pool.submit(self._open, shard))

    def write(self, data: memoryview, lines: int, est_tokens: int) -> None:
        s = self.shards[-1]
        s["line_count"] += lines
        s["byte_count"] += len(data)
        s["est_tokens"] += est_tokens
        self._current.append(self._pool.submit(self._write, data))

    def batch_done(self) -> None:
        for f in self._previous:
            f.result()  # raises the writer's error, if any
        self._previous, self._current = self._current, []

    def close(self) -> None:
        """Finish the last file and wait for every write (raising the first error)."""
        try:
            self._current.append(self._pool.submit(self._close_file))
            for f in self._previous + self._current:
                f.result()
        finally:
            self._pool.shutdown(wait=True)

    # on the writer thread
    def _open(self, shard: dict) -> None:
        self._close_file()
        self._file, self._hash, self._open_shard = open(shard["path"], "wb"), hashlib.sha256(), shard

    def _write(self, data: memoryview) -> None:
        self._file.write(data)
        self._hash.update(data)

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._open_shard["sha256"] = self._hash.hexdigest()
            self._file = self._hash = self._open_shard = None


def _line_bytes(lines: pa.Array) -> tuple[memoryview, memoryview, int]:
    """(offsets, data, first) of a string array: line i is data[offsets[first + i]:offsets[first + i + 1]],
    so a run of consecutive lines is one slice of its buffer, written without a copy."""
    if not (pa.types.is_string(lines.type) or pa.types.is_large_string(lines.type)):
        lines = lines.cast(pa.large_string())
    _, offsets, data = lines.buffers()
    return (
        memoryview(offsets).cast("q" if pa.types.is_large_string(lines.type) else "i"),
        memoryview(data),
        lines.offset,
    )


def _write_attempt(
    conn, wh: Warehouse, task: ResolvedTask, task_id: str, uri: str, attempt: int, spool: _Spool, key: str
) -> list[dict]:
    """Render one attempt's lines of `_todo` in ONE streamed pass over the frozen Parquet: quarantine
    the bad ones, pack the good ones into shards in the order they stream (the manifest's row order)
    and write each shard's file as its lines arrive. The lines are never stored: memory stays one
    batch, and each line is rendered once. The lines and the quarantined items go to `spool`.
    `_todo` names its items by `key`: item_no (a frozen row's number, frozen_item_no_sql) or, for
    a manifest frozen before item numbers, custom_id. Returns the shards (not yet recorded)."""
    limits = task.limits
    max_requests = limits.max_requests_per_shard
    if attempt > FIRST_ATTEMPT:  # retries go in smaller shards (e.g. the unfinished rest of an expired batch)
        max_requests = max(1, int(max_requests * task.spec.retry.shrink ** (attempt - 1)))
    next_shard_no = ledger_shards.next_shard_no(conn, task_id, attempt)
    # The attempt's rows as a bitstring over the frozen Parquet's row numbers, so the lines stream
    # out of a filtered scan in the Parquet's row order (the order of a join's output is not kept).
    rows = scalar(conn, f"SELECT count(*) FROM read_parquet({sql_literal(uri)})")
    if rows == 0:
        return []
    packer = ShardPacker(limits.max_shard_bytes, limits.max_enqueued_tokens, max_requests)
    files = _ShardFiles(wh, task_id, attempt, next_shard_no)
    conn.execute(f"""
        SET VARIABLE {SELECTED_VARIABLE} = (
            SELECT bitstring_agg(p.file_row_number, 0, {rows - 1})
            FROM (SELECT {key} FROM _todo WHERE attempt = {int(attempt)}) t
            JOIN read_parquet({sql_literal(uri)}, file_row_number = true) p
              ON t.{key} = {frozen_item_no_sql("p") if key == "item_no" else "p.custom_id"})
    """)
    batch_rows = stream_batch_rows(conn, uri)  # before the query: its result holds the connection
    # The newline is part of each good line, so a run of lines is one slice of the batch's buffer.
    reader = conn.sql(f"""
        SELECT custom_id, item_no, request_id, line_bytes, est_tokens, reason_code, reason,
               CASE WHEN reason_code IS NULL THEN line || chr(10) END AS line
        FROM ({rendered_lines_sql(conn, task, uri, None, selected=(attempt, SELECTED_VARIABLE))})
        WHERE getvariable({sql_literal(SELECTED_VARIABLE)}) IS NOT NULL
    """).to_arrow_reader(batch_rows)
    try:
        for batch in reader:
            _write_batch(packer, files, spool, batch, attempt, next_shard_no)
            files.batch_done()
    finally:
        reader.close()  # an open result keeps the connection busy: close it before anything else runs
        conn.execute(f"RESET VARIABLE {SELECTED_VARIABLE}")
        files.close()
    return files.shards


def _write_batch(
    packer: ShardPacker, files: _ShardFiles, spool: _Spool, batch: pa.RecordBatch, attempt: int, first_shard_no: int
) -> None:
    """Spool the batch's bad lines for quarantine; pack the good ones, write them into their shard
    files and spool them as the cut's lines."""
    good = pc.is_null(batch.column("reason_code"))
    narrow = batch.select(["custom_id", "item_no", "request_id", "line_bytes", "est_tokens"])
    rows = batch.num_rows
    n = pc.sum(good).as_py() or 0
    if n < rows:
        spool.write(
            "quarantined",
            pa.Table.from_batches(
                [batch.filter(pc.invert(good)).select(["custom_id", "item_no", "reason_code", "reason"])]
            ),
        )
        narrow = narrow.filter(good)
    if n == 0:
        return
    offset = packer.lines
    line_bytes = pl.Series(narrow.column("line_bytes"), dtype=pl.Int64)
    est_tokens = pl.Series(narrow.column("est_tokens"), dtype=pl.Int64)
    before_b, before_t = packer.running_totals
    packer.feed((line_bytes + 1).cum_sum() + before_b, est_tokens.cum_sum() + before_t)  # + 1: the newline
    # The shards this batch's good lines fall in: the open one (unless a shard starts at its first
    # line) and those starting inside it. A bad line's `line` is NULL, which takes no bytes in the
    # buffer, so each run of a shard's good lines is one slice of it, bad lines in between or not.
    starts = [s for s in packer.starts if offset <= s < offset + n]
    position = pl.Series(good).arg_true() if n < rows else None  # row of the k-th good line

    def row(k: int) -> int:
        return rows if k == n else (k if position is None else int(position[k]))

    offsets, data, first = _line_bytes(batch.column("line"))
    cuts = [0] + [s - offset for s in starts if s > offset] + [n]
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        if i > 0 or (starts and starts[0] == offset):
            files.open_next()
        files.write(
            data[offsets[first + row(a)] : offsets[first + row(b)]], b - a, int(est_tokens.slice(a, b - a).sum())
        )
    # Each line's shard (the last start at or before it) and its line number in that shard.
    idx = pl.int_range(offset, offset + n, dtype=pl.Int64, eager=True)
    all_starts = pl.Series(packer.starts, dtype=pl.Int64)
    shard = all_starts.search_sorted(idx, side="right") - 1
    spool.write(
        "lines",
        pa.table(
            {
                "custom_id": narrow.column("custom_id"),
                "item_no": narrow.column("item_no"),
                "attempt": pa.array([attempt] * n, pa.int32()),
                "request_id": narrow.column("request_id"),
                "line_bytes": line_bytes.to_arrow(),
                "est_tokens": est_tokens.to_arrow(),
                "shard_no": (shard + first_shard_no).to_arrow(),
                "line_no": (idx - all_starts.gather(shard) + 1).to_arrow(),
            }
        ),
    )


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
    wh = wh.of(task_id)  # its partition's store
    problems: list[str] = []
    with wh.connect() as conn:
        lines_of = dict(
            conn.execute(
                "SELECT shard_id, count(*) FROM ledger.shard_line WHERE task_id = ? GROUP BY shard_id", [task_id]
            ).fetchall()
        )
        shards = [
            {**s, "ledger_lines": lines_of.get(s["shard_id"], 0)} for s in ledger_shards.partition_shards(conn, task_id)
        ]
        items = scalar(
            conn, "SELECT count(*) FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [task_id]
        )
        quarantined = scalar(conn, "SELECT count(*) FROM ledger.quarantine WHERE task_id = ?", [task_id])
        # Lines of items a refreeze superseded stay in their (already cut) shards but are no items.
        superseded_lines = scalar(
            conn,
            """
            SELECT count(*) FROM ledger.shard_line WHERE task_id = $t AND attempt = 1 AND custom_id IN
                (SELECT custom_id FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NOT NULL)""",
            {"t": task_id},
        )
        superseded_quarantined = scalar(
            conn,
            """
            SELECT count(*) FROM ledger.quarantine WHERE task_id = $t AND custom_id IN
                (SELECT custom_id FROM ledger.manifest_item WHERE task_id = $t AND superseded_at IS NOT NULL)""",
            {"t": task_id},
        )
    for s in shards:
        sid = s["shard_id"]
        if s.get("purged_at") is not None:
            continue  # purged by retention after the partition was final: its hash stays in the ledger
        try:
            path = wh.files.local(s["path"])
        except FileNotFoundError:
            path = Path(s["path"])
        if not path.is_file():
            problems.append(f"{sid}: file {s['path']} is missing; re-materialize shards after restoring it")
            continue
        if file_sha256(path) != s["sha256"]:
            problems.append(f"{sid}: file {path} changed after it was cut (sha256 mismatch)")
        if path.stat().st_size != s["byte_count"] or s["byte_count"] > limits.max_shard_bytes:
            problems.append(
                f"{sid}: {path.stat().st_size} bytes on disk, {s['byte_count']} recorded, "
                f"limit {limits.max_shard_bytes}"
            )
        lines = _count_lines(path)
        if not (lines == s["line_count"] == s["ledger_lines"]) or lines > limits.max_requests_per_shard:
            problems.append(
                f"{sid}: {lines} lines on disk, {s['line_count']} recorded, {s['ledger_lines']} in shard_line, "
                f"limit {limits.max_requests_per_shard}"
            )
        if s["est_tokens"] > limits.max_enqueued_tokens:
            problems.append(
                f"{sid}: {s['est_tokens']} estimated tokens > max_enqueued_tokens {limits.max_enqueued_tokens}"
            )
    shard_lines = sum(s["ledger_lines"] for s in shards if s["attempt"] == FIRST_ATTEMPT) - superseded_lines
    retry_lines = sum(s["ledger_lines"] for s in shards if s["attempt"] != FIRST_ATTEMPT)
    quarantined -= superseded_quarantined
    if shard_lines + quarantined != items:
        problems.append(f"shard lines {shard_lines} + quarantined {quarantined} != manifest items {items}")
    return problems, {
        "manifest_items": items,
        "shard_lines": shard_lines,
        "retry_lines": retry_lines,
        "quarantined": quarantined,
        "shards": len(shards),
    }
