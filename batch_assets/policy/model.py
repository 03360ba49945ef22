"""`PolicySpec` (a task YAML's `policy:` section) and `evaluate`, which applies it to a relation.

Dagster-free. Nothing here puts a matched value in an exception, a log line or the counts: values
only ever live in the findings/mapping temp tables of the local DuckDB connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import duckdb
import phonenumbers
from pydantic import BaseModel, ConfigDict, Field, field_validator

from batch_assets.policy.detectors import DETECTOR_NAMES, default_detectors
from batch_assets.policy.redact import Redaction, redact_texts
from batch_assets.policy.scan import find_sensitive, long_texts_sql, temp_name
from batch_assets.sqltext import quote_ident, sql_literal

Action = Literal["block", "redact", "allow"]
SENSITIVE_COLUMN = "sensitive_column"  # detector name of whole-value findings in `sensitive_columns`


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DetectorActions(_Strict):
    """What to do with an item in which a detector confirmed a value."""

    email: Action = "redact"
    phone: Action = "redact"
    card: Action = "block"
    cn_id: Action = Field(default="block", description="Mainland-China resident identity card number.")
    iban: Action = "block"


class PolicySpec(_Strict):
    """A task's `policy:` section. Example::

    policy:
      detectors: {email: redact, phone: allow, card: block}
      sensitive_columns: [customer_name]
      sensitive_columns_action: redact
      restore_on_apply: true
    """

    detectors: DetectorActions = Field(default_factory=DetectorActions)
    sensitive_columns: list[str] = Field(
        default_factory=list,
        description="Columns always treated as sensitive: the whole non-blank value is redacted or "
        "blocked per `sensitive_columns_action`; detectors do not scan them.",
    )
    sensitive_columns_action: Literal["block", "redact"] = "redact"
    restore_on_apply: bool = Field(
        default=False,
        description="Put original values back into placeholders found in the model's output at apply time.",
    )
    phone_regions: list[str] = Field(
        default_factory=lambda: ["CN"],
        description="Regions whose national number formats count as phone numbers (numbers written "
        "with +CC/00CC are recognised for every country).",
    )

    @field_validator("sensitive_columns")
    @classmethod
    def _columns(cls, v: list[str]) -> list[str]:
        if any(not c.strip() for c in v):
            raise ValueError("has a blank column name")
        if len(set(v)) != len(v):
            raise ValueError("lists a column twice")
        return v

    @field_validator("phone_regions")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("must name at least one region, e.g. [CN]")
        bad = [r for r in v if r.upper() not in phonenumbers.SUPPORTED_REGIONS]
        if bad:
            raise ValueError(f"unknown region(s) {bad}: use ISO 3166 alpha-2 codes such as CN, US, GB")
        return [r.upper() for r in v]

    def action_for(self, detector: str) -> Action:
        if detector == SENSITIVE_COLUMN:
            return self.sensitive_columns_action
        return getattr(self.detectors, detector)


@dataclass(frozen=True)
class DetectorCount:
    detector: str
    action: Action
    findings: int  # confirmed values (a value seen twice counts twice)
    items: int  # distinct ids with at least one finding


@dataclass(frozen=True)
class PolicyOutcome:
    """What `evaluate` found. Tables are TEMP tables of the connection passed to `evaluate`.

    counts: one row per detector (and `sensitive_column` when configured), zero counts included.
    blocked_table: (id, reasons VARCHAR[]) - reasons like "card in column body", never a value.
    redaction.table: (id, column_name, redacted_text) for every row and column (`changed_only`: only
        texts in which something may be masked, of the ids with something masked; an absent text
        is unchanged); values of `redact`
        AND `block` detectors are masked (blocked items should be dropped, but are masked anyway).
    redaction.mapping_table: (id, detector, placeholder, value) - original values, local only.
    findings_table: every confirmed finding, values included - local only.
    """

    counts: tuple[DetectorCount, ...]
    blocked_table: str
    redaction: Redaction
    findings_table: str
    restore_on_apply: bool

    @property
    def redacted_table(self) -> str:
        return self.redaction.table

    @property
    def mapping_table(self) -> str:
        return self.redaction.mapping_table

    def drop(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Drop the temp tables (they also go away with the connection)."""
        for t in (self.blocked_table, self.redaction.table, self.redaction.mapping_table, self.findings_table):
            conn.execute(f"DROP TABLE IF EXISTS {quote_ident(t)}")

    def blocked(self, conn: duckdb.DuckDBPyConnection) -> dict[object, tuple[str, ...]]:
        rows = conn.execute(f"SELECT id, reasons FROM {quote_ident(self.blocked_table)} ORDER BY id").fetchall()
        return {i: tuple(r) for i, r in rows}


def _label_for_column(column: str) -> str:
    label = re.sub(r"[^A-Z0-9]+", "_", column.upper()).strip("_")
    return label if label[:1].isalpha() else f"COL_{label}"


