"""The sensitive-data gate of the freeze stage: the task's `policy:` applied to the source rows.

Where: between the source query and prompt rendering. The columns the prompt template uses (and
the policy's `sensitive_columns`) are scanned set-based by `batch_assets.policy.evaluate`; the
prompt is then rendered from the REDACTED columns, so the manifest Parquet, the input hash and
every shard line hold the text as it is sent: placeholders such as `[EMAIL_1]` instead of values.

* `redact`: the value is replaced by a placeholder, stable per item (numbered by first
  appearance, the same value twice in an item is one placeholder); the mapping
  (custom_id, placeholder, value) goes to `ledger.pii_mapping` and never leaves the machine.
* `block`: the item's `blocked_reason` names detector and column ("card in column body", never
  the value); the shard stage quarantines it (reason code `blocked_by_policy`), so it is never sent.
* `allow`: unchanged.

Scanning the source columns rather than the rendered prompt gives reasons that name the business
column, and the template's own text holds nothing sensitive. Apply re-reads the source through the
same gate, so its stale-input guard hashes exactly what was sent.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from batch_assets.pipeline.errors import SourceQueryError
from batch_assets.pipeline.freeze.render import input_hash_sql
from batch_assets.policy.model import PolicyOutcome, evaluate
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import quote_ident, sql_literal

GATED_TABLE = "_gated_src"  # view: _raw_src with the scanned columns redacted, + __bid, __blocked, __fp
CHANGED_TABLE = "_gate_out"  # the redacted texts and block reasons of the items with a masked finding
MAPPING_TABLE = "_pii_map"  # (business_id, detector, placeholder, value) of items not blocked - local only
REPEATED_TABLE = "_gate_repeated"  # (__bid) the business ids the source holds more than once (the freeze rejects them)
BLOCKED_CODE = "blocked_by_policy"


@dataclass(frozen=True)
class GateCounts:
    """What the gate found in a partition: items per detector and action (no values)."""

    by_detector: dict[str, dict]  # detector -> {"action", "findings", "items"}
    redacted_items: int  # items sent with at least one placeholder
    blocked_items: int  # items held back

    def as_metadata(self) -> dict:
        flat = {f"pii_{d}_{c['action']}_items": c["items"] for d, c in self.by_detector.items()}
        return {"pii_redacted": self.redacted_items, "pii_blocked": self.blocked_items, **flat}


def scanned_columns(task: ResolvedTask) -> list[str]:
    policy = task.spec.policy
    return list(task.template_columns) + [c for c in policy.sensitive_columns if c not in task.template_columns]


def fingerprinted_columns(task: ResolvedTask) -> list[str]:
    """The source columns an item's request is made of: template, required and sensitive columns."""
    cols = [*scanned_columns(task), *(task.spec.source.required_columns or [])]
    return list(dict.fromkeys(cols))


def source_fingerprint_sql(task: ResolvedTask, alias: str) -> str:
    """A 64-bit fingerprint of a source row as the task reads it: its raw (not yet redacted) columns
    plus everything of the task that shapes the request (prompt template, canonical request, policy).
    Kept in the manifest at freeze; apply re-runs the gate and re-hashes only rows whose fingerprint
    changed (same fingerprint: same raw input under the same task, so the same input hash)."""
    config = "\x1f".join([task.template, input_hash_sql(task, "''"), task.spec.policy.model_dump_json()])
    cols = ", ".join(f"{alias}.{quote_ident(c)}" for c in fingerprinted_columns(task))
    return f"hash({sql_literal(config)}, {cols})"


