"""Which terminal jobs still need a collect run: found per partition from the ledger, remembered once
collected (`provider_job.collected_at`), so the search costs what the unfinished jobs cost, not the
ledger's history (the sensor runs it on every tick)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from batch_assets.emulator.testing import running_emulator
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline import collect
from batch_assets.pipeline.collect import pending_jobs
from batch_assets.providers.contract import ClientSettings
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
from batch_assets.resources import EMULATOR_API_KEY

from .conftest import DAY1, FAST_EMULATOR, _run_partition

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


def test_collected_jobs_are_marked_once_and_skipped_after(collected_run, tmp_path):
    wh = _copy(collected_run, tmp_path)
    with wh.connect() as conn:
        conn.execute("UPDATE ledger.provider_job SET collected_at = NULL")
        (first, second, third) = sorted(r[0] for r in conn.execute("SELECT job_key FROM ledger.provider_job").fetchall())
        # One job looks not collected: a file of it not ingested yet.
        conn.execute("""INSERT INTO ledger.raw_file (file_key, job_key, task_id, kind, path, sha256, byte_count, downloaded_at)
                        VALUES ('late', ?, ?, 'output', '/nowhere', '', 0, now()::TIMESTAMP)""", [third, TASK_ID1])
    (pending,) = pending_jobs(wh)
    assert (pending.job_key, pending.reason) == (third, "raw files not ingested")
    marks = _collected_at(wh)
    assert marks[first] is not None and marks[second] is not None and marks[third] is None
    # A job once found collected is not looked at again: the same sign of pending work on it is ignored.
    with wh.connect() as conn:
        conn.execute("""INSERT INTO ledger.raw_file (file_key, job_key, task_id, kind, path, sha256, byte_count, downloaded_at)
                        VALUES ('later', ?, ?, 'output', '/nowhere', '', 0, now()::TIMESTAMP)""", [first, TASK_ID1])
    assert [(j.job_key, j.reason) for j in pending_jobs(wh)] == [(third, "raw files not ingested")]
    assert _collected_at(wh)[first] == marks[first]


@pytest.mark.parametrize("step, reason", [
    ("UPDATE ledger.provider_job SET downloaded_at = NULL WHERE job_key = $job", "not downloaded"),
    ("DELETE FROM ledger.parsed_result WHERE (custom_id, attempt) IN "
     "(SELECT custom_id, attempt FROM ledger.raw_result WHERE job_key = $job AND status = 'ok' LIMIT 1)",
     "result lines not parsed"),
    ("DELETE FROM ledger.applied_result WHERE custom_id IN (SELECT custom_id FROM ledger.parsed_result "
     "WHERE job_key = $job AND error_class IS NULL LIMIT 1)", "usable outcomes not applied"),
])
def test_each_unfinished_step_keeps_a_job_pending_and_unmarked(collected_run, tmp_path, step, reason):
    wh = _copy(collected_run, tmp_path)
    with wh.connect() as conn:
        job = conn.execute("SELECT min(job_key) FROM ledger.provider_job").fetchone()[0]
        conn.execute("UPDATE ledger.provider_job SET collected_at = NULL")
        conn.execute(step, {"job": job})
    assert [(j.job_key, j.reason) for j in pending_jobs(wh, TASK_ID1)] == [(job, reason)]
    assert _collected_at(wh)[job] is None


def test_the_search_reads_only_the_unfinished_jobs_partitions(collected_run, tmp_path):
    """With nine other partitions in the ledger, every big table's scan in the search yields only
    the rows of the partition whose jobs are not marked collected (DuckDB's profile: row counts)."""
    wh = _copy(collected_run, tmp_path)
    profile = tmp_path / "profile.json"
    with wh.connect() as conn:
        own = {t: conn.execute(f"SELECT count(*) FROM ledger.{t} WHERE task_id = ?", [TASK_ID1]).fetchone()[0]
               for t in BIG_TABLES}
        for day in range(1, 10):
            other = f"ticket_triage_2026100{day}"
            for t in BIG_TABLES:
                conn.execute(f"""INSERT INTO ledger.{t} SELECT * REPLACE (
                                     replace(custom_id, '{TASK_ID1}', '{other}') AS custom_id, '{other}' AS task_id)
                                 FROM ledger.{t} WHERE task_id = '{TASK_ID1}'""")
        conn.execute("UPDATE ledger.provider_job SET collected_at = NULL")
        conn.execute("PRAGMA enable_profiling = 'json'")
        conn.execute(f"PRAGMA profiling_output = '{profile}'")
        reasons = conn.execute(f"SELECT reason FROM ({collect._PENDING_SQL})", {"task_id": None}).fetchall()
        conn.execute("PRAGMA disable_profiling")
    assert reasons == [(None,)] * 3
    scans: dict[str, list[int]] = {}

    def walk(node: dict) -> None:
        table = (node.get("extra_info") or {}).get("Table", "")
        if node.get("name") == "SEQ_SCAN" and ".ledger." in table:
            scans.setdefault(table.rsplit(".", 1)[1], []).append(node["intermediate_rows"])
        for child in node.get("children", []):
            walk(child)

    for node in json.loads(profile.read_text())["operator"]:
        walk(node)
    assert set(BIG_TABLES) <= set(scans), scans
    for table in BIG_TABLES:
        assert max(scans[table]) <= own[table], (table, scans[table], own[table])
