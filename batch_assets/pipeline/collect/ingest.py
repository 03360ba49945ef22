"""Stage 5 — download terminal jobs' result files and load every line by custom_id.

Files are streamed to disk under data/raw/ (with object storage: uploaded, see storage/run_files.py)
and kept (audit, re-parsing). Each line is keyed by the provider request id it carries, mapped back
to its custom_id through ledger.shard_line — never by line order. Lines that match no request of the
job are orphans; a custom_id seen again is a duplicate; lines that are not JSON are malformed (copied
verbatim into the ledger). All are recorded, none dropped. A file is ingested once: re-importing it
adds nothing.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from batch_assets import progress
from batch_assets.ledger.job_reads import jobs_to_download
from batch_assets.ledger.jobs import mark_downloaded, set_collect_error
from batch_assets.ledger.partition_control import partition_views
from batch_assets.ledger.results import insert_raw_file, insert_raw_results, mark_files_ingested
from batch_assets.ledger.tasks import task_row
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline import faultpoints
from batch_assets.pipeline.collect.collect_runs import start_collect_run
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.files import file_sha256
from batch_assets.providers.contract import BatchProvider, JobRef
from batch_assets.providers.registry import wire_format
from batch_assets.providers.retry import Backoff, call_with_retry
from batch_assets.providers.wire import WireFormat
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal

SLOW_PATH_BATCH_LINES = 100_000
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestSummary:
    task_id: str
    downloaded_files: int
    ingested_files: int
    lines: int
    by_status: dict[str, int]
    remote_files_deleted: int = 0  # provider-side files deleted by this run (retention)
    remote_deletions_failed: int = 0  # jobs whose deletion failed: pending, tried again next time


def _safe_name(job_key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", job_key)


class CollectError(RuntimeError):
    """Some of a partition's terminal jobs could not be downloaded (recorded in collect_error)."""


# Transient download errors (429, 5xx, timeouts, dropped connections) are retried with this backoff.
DOWNLOAD_BACKOFF = Backoff(attempts=4, base_s=1.0, max_s=30.0)
DOWNLOAD_SLEEP = time.sleep  # tests replace it to retry without waiting


def download_results(wh: Warehouse, task_id: str, adapter: BatchProvider, errors: dict[str, str] | None = None) -> int:
    """Stream the results (output and error files, or the results stream) of the task's terminal
    jobs not downloaded yet to data/raw/<task_id>/; returns the number of files.

    A job reported COMPLETED whose results the provider cannot serve yet is left for later. A transient
    error is retried with backoff; a job that still fails keeps its place (not downloaded, its
    `collect_error` recorded) and the other jobs go on. Failures go into `errors` (job_key ->
    error) when given, else the first is raised once every job was tried."""
    wh = wh.of(task_id)  # its partition's store
    with wh.connect() as conn:
        jobs = jobs_to_download(conn, task_id)
    failed: dict[str, str] = {}
    count = 0
    with progress.task(f"{task_id}: download results", total=len(jobs), unit="jobs") as bar:
        for job in jobs:
            count += _download_job(wh, task_id, adapter, job, failed)
            bar.advance()
    if errors is not None:
        errors.update(failed)
    elif failed:
        raise CollectError("; ".join(f"{k}: {v}" for k, v in failed.items()))
    return count


def _download_job(wh: Warehouse, task_id: str, adapter: BatchProvider, job: dict, failed: dict[str, str]) -> int:
    """Download one job's results and record its files (returns how many); a failure goes into `failed`."""
    wh = wh.of(task_id)  # its partition's store
    ref = JobRef(
        job["provider_batch_id"],
        output_file_id=job["output_file_id"],
        error_file_id=job["error_file_id"],
        input_file_id=job["input_file_id"],
    )
    try:
        results = call_with_retry(
            lambda: adapter.stream_results(ref, wh.files.new_dir("raw", task_id), _safe_name(job["job_key"])),
            backoff=DOWNLOAD_BACKOFF,
            sleep=lambda s: DOWNLOAD_SLEEP(s),
            on_retry=lambda n, exc, delay: log.warning(
                "%s: download failed (%s: %s), try %d again in %.1f s",
                job["job_key"],
                type(exc).__name__,
                exc,
                n + 1,
                delay,
            ),
        )
    except Exception as exc:
        failed[job["job_key"]] = f"download failed: {type(exc).__name__}: {exc}"
        with wh.connect() as conn:
            set_collect_error(conn, job["job_key"], failed[job["job_key"]])
        return 0
    files = []
    for r in results:  # uploaded with object storage: a crash before the commit below leaves an orphan
        sha = file_sha256(r.path)
        location = wh.files.keep(r.path, "raw", task_id, sha)
        files.append(
            (f"{job['job_key']}:{r.kind}", r.kind, r.provider_file_id, location, sha, r.byte_count, r.unmatched_lines)
        )
    faultpoints.reached("download.file_written")
    with wh.connect() as conn, transaction(conn):
        for file_key, kind, file_id, path, sha, size, unmatched in files:
            insert_raw_file(
                conn,
                file_key=file_key,
                job_key=job["job_key"],
                task_id=task_id,
                kind=kind,
                provider_file_id=file_id,
                path=path,
                sha256=sha,
                byte_count=size,
                unmatched_lines=unmatched,
            )
        mark_downloaded(conn, job["job_key"])
    return len(files)


