"""The Dagster instance on PostgreSQL, chosen by configuration alone: with BATCH_ASSETS_DAGSTER_PG_URL
set, the instance `make dev` / `make demo` prepare stores runs and events in that database (a fresh
instance reads back what a real run wrote); without it the SQLite default is unchanged."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from batch_assets.demo.runner import DAGSTER_PG_VARIABLE, prepare_dagster_home

pytestmark = pytest.mark.slow  # real Dagster instances and a run


@dg.asset
def probe() -> int:
    return 1


def test_without_the_variable_the_instance_keeps_its_sqlite_default(tmp_path, monkeypatch):
    monkeypatch.delenv(DAGSTER_PG_VARIABLE, raising=False)
    config = yaml.safe_load((prepare_dagster_home(tmp_path) / "dagster.yaml").read_text())
    assert "storage" not in config and config["concurrency"]["runs"]["max_concurrent_runs"] == 4


def test_a_run_is_stored_in_postgres_and_read_back_by_another_instance(tmp_path, monkeypatch, postgres_url):
    url = postgres_url.replace("postgresql://", "postgresql+psycopg2://", 1)
    monkeypatch.setenv(DAGSTER_PG_VARIABLE, url)
    home = prepare_dagster_home(tmp_path)
    assert url not in (home / "dagster.yaml").read_text()  # the file names the variable, never the URL
    writer = dg.DagsterInstance.from_config(str(home))
    try:
        assert type(writer.run_storage).__name__ == "PostgresRunStorage"
        result = dg.materialize([probe], instance=writer)
        assert result.success
    finally:
        writer.dispose()
    reader = dg.DagsterInstance.from_config(str(home))
    try:
        runs = reader.get_run_records()
        assert [r.dagster_run.run_id for r in runs] == [result.run_id]
        assert reader.get_latest_materialization_event(dg.AssetKey("probe")) is not None
    finally:
        reader.dispose()
