"""Partition stores in object storage (a real S3 server): versions named in PostgreSQL, moved by
compare-and-set with the control rows, orphans collected (ledger/store_versions.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from batch_assets.ledger import store_versions
from batch_assets.ledger import transaction as transaction_mod
from batch_assets.ledger.retries import record_operator_action
from batch_assets.ledger.store_versions import StoreVersionConflict
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.task_tables.postgres import PgTables

TASK_ID = "ticket_triage_20261120"


@pytest.fixture
def machines(tmp_path, postgres_url, s3_storage) -> tuple[Warehouse, Warehouse]:
    """Two machines: separate, empty data directories; one PostgreSQL ledger, one bucket."""

    def machine(name: str) -> Warehouse:
        return Warehouse.at(
            tmp_path / name / "warehouse.duckdb",
            ledger_url=postgres_url,
            tables=PgTables(postgres_url, schema="biz"),
            storage=s3_storage,
        )

    return machine("a"), machine("b")


def _reject(conn, business_id: str) -> None:
    """One per-item row (idempotent: a second write of it changes nothing)."""
    conn.execute(
        """INSERT INTO ledger.source_reject (task_id, business_id, row_count, reason_code, reason, recorded_at)
           SELECT ?, ?, 1, 'test', 'test', now()::TIMESTAMP
           WHERE NOT EXISTS (SELECT 1 FROM ledger.source_reject WHERE business_id = ?)""",
        [TASK_ID, business_id, business_id],
    )


def _rejects(wh: Warehouse) -> list[str]:
    with wh.of(TASK_ID).connect(read_only=True) as conn:
        return [r[0] for r in conn.execute("SELECT business_id FROM ledger.source_reject ORDER BY 1").fetchall()]


def _version(wh: Warehouse):
    with wh.control() as db:
        return store_versions.current(db, TASK_ID)


def test_a_store_written_on_one_machine_is_read_and_continued_on_another(machines, s3_storage):
    a, b = machines
    with a.of(TASK_ID).connect() as conn, transaction(conn):
        _reject(conn, "from-a")
    first = _version(a)
    assert first.version == 1 and first.object_key.endswith(f"{first.sha256}.duckdb")
    assert _rejects(b) == ["from-a"]  # b's disk had nothing: it read the version a uploaded
    with b.of(TASK_ID).connect() as conn, transaction(conn):
        _reject(conn, "from-b")
    assert _version(b).version == 2
    with a.of(TASK_ID).connect() as conn:  # a's copy is stale: it starts from b's version
        assert conn.execute("SELECT count(*) FROM ledger.source_reject").fetchone() == (2,)
        with transaction(conn):
            _reject(conn, "from-a-again")
    assert _rejects(b) == ["from-a", "from-a-again", "from-b"]
    with b.connect() as conn:  # a read across partitions reads the current versions too
        assert conn.execute("SELECT count(*) FROM ledger.source_reject").fetchone() == (3,)
    keys = {k for k, _ in s3_storage.objects("stores")}
    assert _version(a).object_key in keys and len(keys) == 3  # immutable versions, keyed by content
    assert not list((a.data_dir / "partitions").glob("*.wal"))


def test_a_run_that_lost_the_race_for_the_store_records_nothing_and_its_rerun_starts_from_the_winner(machines):
    """Two runs started from version 1 (the loser's lease had lapsed; here both are in one process,
    which shares its lease): the winner's compare-and-set moves the pointer, the loser's fails, and
    neither its store changes nor the control row of its transaction are kept."""
    a, b = machines
    with a.of(TASK_ID).connect() as conn, transaction(conn):
        _reject(conn, "base")
    with a.of(TASK_ID).connect() as loser:  # started from version 1
        with b.of(TASK_ID).connect() as winner, transaction(winner):
            _reject(winner, "winner")
        assert _version(b).version == 2
        with pytest.raises(StoreVersionConflict, match=rf"partition {TASK_ID}: its store was moved to version 2"):
            with transaction(loser):
                _reject(loser, "loser")
                record_operator_action(loser, "retry", task_id=TASK_ID, detail="the loser's control row")
    with a.control() as db:
        assert db.execute("SELECT count(*) FROM ledger.operator_action").scalar() == 0
    assert _version(a).version == 2 and _rejects(b) == ["base", "winner"]
    # The rerun starts from the winner's version and does its work once.
    for _ in range(2):
        with a.of(TASK_ID).connect() as conn, transaction(conn):
            _reject(conn, "loser")
    assert _rejects(b) == ["base", "loser", "winner"] and _version(a).version == 3


def test_an_upload_whose_commit_never_came_is_an_orphan_that_garbage_collection_deletes(
    machines, s3_storage, monkeypatch
):
    a, _ = machines
    with a.of(TASK_ID).connect() as conn, transaction(conn):
        _reject(conn, "kept")
    kept = _version(a)

    def crash() -> None:  # after the upload, before PostgreSQL commits the pointer
        raise SystemExit("killed between the upload and the ledger commit")

    monkeypatch.setattr(transaction_mod, "BETWEEN_COMMITS", [crash])
    with pytest.raises(SystemExit), a.of(TASK_ID).connect() as conn, transaction(conn):
        _reject(conn, "lost")
    monkeypatch.setattr(transaction_mod, "BETWEEN_COMMITS", [])
    assert _version(a) == kept
    keys = {k for k, _ in s3_storage.objects("stores")}
    assert len(keys) == 2 and kept.object_key in keys
    (orphan,) = keys - {kept.object_key}
    with a.control() as db:
        assert store_versions.collect_garbage(s3_storage, db) == []  # younger than the grace period
        assert store_versions.collect_garbage(s3_storage, db, grace=dt.timedelta(0), dry_run=True) == [orphan]
        assert store_versions.collect_garbage(s3_storage, db, grace=dt.timedelta(0)) == [orphan]
    assert {k for k, _ in s3_storage.objects("stores")} == {kept.object_key}
    assert _rejects(dataclasses.replace(a, data_dir=a.data_dir.parent / "fresh")) == ["kept"]


@pytest.mark.slow
def test_the_demo_with_its_stores_in_object_storage_runs_to_final(tmp_path, monkeypatch, postgres_url, s3_storage):
    """`make services` + `make demo` with every printed line, for one task: its files and each
    partition's store version are in the bucket and named in the ledger, nothing but caches is left
    under data/, and a fresh machine reads the same answers."""
    from batch_assets.demo.runner import run_demo
    from batch_assets_tests.pg_tables import demo_env_on_postgres, storage_env

    demo_env_on_postgres(monkeypatch, postgres_url)
    monkeypatch.setenv("BATCH_ASSETS_LEDGER_URL", postgres_url)
    storage_env(monkeypatch, s3_storage)
    printed: list[tuple[list, list]] = []
    assert run_demo(tmp_path / "data", tasks=("ticket_triage",), print_table=lambda h, r: printed.append((h, r))) == 0
    headers, rows = printed[0]
    by_task = {r[0]: dict(zip(headers, r)) for r in rows}
    assert {v["status"] for v in by_task.values()} == {"COMPLETED_WITH_FAILURES"}
    left = {p.name for p in (tmp_path / "data").iterdir()}  # besides the emulator's and Dagster's own
    assert left - {"emulator", "dagster_home"} == {"cache"}, left  # every run file and store is in the bucket
    kinds = {k.split("/")[0] for k, _ in s3_storage.objects("")}
    assert kinds == {"manifests", "shards", "raw", "stores", "reports"}
    fresh = Warehouse.at(tmp_path / "fresh" / "warehouse.duckdb")  # another machine: an empty data directory
    assert fresh.storage == s3_storage.__class__.from_env() and fresh.partition_stores
    with fresh.control() as db:
        versions = {t: store_versions.current(db, t) for t in by_task}
    assert all(v is not None and v.version >= 1 for v in versions.values())
    assert {k for k, _ in s3_storage.objects("stores")} >= {v.object_key for v in versions.values()}
    with fresh.connect() as conn:
        applied = dict(conn.execute("SELECT task_id, count(*) FROM ledger.applied_result GROUP BY 1").fetchall())
    assert applied == {t: int(v["applied"]) for t, v in by_task.items()}


def test_forgetting_a_partition_forgets_its_store_version_so_it_starts_empty(machines):
    """`demo --fresh` deletes the partitions' control rows: their store versions too, or the next
    run would download the forgotten items again."""
    from batch_assets.ledger.tasks import forget_tasks

    a, b = machines
    with a.of(TASK_ID).connect() as conn, transaction(conn):
        _reject(conn, "forgotten")
    with a.control() as db:
        forget_tasks(db, [TASK_ID])
    assert _version(a) is None
    with b.of(TASK_ID).connect() as conn:
        assert conn.execute("SELECT count(*) FROM ledger.source_reject").fetchone() == (0,)