def _line_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """Slow path for damaged files: every non-blank line with its number, streamed in batches."""
    numbers: list[int] = []
    lines: list[str] = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not text.strip():
                continue
            numbers.append(n)
            lines.append(text)
            if len(lines) >= SLOW_PATH_BATCH_LINES:
                yield pa.RecordBatch.from_pydict({"line_no": numbers, "line": lines})
                numbers, lines = [], []
    yield pa.RecordBatch.from_pydict({"line_no": pa.array(numbers, pa.int64()), "line": pa.array(lines, pa.string())})


def stage_result_file(conn: duckdb.DuckDBPyConnection, path: str, fmt: WireFormat) -> None:
    """Load a result file into temp table _in (line_no, request_id, envelope fields, malformed_line)."""
    columns = "{" + ", ".join(f"'{k}': '{v}'" for k, v in fmt.result_columns.items()) + "}"
    try:
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _in AS
            SELECT row_number() OVER () AS line_no, {fmt.envelope_sql("l")}, NULL::VARCHAR AS malformed_line
            FROM read_json({sql_literal(path)}, format='newline_delimited', columns={columns}) l
        """)
        return
    except duckdb.Error:
        pass  # a malformed or truncated line: take the line-by-line path below
    reader = pa.RecordBatchReader.from_batches(  # noqa: F841 -- read by name in the SQL below (replacement scan)
        pa.schema([("line_no", pa.int64()), ("line", pa.string())]), _line_batches(Path(path))
    )
    # Same columns and types as the fast path; a value of the wrong shape becomes NULL.
    fields = ", ".join(
        f"j ->> '$.{k}' AS {k}"
        if v == "VARCHAR"
        else f"j -> '$.{k}' AS {k}"
        if v == "JSON"
        else f"TRY_CAST(j -> '$.{k}' AS {v}) AS {k}"
        for k, v in fmt.result_columns.items()
    )
    conn.execute(f"""
        CREATE OR REPLACE TEMP TABLE _in AS
        SELECT line_no, {fmt.envelope_sql("l")}, CASE WHEN j IS NULL THEN line END AS malformed_line
        FROM (SELECT line_no, line, j, {fields}
              FROM (SELECT line_no, line,
                           CASE WHEN json_valid(line) AND json_type(line) = 'OBJECT' THEN line::JSON END AS j
                    FROM reader)) l
    """)


INGEST_BATCH_BYTES = 256 << 20  # result-file bytes staged per transaction (bounds memory)
# DuckDB stores a table in row groups of this many rows, and each insert leaves its last one partly
# filled. A checkpoint merges runs of adjacent row groups that fit into fewer: an insert whose last
# row group is at most half full makes it rewrite the runs around it, most of what an ingest wrote.
ROW_GROUP_ROWS = 122_880


# A planned batch ends where its expected line count leaves the insert's last row group at least
# this far from half full and from full (the expectation can miss by a few lines: see planned_batch).
PLAN_MARGIN_ROWS = ROW_GROUP_ROWS // 16


def expected_lines(files: list[dict]) -> list[int]:
    """The lines each of `files` (in ingest order, each with job_key and shard_lines) is expected to
    hold: a job's files together answer its shard's requests once each, so the first file of a
    job is given the shard's line count and the job's other files (its error file) none. Only a
    plan: lines missing or repeated by the provider make it miss (aligned_prefix checks the truth)."""
    counts, previous = [], None
    for f in files:
        counts.append(f["shard_lines"] if f["job_key"] != previous else 0)
        previous = f["job_key"]
    return counts


def planned_batch(files: list[dict], expected: list[int], limit: int | None = None) -> int:
    """How many of `files` (the next ones to ingest, in order; `expected` their expected_lines) to
    stage as the next batch: at most INGEST_BATCH_BYTES of them (one file at least), and of those
    the most that end at a job's end with an expected line count leaving the insert's last row
    group more than half full (PLAN_MARGIN_ROWS from either edge), so that aligned_prefix keeps the
    whole batch (a batch of a fixed number of bytes leaves its unaligned tail for the next batch to
    read again). All of them when they fit (the last batch has nothing after it to align with);
    every file that fits when no end qualifies."""
    limit = INGEST_BATCH_BYTES if limit is None else limit
    fit, size = 0, 0
    for f in files:
        if fit and size + f["byte_count"] > limit:
            break
        size += f["byte_count"]
        fit += 1
    if fit == len(files):
        return fit
    best, total = 0, 0
    for k in range(fit):
        total += expected[k]
        left = total % ROW_GROUP_ROWS
        if (
            files[k + 1]["job_key"] != files[k]["job_key"]
            and ROW_GROUP_ROWS // 2 + PLAN_MARGIN_ROWS <= left <= ROW_GROUP_ROWS - PLAN_MARGIN_ROWS
        ):
            best = k + 1
    return best or fit


def aligned_prefix(line_counts: list[int]) -> int:
    """How many of a staged batch's files (their line counts, in order) to insert now: the most
    whose lines leave the insert's last row group empty or more than half full, so that the
    checkpoint finds nothing to merge; all of them when no such prefix exists. The files after it
    are staged again with the next batch (read again: lines kept from one staging and added to the
    next were written as a second partial row group)."""
    total, best = 0, len(line_counts)
    for k, lines in enumerate(line_counts, start=1):
        total += lines
        if total % ROW_GROUP_ROWS == 0 or total % ROW_GROUP_ROWS > ROW_GROUP_ROWS // 2:
            best = k
    return best


def _stage_batch(conn: duckdb.DuckDBPyConnection, batch: list[dict], fmt: WireFormat) -> None:
    """Load a batch of result files into temp table _in (file_key, line_no, envelope, malformed_line).

    Fast path: one read_json over all the batch's files. If any file is damaged, fall back to
    stage_result_file per file (which takes the line-by-line path only for the damaged ones)."""
    columns = "{" + ", ".join(f"'{k}': '{v}'" for k, v in fmt.result_columns.items()) + "}"
    paths = "[" + ", ".join(sql_literal(f["path"]) for f in batch) + "]"
    try:
        # No row_number() here: a window keeps the read on one thread. The table keeps the lines
        # in file order (insertion order is preserved), so its row ids count them.
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _raw_in AS
            SELECT filename, {fmt.envelope_sql("l")}, NULL::VARCHAR AS malformed_line
            FROM read_json({paths}, format='newline_delimited', columns={columns}, filename=true) l
        """)
    except duckdb.Error:
        conn.execute("DROP TABLE IF EXISTS _raw_in")
        first = True
        for f in batch:
            stage_result_file(conn, f["path"], fmt)
            verb = "CREATE OR REPLACE TEMP TABLE _in_all AS" if first else "INSERT INTO _in_all"
            conn.execute(f"{verb} SELECT {sql_literal(f['file_key'])} AS file_key, * FROM _in")
            first = False
        conn.execute("DROP TABLE _in; ALTER TABLE _in_all RENAME TO _in")
        return
    # A line's number is its row id minus that of its file's first line (the ids are consecutive
    # within the table). _in is a table, not a view over _raw_in: an insert from such a view keeps
    # its rows in the transaction until the commit, which makes the commit slow.
    conn.execute("""
        CREATE OR REPLACE TEMP TABLE _in AS
        SELECT f.file_key, r.rowid - s.first_row + 1 AS line_no, r.* EXCLUDE (filename)
        FROM _raw_in r JOIN (SELECT filename, min(rowid) AS first_row FROM _raw_in GROUP BY filename) s USING (filename)
             JOIN _files f ON f.path = r.filename
    """)
    conn.execute("DROP TABLE _raw_in")


