"""The ledger records absolute file paths whatever the working directory of the process that
wrote them, so a purge, a collect or a report in another directory finds the same files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from batch_assets.demo import seed_support_tickets
from batch_assets.ledger.control_db import as_control, local_control
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.resources import WarehouseResource


def test_a_relative_data_dir_gives_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wh = Warehouse.at("warehouse.duckdb", "data")
    assert wh.database == tmp_path / "warehouse.duckdb" and wh.data_dir == tmp_path / "data"
    shard = wh.path("shards", "t_20261120", "s1.jsonl")
    assert shard.is_absolute() and shard.parent.is_dir()
    assert Warehouse.at("warehouse.duckdb").data_dir == tmp_path  # no data dir: the database's folder


@pytest.mark.slow
def test_a_partition_run_from_a_relative_data_dir_leaves_no_relative_path_in_the_ledger(
    ledger_backend, tmp_path, monkeypatch, ticket_task, adapter, run_partition
):
    """As `dg launch` runs it: the resource configured with relative paths, the process in their folder."""
    monkeypatch.chdir(tmp_path)
    wh = WarehouseResource(database="data/warehouse.duckdb", data_dir="data").warehouse()
    with wh.connect() as conn:
        seed_support_tickets(conn, days=1, per_day=50)
    assert run_partition(wh, ticket_task, "2026-11-20", adapter).applied > 0
    file_name = re.compile(r".*[.](jsonl|parquet|gz)$")
    with wh.connect() as conn:
        paths = []
        # The file's tables and, in `distributed`, the PostgreSQL ledger's.
        for db in {id(s): s for s in (local_control(conn), as_control(conn))}.values():
            columns = db.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = 'ledger' AND data_type IN ('VARCHAR', 'character varying')"
            ).rows
            paths += [
                (table, column, value)
                for table, column in columns
                for (value,) in db.execute(f'SELECT DISTINCT "{column}" FROM ledger."{table}"').rows
                if isinstance(value, str) and file_name.match(value)
            ]
        assert ledger_backend == "local" or any(t == "shard" for t, _, _ in paths)
    assert paths, "the run recorded no file path at all"
    assert [p for p in paths if not Path(p[2]).is_absolute()] == []
