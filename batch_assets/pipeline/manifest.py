"""Stage 1 — freeze a partition's source rows into the input manifest.

A frozen partition is reused as is; only an explicit `refreeze` re-queries the source, and then
items whose input hash is unchanged keep their custom_id while new or changed ones get new ones
(changed ones supersede the old item). The prompt texts go to a Parquet file (the manifest URI);
the ledger keeps one row per item with its identifiers.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import duckdb

from batch_assets.ledger import manifest as ledger_manifest
from batch_assets.ledger.tasks import set_task_currency, upsert_frozen_task
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse, scalar
from batch_assets.pipeline import stable_source
from batch_assets.pipeline.gate import (GATED_TABLE, MAPPING_TABLE, REPEATED_TABLE, GateCounts, blocked_reason_sql,
                                        drop_gate, gate_source)
from batch_assets.pipeline.render import blank_columns_sql, estimated_tokens_sql, input_hash_sql, prompt_sql
from batch_assets.providers.prices import cost_sql_or_null, currency_of
from batch_assets.sqltext import sql_literal
from batch_assets.spec.resolve import ResolvedTask


class SourceQueryError(ValueError):
    """The task's source query failed or lacks a column the task needs."""


@dataclass(frozen=True)
class ManifestSummary:
    task_id: str
    manifest_uri: str
    manifest_version: int
    items: int
    new_items: int
    superseded_items: int
    rejected_business_ids: int
    reused: bool
    pii: GateCounts | None = None       # None when the manifest was reused (nothing scanned)
    est_cost: float | None = None       # estimated cost of the live items (None: model not priced)
    currency: str | None = None
    # How the freeze read its source: "view" (read again: a pure query, see stable_source) or
    # "copy: <why it is not pure>"; None when the manifest was reused.
    source_read: str | None = None


def load_source(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, partition_date: str) -> GateCounts:
    """The source query as `_raw_src` (a view when reading it again gives the same rows, see
    query_source), passed through the task's sensitive-data policy (`pipeline.gate`: redacted
    columns, block reasons, the local `_pii_map`); `_src` (business_id, prompt_text, blank_columns,
    blocked_reason, source_fp) is a temp VIEW over the gated rows, so the rendered prompts are
    computed where used, never stored twice. Drop all with drop_source(). Run it and every read of
    `_src` in one transaction (freeze_manifest does): a view's reads agree only within one."""
    return gate_loaded_source(conn, task, query_source(conn, task, partition_date, reread=True))


def source_subquery(task: ResolvedTask) -> str:
    """The source query as a parenthesized subquery (a trailing `;` and line comments removed; the
    closing parenthesis on its own line so a last `-- comment` cannot swallow it)."""
    text = re.sub(r";\s*(--[^\n]*\s*)*$", "", task.spec.source.sql.strip())
    return f"({text}\n)"


def query_source(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, partition_date: str,
                 where: str | None = None, reread: bool = False) -> set[str]:
    """The source query into temp table `_raw_src` (checked for the columns the task needs); returns
    its columns. `where`: only the source rows matching this condition (over the source's columns).
    `reread`: the caller only reads the source (it writes no table the query may read), so when the
    query is a pure function of DuckDB tables (`stable_source.view_sql`) `_raw_src` is a view over
    it, not a copy: at 10M items the copy was 5.4 GB that spilled and was read back."""
    spec = task.spec
    query = spec.source.sql if where is None else f"SELECT * FROM {source_subquery(task)} AS _q WHERE {where}"
    params = {"partition_date": partition_date}
    _drop_raw_source(conn)
    try:
        view = stable_source.view_sql(conn, query, params) if reread else None
        if view is not None:
            conn.execute(f"CREATE TEMP VIEW _raw_src AS {view}")
        else:
            conn.execute(f"CREATE TEMP TABLE _raw_src AS {query}", params)
    except duckdb.Error as exc:
        raise SourceQueryError(
            f"task {spec.name!r}: the source query (source.sql in {task.yaml_path}) failed for partition "
            f"{partition_date}: {exc}"
        ) from exc
    columns = {row[0] for row in conn.execute("DESCRIBE _raw_src").fetchall()}
    needed = {spec.source.business_id, *task.template_columns, *(spec.source.required_columns or [])}
    missing = sorted(needed - columns)
    if missing:
        raise SourceQueryError(
            f"task {spec.name!r}: the source query returns no column(s) {missing} (needed by source.business_id, "
            f"the prompt template or source.required_columns in {task.yaml_path}); it returns {sorted(columns)}. "
            "Fix: select those columns or correct the names."
        )
    return columns


