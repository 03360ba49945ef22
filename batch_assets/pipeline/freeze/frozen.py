"""Reads of a frozen manifest Parquet that later stages share (shards, apply, dry runs)."""

from __future__ import annotations

import duckdb

from batch_assets.ledger.tasks import manifest_uri
from batch_assets.sqltext import sql_literal
from batch_assets.storage.run_files import RunFiles


def frozen_manifest(conn, files: RunFiles, task_id: str) -> str | None:
    """The partition's current frozen manifest Parquet as a local file (its cached copy when it is
    in object storage, downloaded if need be), or None before its first freeze."""
    location = manifest_uri(conn, task_id)
    return None if location is None else str(files.local(location))


def frozen_columns(conn: duckdb.DuckDBPyConnection, uri: str) -> set[str]:
    """The column names of a frozen manifest Parquet (older freezes lack the newer columns)."""
    return {r[0] for r in conn.execute(f"DESCRIBE SELECT * FROM read_parquet({sql_literal(uri)})").fetchall()}


def frozen_item_no_sql(alias: str = "p") -> str:
    """An item's number (ledger.manifest_item.item_no) from its row `alias` of a frozen manifest
    Parquet read with `file_row_number = true`. The Parquet holds `item_no_base` (a constant: the
    partition's highest number + 1 at the freeze) and `earlier_no` (on a refreeze, the number of an
    item frozen before; NULL otherwise); a new item's number is its row in the file after the base,
    so numbers stay unique. Not a number column written by the freeze's COPY: a window's
    row_number() there makes the COPY single-threaded and a sequence is slow too; a constant and the
    file's row number cost nothing. Manifests frozen before item numbers have neither column
    (`"item_no_base" not in frozen_columns(...)`)."""
    return f"coalesce({alias}.earlier_no, {alias}.item_no_base + {alias}.file_row_number)"
