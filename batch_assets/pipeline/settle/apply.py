"""Stage 7 — write usable answers into the business table exactly once.

The business table is keyed by (business key, output_version). Before writing, the live source is
re-read and each candidate's input is re-hashed: a result whose input hash no longer matches the
current source row is marked stale and never written over newer data. Every decision is recorded in
ledger.applied_result in the same transaction as the write, so applying twice changes nothing.
In that transaction too: the business row an answer overwrites is kept in ledger.applied_previous
(so a revoke can put it back), and the answers the task's `review:` picks land in ledger.review_item.
Large partitions are written in chunks of about APPLY_CHUNK answers, one transaction each.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from batch_assets.ledger.results import insert_applied_results
from batch_assets.ledger.review import insert_applied_previous, insert_review_items
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline import faultpoints
from batch_assets.pipeline.errors import SourceQueryError
from batch_assets.pipeline.freeze.frozen import frozen_columns, frozen_item_no_sql, frozen_manifest
from batch_assets.pipeline.freeze.render import input_hash_sql
from batch_assets.pipeline.freeze.source import drop_source, gate_loaded_source, query_source, source_relation
from batch_assets.pipeline.govern.sensitive import restore_json_sql, source_fingerprint_sql
from batch_assets.pipeline.settle import business_table_pg
from batch_assets.pipeline.settle.business_table import column_type, ensure_target_table, value_sql
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import in_range_sql, quote_ident, sql_literal
from batch_assets.task_tables.postgres import PgTables


def review_sample_sql(task: ResolvedTask, applied: str) -> str:
    """The applied answers (`applied`: a FROM clause with custom_id, attempt and the output fields by
    name, typed as value_sql gives them) picked for review: a hash of the custom_id below the task's
    rate (the same items on every run), or the task's `always_if` condition over the output fields.
    Columns: custom_id, attempt, sampled_by."""
    review = task.spec.review
    # The first 32 bits of md5(custom_id) as a fraction of 2^32: stable across runs and versions.
    by_rate = f"CAST('0x' || left(md5(custom_id), 8) AS UBIGINT) < {float(review.sample_rate)!r} * 4294967296"
    condition = f"coalesce(({review.always_if}), false)" if review.always_if else "false"
    return f"""
        SELECT custom_id, attempt, CASE WHEN _by_rate THEN 'rate' ELSE 'always_if' END AS sampled_by
        FROM (SELECT *, {by_rate} AS _by_rate FROM {applied})
        WHERE _by_rate OR {condition}
    """


def _answer_fields(task: ResolvedTask) -> list[str]:
    """The output fields an apply reads out of each answer: the business columns' and, when the
    review has an `always_if` condition, every output field (it may name any)."""
    fields = list(task.spec.apply.columns.values())
    if task.spec.review.always_if:
        fields += list(task.output_schema["properties"])
    return list(dict.fromkeys(fields))


def _usable_sql(task_id: str, alias: str = "p") -> str:
    """The condition on ledger.parsed_result row `alias` for an answer of the partition that can be
    applied (a provider success with a schema-valid answer). The candidates, the refused count and
    each chunk's read use this one definition: a candidate a chunk did not read back would be
    counted but not written."""
    return f"{alias}.task_id = {sql_literal(task_id)} AND {alias}.provider_succeeded AND {alias}.error_class IS NULL"


def _chunk_sql(task: ResolvedTask, task_id: str, lo: int | None, hi: int | None) -> str:
    """The candidates with item numbers in [lo, hi) (None: unbounded) as rows (custom_id, item_no,
    attempt, business_id, input_hash, answer, outcome): the answer from ledger.parsed_result, the
    business id and input hash from ledger.manifest_item, the outcome from `_live`'s flag. Only the
    chunk's rows are read: both ledger tables are stored in about item order, so their scans skip
    the row groups outside the range (zone maps); the wide columns are never sorted or copied whole."""
    tid = sql_literal(task_id)

    def between(column: str) -> str:
        return in_range_sql(column, lo, hi)

    return f"""
        SELECT p.custom_id, p.item_no, p.attempt, m.business_id, m.input_hash, p.output_json AS answer,
               CASE WHEN l.fresh THEN 'applied' ELSE 'stale' END AS outcome
        FROM (SELECT custom_id, item_no, attempt, output_json FROM ledger.parsed_result p
              WHERE {_usable_sql(task_id)} AND {between("item_no")}
                AND output_schema_version = {sql_literal(task.spec.output.version)}) p
        JOIN (SELECT item_no, attempt, fresh FROM _live WHERE {between("item_no")}) l
          ON l.item_no = p.item_no AND l.attempt = p.attempt
        JOIN (SELECT item_no, business_id, input_hash FROM ledger.manifest_item
              WHERE task_id = {tid} AND {between("item_no")}) m ON m.item_no = p.item_no
    """


def _answers_sql(task: ResolvedTask, chunk: str, by_business_id: bool = False) -> str:
    """The rows of `chunk` (a FROM clause giving _chunk_sql's columns) with, for applied ones, their
    typed output fields (column `_f<i>` for _answer_fields()[i]) read out of the answer ONCE: the
    business write and the review pick both use them, and the answer itself is not copied further.
    `by_business_id`: stored in business-id order (see _ids_follow_item_numbers)."""
    fields = _answer_fields(task)
    scalars = [f for f in fields if column_type(task, f) != "JSON" and "[" not in column_type(task, f)]
    paths = "[" + ", ".join(sql_literal("$." + f) for f in scalars) + "]"

    def expr(f: str) -> str:
        sql_type = column_type(task, f)
        if f in scalars:  # one multi-path extraction (one parse) for every scalar field
            return f"CAST(_vals[{scalars.index(f) + 1}] AS {sql_type})"
        return f"CASE WHEN outcome = 'applied' THEN {value_sql(task, f, 'answer', f)} END"

    values = "".join(f", {expr(f)} AS _f{i}" for i, f in enumerate(fields))
    vals = f"CASE WHEN outcome = 'applied' THEN json_extract_string(answer, {paths}) END" if scalars else "NULL"
    return f"""
        SELECT custom_id, item_no, attempt, business_id, input_hash, outcome{values}
        FROM (SELECT *, {vals} AS _vals FROM {chunk})
        {"ORDER BY business_id" if by_business_id else ""}
    """


def _ids_follow_item_numbers(conn: duckdb.DuckDBPyConnection, task_id: str) -> bool:
    """Whether the partition's business ids ascend with its item numbers, block by block (each
    block of _COUNT_BLOCK numbers holds ids above the block before's): then a chunk (a range of
    item numbers) writes its keys into the business table's index in about key order. Items are
    numbered in the source's order; a source that does not list its rows by business id gets each
    chunk sorted by it instead (keys written spread over the index's whole range cost the most), a
    sort wasted where they already ascend. One grouped scan of the ids, no sort."""
    return conn.execute(
        f"""
        SELECT coalesce(bool_and(hi <= next_lo), true)
        FROM (SELECT hi, lead(lo) OVER (ORDER BY b) AS next_lo
              FROM (SELECT item_no // {_COUNT_BLOCK} AS b, min(business_id) AS lo, max(business_id) AS hi
                    FROM ledger.manifest_item WHERE task_id = ? GROUP BY b))
    """,
        [task_id],
    ).fetchone()[0]


# Answers written per transaction (see apply_results).
APPLY_CHUNK = 1_000_000


@dataclass(frozen=True)
class ApplySummary:
    task_id: str
    applied: int
    stale: int
    target_table: str
    refused_version: int = 0  # answers parsed under another output version than the task's now: not written


def _stale_guard(
    conn: duckdb.DuckDBPyConnection,
    task: ResolvedTask,
    partition_date: str,
    candidates: int,
    uri: str | None,
    tables: PgTables | None = None,
) -> str:
    """Temp table `_live` (item_no, attempt, fresh), one row per candidate of `_cand`: whether its
    input hash is the input hash of what the source holds now for its business id (false when the
    source no longer holds the id; NULL, which counts as not fresh everywhere, when it now holds it
    twice). Only the flag is kept: each chunk's answers join it (_chunk_sql). `uri`: the frozen
    manifest Parquet as a local file (frozen_manifest).

    Re-rendering a row means re-running the sensitive-data gate and a sha256 of its prompt; a row
    whose fingerprint (raw columns + task, see gate.source_fingerprint_sql) equals the one frozen
    into the manifest Parquet has the frozen input hash, so only the other rows are gated and hashed.
    The frozen row is found by the candidate's item number (an integer join); the source is grouped
    once by a 64-bit hash of the business id (an 8-byte key: the strings' hash tables spill on a
    large partition) and joined to the candidates once. Two ids of one hash look like an id held twice and
    are re-hashed exactly, by their strings, like a changed row. A candidate of an earlier freeze
    (another item of the id) is not the Parquet's row: it is re-hashed too, which gives the same
    live hash.

    When most of the partition's items are candidates, the source is first compared with the
    Parquet as a whole (_source_as_frozen: one streamed pass, no hash table): if it holds exactly
    the frozen rows, each candidate's verdict comes from its frozen row alone.

    Returns how the candidates were decided: 'as_frozen' (the source holds the frozen rows),
    'by_id' (the source grouped by id, only changed rows re-hashed) or 'rehashed' (every one)."""
    spec = task.spec
    task_id = task.task_id(partition_date)
    bid = f"CAST({quote_ident(spec.source.business_id)} AS VARCHAR)"
    frozen = f"read_parquet({sql_literal(uri)}, file_row_number = true)"
    has_fp = uri is not None and {"source_fp", "item_no_base"} <= frozen_columns(conn, uri)
    # Every candidate undecided: each is gated and hashed again.
    undecided = "CREATE OR REPLACE TEMP TABLE _live AS SELECT item_no, attempt, NULL::BOOLEAN AS fresh FROM _cand"
    # The undecided candidates with their business ids and input hashes as strings (usually few rows).
    undecided_rows = f"""
        (SELECT l.item_no, l.attempt, m.business_id, m.input_hash
         FROM _live l JOIN ledger.manifest_item m ON m.task_id = {sql_literal(task_id)} AND m.item_no = l.item_no
         WHERE l.fresh IS NULL)
    """
    try:
        if has_fp:  # manifests frozen before fingerprints and numbers lack them: every row is re-hashed
            # With few candidates (a re-apply of some retries) only their ids' source rows are read;
            # with most of the partition's items the filter would cost a hash join and save nothing.
            items = conn.execute(
                "SELECT count(*) FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [task_id]
            ).fetchone()[0]
            few = 2 * candidates < items
            only_candidates = f"WHERE hash({bid}) IN (SELECT id_hash FROM _cand)" if few else ""
            frozen_rows = f"""
                (SELECT {frozen_item_no_sql("p")} AS item_no, hash(business_id) AS id_hash,
                        hash(input_hash) AS input_hash_hash, source_fp
                 FROM {frozen} p)"""
            if not few and _source_as_frozen(conn, task, bid, frozen, partition_date, tables):
                # Every frozen id is in the source once, with its frozen fingerprint: a candidate
                # that is its id's frozen row is fresh when it holds the frozen input hash; one
                # that is not (an earlier freeze's item) stays undecided and is re-hashed below.
                how = "as_frozen"
                conn.execute(f"""
                    CREATE OR REPLACE TEMP TABLE _live AS
                    SELECT c.item_no, c.attempt,
                           CASE WHEN m.id_hash = c.id_hash THEN m.input_hash_hash = c.input_hash_hash END AS fresh
                    FROM _cand c LEFT JOIN {frozen_rows} m ON m.item_no = c.item_no
                """)
            else:
                how = "by_id"
                _live_by_id(conn, task, bid, only_candidates, frozen_rows, partition_date, tables)
            # Only the undecided candidates' rows are read and gated again (usually none).
            if not conn.execute("SELECT EXISTS (SELECT 1 FROM _live WHERE fresh IS NULL)").fetchone()[0]:
                drop_source(conn)
                return how
        else:
            how = "rehashed"
            conn.execute(undecided)
        conn.execute(f"CREATE OR REPLACE TEMP TABLE _changed AS SELECT DISTINCT business_id FROM {undecided_rows}")
        columns = query_source(
            conn, task, partition_date, where=f"{bid} IN (SELECT business_id FROM _changed)", tables=tables
        )
    except (duckdb.Error, SourceQueryError):
        # A source query that cannot be nested as written: read it whole, as freeze does (a broken
        # one raises its clear error here), and re-hash every candidate.
        how = "rehashed"
        conn.execute("DROP TABLE IF EXISTS _source_now")
        conn.execute(undecided)
        columns = query_source(conn, task, partition_date, tables=tables)
    gate_loaded_source(conn, task, columns)
    conn.execute("DROP TABLE IF EXISTS _changed")
    # The re-hashed rows: one live hash per business id, none when the source now holds it twice
    # (a candidate left without one stays NULL: not fresh).
    conn.execute(f"""
        UPDATE _live SET fresh = r.fresh
        FROM (SELECT u.item_no, u.attempt, h.live_hash = u.input_hash AS fresh
              FROM {undecided_rows} u
              JOIN (SELECT business_id, CASE WHEN count(*) = 1 THEN any_value(live_hash) END AS live_hash
                    FROM (SELECT business_id, {input_hash_sql(task)} AS live_hash FROM _src)
                    GROUP BY business_id) h USING (business_id)) r
        WHERE _live.item_no = r.item_no AND _live.attempt = r.attempt AND _live.fresh IS NULL
    """)
    drop_source(conn)
    return how


def _source_as_frozen(
    conn: duckdb.DuckDBPyConnection,
    task: ResolvedTask,
    bid: str,
    frozen: str,
    partition_date: str,
    tables: PgTables | None = None,
) -> bool:
    """Whether the source now holds exactly the frozen manifest's rows: the same number of rows with
    an id the freeze did not reject (the Parquet holds every row the freeze kept), and the same sum
    and xor of 64-bit hashes of (id, fingerprint) — a multiset checksum, so an order change does
    not count and any added, removed, repeated or edited row does (but with ~2^-64 odds, the same
    odds as a fingerprint collision, which the guard already accepts). One streamed pass over each,
    no hash table: grouping the source rows by id and joining them to the candidates costs more."""
    fp = source_fingerprint_sql(task, "_q")
    # The rows the freeze kept: an id, and not one it rejected (held twice then: its rows are not in
    # the Parquet, nor is any candidate of it). Without rejects, no anti-join.
    rejected = (
        f"SELECT business_id FROM ledger.source_reject WHERE task_id = {sql_literal(task.task_id(partition_date))}"
    )
    not_rejected = (
        f"AND {bid} NOT IN ({rejected} AND business_id IS NOT NULL)"
        if conn.execute(f"SELECT EXISTS ({rejected})").fetchone()[0]
        else ""
    )
    source, params = source_relation(conn, task, partition_date, tables)
    now, then = conn.execute(
        f"""
        SELECT (SELECT (count(*), sum(h), bit_xor(h)) FROM (
                    SELECT hash(hash({bid}), {fp}) AS h FROM {source} AS _q
                    WHERE {bid} IS NOT NULL AND trim({bid}) <> '' {not_rejected})),
               (SELECT (count(*), sum(h), bit_xor(h)) FROM (
                    SELECT hash(hash(business_id), source_fp) AS h FROM {frozen} p))
    """,
        params,
    ).fetchone()
    return now == then and now[0] > 0


def _live_by_id(
    conn: duckdb.DuckDBPyConnection,
    task: ResolvedTask,
    bid: str,
    only_candidates: str,
    frozen_rows: str,
    partition_date: str,
    tables: PgTables | None = None,
) -> None:
    """Temp table `_live` from the source grouped by id: a candidate is decided by its frozen row
    when its id is in the source once with the frozen fingerprint (undecided otherwise)."""
    # Straight from the source query: only (id hash, count, fingerprint) is kept, not its rows.
    # Two statements, one join each: faster and lower at the peak than one statement with both.
    source, params = source_relation(conn, task, partition_date, tables)
    conn.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _source_now AS
        SELECT c.item_no, c.attempt, c.id_hash, c.input_hash_hash, f.n, f.fp
        FROM _cand c
        LEFT JOIN (SELECT hash({bid}) AS id_hash, count(*) AS n, any_value({source_fingerprint_sql(task, "_q")}) AS fp
                   FROM {source} AS _q {only_candidates}
                   GROUP BY ALL) f ON f.id_hash = c.id_hash
    """,
        params,
    )
    # The frozen row's id and input hash as 64-bit hashes, like its fingerprint: the join's build
    # side stays narrow (with both strings it spills on a large partition).
    conn.execute(f"""
        CREATE OR REPLACE TEMP TABLE _live AS
        SELECT c.item_no, c.attempt,
               CASE WHEN c.n = 1 AND c.fp = m.source_fp AND m.id_hash = c.id_hash
                         THEN m.input_hash_hash = c.input_hash_hash
                    WHEN c.n IS NULL THEN false  -- the source no longer holds the id
                    ELSE NULL  -- changed, not its frozen row, or held twice: re-hash exactly
               END AS fresh
        FROM _source_now c LEFT JOIN {frozen_rows} m ON m.item_no = c.item_no
    """)
    conn.execute("DROP TABLE _source_now")


