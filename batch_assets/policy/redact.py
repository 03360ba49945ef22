"""Set-based redaction of confirmed findings, a local placeholder mapping, and `restore`.

Approach: split/join by OFFSETS, in one SQL pass (not an iterative `replace`). `replace` would mask
every occurrence of a value's characters, including inside longer unrelated digit runs, and its
result depends on the order of replacements; offsets replace exactly the confirmed spans.

1. Spans to mask are the findings (optionally only some detectors). Overlapping spans in one
   (id, column) - a phone number inside an e-mail address - are merged into one "island"
   (gaps-and-islands over start offsets), so every confirmed character is masked. The island takes
   the label of its longest finding (ties: detector precedence).
2. Placeholders are per item (id) and label: `[EMAIL_1]`, `[EMAIL_2]`, numbered by first
   appearance (column order, then offset); the same value appearing twice in one item - in one
   column or in two - gets the same placeholder. "Same" means the exact same text: `138-1234-5678`
   and `13812345678` are two placeholders, so `restore` gives back exactly what was written.
3. The redacted text is the text cut once by its spans (an ordered list per text): the piece
   before each span + its placeholder, then the tail after the last span. Rows without findings
   come through unchanged (a LEFT JOIN).

The mapping table (id, detector, placeholder, value) holds the original values: it stays in the
local warehouse and must never be sent to a provider or logged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import duckdb

from batch_assets.policy.scan import long_texts_sql, temp_name
from batch_assets.sqltext import quote_ident, sql_literal

PLACEHOLDER_RE = re.compile(r"\[[A-Z][A-Z0-9_]*_[0-9]+\]")


@dataclass(frozen=True)
class Redaction:
    """Names of two TEMP tables: `table` (id, column_name, redacted_text) with every input row (with
    `changed_only`: only the given rows of the ids that have a masked finding), and `mapping_table`
    (id, detector, placeholder, value), local only."""

    table: str
    mapping_table: str

    def relation(self, conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        return conn.table(self.table)


def redact(
    conn: duckdb.DuckDBPyConnection,
    relation_sql: str,
    id_col: str,
    text_cols: Sequence[str],
    findings_table: str,
    *,
    detectors: Iterable[str] | None = None,
    table: str | None = None,
    mapping_table: str | None = None,
) -> Redaction:
    """Redact the findings of `findings_table` (as made by `find_sensitive`) in `text_cols`.

    `detectors`: only findings of these detector names are masked (None: all). Returns the
    redacted relation for ALL rows and columns (unchanged where nothing is masked)."""
    texts_sql = long_texts_sql(relation_sql, id_col, text_cols)
    return redact_texts(conn, texts_sql, findings_table, detectors=detectors, table=table, mapping_table=mapping_table)


def redact_texts(
    conn: duckdb.DuckDBPyConnection,
    texts_sql: str,
    findings_table: str,
    *,
    detectors: Iterable[str] | None = None,
    table: str | None = None,
    mapping_table: str | None = None,
    changed_only: bool = False,
) -> Redaction:
    """`redact` over an already long relation (id, column_name, col_idx, text).

    `changed_only`: only the texts of ids with a finding to mask are copied and returned; a caller
    that keeps the source value of every other text (the freeze's gate) saves moving all texts
    twice. `texts_sql` may then hold just the texts that can have a finding."""
    table = table or temp_name("policy_redacted")
    mapping_table = mapping_table or temp_name("policy_mapping")
    spans = temp_name("policy_spans")
    where = ""
    if detectors is not None:
        names = sorted(set(detectors))
        where = "WHERE detector IN (" + ", ".join(sql_literal(n) for n in names) + ")" if names else "WHERE false"
    texts = temp_name("policy_texts")
    masked_ids = f"SELECT id FROM {quote_ident(findings_table)} {where}"
    conn.execute(
        f"CREATE OR REPLACE TEMP TABLE {quote_ident(texts)} AS SELECT * FROM ({texts_sql})"
        + (f" WHERE id IN ({masked_ids})" if changed_only else "")
    )
    try:
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE {quote_ident(spans)} AS
            WITH f AS (
                SELECT id, column_name, col_idx, detector, label, precedence, start_offset,
                       start_offset + match_length AS end_offset, match_length
                FROM {quote_ident(findings_table)} {where}
            ),
            ordered AS (
                SELECT *, max(end_offset) OVER (
                    PARTITION BY id, column_name ORDER BY start_offset, match_length DESC, precedence
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max_end
                FROM f
            ),
            marked AS (
                SELECT *, sum(CASE WHEN prev_max_end IS NULL OR start_offset >= prev_max_end THEN 1 ELSE 0 END)
                    OVER (PARTITION BY id, column_name ORDER BY start_offset, match_length DESC, precedence
                          ROWS UNBOUNDED PRECEDING) AS island
                FROM ordered
            ),
            islands AS (
                SELECT id, column_name, any_value(col_idx) AS col_idx, island,
                       min(start_offset) AS s, max(end_offset) AS e,
                       first(detector ORDER BY match_length DESC, precedence) AS detector,
                       first(label ORDER BY match_length DESC, precedence) AS label
                FROM marked GROUP BY id, column_name, island
            ),
            valued AS (
                SELECT i.*, substring(t.text, i.s + 1, i.e - i.s) AS value
                FROM islands AS i JOIN {quote_ident(texts)} AS t USING (id, column_name)
            ),
            numbered AS (
                SELECT id, label, value,
                       '[' || label || '_' || CAST(row_number() OVER (
                           PARTITION BY id, label
                           ORDER BY min([CAST(col_idx AS BIGINT), CAST(s AS BIGINT)]), value) AS VARCHAR)
                       || ']' AS placeholder
                FROM valued GROUP BY id, label, value
            )
            SELECT v.id, v.column_name, v.s, v.e, v.detector, v.value, n.placeholder
            FROM valued AS v JOIN numbered AS n USING (id, label, value)
        """)
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE {quote_ident(mapping_table)} AS
            SELECT id, any_value(detector) AS detector, placeholder, value
            FROM {quote_ident(spans)} GROUP BY id, placeholder, value
        """)
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE {quote_ident(table)} AS
            -- Each text's spans as one small ordered list (no text copied per span), then the text
            -- cut once: the piece before each span + its placeholder, then the tail. Windows and an
            -- ordered string_agg over (span, whole text) rows ran out of memory at 10M items.
            WITH g AS (
                SELECT id, column_name, list({{'s': s, 'e': e, 'ph': placeholder}} ORDER BY s) AS sp
                FROM {quote_ident(spans)} GROUP BY id, column_name
            )
            SELECT t.id, t.column_name,
                   CASE WHEN g.sp IS NULL THEN t.text ELSE
                       array_to_string(list_transform(range(1, len(g.sp) + 1), lambda i:
                           substring(t.text, CASE WHEN i = 1 THEN 0 ELSE g.sp[i - 1].e END + 1,
                                     g.sp[i].s - CASE WHEN i = 1 THEN 0 ELSE g.sp[i - 1].e END) || g.sp[i].ph), '')
                       || substring(t.text, g.sp[len(g.sp)].e + 1)
                   END AS redacted_text
            FROM {quote_ident(texts)} AS t LEFT JOIN g USING (id, column_name)
        """)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {quote_ident(spans)}")
        conn.execute(f"DROP TABLE IF EXISTS {quote_ident(texts)}")
    return Redaction(table=table, mapping_table=mapping_table)


def load_mapping(conn: duckdb.DuckDBPyConnection, mapping_table: str, item_id: object) -> dict[str, str]:
    """placeholder -> original value for one item (for `restore`)."""
    rows = conn.execute(
        f"SELECT placeholder, value FROM {quote_ident(mapping_table)} WHERE id = ?", [item_id]
    ).fetchall()
    return dict(rows)


def restore(text: str, mapping: Mapping[str, str]) -> str:
    """Put original values back for the placeholders in `text` (e.g. a model's answer at apply time).

    Placeholders not in `mapping` are left as they are. Single pass: a restored value is never
    itself scanned for placeholders."""
    return PLACEHOLDER_RE.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)
