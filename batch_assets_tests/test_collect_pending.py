"""Which terminal jobs still need a collect run: found per partition from the ledger, remembered once
collected (`provider_job.collected_at`), so the search costs what the unfinished jobs cost, not the
ledger's history (the sensor runs it on every tick)."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from batch_assets.emulator.testing import running_emulator
from batch_assets.ledger.history import copy_partition_rows
from batch_assets.ledger.job_reads import collect_candidates
from batch_assets.ledger.jobs import unmark_collected
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect import collect_runs as collect
from batch_assets.pipeline.collect.collect_runs import pending_jobs
from batch_assets.providers.contract import ClientSettings
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
from batch_assets.resources import EMULATOR_API_KEY

from .conftest import DAY1, FAST_EMULATOR, _run_partition
from .profiles import EARLIER_DAYS, ledger_scans

TASK_ID1 = "ticket_triage_20261120"
BIG_TABLES = ("manifest_item", "shard_line", "raw_result", "parsed_result", "applied_result")


@pytest.fixture(scope="module")
def collected_run(tmp_path_factory, _seeded_template, ticket_task) -> Warehouse:
    """One partition run to the end in three jobs (some item errors); tests work on copies of it."""
    root = tmp_path_factory.mktemp("collected_run")
    wh = Warehouse.at(root / "warehouse.duckdb", root / "data")
    shutil.copy(_seeded_template, wh.database)
    task = dataclasses.replace(ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=20))
    with running_emulator(root / "emulator", **FAST_EMULATOR, item_error_rate=0.2) as emu:
        adapter = OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emu.openai_base_url, max_retries=2))
        r = _run_partition(wh, task, DAY1, adapter)
    assert r.problems() == [] and r.jobs == 3
    return wh


def _copy(wh: Warehouse, tmp_path) -> Warehouse:
    copy = Warehouse.at(tmp_path / "warehouse.duckdb", wh.data_dir)
    shutil.copy(wh.database, copy.database)
    return copy


def _collected_at(wh: Warehouse) -> dict[str, object]:
    with wh.connect() as conn:
        return dict(conn.execute("SELECT job_key, collected_at FROM ledger.provider_job").fetchall())


@pytest.mark.slow
def test_collected_jobs_are_marked_once_and_skipped_after(collected_run, tmp_path):
    wh = _copy(collected_run, tmp_path)
    with wh.connect() as conn:
        conn.execute("UPDATE ledger.provider_job SET collected_at = NULL")
        (first, second, third) = sorted(
            r[0] for r in conn.execute("SELECT job_key FROM ledger.provider_job").fetchall()
        )
        # One job looks not collected: a file of it not ingested yet.
        conn.execute(
            """INSERT INTO ledger.raw_file (file_key, job_key, task_id, kind, path, sha256, byte_count, downloaded_at)
                        VALUES ('late', ?, ?, 'output', '/nowhere', '', 0, now()::TIMESTAMP)""",
            [third, TASK_ID1],
        )
    (pending,) = pending_jobs(wh)
    assert (pending.job_key, pending.reason) == (third, "raw files not ingested")
    marks = _collected_at(wh)
    assert marks[first] is not None and marks[second] is not None and marks[third] is None
    # A job once found collected is not looked at again: the same sign of pending work on it is ignored.
    with wh.connect() as conn:
        conn.execute(
            """INSERT INTO ledger.raw_file (file_key, job_key, task_id, kind, path, sha256, byte_count, downloaded_at)
                        VALUES ('later', ?, ?, 'output', '/nowhere', '', 0, now()::TIMESTAMP)""",
            [first, TASK_ID1],
        )
    assert [(j.job_key, j.reason) for j in pending_jobs(wh)] == [(third, "raw files not ingested")]
    assert _collected_at(wh)[first] == marks[first]


@pytest.mark.slow
@pytest.mark.parametrize(
    "step, reason",
    [
        ("UPDATE ledger.provider_job SET downloaded_at = NULL WHERE job_key = $job", "not downloaded"),
        (
            "DELETE FROM ledger.parsed_result WHERE (custom_id, attempt) IN "
            "(SELECT custom_id, attempt FROM ledger.raw_result WHERE job_key = $job AND status = 'ok' LIMIT 1)",
            "result lines not parsed",
        ),
        (
            "DELETE FROM ledger.applied_result WHERE custom_id IN (SELECT custom_id FROM ledger.parsed_result "
            "WHERE job_key = $job AND error_class IS NULL LIMIT 1)",
            "usable outcomes not applied",
        ),
    ],
)
def test_each_unfinished_step_keeps_a_job_pending_and_unmarked(collected_run, tmp_path, step, reason):
    wh = _copy(collected_run, tmp_path)
    with wh.connect() as conn:
        job = conn.execute("SELECT min(job_key) FROM ledger.provider_job").fetchone()[0]
        conn.execute("UPDATE ledger.provider_job SET collected_at = NULL")
        conn.execute(step, {"job": job})
    assert [(j.job_key, j.reason) for j in pending_jobs(wh, TASK_ID1)] == [(job, reason)]
    assert _collected_at(wh)[job] is None


@pytest.mark.slow
def test_the_search_reads_only_the_unfinished_jobs_partitions(collected_run, tmp_path):
    """With nine other (collected) partitions in the ledger, every big table's scan in the search
    yields only the rows of the partition whose jobs are not marked collected (DuckDB's profile:
    row counts)."""
    wh = _copy(collected_run, tmp_path)
    with wh.connect() as conn:
        own = {
            t: conn.execute(f"SELECT count(*) FROM ledger.{t} WHERE task_id = ?", [TASK_ID1]).fetchone()[0]
            for t in BIG_TABLES
        }
        copy_partition_rows(conn, DAY1, EARLIER_DAYS)
        unmark_collected(conn, TASK_ID1)
        conn.register("cand", collect_candidates(conn))
        assert conn.execute("SELECT DISTINCT task_id FROM cand").fetchall() == [(TASK_ID1,)]
        found = {}
        scans = ledger_scans(
            conn,
            lambda: found.update(
                reasons=conn.execute(f"SELECT reason FROM ({collect._reasons_sql('cand', [TASK_ID1])})").fetchall()
            ),
            tmp_path / "profile.json",
        )
    assert found["reasons"] == [(None,)] * 3
    assert set(BIG_TABLES) <= set(scans), scans
    for table in BIG_TABLES:
        assert max(scans[table]) <= own[table], (table, scans[table], own[table])


@pytest.mark.parametrize("n", [0, 1, 3, 20])
def test_rows_of_partitions_selects_exactly_the_named_partitions(n):
    """One equality scan per partition (an IN list beyond MAX_PARTITION_SCANS): the same rows as
    `task_id IN (…)`, none for no partition."""
    import duckdb

    from batch_assets.sqltext import MAX_PARTITION_SCANS, rows_of_partitions

    conn = duckdb.connect()
    conn.execute("CREATE TABLE t AS SELECT 'task_' || (i % 30) AS task_id, i FROM range(3000) r(i)")
    names = [f"task_{k}" for k in range(n)] + ["task_0"] * (n > 0)  # a repeated name counts once
    got = conn.execute(f"SELECT task_id, i FROM {rows_of_partitions('t', 'task_id, i', names)} ORDER BY i").fetchall()
    want = conn.execute("SELECT task_id, i FROM t WHERE list_contains(?, task_id) ORDER BY i", [names]).fetchall()
    assert got == want and len(got) == 100 * n
    assert (" UNION ALL " in rows_of_partitions("t", "i", names)) == (1 < n <= MAX_PARTITION_SCANS)
