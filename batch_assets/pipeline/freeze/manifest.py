"""Stage 1 — freeze a partition's source rows into the input manifest.

A frozen partition is reused as is; only an explicit `refreeze` re-queries the source, and then
items whose input hash is unchanged keep their custom_id while new or changed ones get new ones
(changed ones supersede the old item). The prompt texts go to a Parquet file (the manifest URI);
the ledger keeps one row per item with its identifiers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from batch_assets.ledger import manifest as ledger_manifest
from batch_assets.ledger.tasks import set_task_currency, task_row, upsert_frozen_task
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse, scalar
from batch_assets.pipeline.freeze.frozen import frozen_item_no_sql
from batch_assets.pipeline.freeze.render import estimated_tokens_sql, input_hash_sql
from batch_assets.pipeline.freeze.source import drop_source, load_source, source_read
from batch_assets.pipeline.govern.cost import est_cost_sql
from batch_assets.pipeline.govern.sensitive import MAPPING_TABLE, REPEATED_TABLE, GateCounts
from batch_assets.providers.prices import currency_of
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal


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
    pii: GateCounts | None = None  # None when the manifest was reused (nothing scanned)
    est_cost: float | None = None  # estimated cost of the live items (None: model not priced)
    currency: str | None = None
    # How the freeze read its source: "view" (read again: a pure query, see stable_source) or
    # "copy: <why it is not pure>"; None when the manifest was reused.
    source_read: str | None = None


def freeze_manifest(wh: Warehouse, task: ResolvedTask, partition_date: str, refreeze: bool = False) -> ManifestSummary:
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    with wh.connect() as conn:
        row = task_row(conn, task_id)
        existing = (row["manifest_version"], row["manifest_uri"]) if row else None
        if existing and existing[0] > 0 and not refreeze:
            items = scalar(
                conn, "SELECT count(*) FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [task_id]
            )
            rejects = scalar(conn, "SELECT count(*) FROM ledger.source_reject WHERE task_id = ?", [task_id])
            return ManifestSummary(task_id, existing[1], existing[0], items, 0, 0, rejects, reused=True)

        version = (existing[0] if existing else 0) + 1
        with transaction(conn):
            pii = load_source(conn, task, partition_date, wh.tables)
            read = source_read(conn, task, partition_date, wh.tables)
            summary = _freeze(conn, wh, task, partition_date, task_id, version, pii)
        return dataclasses.replace(summary, source_read=read)


def _freeze(
    conn, wh: Warehouse, task: ResolvedTask, partition_date: str, task_id: str, version: int, pii: GateCounts
) -> ManifestSummary:
    spec = task.spec
    # Business ids that are missing or occur more than once cannot be keyed: record them, keep the rest.
    ledger_manifest.replace_source_rejects(
        conn,
        task_id,
        f"""
        SELECT business_id, count(*) AS row_count,
               CASE WHEN business_id IS NULL OR trim(business_id) = '' THEN 'missing_business_id'
                    ELSE 'duplicate_business_id' END AS reason_code,
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
    """,
    )
    prefix = sql_literal(task_id + ":" + spec.item_type + ":")
    # The items go straight into the manifest Parquet, the only copy of the prompt texts; the
    # ledger statements below read their narrow columns back from it (materializing the items first
    # would write and read the texts twice, spilling a large partition out of the memory pool).
    manifest_path = wh.files.new_path("manifests", task_id, f"v{version}.parquet")
    # Each item's number (ledger.manifest_item.item_no, see frozen_item_no_sql): a first
    # freeze numbers its items by their row in the Parquet (0, 1, 2, …); a refreeze keeps the number
    # of an item frozen before and numbers the new ones after the partition's highest.
    base, earlier = conn.execute(
        "SELECT coalesce(max(item_no) + 1, 0), count(*) > 0 FROM ledger.manifest_item WHERE task_id = ?", [task_id]
    ).fetchone()
    earlier_no, earlier_items = "NULL::BIGINT", ""
    if earlier:
        earlier_no = "_earlier.earlier_no"
        earlier_items = (
            f"LEFT JOIN (SELECT custom_id AS earlier_id, item_no AS earlier_no FROM ledger.manifest_item "
            f"WHERE task_id = {sql_literal(task_id)}) _earlier ON _earlier.earlier_id = custom_id"
        )
    conn.execute(f"""
        COPY (SELECT custom_id, {int(base)}::BIGINT AS item_no_base, {earlier_no} AS earlier_no, business_id,
                     input_hash, est_input_tokens, blank_columns, blocked_reason, prompt_text, source_fp
              FROM (SELECT *, {prefix} || business_id || ':' || substr(input_hash, 1, 8) AS custom_id
                    FROM (SELECT business_id, prompt_text, blank_columns, blocked_reason, source_fp,
                                 {input_hash_sql(task)} AS input_hash,
                                 {estimated_tokens_sql("prompt_text")} AS est_input_tokens
                          FROM _src
                          WHERE business_id IS NOT NULL AND trim(business_id) <> ''
                            AND business_id NOT IN (
                                SELECT business_id FROM ledger.source_reject
                                WHERE task_id = {sql_literal(task_id)} AND business_id IS NOT NULL)))
                    {earlier_items})
        TO {sql_literal(str(manifest_path))} (FORMAT parquet, COMPRESSION zstd)
    """)
    location = wh.files.keep(manifest_path, "manifests", task_id)  # uploaded, with object storage
    conn.execute(
        f"CREATE OR REPLACE TEMP VIEW _items AS SELECT *, {frozen_item_no_sql('p')} AS item_no "
        f"FROM read_parquet({sql_literal(str(wh.files.local(location)))}, file_row_number = true) p"
    )
    # Items of an earlier freeze whose input changed (or that left the source) are superseded.
    superseded = ledger_manifest.supersede_items_not_in(conn, task_id, "SELECT custom_id FROM _items")
    new_items = ledger_manifest.insert_manifest_items(
        conn,
        task_id,
        f"""
        SELECT i.custom_id, i.item_no, i.business_id, i.input_hash, i.est_input_tokens,
               {est_cost_sql(task, "i.est_input_tokens")} AS est_cost
        FROM _items i
        WHERE i.custom_id NOT IN (SELECT custom_id FROM ledger.manifest_item WHERE task_id = {sql_literal(task_id)})
    """,
        item_type=spec.item_type,
        prompt_version=spec.prompt.version,
        model=spec.model,
        params_json=task.params_json,
        output_schema_version=spec.output.version,
        manifest_version=version,
    )
    # A changed input that flips back to an earlier text reuses its old custom_id: revive it.
    ledger_manifest.revive_items_in(conn, task_id, "SELECT custom_id FROM _items")
    # The values behind the placeholders, kept locally by custom_id (for restore_on_apply).
    ledger_manifest.insert_pii_mapping(
        conn,
        task_id,
        f"""
        SELECT i.custom_id, m.detector, m.placeholder, m.value
        FROM {MAPPING_TABLE} m JOIN _items i USING (business_id)
    """,
    )

    items, tokens, est_cost = conn.execute(f"""
        SELECT count(*), coalesce(sum(est_input_tokens), 0), sum({est_cost_sql(task)}) FILTER (blocked_reason IS NULL)
        FROM _items
    """).fetchone()
    upsert_frozen_task(
        conn,
        task_id=task_id,
        task_name=spec.name,
        partition_date=partition_date,
        item_type=spec.item_type,
        provider=spec.provider,
        model=spec.model,
        endpoint=spec.endpoint,
        prompt_version=spec.prompt.version,
        output_schema_version=spec.output.version,
        manifest_uri=location,
        manifest_version=version,
        total_items=items,
        est_input_tokens=tokens,
        est_output_tokens=items * spec.params.max_tokens,
        prompt_hash=task.prompt_hash,
        output_schema_hash=task.output_schema_hash,
    )
    currency = currency_of(spec.provider, spec.model)
    set_task_currency(conn, task_id, currency)
    rejects = scalar(conn, "SELECT count(*) FROM ledger.source_reject WHERE task_id = ?", [task_id])
    conn.execute("DROP VIEW _items")
    drop_source(conn)
    return ManifestSummary(
        task_id,
        location,
        version,
        items,
        new_items,
        superseded,
        rejects,
        reused=False,
        pii=pii,
        est_cost=est_cost,
        currency=currency,
    )