def _line_spans(conn: duckdb.DuckDBPyConnection, shard_ids: set[str]) -> dict[str, tuple[int, int]]:
    """Each shard's first and last row number in ledger.shard_line (one read of the table). A cut
    writes a shard's lines together, so a shard's span holds little else; nothing deletes lines
    while ingest holds the warehouse, so the row numbers stay put."""
    if not shard_ids:
        return {}
    listed = ", ".join(sql_literal(s) for s in sorted(shard_ids))
    return {
        sid: (lo, hi)
        for sid, lo, hi in conn.execute(
            f"SELECT shard_id, min(rowid), max(rowid) FROM ledger.shard_line "
            f"WHERE shard_id IN ({listed}) GROUP BY shard_id"
        ).fetchall()
    }


def _rowid_range(spans: dict[str, tuple[int, int]], shard_ids: list[str]) -> str:
    """A row-number range around the lines of `shard_ids` (a scan skips what lies outside it), or
    TRUE when none of them has lines. The shard filter itself stays: the range only narrows."""
    found = [spans[s] for s in shard_ids if s in spans]
    if not found:
        return "TRUE"
    return f"rowid BETWEEN {min(lo for lo, _ in found)} AND {max(hi for _, hi in found)}"


def ingest_files(wh: Warehouse, task_id: str, fmt: WireFormat | None = None) -> tuple[int, int]:
    """Ingest every downloaded, not yet ingested file of the task. Returns (files, lines).

    The result line format is the task's (from the ledger) unless given. Files are staged and
    inserted in batches of at most INGEST_BATCH_BYTES (planned_batch), one transaction per batch."""
    wh = wh.of(task_id)  # its partition's store
    files_done = lines_done = 0
    tid = sql_literal(task_id)
    with contextlib.ExitStack() as stack:
        conn = stack.enter_context(wh.connect())
        stack.enter_context(partition_views(conn, task_id))  # read once: ingest writes no job or shard row
        if fmt is None:
            row = task_row(conn, task_id)
            fmt = wire_format(row["provider"], row["endpoint"])
        files = fetch_dicts(
            conn,
            """
            SELECT f.file_key, f.job_key, f.path, f.byte_count, j.shard_id, s.attempt, s.line_count AS shard_lines
            FROM ledger.raw_file f JOIN part_job j USING (job_key) JOIN part_shard s USING (shard_id)
            WHERE f.task_id = ? AND f.ingested_at IS NULL ORDER BY f.job_key, f.kind DESC
        """,
            [task_id],
        )
        for f in files:  # read from this machine's disk: the file itself, or its cached copy
            f["path"] = str(wh.files.local(f["path"]))
        bar = stack.enter_context(
            progress.task(f"{task_id}: ingest results", total=sum(f["byte_count"] for f in files), unit="bytes")
        )
        spans = _line_spans(conn, {f["shard_id"] for f in files})
        expected = expected_lines(files)
        done = 0
        while done < len(files):
            batch = files[done : done + planned_batch(files[done:], expected[done:])]
            rows = ", ".join(
                f"({i}, {sql_literal(f['file_key'])}, {sql_literal(f['job_key'])}, {sql_literal(f['path'])}, "
                f"{sql_literal(f['shard_id'])}, {int(f['attempt'])})"
                for i, f in enumerate(batch)
            )
            conn.execute(
                f"CREATE OR REPLACE TEMP TABLE _files AS SELECT * FROM (VALUES {rows}) "
                "AS t(ord, file_key, job_key, path, shard_id, attempt)"
            )
            _stage_batch(conn, batch, fmt)
            if done + len(batch) < len(files):
                # When the plan missed (lines the provider dropped or repeated), files after an aligned
                # prefix wait for the next batch: their lines leave _files (the insert below reads _in
                # through it), their files stay unmarked.
                counts = dict(conn.execute("SELECT file_key, count(*) FROM _in GROUP BY file_key").fetchall())
                keep = aligned_prefix([counts.get(f["file_key"], 0) for f in batch])
                if keep < len(batch):
                    later = ", ".join(sql_literal(f["file_key"]) for f in batch[keep:])
                    conn.execute(f"DELETE FROM _files WHERE file_key IN ({later})")
                    batch = batch[:keep]
            done += len(batch)
            # The batch's shards, and every job of them, as constant lists: the ledger's line and
            # result tables are filtered by them, so a batch reads its own shards' rows, not the
            # partition's (which would make ingest quadratic in the number of batches).
            shard_ids = sorted({f["shard_id"] for f in batch})
            shards_in = ", ".join(sql_literal(s) for s in shard_ids)
            jobs_in = ", ".join(
                sql_literal(r[0])
                for r in conn.execute(f"SELECT job_key FROM part_job WHERE shard_id IN ({shards_in})").fetchall()
            )
            # Shard and job ids share long prefixes, which DuckDB's string zone maps cannot tell
            # apart: filtered by id alone, every batch reads the ids of all the partition's lines and
            # results. The lines are read within their shards' row span, and earlier results only
            # when one of these jobs had a file ingested before (they are written together).
            in_spans = f"shard_id IN ({shards_in}) AND {_rowid_range(spans, shard_ids)}"
            answered_before = (
                f"SELECT DISTINCT custom_id, attempt FROM ledger.raw_result WHERE task_id = {tid} "
                f"AND status = 'ok' AND job_key IN ({jobs_in})"
            )
            if not conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM ledger.raw_file WHERE job_key IN ({jobs_in}) "
                "AND ingested_at IS NOT NULL)"
            ).fetchone()[0]:
                answered_before = "SELECT NULL::VARCHAR AS custom_id, NULL::INTEGER AS attempt WHERE false"
            # Map each line to its custom_id and rank repeats: narrow columns only (no bodies). A
            # retried item answers once per attempt, so repeats are counted per (custom_id, attempt).
            conn.execute(f"""
                CREATE OR REPLACE TEMP TABLE _keyed AS
                SELECT i.file_key, i.line_no, f.job_key, f.attempt, sl.custom_id, sl.item_no,
                       CASE WHEN sl.custom_id IS NOT NULL
                            THEN row_number() OVER (PARTITION BY sl.custom_id, f.attempt
                                                    ORDER BY f.ord, i.line_no) END AS nth
                FROM _in i JOIN _files f USING (file_key)
                LEFT JOIN (SELECT shard_id, request_id, custom_id, item_no FROM ledger.shard_line WHERE {in_spans}) sl
                       ON sl.shard_id = f.shard_id AND sl.request_id = i.request_id
            """)
            with transaction(conn):
                n = insert_raw_results(
                    conn,
                    task_id,
                    f"""
                    SELECT i.file_key, i.line_no, k.job_key, k.attempt, i.request_id, k.custom_id, k.item_no,
                           CASE WHEN i.malformed_line IS NOT NULL OR i.request_id IS NULL THEN 'malformed'
                                WHEN k.custom_id IS NULL THEN 'orphan'
                                WHEN k.nth > 1 OR prev.custom_id IS NOT NULL THEN 'duplicate'
                                ELSE 'ok' END AS status,
                           i.line_id, i.status_code, i.provider_request_id, i.body, i.error, i.malformed_line
                    FROM _in i JOIN _keyed k USING (file_key, line_no)
                    -- Lines answered before: a (custom_id, attempt) is cut into one shard only, so they
                    -- came from a job of the same shard.
                    LEFT JOIN ({answered_before}) prev
                      ON prev.custom_id = k.custom_id AND prev.attempt = k.attempt
                """,
                )
                mark_files_ingested(
                    conn,
                    """
                    SELECT f.file_key, count(i.file_key) AS line_count
                    FROM _files f LEFT JOIN _in i USING (file_key) GROUP BY 1
                """,
                )
                faultpoints.reached("ingest.before_commit")
            files_done += len(batch)
            lines_done += n
            bar.advance(sum(f["byte_count"] for f in batch))
        conn.execute("DROP TABLE IF EXISTS _in; DROP TABLE IF EXISTS _keyed; DROP TABLE IF EXISTS _files")
    return files_done, lines_done