def gate_loaded_source(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, columns: set[str]) -> GateCounts:
    """The gate over the rows now in `_raw_src`, and the `_src` view (see load_source)."""
    counts = gate_source(conn, task, columns)
    conn.execute(f"""
        CREATE OR REPLACE TEMP VIEW _src AS
        -- The id exactly as the source holds it: 'A' and ' A ' are two records, and a trimmed id
        -- would be a key the business table does not have. The prompt is rendered from the
        -- redacted columns: what is hashed and sent holds placeholders, never the values.
        SELECT __bid AS business_id,
               {prompt_sql(task)} AS prompt_text,
               {blank_columns_sql(task)} AS blank_columns,
               {blocked_reason_sql()} AS blocked_reason,
               __fp AS source_fp
        FROM {GATED_TABLE}
    """)
    return counts


def frozen_columns(conn: duckdb.DuckDBPyConnection, uri: str) -> set[str]:
    """The column names of a frozen manifest Parquet (older freezes lack the newer columns)."""
    return {r[0] for r in conn.execute(f"DESCRIBE SELECT * FROM read_parquet({sql_literal(uri)})").fetchall()}


def frozen_item_no_sql(alias: str = "p") -> str:
    """An item's number (ledger.manifest_item.item_no) from its row `alias` of a frozen manifest
    Parquet read with `file_row_number = true`. The Parquet holds `item_no_base` (a constant: the
    partition's highest number + 1 at the freeze) and `earlier_no` (on a refreeze, the number of an
    item frozen before; NULL otherwise); a new item's number is its row in the file after the base,
    so numbers stay unique. Not a number column written by the freeze's COPY: a window's
    row_number() there made the COPY single-threaded (1M items: 5.2 -> 13.1 s), a sequence took
    8.8 s; a constant and the file's row number cost nothing. Manifests frozen before item numbers
    have neither column (`"item_no_base" not in frozen_columns(...)`)."""
    return f"coalesce({alias}.earlier_no, {alias}.item_no_base + {alias}.file_row_number)"


def _raw_source_kind(conn: duckdb.DuckDBPyConnection) -> str | None:
    """'VIEW' or 'LOCAL TEMPORARY' (a copy): what `_raw_src` is now; None when there is none."""
    return conn.execute("SELECT any_value(table_type) FROM information_schema.tables "
                        "WHERE table_catalog = 'temp' AND table_name = '_raw_src'").fetchone()[0]


def _source_read(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, partition_date: str) -> str:
    """ManifestSummary.source_read for the `_raw_src` loaded now: 'view', or 'copy: ' and why."""
    if _raw_source_kind(conn) == "VIEW":
        return "view"
    why = stable_source.why_not(conn, task.spec.source.sql, {"partition_date": partition_date})
    return f"copy: {why or 'not read as a view'}"


def _drop_raw_source(conn: duckdb.DuckDBPyConnection) -> None:
    kind = _raw_source_kind(conn)
    if kind is not None:
        conn.execute(f"DROP {'VIEW' if kind == 'VIEW' else 'TABLE'} _raw_src")