def gate_source(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, source_columns: set[str]) -> GateCounts:
    """Apply the task's policy to temp table `_raw_src`: creates the view `_gated_src` (every source row;
    scanned columns redacted, `__bid` the business id as VARCHAR, `__blocked` the block reasons or
    NULL) and `_pii_map`. Rows whose business id is missing or repeated are rejected by the freeze
    and never sent; they are not scanned and carry no reasons."""
    spec = task.spec
    policy = spec.policy
    missing = sorted(set(policy.sensitive_columns) - source_columns)
    if missing:
        raise SourceQueryError(
            f"task {spec.name!r}: policy.sensitive_columns names column(s) {missing} the source query does not "
            f"return ({task.yaml_path}); select them in source.sql or remove them from the policy"
        )
    cols = scanned_columns(task)
    bid = f"CAST({quote_ident(spec.source.business_id)} AS VARCHAR)"
    # A view over the source rows, not a copy of their texts: only the (usually no) repeated ids are
    # kept aside (and kept for the freeze's reject check, until drop_gate). As many distinct 64-bit
    # hashes as ids proves them distinct (equal ids hash equally): the strings are grouped only when
    # some hash repeats (an id held twice, or a collision), since counting hashes is cheaper.
    # (NULLs left out: hash(NULL) is a value, which would make up for a repeated id.)
    rows, hashes = conn.execute(
        f"SELECT count(*), count(DISTINCT hash({bid})) FROM _raw_src WHERE {bid} IS NOT NULL"
    ).fetchone()
    conn.execute(f"""
        CREATE OR REPLACE TEMP TABLE {REPEATED_TABLE} AS
        SELECT {bid} AS __bid FROM _raw_src WHERE {bid} IS NOT NULL {"AND false" if rows == hashes else ""}
        GROUP BY ALL HAVING count(*) > 1
    """)
    # With no repeated id the anti-join is left out (`x NOT IN (empty)` holds for every x): it hashed
    # every id again in each of the view's reads.
    not_repeated = "" if rows == hashes else f"AND {bid} NOT IN (SELECT __bid FROM {REPEATED_TABLE})"
    conn.execute(f"""
        CREATE OR REPLACE TEMP VIEW _gate_in AS
        SELECT {bid} AS __bid, {", ".join(f"CAST({quote_ident(c)} AS VARCHAR) AS {quote_ident(c)}" for c in cols)}
        FROM _raw_src
        WHERE {bid} IS NOT NULL {not_repeated}
    """)
    # _gate_in holds each id once (NULLs and repeated ids left out): the scan need not check it again.
    outcome: PolicyOutcome = evaluate(
        conn, "_gate_in", "__bid", list(task.template_columns), policy, changed_only=True, ids_unique=True
    )
    try:
        red, blocked = quote_ident(outcome.redacted_table), quote_ident(outcome.blocked_table)
        pivot = ", ".join(
            f"max(redacted_text) FILTER (WHERE column_name = {sql_literal(c)}) AS {quote_ident(c)}" for c in cols
        )
        # Only items with a masked finding have a text that differs from the source; every other
        # text keeps its source value (the view below).
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE {CHANGED_TABLE} AS
            SELECT r.*, b.reasons AS __blocked
            FROM (SELECT id AS __bid, {pivot} FROM {red}
                  WHERE id IN (SELECT id FROM {quote_ident(outcome.mapping_table)}) GROUP BY id) AS r
            LEFT JOIN {blocked} AS b ON b.id = r.__bid
        """)
        # The redacted relation holds only the texts that may have had something masked: any other
        # text (another column of a changed item too) keeps its source value. Redaction never
        # turns a text into NULL.
        replaced = ", ".join(
            f"coalesce(g.{quote_ident(c)}, CAST(r.{quote_ident(c)} AS VARCHAR)) AS {quote_ident(c)}" for c in cols
        )
        # A view, not a copy: the freeze reads the gated rows once (its reject check needs only the
        # ids), so materializing every source row again here would only cost time and memory.
        conn.execute(f"""
            CREATE OR REPLACE TEMP VIEW {GATED_TABLE} AS
            SELECT r.* REPLACE ({replaced}), CAST(r.{quote_ident(spec.source.business_id)} AS VARCHAR) AS __bid,
                   g.__blocked, {source_fingerprint_sql(task, "r")} AS __fp
            FROM _raw_src AS r
            LEFT JOIN {CHANGED_TABLE} AS g ON g.__bid = CAST(r.{quote_ident(spec.source.business_id)} AS VARCHAR)
        """)
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE {MAPPING_TABLE} AS
            SELECT id AS business_id, detector, placeholder, value
            FROM {quote_ident(outcome.mapping_table)}
            WHERE id NOT IN (SELECT id FROM {blocked})
        """)
        redacted_items = conn.execute(f"SELECT count(DISTINCT business_id) FROM {MAPPING_TABLE}").fetchone()[0]
        blocked_items = conn.execute(f"SELECT count(*) FROM {blocked}").fetchone()[0]
    finally:
        outcome.drop(conn)
        conn.execute("DROP VIEW IF EXISTS _gate_in")
    return GateCounts(
        by_detector={
            c.detector: {"action": c.action, "findings": c.findings, "items": c.items} for c in outcome.counts
        },
        redacted_items=int(redacted_items),
        blocked_items=int(blocked_items),
    )


def blocked_reason_sql(col: str = "__blocked") -> str:
    """The quarantine reason of a blocked item: detectors and columns, never a value."""
    return (
        f"CASE WHEN {col} IS NOT NULL THEN 'blocked by the task policy: ' || array_to_string({col}, ', ') "
        f"|| '; remove the data from the source or change policy.detectors in the task spec' END"
    )


def drop_gate(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute(
        f"DROP VIEW IF EXISTS {GATED_TABLE}; DROP TABLE IF EXISTS {CHANGED_TABLE}; "
        f"DROP TABLE IF EXISTS {MAPPING_TABLE}; DROP TABLE IF EXISTS {REPEATED_TABLE};"
    )


PLACEHOLDER_PATTERN = r"\[[A-Z][A-Z0-9_]*_[0-9]+\]"


def restore_json_sql(text_col: str, custom_id_col: str, relation: str) -> str:
    """SELECT custom_id, restored: `text_col` (JSON text) of `relation` with every placeholder the
    item's mapping knows replaced by the original value, JSON-escaped. Set-based: the text is split
    at the placeholders and put together again with the mapped values."""
    pat = sql_literal(PLACEHOLDER_PATTERN)
    return f"""
        WITH parts AS (
            SELECT {custom_id_col} AS custom_id, regexp_split_to_array({text_col}, {pat}) AS segs,
                   regexp_extract_all({text_col}, {pat}) AS phs
            FROM {relation}
        ),
        ph AS (SELECT custom_id, unnest(phs) AS ph, unnest(range(1, len(phs) + 1)) AS k FROM parts),
        rep AS (
            SELECT ph.custom_id, ph.k,
                   coalesce(CASE WHEN m.value IS NOT NULL THEN
                                 substr(CAST(to_json(m.value) AS VARCHAR), 2,
                                        length(CAST(to_json(m.value) AS VARCHAR)) - 2)
                            END, ph.ph) AS r
            FROM ph LEFT JOIN ledger.pii_mapping AS m ON m.custom_id = ph.custom_id AND m.placeholder = ph.ph
        )
        SELECT p.custom_id,
               p.segs[1] || coalesce((SELECT string_agg(rep.r || p.segs[rep.k + 1], '' ORDER BY rep.k)
                                      FROM rep WHERE rep.custom_id = p.custom_id), '') AS restored
        FROM parts AS p
    """