def evaluate(
    conn: duckdb.DuckDBPyConnection,
    relation_sql: str,
    id_col: str,
    text_cols: list[str],
    policy: PolicySpec,
    *,
    changed_only: bool = False,
    ids_unique: bool = False,
) -> PolicyOutcome:
    """Scan `text_cols` of `relation_sql` and apply `policy`: counts, ids to block, redacted text.

    Columns in `policy.sensitive_columns` need not be in `text_cols`; they are added to the
    redacted relation either way. `changed_only`: the redacted relation holds only the texts that
    may have something masked, of the ids that have (the texts a detector's pattern matches, and
    the sensitive columns), so the texts are read once, by the scan: a caller keeps the source
    value of every text not in it. `ids_unique`: the caller made `id_col` unique and non-NULL (the
    scan's own check of it is skipped)."""
    all_cols = list(text_cols) + [c for c in policy.sensitive_columns if c not in text_cols]
    col_idx = {c: i for i, c in enumerate(all_cols)}
    scan_cols = [c for c in text_cols if c not in policy.sensitive_columns]
    detectors = default_detectors(policy.phone_regions)

    findings = temp_name("policy_findings")
    hit_texts = temp_name("policy_hit_texts") if changed_only and scan_cols else None
    if scan_cols:
        find_sensitive(
            conn, relation_sql, id_col, scan_cols, detectors, table=findings, hit_texts=hit_texts, ids_unique=ids_unique
        )
        remap = " ".join(f"WHEN {sql_literal(c)} THEN {col_idx[c]}" for c in scan_cols)
        conn.execute(f"UPDATE {quote_ident(findings)} SET col_idx = CASE column_name {remap} END")
    else:
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE {quote_ident(findings)} AS
            SELECT id, ''::VARCHAR AS column_name, 0 AS col_idx, ''::VARCHAR AS detector, ''::VARCHAR AS label,
                   0 AS precedence, ''::VARCHAR AS value, 0::BIGINT AS start_offset, 0::BIGINT AS match_length
            FROM ({long_texts_sql(relation_sql, id_col, all_cols)}) LIMIT 0
        """)
    if policy.sensitive_columns:
        label_case = " ".join(
            f"WHEN {sql_literal(c)} THEN {sql_literal(_label_for_column(c))}" for c in policy.sensitive_columns
        )
        idx_case = " ".join(f"WHEN {sql_literal(c)} THEN {col_idx[c]}" for c in policy.sensitive_columns)
        conn.execute(f"""
            INSERT INTO {quote_ident(findings)}
            SELECT id, column_name, CASE column_name {idx_case} END, {sql_literal(SENSITIVE_COLUMN)},
                   CASE column_name {label_case} END, -1, text, 0, length(text)
            FROM ({long_texts_sql(relation_sql, id_col, policy.sensitive_columns)})
            WHERE text IS NOT NULL AND trim(text) <> ''
        """)

    names = list(DETECTOR_NAMES) + ([SENSITIVE_COLUMN] if policy.sensitive_columns else [])
    raw = dict(
        (d, (n, i))
        for d, n, i in conn.execute(
            f"SELECT detector, count(*), count(DISTINCT id) FROM {quote_ident(findings)} GROUP BY detector"
        ).fetchall()
    )
    counts = tuple(DetectorCount(d, policy.action_for(d), *raw.get(d, (0, 0))) for d in names)

    block = [d for d in names if policy.action_for(d) == "block"]
    masked = [d for d in names if policy.action_for(d) in ("block", "redact")]
    blocked_table = temp_name("policy_blocked")
    in_block = ", ".join(sql_literal(d) for d in block) or "NULL"
    conn.execute(f"""
        CREATE OR REPLACE TEMP TABLE {quote_ident(blocked_table)} AS
        SELECT id, list(DISTINCT CASE WHEN detector = {sql_literal(SENSITIVE_COLUMN)}
                                      THEN 'sensitive column ' || column_name
                                      ELSE detector || ' in column ' || column_name END
                        ORDER BY CASE WHEN detector = {sql_literal(SENSITIVE_COLUMN)}
                                      THEN 'sensitive column ' || column_name
                                      ELSE detector || ' in column ' || column_name END) AS reasons
        FROM {quote_ident(findings)} WHERE detector IN ({in_block})
        GROUP BY id
    """)
    if changed_only:
        # The texts a detector's pattern matched (kept by the scan) and the sensitive columns' texts.
        def renumbered(texts: str) -> str:
            idx = " ".join(f"WHEN {sql_literal(c)} THEN {col_idx[c]}" for c in all_cols)
            return f"SELECT id, column_name, CASE column_name {idx} END AS col_idx, text FROM ({texts})"

        parts = [renumbered(f"SELECT * FROM {quote_ident(hit_texts)}")] if hit_texts else []
        if policy.sensitive_columns:
            parts.append(renumbered(long_texts_sql(relation_sql, id_col, policy.sensitive_columns)))
        texts_sql = (
            "\nUNION ALL\n".join(parts)
            if parts
            else f"SELECT * FROM ({long_texts_sql(relation_sql, id_col, all_cols)}) LIMIT 0"
        )
    else:
        texts_sql = long_texts_sql(relation_sql, id_col, all_cols)
    try:
        redaction = redact_texts(conn, texts_sql, findings, detectors=masked, changed_only=changed_only)
    finally:
        if hit_texts:
            conn.execute(f"DROP TABLE IF EXISTS {quote_ident(hit_texts)}")
    return PolicyOutcome(
        counts=counts,
        blocked_table=blocked_table,
        redaction=redaction,
        findings_table=findings,
        restore_on_apply=policy.restore_on_apply,
    )
