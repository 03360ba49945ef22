"""The ledger records absolute file paths whatever the working directory of the process that
wrote them, so a purge, a collect or a report in another directory finds the same files."""

from __future__ import annotations

from batch_assets.ledger.warehouse import Warehouse


def test_a_relative_data_dir_gives_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wh = Warehouse.at("warehouse.duckdb", "data")
    assert wh.database == tmp_path / "warehouse.duckdb" and wh.data_dir == tmp_path / "data"
    shard = wh.path("shards", "t_20261120", "s1.jsonl")
    assert shard.is_absolute() and shard.parent.is_dir()
    assert Warehouse.at("warehouse.duckdb").data_dir == tmp_path  # no data dir: the database's folder