def apply_results(wh: Warehouse, task: ResolvedTask, partition_date: str) -> ApplySummary:
    spec, apply = task.spec, task.spec.apply
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    tid = sql_literal(task_id)
    tables = wh.tables
    with wh.connect() as conn:
        if tables is None:
            ensure_target_table(conn, task)
        version = sql_literal(spec.output.version)
        not_applied = f"p.item_no NOT IN (SELECT item_no FROM ledger.applied_result WHERE task_id = {tid})"
        # An answer is written under the output version it was parsed with, which must be the
        # task's now: an answer to v1 is never written as v2 (restore the version or refreeze).
        refused = conn.execute(f"""
            SELECT count(*) FROM ledger.parsed_result p
            WHERE {_usable_sql(task_id)} AND p.output_schema_version <> {version} AND {not_applied}
        """).fetchone()[0]
        # The candidates, narrow: (item number, attempt) and 64-bit hashes of the business id and
        # input hash. The guard and the chunk marks need no more; each chunk reads its own answers,
        # ids and hashes (_chunk_sql): a candidate table with the answers and strings spills.
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _cand AS
            SELECT p.item_no, p.attempt, m.id_hash, m.input_hash_hash
            FROM ledger.parsed_result p
            JOIN (SELECT item_no, hash(business_id) AS id_hash, hash(input_hash) AS input_hash_hash
                  FROM ledger.manifest_item WHERE task_id = {tid} AND output_schema_version = {version}) m
              ON m.item_no = p.item_no
            WHERE {_usable_sql(task_id)} AND p.output_schema_version = {version} AND {not_applied}
        """)
        n_cand, latest_attempt = conn.execute("SELECT count(*), max(attempt) FROM _cand").fetchone()
        if latest_attempt is not None and latest_attempt > 1:
            # An item can hold usable answers at two attempts (a batch's output that arrived after
            # its items were sent again): it is written once, with its latest attempt's answer (the
            # one reconcile counts). Its second row would fail the chunk's keyed insert on every run.
            conn.execute(
                "CREATE OR REPLACE TEMP TABLE _cand AS SELECT * FROM _cand "
                "QUALIFY attempt = max(attempt) OVER (PARTITION BY item_no)"
            )
            n_cand = conn.execute("SELECT count(*) FROM _cand").fetchone()[0]
        if n_cand == 0:
            conn.execute("DROP TABLE _cand")
            return ApplySummary(task_id, 0, 0, apply.table, refused)
        # The stale-input guard: hash what the source holds now for these business ids.
        _stale_guard(conn, task, partition_date, n_cand, frozen_manifest(conn, wh.files, task_id), tables)
        fields = _answer_fields(task)
        applied = conn.execute("SELECT count(*) FILTER (fresh) FROM _live").fetchone()[0]
        stale = n_cand - applied
        any_held = _held_keys(conn, task, task_id, tables)
        # A task without review picks yet (its first apply) adds each chunk's with a plain INSERT
        # (see insert_review_items). A custom_id begins with its task's id, so only this task's
        # rows could be an item picked before.
        none_picked_before = not conn.execute(
            "SELECT EXISTS (SELECT 1 FROM ledger.review_item WHERE task_id = ?)", [task_id]
        ).fetchone()[0]
        # Written in chunks of about APPLY_CHUNK answers (ranges of item numbers), each in its own
        # transaction: an answer's business row and its ledger rows still commit together, and a
        # transaction never holds more than a chunk (one transaction of a large partition runs out
        # of memory on its uncommitted index entries). A failure between chunks leaves the rest
        # unapplied for the next run, never half of an answer.
        table_rows = _table_rows(conn, task) if tables is None else 0  # row groups: DuckDB's storage only
        marks = _chunk_marks(conn, table_rows, any_held) if n_cand > APPLY_CHUNK else []
        conn.execute("DROP TABLE _cand")
        bounds = [None, *marks, None]
        by_business_id = bool(marks) and not _ids_follow_item_numbers(conn, task_id)
        for lo, hi in zip(bounds, bounds[1:]):
            # The chunk's answers, read once into a table the chunk's statements share.
            chunk = f"({_chunk_sql(task, task_id, lo, hi)})"
            if spec.policy.restore_on_apply:
                # Placeholders the model repeated in its answer get their original values back (from
                # the local ledger.pii_mapping) in the business table only.
                conn.execute(f"CREATE OR REPLACE TEMP TABLE _raw_part AS SELECT * FROM {chunk}")
                conn.execute(f"""
                    UPDATE _raw_part SET answer = r.restored
                    FROM ({
                    restore_json_sql(
                        "CAST(answer AS VARCHAR)",
                        "custom_id",
                        "_raw_part WHERE custom_id IN (SELECT custom_id FROM ledger.pii_mapping)",
                    )
                }) AS r
                    WHERE _raw_part.custom_id = r.custom_id
                """)
                chunk = "_raw_part"
            conn.execute(f"CREATE OR REPLACE TEMP TABLE _part AS {_answers_sql(task, chunk, by_business_id)}")
            conn.execute("DROP TABLE IF EXISTS _raw_part")
            # Every candidate of the range read back, or nothing of the chunk is written: the counts
            # above come from the candidates, and one counted but not written would look applied.
            read, expected = conn.execute(
                f"SELECT (SELECT count(*) FROM _part), "
                f"(SELECT count(*) FROM _live WHERE {in_range_sql('item_no', lo, hi)})"
            ).fetchone()
            if read != expected:
                raise RuntimeError(
                    f"apply {task_id}: the chunk of item numbers [{lo}, {hi}) read {read} answers "
                    f"back for {expected} candidates; nothing of it was written (a ledger row changed "
                    "during the apply? run it again)"
                )
            write = _write_chunk if tables is None else _write_chunk_pg
            write(conn, task, task_id, fields, any_held, none_picked_before, tables)
            conn.execute("DROP TABLE _part")
        conn.execute("DROP TABLE _held; DROP TABLE _live; DROP TABLE IF EXISTS _pg_held;")
    return ApplySummary(task_id, applied, stale, apply.table, refused)


# DuckDB's row group: the rows of one storage unit (the default the warehouse file is opened with;
# test_the_row_group_the_apply_chunks_align_to_is_duckdbs checks it is still this size).
ROW_GROUP_ROWS = 122_880
# _chunk_marks counts the candidates' appended rows per block of this many item numbers, then looks
# inside the few blocks where a chunk ends.
_COUNT_BLOCK = 2048


def _chunk_marks(conn: duckdb.DuckDBPyConnection, table_rows: int, any_held: bool) -> list[int]:
    """The item numbers where a chunk after the first starts (each chunk: the candidates of `_live`
    with item numbers from one mark up to the next).

    A chunk ends where the business table's row count reaches a multiple of its row group
    (`table_rows`: the rows it has now, deleted ones included; only fresh answers for keys it does
    not hold append a row, see `_held`), about every APPLY_CHUNK appended rows: a commit that leaves
    the table's row count off a multiple of the row group, even by a few rows, makes the next chunk's
    commit cost several times more. Rows that append nothing still count toward a chunk's size: no
    chunk holds more than 1.5x APPLY_CHUNK rows (a re-apply that overwrites every key stays in
    bounded transactions). The rows after the last mark join the chunk before when the two stay
    within that.

    A chunk is a range of item numbers, which the scans of ledger.parsed_result and
    ledger.manifest_item read without touching the rest (see _chunk_sql), and each chunk's keys
    are written in about key order (see _ids_follow_item_numbers). Item numbers are stable; the
    row numbers of a ledger table are not (a checkpoint compacts deleted rows)."""
    aligned = APPLY_CHUNK >= ROW_GROUP_ROWS  # chunks smaller than a row group (tests): nothing to align
    step = max(1, round(APPLY_CHUNK / ROW_GROUP_ROWS)) * ROW_GROUP_ROWS if aligned else APPLY_CHUNK

    def next_mark(appended: int) -> int:
        """The appended-row ordinal that ends a chunk starting after `appended` appended rows."""
        return appended + step - ((table_rows + appended) % ROW_GROUP_ROWS if aligned else 0)

    # The rows that append one to the business table: fresh answers for keys it does not hold.
    if any_held:
        rows = "(SELECT item_no, fresh AND item_no NOT IN (SELECT item_no FROM _held) AS appends FROM _live)"
    else:
        rows = "(SELECT item_no, fresh AS appends FROM _live)"
    blocks = conn.execute(
        f"SELECT item_no // {_COUNT_BLOCK} AS b, count(*), count(*) FILTER (appends) FROM {rows} GROUP BY b ORDER BY b"
    ).fetchall()
    # The appended-row ordinals where a chunk ends, each as (block, ordinal within the block); and
    # where rows that append nothing (stale answers, overwritten keys) would make a chunk hold more
    # than half as many rows again as a chunk: a cut at the start of a block (a transaction stays
    # bounded whatever the answers are; the next mark then aligns again).
    cap = step + step // 2
    wanted, cuts, before, chunk_rows, mark = [], [], 0, 0, next_mark(0)
    for block, total, count in blocks:
        if chunk_rows and chunk_rows + total > cap:
            cuts.append(block * _COUNT_BLOCK)
            chunk_rows = 0
            mark = next_mark(before)
        chunk_rows += total
        while mark < before + count:
            wanted.append((block, mark - before))
            chunk_rows = total  # the chunk starts within this block: counted from the block's start
            mark += step
        before += count
    marks = list(cuts)
    if wanted:  # the item number of each wanted ordinal, looked up in its block only
        blocks = ", ".join(str(b) for b, _ in wanted)
        ordinals = ", ".join(f"({b}, {k})" for b, k in wanted)
        marks += [
            r[0]
            for r in conn.execute(f"""
            SELECT d.item_no
            FROM (SELECT item_no, item_no // {_COUNT_BLOCK} AS b,
                         row_number() OVER (PARTITION BY item_no // {_COUNT_BLOCK} ORDER BY item_no) - 1 AS k
                  FROM {rows}
                  WHERE item_no // {_COUNT_BLOCK} IN ({blocks}) AND appends) d
            JOIN (VALUES {ordinals}) AS t(b, k) ON t.b = d.b AND t.k = d.k
        """).fetchall()
        ]
    marks = sorted(set(marks))
    if marks:
        # The last chunk holds what is left after the last mark, often a sliver, and a chunk costs a
        # commit beyond its rows: it joins the chunk before when the two stay within the cap. Where it
        # ends needs no alignment: nothing of this apply commits after it, and a later apply's first
        # chunk aligns from the table's row count (next_mark).
        before_last = marks[-2] if len(marks) > 1 else None
        tail = conn.execute(
            f"SELECT count(*) FROM {rows} WHERE {in_range_sql('item_no', before_last, None)}"
        ).fetchone()[0]
        if tail <= cap:
            marks.pop()
    return marks


def _table_rows(conn: duckdb.DuckDBPyConnection, task: ResolvedTask) -> int:
    """The business table's rows as its storage counts them (deleted ones included): the catalog's
    figure, read without a scan. 0 if the catalog does not list it (the chunks only align less well)."""
    row = conn.execute(
        "SELECT estimated_size FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND table_name = ?",
        [task.spec.apply.table],
    ).fetchone()
    return int(row[0] or 0) if row else 0


def _held_keys(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, task_id: str, tables: PgTables | None) -> bool:
    """Temp table `_held` (item_no): the fresh candidates (`_cand`, `_live`) whose
    business id the business table may hold already (at the task's output version), found with one
    read of the table's keys for all chunks, by the ids' 64-bit hashes: a hash two ids share only
    sends an answer down the exact overwrite path (_write_chunk), which finds no row to keep.
    In PostgreSQL, the rows held for the fresh candidates' ids are read once, whole (`_pg_held`:
    business_id, custom_id, row), and `_held` names the candidates they answer. Returns whether there is any."""
    apply = task.spec.apply
    if tables is not None:
        fresh_ids = f"""
            SELECT m.business_id, {sql_literal(task.spec.output.version)} AS output_version
            FROM _cand c JOIN _live l ON l.item_no = c.item_no AND l.attempt = c.attempt
            JOIN ledger.manifest_item m ON m.task_id = {sql_literal(task_id)} AND m.item_no = c.item_no
            WHERE l.fresh"""
        if not business_table_pg.current_rows(tables, conn, task, fresh_ids, "_pg_held"):
            conn.execute("CREATE OR REPLACE TEMP TABLE _held AS SELECT NULL::BIGINT AS item_no WHERE false")
            return False
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _held AS
            SELECT c.item_no
            FROM _cand c JOIN _live l ON l.item_no = c.item_no AND l.attempt = c.attempt
            JOIN ledger.manifest_item m ON m.task_id = {sql_literal(task_id)} AND m.item_no = c.item_no
            WHERE l.fresh AND m.business_id IN (SELECT business_id FROM _pg_held)
        """)
        return conn.execute("SELECT EXISTS (SELECT 1 FROM _held)").fetchone()[0]
    conn.execute(f"""
        CREATE OR REPLACE TEMP TABLE _held AS
        SELECT c.item_no
        FROM _cand c JOIN _live l ON l.item_no = c.item_no AND l.attempt = c.attempt
        WHERE l.fresh AND c.id_hash IN (SELECT hash({quote_ident(apply.key)}) FROM main.{quote_ident(apply.table)}
                                        WHERE output_version = {sql_literal(task.spec.output.version)})
    """)
    return conn.execute("SELECT EXISTS (SELECT 1 FROM _held)").fetchone()[0]


def _write_chunk(
    conn: duckdb.DuckDBPyConnection,
    task: ResolvedTask,
    task_id: str,
    fields: list[str],
    any_held: bool,
    none_picked_before: bool,
    tables: PgTables | None = None,
) -> None:
    """One transaction: the answers of `_part` (one chunk's, see _answers_sql) into the business table
    (the rows they overwrite kept for revoke), their outcomes into ledger.applied_result, the review
    picks into ledger.review_item. `any_held`: whether `_held` has any candidate;
    `none_picked_before`: whether the task had no review pick when the apply began."""
    spec, apply = task.spec, task.spec.apply
    tid = sql_literal(task_id)
    targets = ", ".join(quote_ident(c) for c in apply.columns)
    values = ", ".join(f"_f{fields.index(f)}" for f in apply.columns.values())
    updates = ", ".join(f"{quote_ident(c)} = excluded.{quote_ident(c)}" for c in apply.columns)
    key = quote_ident(apply.key)
    table = f"main.{quote_ident(apply.table)}"
    with transaction(conn):
        # The rows about to be overwritten (an earlier answer for the key and version): a revoke puts
        # them back. Only keys the table held before this apply can be (`_held`); a chunk without
        # any does not read the table.
        overwrites = 0
        held = "item_no IN (SELECT item_no FROM _held)"
        if any_held and conn.execute(f"SELECT EXISTS (SELECT 1 FROM _part WHERE {held})").fetchone()[0]:
            conn.execute(f"""
                CREATE OR REPLACE TEMP TABLE _over AS
                SELECT d.custom_id, d.business_id, b.custom_id AS previous_custom_id, to_json(b) AS previous_row
                FROM _part d JOIN {table} b
                  ON b.{key} = d.business_id AND b.output_version = {sql_literal(spec.output.version)}
                WHERE d.outcome = 'applied' AND {held}
            """)
            insert_applied_previous(
                conn,
                task_id,
                "SELECT custom_id, business_id, previous_custom_id, previous_row FROM _over",
                target_table=apply.table,
                output_version=spec.output.version,
            )
            overwrites = conn.execute("SELECT count(*) FROM _over").fetchone()[0]

        def rows(held: str) -> str:
            return f"""
                INSERT INTO {table} ({key}, {targets}, output_version, custom_id, input_hash, task_id, applied_at)
                SELECT business_id, {values}, {sql_literal(spec.output.version)}, custom_id, input_hash, {tid},
                       now()::TIMESTAMP
                FROM _part WHERE outcome = 'applied' AND {held}
            """

        # Keys the table does not hold take a plain INSERT (the primary key still refuses one written
        # meanwhile: the chunk fails and rolls back, nothing is overwritten unrecorded); ON
        # CONFLICT's update path costs more per row, so only overwritten keys take it.
        conn.execute(rows("business_id NOT IN (SELECT business_id FROM _over)" if overwrites else "true"))
        if overwrites:
            conn.execute(
                rows("business_id IN (SELECT business_id FROM _over)")
                + f"""
                ON CONFLICT ({key}, output_version) DO UPDATE SET {updates},
                    custom_id = excluded.custom_id, input_hash = excluded.input_hash,
                    task_id = excluded.task_id, applied_at = excluded.applied_at
            """
            )
        conn.execute("DROP TABLE IF EXISTS _over")
        faultpoints.reached("apply.before_commit")
        _record_outcomes(conn, task, task_id, fields, none_picked_before)


def _record_outcomes(
    conn: duckdb.DuckDBPyConnection, task: ResolvedTask, task_id: str, fields: list[str], none_picked_before: bool
) -> None:
    """The outcomes of `_part` into ledger.applied_result, its review picks into ledger.review_item."""
    spec = task.spec
    insert_applied_results(
        conn,
        task_id,
        "SELECT custom_id, item_no, business_id, outcome FROM _part",
        target_table=spec.apply.table,
        output_version=spec.output.version,
    )
    if spec.review.sample_rate > 0 or spec.review.always_if:
        named = "".join(f", _f{i} AS {quote_ident(f)}" for i, f in enumerate(fields))
        insert_review_items(
            conn,
            task_id,
            review_sample_sql(task, f"(SELECT custom_id, attempt{named} FROM _part WHERE outcome = 'applied')"),
            none_picked_before=none_picked_before,
        )


def _write_chunk_pg(
    conn: duckdb.DuckDBPyConnection,
    task: ResolvedTask,
    task_id: str,
    fields: list[str],
    any_held: bool,
    none_picked_before: bool,
    tables: PgTables,
) -> None:
    """_write_chunk for a business table in PostgreSQL, in three commits (see business_table_pg): the
    rows the chunk overwrites into ledger.applied_previous, the answers into the business table,
    then their outcomes and review picks. A crash between leaves what a re-run completes: the rows
    already recorded are not recorded again, answers already written are left as they are."""
    spec, apply = task.spec, task.spec.apply
    held = "item_no IN (SELECT item_no FROM _held)"
    found = "NULL::VARCHAR"
    if any_held and conn.execute(f"SELECT EXISTS (SELECT 1 FROM _part WHERE {held})").fetchone()[0]:
        found = "h.custom_id"
        with transaction(conn):
            # A row holding this very answer was written by an earlier run of the apply, which
            # recorded what it overwrote before writing it.
            conn.execute("""
                CREATE OR REPLACE TEMP TABLE _over AS
                SELECT d.custom_id, d.business_id, h.custom_id AS previous_custom_id, h.row AS previous_row
                FROM _part d JOIN _pg_held h ON h.business_id = d.business_id
                WHERE d.outcome = 'applied' AND h.custom_id <> d.custom_id
                  AND d.custom_id NOT IN (SELECT custom_id FROM ledger.applied_previous)
            """)
            insert_applied_previous(
                conn,
                task_id,
                "SELECT custom_id, business_id, previous_custom_id, previous_row FROM _over",
                target_table=apply.table,
                output_version=spec.output.version,
            )
            conn.execute("DROP TABLE _over")
    named = ", ".join(f"d._f{fields.index(f)} AS {quote_ident(c)}" for c, f in apply.columns.items())
    held_join = "LEFT JOIN _pg_held h ON h.business_id = d.business_id" if found != "NULL::VARCHAR" else ""
    business_table_pg.upsert_answers(
        tables,
        conn,
        task,
        f"""SELECT d.business_id AS {quote_ident(apply.key)}, {named},
                   {sql_literal(spec.output.version)} AS output_version, d.custom_id, d.input_hash,
                   {sql_literal(task_id)} AS task_id, now()::TIMESTAMP AS applied_at, {found} AS expected_custom_id
            FROM _part d {held_join} WHERE d.outcome = 'applied'""",
    )
    faultpoints.reached("apply.before_commit")  # the business rows committed, their outcomes not yet
    with transaction(conn):
        _record_outcomes(conn, task, task_id, fields, none_picked_before)
