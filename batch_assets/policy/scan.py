"""Set-based scan of a whole partition: DuckDB finds candidates, Python confirms distinct ones.

Flow of `find_sensitive`:
1. The relation is turned long: one row per (id, column, text) for every requested text column.
2. One pass of `regexp_matches` with the alternation of all detector patterns keeps only the texts
   that hold any candidate (exact: the alternation matches iff one of its branches does; RE2 runs
   it at the cost of a single pattern). On typical text that drops most rows before the
   per-detector passes.
3. For every detector, `regexp_extract_all` + `unnest` produce the candidates with their start
   offsets (code points, 0-based). DuckDB has no "match positions" function; the offsets come from
   `regexp_split_to_array` with the same pattern: the k-th match starts after the first k text
   segments and the k-1 earlier matches (a running sum over k).
4. The DISTINCT (detector, candidate) pairs go into a temp table; Python pulls them in slices of
   CONFIRM_BATCH, calls each detector's `confirm` once per pair, and pushes each slice's verdicts
   back as an Arrow table; a join yields the confirmed findings. Python holds one slice at a time,
   so its memory does not grow with the partition (pulled at once, a large partition's distinct
   candidates would not fit).

There is no Python loop over rows: Python work is proportional to the number of distinct
candidates, which is what the tests assert.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from batch_assets.policy.detectors import DEFAULT_DETECTORS, Detector
from batch_assets.sqltext import quote_ident, sql_literal

# Distinct candidates confirmed per round trip (Python holds one slice's strings and verdicts).
CONFIRM_BATCH = 20_000

VERDICT_SCHEMA = pa.schema(
    [
        ("detector", pa.string()),
        ("candidate", pa.string()),
        ("rel_offset", pa.int64()),
        ("value", pa.string()),
        ("label", pa.string()),
        ("precedence", pa.int32()),
    ]
)


def temp_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def long_texts_sql(relation_sql: str, id_col: str, text_cols: Sequence[str]) -> str:
    """SELECT id, column_name, col_idx, text: one row per (row, text column), text cast to VARCHAR.

    `relation_sql` is a table/view name or a parenthesizable SELECT."""
    if not text_cols:
        raise ValueError("text_cols is empty: name at least one column to scan")
    if len(set(text_cols)) != len(text_cols):
        raise ValueError("text_cols has duplicates")
    rel = _relation(relation_sql)
    parts = [
        f"SELECT {quote_ident(id_col)} AS id, {sql_literal(col)} AS column_name, {i} AS col_idx, "
        f"CAST({quote_ident(col)} AS VARCHAR) AS text FROM {rel} AS r"
        for i, col in enumerate(text_cols)
    ]
    return "\nUNION ALL\n".join(parts)


def _relation(relation_sql: str) -> str:
    s = relation_sql.strip()
    if s.split(None, 1)[0].upper() in {"SELECT", "WITH", "FROM", "VALUES", "TABLE"}:
        return f"({s})"
    return s


def _check_ids(conn: duckdb.DuckDBPyConnection, relation_sql: str, id_col: str) -> None:
    """Offsets, placeholders and the redacted relation are keyed by id: it must be unique and set."""
    # As many distinct hashes as rows proves the ids distinct (equal ids hash equally) and is
    # cheaper than distinct strings; only fewer (repeats, or a collision) needs the exact count.
    total, distinct, non_null = conn.execute(
        f"SELECT count(*), count(DISTINCT hash({quote_ident(id_col)})), count({quote_ident(id_col)}) "
        f"FROM {_relation(relation_sql)} AS r"
    ).fetchone()
    if non_null != total:
        raise ValueError(f"id column {id_col!r} has {total - non_null} NULL value(s); every row needs an id")
    if distinct != total:
        distinct = conn.execute(
            f"SELECT count(DISTINCT {quote_ident(id_col)}) FROM {_relation(relation_sql)} AS r"
        ).fetchone()[0]
    if distinct != total:
        raise ValueError(
            f"id column {id_col!r} is not unique ({total - distinct} duplicate row(s)); "
            "scan a relation with one row per item"
        )


def candidates_sql(texts_sql: str, detectors: Sequence[Detector]) -> str:
    """(id, column_name, col_idx, detector, candidate, start_offset) for every regex hit."""
    branches = []
    for d in detectors:
        pat = sql_literal(d.pattern)
        branches.append(
            f"SELECT id, column_name, col_idx, {sql_literal(d.name)} AS detector, ms,"
            f" regexp_split_to_array(text, {pat}) AS segs"
            f" FROM (SELECT id, column_name, col_idx, text, regexp_extract_all(text, {pat}) AS ms FROM pre)"
            f" WHERE len(ms) > 0"
        )
    hits = "\nUNION ALL\n".join(branches)
    combined = _any_detector_pattern(detectors)
    return f"""
        WITH texts AS ({texts_sql}),
        pre AS MATERIALIZED (SELECT * FROM texts WHERE regexp_matches(text, {combined})),
        hits AS ({hits}),
        flat AS (
            SELECT id, column_name, col_idx, detector,
                   unnest(ms) AS candidate,
                   unnest(segs[1:len(ms)]) AS seg,
                   unnest(range(1, len(ms) + 1)) AS k
            FROM hits
        )
        SELECT id, column_name, col_idx, detector, candidate,
               CAST(sum(length(seg) + length(candidate)) OVER (
                   PARTITION BY id, column_name, detector ORDER BY k
                   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - length(candidate) AS BIGINT) AS start_offset
        FROM flat
    """


def _any_detector_pattern(detectors: Sequence[Detector]) -> str:
    """A SQL literal: the regular expression matching wherever any of `detectors` matches."""
    return sql_literal("|".join(f"(?:{d.pattern})" for d in detectors))


def confirm_distinct(pairs: Sequence[tuple[str, str]], detectors: Sequence[Detector]) -> pa.Table:
    """Call each detector's `confirm` once per distinct (detector, candidate) pair.

    Returns the verdicts as Arrow: detector, candidate, rel_offset, value, label, precedence. A
    failing validator is reported by detector name only (the candidate never appears in the error,
    and the original exception is not chained because its message might quote the value)."""
    by_name = {d.name: d for d in detectors}
    cols: dict[str, list] = {k: [] for k in ("detector", "candidate", "rel_offset", "value", "label", "precedence")}
    for name, candidate in pairs:
        d = by_name[name]
        try:
            confirmed = d.confirm(candidate)
        except Exception:
            raise RuntimeError(f"sensitive-data detector {name!r} failed on a candidate (value withheld)") from None
        for rel_offset, value in confirmed:
            cols["detector"].append(name)
            cols["candidate"].append(candidate)
            cols["rel_offset"].append(rel_offset)
            cols["value"].append(value)
            cols["label"].append(d.label)
            cols["precedence"].append(d.precedence)
    return pa.table(cols, schema=VERDICT_SCHEMA)


def _confirm_all(conn: duckdb.DuckDBPyConnection, cand: str, verdicts: str, detectors: Sequence[Detector]) -> None:
    """TEMP table `verdicts`: confirm_distinct over every distinct (detector, candidate) of `cand`,
    a slice of CONFIRM_BATCH pairs at a time (a slice is a range of the pairs' numbers). The pairs
    are numbered, not sliced by rowid: inside a transaction a new table's rowids start at 2^62."""
    pairs = temp_name("policy_pairs")
    arrow_name = temp_name("policy_slice")
    conn.execute(
        f"CREATE TEMP TABLE {quote_ident(pairs)} AS SELECT row_number() OVER () - 1 AS pair_no, detector, "
        f"candidate FROM (SELECT DISTINCT detector, candidate FROM {quote_ident(cand)})"
    )
    conn.execute(
        f"CREATE TEMP TABLE {quote_ident(verdicts)} (detector VARCHAR, candidate VARCHAR, "
        "rel_offset BIGINT, value VARCHAR, label VARCHAR, precedence INTEGER)"
    )
    try:
        end = conn.execute(f"SELECT count(*) FROM {quote_ident(pairs)}").fetchone()[0]
        for lo in range(0, end, CONFIRM_BATCH):
            batch = conn.execute(
                f"SELECT detector, candidate FROM {quote_ident(pairs)} "
                f"WHERE pair_no >= {lo} AND pair_no < {lo + CONFIRM_BATCH}"
            ).fetchall()
            conn.register(arrow_name, confirm_distinct(batch, detectors))
            try:
                conn.execute(f"INSERT INTO {quote_ident(verdicts)} SELECT * FROM {quote_ident(arrow_name)}")
            finally:
                conn.unregister(arrow_name)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {quote_ident(pairs)}")


def find_sensitive(
    conn: duckdb.DuckDBPyConnection,
    relation_sql: str,
    id_col: str,
    text_cols: Sequence[str],
    detectors: Sequence[Detector] = DEFAULT_DETECTORS,
    *,
    table: str | None = None,
    hit_texts: str | None = None,
    ids_unique: bool = False,
) -> str:
    """Scan every row and text column of `relation_sql`; return the name of a TEMP table of
    confirmed findings with columns
    (id, column_name, col_idx, detector, label, precedence, value, start_offset, match_length).

    `hit_texts`: also keep, as a TEMP table of that name, the texts (id, column_name, col_idx, text)
    in which any detector's pattern matches: every text with a finding is one of them, so a
    redaction of the findings need not read every text again (a few percent of them, usually).

    `start_offset` is 0-based in code points (Python `str` indexing); `value` is the matched text
    exactly as it appears. Findings of different detectors may overlap (a phone number inside an
    e-mail address); redaction merges overlapping spans. `id_col` must be unique and non-NULL: it is
    checked (one aggregate over every id) unless `ids_unique` (the caller made it so).
    """
    names = [d.name for d in detectors]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate detector names: {names}")
    if not ids_unique:
        _check_ids(conn, relation_sql, id_col)
    table = table or temp_name("policy_findings")
    cand = temp_name("policy_candidates")
    verdicts = temp_name("policy_verdicts")
    texts = long_texts_sql(relation_sql, id_col, text_cols)
    if hit_texts is not None:
        conn.execute(
            f"CREATE OR REPLACE TEMP TABLE {quote_ident(hit_texts)} AS SELECT * FROM ({texts}) "
            f"WHERE regexp_matches(text, {_any_detector_pattern(detectors)})"
        )
        texts = f"SELECT * FROM {quote_ident(hit_texts)}"
    conn.execute(f"CREATE OR REPLACE TEMP TABLE {quote_ident(cand)} AS {candidates_sql(texts, detectors)}")
    try:
        _confirm_all(conn, cand, verdicts, detectors)
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE {quote_ident(table)} AS
            SELECT c.id, c.column_name, c.col_idx, c.detector, v.label, v.precedence, v.value,
                   c.start_offset + v.rel_offset AS start_offset,
                   CAST(length(v.value) AS BIGINT) AS match_length
            FROM {quote_ident(cand)} AS c
            JOIN {quote_ident(verdicts)} AS v USING (detector, candidate)
        """)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {quote_ident(cand)}")
        conn.execute(f"DROP TABLE IF EXISTS {quote_ident(verdicts)}")
    return table