def collect_raw_results(
    wh: Warehouse, task: ResolvedTask, partition_date: str, adapter: BatchProvider
) -> IngestSummary:
    """Poll, download and ingest the partition's terminal jobs. Counts one collect try on each
    pending job first; raises CollectError (after ingesting what did download) if a download failed."""
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    # Refresh this partition's jobs first, so a manual run picks up whatever has finished.
    poll_jobs(wh, lambda _provider: adapter, task_id=task_id, poller="collect")
    start_collect_run(wh, task_id)
    errors: dict[str, str] = {}
    downloaded = download_results(wh, task_id, adapter, errors)
    files, lines = ingest_files(wh, task_id, wire_format(task.spec.provider, task.spec.endpoint))
    deletion = None
    if task.spec.retention.delete_remote_files:
        # Provider-side copies go once the results are safely here; a failure stays pending (not fatal).
        from batch_assets.pipeline.govern.retention import delete_remote_files

        deletion = delete_remote_files(wh, lambda _provider: adapter, task_id=task_id)
    if errors:
        raise CollectError(
            f"{len(errors)} job(s) of {task_id} not downloaded (retried next time): "
            + "; ".join(f"{k}: {v}" for k, v in errors.items())
        )
    with wh.connect() as conn:
        by_status = dict(
            conn.execute(
                "SELECT status, count(*) FROM ledger.raw_result WHERE task_id = ? GROUP BY status", [task_id]
            ).fetchall()
        )
    return IngestSummary(
        task_id,
        downloaded,
        files,
        lines,
        by_status,
        remote_files_deleted=deletion.files_deleted if deletion else 0,
        remote_deletions_failed=len(deletion.failed) if deletion else 0,
    )
