"""`distributed` with the tables in PostgreSQL: one per-item DuckDB store per task partition, written
only under the partition's lease in the control ledger (ledger/partition_stores.py, partition_lease.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap

import duckdb
import psycopg
import pytest

from batch_assets.ledger import partition_lease
from batch_assets.ledger.control_db import CONTROL_TABLES
from batch_assets.ledger.distributed import LEDGER_URL_VAR
from batch_assets.ledger.partition_lease import PartitionLeaseError
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.govern.retention import purge_local
from batch_assets.pipeline.govern.review import decide
from batch_assets.pipeline.govern.revoke import revoke
from batch_assets.pipeline.settle.reconcile import settle
from batch_assets_tests.pg_tables import tables_in_postgres

from .conftest import DAY1, DAY2

pytestmark = pytest.mark.usefixtures("postgres_url")


@pytest.fixture
def stores_wh(seeded_copy, postgres_url, monkeypatch) -> Warehouse:
    """The seeded warehouse with its source table and its control ledger in PostgreSQL."""
    monkeypatch.delenv(LEDGER_URL_VAR, raising=False)
    wh = tables_in_postgres(dataclasses.replace(seeded_copy, ledger_url=None), postgres_url)
    monkeypatch.setenv(LEDGER_URL_VAR, postgres_url)  # for the processes this test starts
    wh = dataclasses.replace(wh, ledger_url=postgres_url)
    assert wh.partition_stores
    return wh


def _store_tables(path) -> dict[str, set[str]]:
    with duckdb.connect(str(path), read_only=True) as conn:
        rows = conn.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall()
    out: dict[str, set[str]] = {}
    for schema, table in rows:
        out.setdefault(schema, set()).add(table)
    return out


def _hold(wh: Warehouse, task_id: str) -> subprocess.Popen:
    """A process holding the partition's store open for writing (and so its lease) until killed."""
    script = textwrap.dedent(f"""
        import sys
        from batch_assets.ledger.warehouse import Warehouse
        from batch_assets.task_tables.postgres import PgTables
        wh = Warehouse.at({str(wh.database)!r}, {str(wh.data_dir)!r}, tables=PgTables({wh.tables.url!r}, schema="biz"))
        with wh.of({task_id!r}).connect():
            print("held", flush=True)
            sys.stdin.read()
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ)
    )
    assert proc.stdout.readline().strip() == b"held"
    return proc


@pytest.mark.slow
def test_each_partition_is_written_in_its_own_store_while_another_is_held(
    stores_wh, ticket_task, adapter, run_partition, postgres_url
):
    """While another process writes DAY1's store, DAY2 goes from freeze to applied beside it; DAY1's
    store cannot be written meanwhile (its lease names the holder) and is taken over at once when
    that process is killed; then both partitions balance, and every store holds per-item tables only."""
    wh, day1, day2 = stores_wh, ticket_task.task_id(DAY1), ticket_task.task_id(DAY2)
    holder = _hold(wh, day1)
    try:
        assert run_partition(wh, ticket_task, DAY2, adapter).problems() == []
        impatient = dataclasses.replace(wh, lock_timeout_s=0.3)
        with pytest.raises(PartitionLeaseError, match=rf"partition {day1}: its store is leased by .*:{holder.pid} "):
            with impatient.of(day1).connect():
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The killed holder's lease is taken over without waiting it out.
    with dataclasses.replace(wh, lock_timeout_s=0.3).of(day1).connect():
        pass
    assert run_partition(wh, ticket_task, DAY1, adapter).problems() == []

    with duckdb.connect(str(wh.database), read_only=True) as conn:  # the seeded file: nothing written there
        assert conn.execute("SELECT count(*) FROM ledger.manifest_item").fetchone() == (0,)
    for task_id in (day1, day2):
        tables = _store_tables(wh.of(task_id).store)
        assert set(tables) == {"ledger"}  # no source or business table
        assert not tables["ledger"] & set(CONTROL_TABLES)
        assert {"manifest_item", "shard_line", "raw_result", "parsed_result", "applied_result"} <= tables["ledger"]
        with duckdb.connect(str(wh.of(task_id).store), read_only=True) as conn:
            assert conn.execute("SELECT DISTINCT task_id FROM ledger.manifest_item").fetchall() == [(task_id,)]
    with psycopg.connect(postgres_url) as pg:
        applied = dict(pg.execute("SELECT task_id, count(*) FROM biz.ticket_labels GROUP BY 1").fetchall())
        assert pg.execute("SELECT count(*) FROM ledger.partition_lease").fetchone() == (0,)
    # A read across partitions sees both stores; a write through it fails rather than go nowhere.
    with wh.connect() as conn:
        across = dict(conn.execute("SELECT task_id, count(*) FROM ledger.applied_result GROUP BY 1").fetchall())
        with pytest.raises(duckdb.Error, match="base table|not an table"):
            conn.execute("DELETE FROM ledger.applied_result")
    assert across == applied and set(across) == {day1, day2}

    # A review decision on items of both partitions is recorded in each one's store.
    with wh.connect() as conn:
        queued = conn.execute(
            "SELECT max(custom_id) FROM ledger.review_item WHERE state = 'pending' GROUP BY task_id"
        ).fetchall()
    assert len(queued) == 2
    assert decide(wh, [r[0] for r in queued], "approved").decided == 2
    with wh.connect() as conn:
        approved = conn.execute("SELECT custom_id FROM ledger.review_item WHERE state = 'approved'").fetchall()
    assert sorted(approved) == sorted(queued)
    # A revoke naming answers of both partitions writes each partition's revocation in its own store.
    with wh.connect() as conn:
        picked = [
            r[0] for r in conn.execute("SELECT min(custom_id) FROM ledger.applied_result GROUP BY task_id").fetchall()
        ]
    summary = revoke(wh, custom_ids=picked, reason="test", tasks={"ticket_triage": ticket_task})
    assert summary.by_action == {"removed": 2} and summary.not_found == []
    for custom_id in picked:
        with duckdb.connect(str(wh.of(custom_id.split(":")[0]).store), read_only=True) as conn:
            assert conn.execute("SELECT custom_id FROM ledger.revocation").fetchall() == [(custom_id,)]
    with psycopg.connect(postgres_url) as pg:
        left = {r[0] for r in pg.execute("SELECT custom_id FROM biz.ticket_labels").fetchall()}
    assert not left & set(picked) and len(left) == sum(applied.values()) - 2
    # Purging finished partitions marks each raw file in its own partition's store.
    assert [settle(wh, t)[0].problems() for t in (day1, day2)] == [[], []]
    purged = purge_local(wh, dt.timedelta(0))
    assert purged.raw_files and all(p.endswith(".jsonl") for p in purged.raw_files)
    for task_id in (day1, day2):
        with duckdb.connect(str(wh.of(task_id).store), read_only=True) as conn:
            assert conn.execute("SELECT count(*) FILTER (purged_at IS NULL) FROM ledger.raw_file").fetchone() == (0,)


def test_a_read_across_partitions_without_any_store_refuses_writes(stores_wh):
    with stores_wh.connect() as conn:
        assert conn.execute("SELECT count(*) FROM ledger.manifest_item").fetchone() == (0,)
        with pytest.raises(duckdb.Error):
            conn.execute("INSERT INTO ledger.source_reject VALUES ('t', 'b', 1, 'c', 'r', now()::TIMESTAMP)")
    with stores_wh.of("ticket_triage_20261120").connect(read_only=True) as conn:  # no store yet: nothing, no file
        assert conn.execute("SELECT count(*) FROM ledger.manifest_item").fetchone() == (0,)
    assert not stores_wh.of("ticket_triage_20261120").store.exists()


def test_a_lease_is_taken_when_free_expired_ours_or_its_holder_gone_never_from_a_live_holder(stores_wh):
    task_id = "ticket_triage_20261120"
    me, host, pid = partition_lease.this_process()

    def plant(owner: str, host: str, pid: int, expires: str) -> None:
        db.execute("DELETE FROM ledger.partition_lease WHERE task_id = ?", [task_id])
        db.execute(
            f"INSERT INTO ledger.partition_lease VALUES (?, ?, ?, ?, now()::TIMESTAMP, now()::TIMESTAMP {expires})",
            [task_id, owner, host, pid],
        )

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with stores_wh.control() as db:
        assert partition_lease.take(db, task_id)  # free
        assert partition_lease.take(db, task_id)  # already ours
        assert partition_lease.renew(db, task_id)
        plant("elsewhere:1", "elsewhere", 1, "+ INTERVAL '1 minute'")
        assert not partition_lease.take(db, task_id)  # a live holder on another host
        assert not partition_lease.renew(db, task_id)  # not ours to renew
        plant(f"{host}:{os.getppid()}", host, os.getppid(), "+ INTERVAL '1 minute'")
        assert not partition_lease.take(db, task_id)  # a live process of this host
        plant(f"{host}:{gone.pid}", host, gone.pid, "+ INTERVAL '1 minute'")
        assert partition_lease.take(db, task_id)  # its holder is gone
        assert partition_lease.holder(db, task_id).owner == me
        plant("elsewhere:1", "elsewhere", 1, "- INTERVAL '1 second'")
        assert partition_lease.take(db, task_id)  # expired
        partition_lease.release(db, task_id)
        assert partition_lease.holder(db, task_id) is None


def test_nested_writes_of_one_process_share_one_lease_given_back_after(stores_wh):
    part = stores_wh.of("ticket_triage_20261120")
    with part.connect() as outer:
        with part.connect():
            pass
        with stores_wh.control() as db:  # still held after the inner block
            assert partition_lease.holder(db, part.partition).owner == partition_lease.this_process()[0]
        outer.execute("SELECT 1")
    with stores_wh.control() as db:
        assert partition_lease.holder(db, part.partition) is None
