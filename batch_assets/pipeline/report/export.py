"""Export a task partition's results merged with its inputs, as CSV for spreadsheets."""

from __future__ import annotations

from pathlib import Path

from batch_assets import progress
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.freeze.frozen import frozen_manifest
from batch_assets.sqltext import sql_literal

UTF8_BOM = b"\xef\xbb\xbf"


def export_results(wh: Warehouse, task_id: str, out: Path) -> int:
    """One row per manifest item: its outcome, answer and input text, written to `out` (its directory
    must exist). Returns rows written."""
    wh = wh.of(task_id)  # its partition's store
    body = out.with_suffix(out.suffix + ".part")
    with wh.connect(read_only=True) as conn, progress.task(f"{task_id}: export (query)", unit="rows", keep=True) as bar:
        tid = sql_literal(task_id)
        uri = frozen_manifest(conn, wh.files, task_id)
        if uri is None:
            raise ValueError(f"no batch task {task_id!r}; list them with `batch-assets report`")
        n = conn.execute(f"""
            COPY (
                SELECT m.custom_id, m.business_id, m.input_hash,
                       CASE WHEN q.custom_id IS NOT NULL THEN 'quarantined'
                            WHEN a.outcome IS NOT NULL THEN a.outcome
                            WHEN p.custom_id IS NULL THEN 'no result yet'
                            WHEN p.error_class IS NOT NULL THEN p.error_class
                            ELSE 'not applied yet' END AS outcome,
                       coalesce(q.reason, p.error_message) AS detail,
                       p.output_json AS answer, p.finish_reason, p.input_tokens, p.output_tokens,
                       src.prompt_text AS input_text
                FROM ledger.manifest_item m
                -- The partition's own rows only (the ledger holds every partition), and of an item's
                -- parsed results the latest attempt's: one row per item, retried or not.
                LEFT JOIN (SELECT * FROM ledger.quarantine WHERE task_id = {tid}) q USING (custom_id)
                LEFT JOIN (SELECT * FROM ledger.parsed_result WHERE task_id = {tid}
                           QUALIFY row_number() OVER (PARTITION BY custom_id ORDER BY attempt DESC) = 1) p
                       USING (custom_id)
                LEFT JOIN (SELECT * FROM ledger.applied_result WHERE task_id = {tid}) a USING (custom_id)
                LEFT JOIN read_parquet({sql_literal(uri)}) src USING (custom_id)
                WHERE m.task_id = {tid} AND m.superseded_at IS NULL
                ORDER BY m.business_id
            ) TO {sql_literal(str(body))} (FORMAT csv, HEADER true)
        """).fetchone()[0]
        bar.advance(n)
    with (
        open(out, "wb") as dst,
        open(body, "rb") as src,
        progress.task(
            f"{task_id}: export (write {out.name})", total=body.stat().st_size, unit="bytes", keep=True
        ) as bar,
    ):
        dst.write(UTF8_BOM)
        while chunk := src.read(1 << 20):
            dst.write(chunk)
            bar.advance(len(chunk))
    body.unlink()
    return int(n)
