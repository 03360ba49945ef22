"""Settings that reach SQL are validated or bound, never pasted into a statement."""

from __future__ import annotations

import duckdb
import pytest

from batch_assets.ledger.warehouse import MEMORY_LIMIT_ENV, Warehouse


def test_memory_limit_setting_cannot_inject_sql(tmp_path, monkeypatch):
    wh = Warehouse.at(tmp_path / "w.duckdb")
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1GB'; CREATE TABLE pwned AS SELECT 1; --")
    with pytest.raises(ValueError, match=rf"{MEMORY_LIMIT_ENV}=.* is not a memory size\. Fix: set it like 2GB"):
        with wh.connect():
            pass
    with duckdb.connect(str(wh.database)) as conn:
        tables = {r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "pwned" not in tables


@pytest.mark.parametrize("value", ["1GB", "1500MB", "2 GiB", "512mb"])
def test_memory_limit_setting_is_applied(tmp_path, monkeypatch, value):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, value)
    with Warehouse.at(tmp_path / "w.duckdb").connect() as conn:
        applied = conn.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert applied.endswith(("MiB", "GiB", "MB", "GB"))


def test_default_memory_limit_leaves_room_for_the_interpreter_within_2gb(tmp_path, monkeypatch):
    """DuckDB's limit covers its buffer pool only; the default leaves room for the 200-350 MB a stage
    process holds outside it, within 2 GB (and about what a 1M-item stage needs: see warehouse.py)."""
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    with Warehouse.at(tmp_path / "w.duckdb").connect() as conn:
        applied = conn.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    number, unit = applied.split()
    mib = float(number) * {"MiB": 1, "GiB": 1024, "MB": 1e6 / 2**20, "GB": 1e9 / 2**20}[unit]
    assert 800 <= mib <= 1600


def test_a_warehouse_given_its_own_pool_uses_it_whatever_the_environment_says(tmp_path, monkeypatch):
    """The benchmark's setup and checks get the floors' pool while its stages get the product's."""
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "900MB")
    with Warehouse.at(tmp_path / "w.duckdb", memory_limit="1500MB").connect() as conn:
        own = conn.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    with Warehouse.at(tmp_path / "w.duckdb").connect() as conn:
        from_env = conn.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert (own, from_env) == ("1.3 GiB", "858.3 MiB")
    with pytest.raises(ValueError, match=r"memory_limit='1GB; --' is not a memory size\. Fix: set it like 2GB"):
        with Warehouse.at(tmp_path / "w.duckdb", memory_limit="1GB; --").connect():
            pass


@pytest.mark.parametrize(("pool", "threshold"), [("1000MB", "238.4 MiB"), ("1GiB", "256.0 MiB"), ("8GB", "512.0 MiB")])
def test_memory_an_eviction_frees_goes_back_to_the_os_at_a_quarter_of_the_pool(tmp_path, pool, threshold):
    """DuckDB's default (512 MiB) is half the default pool: a stage at its limit would hold what its
    evictions freed on top of the pool. Large pools keep DuckDB's default."""
    with Warehouse.at(tmp_path / "w.duckdb", memory_limit=pool).connect() as conn:
        applied = conn.execute("SELECT current_setting('allocator_bulk_deallocation_flush_threshold')").fetchone()[0]
    assert applied == threshold
    with Warehouse.at(tmp_path / "w.duckdb", memory_limit=pool).connect(read_only=True) as conn:
        assert (
            conn.execute("SELECT current_setting('allocator_bulk_deallocation_flush_threshold')").fetchone()[0]
            == threshold
        )