def drop_source(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute("DROP VIEW IF EXISTS _src")
    _drop_raw_source(conn)
    drop_gate(conn)


def freeze_manifest(wh: Warehouse, task: ResolvedTask, partition_date: str, refreeze: bool = False) -> ManifestSummary:
    spec = task.spec
    task_id = task.task_id(partition_date)
    with wh.connect() as conn:
        existing = conn.execute(
            "SELECT manifest_version, manifest_uri FROM ledger.batch_task WHERE task_id = ?", [task_id]
        ).fetchone()
        if existing and existing[0] > 0 and not refreeze:
            items = scalar(conn, "SELECT count(*) FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [task_id])
            rejects = scalar(conn, "SELECT count(*) FROM ledger.source_reject WHERE task_id = ?", [task_id])
            return ManifestSummary(task_id, existing[1], existing[0], items, 0, 0, rejects, reused=True)

        version = (existing[0] if existing else 0) + 1
        with transaction(conn):
            pii = load_source(conn, task, partition_date)
            read = _source_read(conn, task, partition_date)
            summary = _freeze(conn, wh, task, partition_date, task_id, version, pii)
        return dataclasses.replace(summary, source_read=read)


def expected_output_tokens(task: ResolvedTask) -> int:
    """Output tokens the estimate assumes per item: `params.max_tokens`, the most that can be billed
    (an upper bound; thinking tokens count against it), 0 for embeddings."""
    return 0 if task.spec.output.kind == "embedding" else int(task.spec.params.max_tokens)


REQUEST_FRAMING_TOKENS = 10  # per request: role markers of the system and user turns and the reply's start


def request_overhead_tokens(task: ResolvedTask) -> int:
    """Input tokens a request bills beyond its prompt text: the system prompt (estimated like the
    prompt, ~4 bytes a token) plus the chat framing. 0 for embeddings (the text is all)."""
    if task.spec.output.kind == "embedding":
        return 0
    system = (task.spec.prompt.system or "").encode("utf-8")
    return -(-len(system) // 4) + REQUEST_FRAMING_TOKENS


def est_cost_sql(task: ResolvedTask, input_tokens_sql: str = "est_input_tokens") -> str:
    """Estimated cost of one item: its prompt's offline token estimate plus the request overhead
    in, `expected_output_tokens` out, at the batch price (NULL when the model has no price)."""
    return cost_sql_or_null(task.spec.provider, task.spec.model,
                            f"({input_tokens_sql} + {request_overhead_tokens(task)})", str(expected_output_tokens(task)))


def _freeze(conn, wh: Warehouse, task: ResolvedTask, partition_date: str, task_id: str, version: int,
            pii: GateCounts) -> ManifestSummary:
    spec = task.spec
    # Business ids that are missing or occur more than once cannot be keyed: record them, keep the rest.
    ledger_manifest.replace_source_rejects(conn, task_id, f"""
        SELECT business_id, count(*) AS row_count,
               CASE WHEN business_id IS NULL OR trim(business_id) = '' THEN 'missing_business_id' ELSE 'duplicate_business_id' END
                   AS reason_code,
               CASE WHEN business_id IS NULL OR trim(business_id) = ''
                    THEN 'source rows without a value in ' || {sql_literal(spec.source.business_id)}
                         || '; fix the source data or filter such rows out in source.sql'
                    ELSE 'business id ' || business_id || ' appears ' || count(*) || ' times in the source; '
                         || 'none of its rows was sent. Fix: deduplicate the source (source.sql) so each '
                         || {sql_literal(spec.source.business_id)} || ' appears once'
               END AS reason
        FROM _src
        -- Only the missing and the repeated ids (found by the gate) are grouped, not every id.
        WHERE business_id IS NULL OR trim(business_id) = '' OR business_id IN (SELECT __bid FROM {REPEATED_TABLE})
        GROUP BY business_id
        HAVING business_id IS NULL OR trim(business_id) = '' OR count(*) > 1
    """)
    prefix = sql_literal(task_id + ':' + spec.item_type + ':')
    # The items go straight into the manifest Parquet, the only copy of the prompt texts; the
    # ledger statements below read their narrow columns back from it. (Materializing the items,
    # texts included, and then copying them out wrote and read them twice: at 10M items ~6 GB
    # spilled out of the memory pool and back.)
    manifest_path = wh.path("manifests", task_id, f"v{version}.parquet")
    # Each item's number (ledger.manifest_item.item_no, see frozen_item_no_sql): a first
    # freeze numbers its items by their row in the Parquet (0, 1, 2, …); a refreeze keeps the number
    # of an item frozen before and numbers the new ones after the partition's highest.
    base, earlier = conn.execute("SELECT coalesce(max(item_no) + 1, 0), count(*) > 0 FROM ledger.manifest_item "
                                 "WHERE task_id = ?", [task_id]).fetchone()
    earlier_no, earlier_items = "NULL::BIGINT", ""
    if earlier:
        earlier_no = "_earlier.earlier_no"
        earlier_items = (f"LEFT JOIN (SELECT custom_id AS earlier_id, item_no AS earlier_no FROM ledger.manifest_item "
                         f"WHERE task_id = {sql_literal(task_id)}) _earlier ON _earlier.earlier_id = custom_id")
    conn.execute(f"""
        COPY (SELECT custom_id, {int(base)}::BIGINT AS item_no_base, {earlier_no} AS earlier_no, business_id,
                     input_hash, est_input_tokens, blank_columns, blocked_reason, prompt_text, source_fp
              FROM (SELECT *, {prefix} || business_id || ':' || substr(input_hash, 1, 8) AS custom_id
                    FROM (SELECT business_id, prompt_text, blank_columns, blocked_reason, source_fp,
                                 {input_hash_sql(task)} AS input_hash,
                                 {estimated_tokens_sql('prompt_text')} AS est_input_tokens
                          FROM _src
                          WHERE business_id IS NOT NULL AND trim(business_id) <> ''
                            AND business_id NOT IN (SELECT business_id FROM ledger.source_reject
                                                    WHERE task_id = {sql_literal(task_id)} AND business_id IS NOT NULL)))
                    {earlier_items})
        TO {sql_literal(str(manifest_path))} (FORMAT parquet, COMPRESSION zstd)
    """)
    conn.execute(f"CREATE OR REPLACE TEMP VIEW _items AS SELECT *, {frozen_item_no_sql('p')} AS item_no "
                 f"FROM read_parquet({sql_literal(str(manifest_path))}, file_row_number = true) p")
    # Items of an earlier freeze whose input changed (or that left the source) are superseded.
    superseded = ledger_manifest.supersede_items_not_in(conn, task_id, "SELECT custom_id FROM _items")
    new_items = ledger_manifest.insert_manifest_items(conn, task_id, f"""
        SELECT i.custom_id, i.item_no, i.business_id, i.input_hash, i.est_input_tokens,
               {est_cost_sql(task, 'i.est_input_tokens')} AS est_cost
        FROM _items i
        WHERE i.custom_id NOT IN (SELECT custom_id FROM ledger.manifest_item WHERE task_id = {sql_literal(task_id)})
    """, item_type=spec.item_type, prompt_version=spec.prompt.version, model=spec.model,
        params_json=task.params_json, output_schema_version=spec.output.version, manifest_version=version)
    # A changed input that flips back to an earlier text reuses its old custom_id: revive it.
    ledger_manifest.revive_items_in(conn, task_id, "SELECT custom_id FROM _items")
    # The values behind the placeholders, kept locally by custom_id (for restore_on_apply).
    ledger_manifest.insert_pii_mapping(conn, task_id, f"""
        SELECT i.custom_id, m.detector, m.placeholder, m.value
        FROM {MAPPING_TABLE} m JOIN _items i USING (business_id)
    """)

    items, tokens, est_cost = conn.execute(f"""
        SELECT count(*), coalesce(sum(est_input_tokens), 0), sum({est_cost_sql(task)}) FILTER (blocked_reason IS NULL)
        FROM _items
    """).fetchone()
    upsert_frozen_task(
        conn, task_id=task_id, task_name=spec.name, partition_date=partition_date, item_type=spec.item_type,
        provider=spec.provider, model=spec.model, endpoint=spec.endpoint, prompt_version=spec.prompt.version,
        output_schema_version=spec.output.version, manifest_uri=str(manifest_path), manifest_version=version,
        total_items=items, est_input_tokens=tokens, est_output_tokens=items * spec.params.max_tokens,
        prompt_hash=task.prompt_hash, output_schema_hash=task.output_schema_hash)
    currency = currency_of(spec.provider, spec.model)
    set_task_currency(conn, task_id, currency)
    rejects = scalar(conn, "SELECT count(*) FROM ledger.source_reject WHERE task_id = ?", [task_id])
    conn.execute("DROP VIEW _items")
    drop_source(conn)
    return ManifestSummary(task_id, str(manifest_path), version, items, new_items, superseded, rejects, reused=False,
                           pii=pii, est_cost=est_cost, currency=currency)
