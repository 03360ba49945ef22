"""Retention: provider-side files deleted after download (the emulator confirms through each SDK),
a failed deletion retried on the next collect, local purge keeps the ledger and re-runs safely."""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import io
import json
from dataclasses import replace
from pathlib import Path

import openai
import pytest
from google.genai import errors as genai_errors

from batch_assets.cli import main as cli_main
from batch_assets.emulator.testing import EmulatorHandle
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.govern.retention import (
    delete_remote_files,
    parse_age,
    pending_remote_deletions,
    purge_local,
)
from batch_assets.pipeline.settle.reconcile import settle
from batch_assets.spec.model import RetentionSpec
from batch_assets.spec.resolve import load_all_tasks
from batch_assets_tests.provider_calls import DAY, TASK_OF, adapter_for, collect_and_reconcile, run_to_terminal


def _gone(adapter, provider: str, file_id: str) -> bool:
    """Whether the provider says the file does not exist, asked through its SDK (Gemini: 403
    PERMISSION_DENIED "... or it may not exist", as the real API answers)."""
    try:
        if provider == "gemini":
            adapter._client.files.get(name=file_id)
        else:
            adapter._client.files.retrieve(file_id)
    except openai.NotFoundError:
        return True
    except genai_errors.ClientError as exc:
        return exc.code in (403, 404)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(TASK_OF))
def test_provider_files_are_deleted_after_download(
    provider: str, all_seeded: Warehouse, emulator: EmulatorHandle
) -> None:
    task = load_all_tasks()[TASK_OF[provider]]
    adapter = adapter_for(emulator, provider)
    jobs = run_to_terminal(all_seeded, task, adapter)
    file_ids = [j[k] for j in jobs for k in ("input_file_id", "output_file_id", "error_file_id") if j[k]]
    assert provider == "anthropic" or file_ids, "the job should name provider files"
    assert not any(_gone(adapter, provider, f) for f in file_ids)
    rec = collect_and_reconcile(all_seeded, task, adapter)
    assert rec.applied > 0
    with all_seeded.connect() as conn:
        rows = fetch_dicts(
            conn, "SELECT file_id, outcome FROM ledger.remote_file_deletion WHERE task_id = ?", [task.task_id(DAY)]
        )
        left = conn.execute("SELECT count(*) FROM ledger.provider_job WHERE remote_deleted_at IS NULL").fetchone()[0]
    assert left == 0
    if provider == "anthropic":  # no user files: the batch's results go with the batch
        assert {r["outcome"] for r in rows} == {"nothing_to_delete"}
    else:
        assert sorted(r["file_id"] for r in rows if r["outcome"] == "deleted") == sorted(file_ids)
        assert all(_gone(adapter, provider, f) for f in file_ids)


@pytest.mark.slow
def test_retention_off_keeps_provider_files(all_seeded: Warehouse, emulator: EmulatorHandle) -> None:
    task = load_all_tasks()["ticket_triage"]
    task = replace(task, spec=task.spec.model_copy(update={"retention": RetentionSpec(delete_remote_files=False)}))
    adapter = adapter_for(emulator, "openai")
    jobs = run_to_terminal(all_seeded, task, adapter)
    collect_raw_results(all_seeded, task, DAY, adapter)
    assert not _gone(adapter, "openai", jobs[0]["input_file_id"])
    assert [j["job_key"] for j in pending_remote_deletions(all_seeded)] == [jobs[0]["job_key"]]
    assert _jobs_remote(all_seeded) == [("on provider", None)]


def _jobs_remote(wh: Warehouse) -> list[tuple[str, str | None]]:
    """(remote, remote_delete_error) of every job, as `batch-assets jobs --format json` prints them."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["--database", str(wh.database), "jobs", "--format", "json"]) == 0
    return [(j["remote_files"], j["remote_delete_error"]) for j in json.loads(out.getvalue())]


@pytest.mark.slow
def test_failed_deletion_is_recorded_and_retried_on_the_next_collect(
    all_seeded: Warehouse, emulator: EmulatorHandle
) -> None:
    task = load_all_tasks()["ticket_triage"]
    keep = replace(task, spec=task.spec.model_copy(update={"retention": RetentionSpec(delete_remote_files=False)}))
    adapter = adapter_for(emulator, "openai")
    jobs = run_to_terminal(all_seeded, task, adapter)
    collect_raw_results(all_seeded, keep, DAY, adapter)
    # Every try of the first DELETE (the SDK's own retries included) answers 500.
    emulator.configure(fail_next_requests=adapter.settings.max_retries + 1, fail_status=500)
    summary = delete_remote_files(all_seeded, lambda _p: adapter, task_id=task.task_id(DAY))
    assert list(summary.failed) == [jobs[0]["job_key"]]
    pending = pending_remote_deletions(all_seeded)
    assert [(p["job_key"], p["attempts"]) for p in pending] == [(jobs[0]["job_key"], 1)]
    assert "500" in pending[0]["last_error"] or "Internal" in pending[0]["last_error"]
    assert not _gone(adapter, "openai", jobs[0]["input_file_id"])
    # The operator sees it in `batch-assets jobs`.
    assert _jobs_remote(all_seeded) == [("delete failed x1 (retried)", pending[0]["last_error"])]

    summary = collect_raw_results(all_seeded, task, DAY, adapter)  # the next collect tries again
    assert summary.remote_deletions_failed == 0 and summary.remote_files_deleted >= 2
    assert pending_remote_deletions(all_seeded) == []
    assert _gone(adapter, "openai", jobs[0]["input_file_id"]) and _gone(adapter, "openai", jobs[0]["output_file_id"])
    assert [remote for remote, _error in _jobs_remote(all_seeded)] == ["deleted"]
    with all_seeded.connect() as conn:
        outcomes = dict(conn.execute("SELECT outcome, count(*) FROM ledger.remote_file_deletion GROUP BY 1").fetchall())
    assert outcomes["failed"] == 1 and outcomes["deleted"] >= 2


@pytest.mark.slow
def test_purge_keeps_the_ledger_compresses_raw_files_and_reruns_safely(
    all_seeded: Warehouse, emulator: EmulatorHandle
) -> None:
    task = load_all_tasks()["ticket_triage"]
    adapter = adapter_for(emulator, "openai")
    run_to_terminal(all_seeded, task, adapter)
    collect_and_reconcile(all_seeded, task, adapter)
    task_id = task.task_id(DAY)
    # Not final yet: nothing is purged, whatever the age.
    assert purge_local(all_seeded, dt.timedelta(0)).shards == []
    rec, verdict = settle(all_seeded, task_id)
    assert verdict.final_status is not None
    with all_seeded.connect() as conn:
        before = {
            t: conn.execute(f"SELECT count(*) FROM ledger.{t}").fetchone()[0]
            for t in ("shard", "raw_file", "raw_result", "parsed_result", "applied_result")
        }
        shards = fetch_dicts(conn, "SELECT path, sha256 FROM ledger.shard WHERE task_id = ?", [task_id])
        raws = fetch_dicts(conn, "SELECT path, sha256 FROM ledger.raw_file WHERE task_id = ?", [task_id])
    originals = {r["path"]: Path(r["path"]).read_bytes() for r in raws}

    assert purge_local(all_seeded, dt.timedelta(days=30)).shards == []  # finished just now: inside the window
    dry = purge_local(all_seeded, dt.timedelta(0), dry_run=True)
    assert sorted(dry.shards) == sorted(s["path"] for s in shards) and len(dry.raw_files) == len(raws)
    assert all(Path(s["path"]).is_file() for s in shards) and all(Path(r["path"]).is_file() for r in raws)

    done = purge_local(all_seeded, dt.timedelta(0))
    assert len(done.shards) == len(shards) and len(done.raw_files) == len(raws)
    assert not any(Path(s["path"]).exists() for s in shards)
    for path, content in originals.items():  # the only verbatim copy stays, compressed
        assert not Path(path).exists()
        assert gzip.decompress(Path(path + ".gz").read_bytes()) == content
    with all_seeded.connect() as conn:
        after = {t: conn.execute(f"SELECT count(*) FROM ledger.{t}").fetchone()[0] for t in before}
        assert (
            conn.execute("SELECT count(*) FROM ledger.shard WHERE purged_at IS NULL OR sha256 IS NULL").fetchone()[0]
            == 0
        )
        assert conn.execute("SELECT count(*) FROM ledger.raw_file WHERE archived_path IS NULL").fetchone()[0] == 0
    assert after == before
    again = purge_local(all_seeded, dt.timedelta(0))
    assert again.shards == [] and again.raw_files == []
    assert settle(all_seeded, task_id)[1].passed


@pytest.mark.parametrize(
    "text,expected", [("30d", dt.timedelta(days=30)), ("12h", dt.timedelta(hours=12)), ("0h", dt.timedelta(0))]
)
def test_parse_age(text: str, expected: dt.timedelta) -> None:
    assert parse_age(text) == expected


@pytest.mark.parametrize("text", ["30", "d30", "1w", "-3d", "3.5d", ""])
def test_parse_age_rejects_other_values(text: str) -> None:
    with pytest.raises(ValueError, match="write e.g. 30d or 12h"):
        parse_age(text)


@pytest.mark.slow
def test_retention_asset_deletes_what_a_collect_left_pending(all_seeded: Warehouse, emulator: EmulatorHandle) -> None:
    """A deletion that failed during collect is done by the `retention` asset (a real materialization)."""
    import dagster as dg

    from batch_assets.defs.retention_job import retention
    from batch_assets.resources import ProvidersResource, WarehouseResource

    task = load_all_tasks()["ticket_triage"]
    adapter = adapter_for(emulator, "openai")
    jobs = run_to_terminal(all_seeded, task, adapter)
    keep = replace(task, spec=task.spec.model_copy(update={"retention": RetentionSpec(delete_remote_files=False)}))
    collect_raw_results(all_seeded, keep, DAY, adapter)
    assert len(pending_remote_deletions(all_seeded)) == 1
    result = dg.materialize(
        [retention],
        resources={
            "warehouse": WarehouseResource(database=str(all_seeded.database), data_dir=str(all_seeded.data_dir)),
            "providers": ProvidersResource(emulator_url=emulator.base_url, max_retries=2),
        },
    )
    assert result.success
    meta = result.asset_materializations_for_node("retention")[0].metadata
    assert meta["remote_files_deleted"].value == 2 and meta["remote_deletions_pending"].value == 0
    assert meta["shards_purged"].value == 0  # finished just now: inside the 30-day window
    assert _gone(adapter, "openai", jobs[0]["input_file_id"])


@pytest.mark.slow
def test_sensor_tick_retries_a_failed_deletion(
    dagster_env: Warehouse, emulator: EmulatorHandle, adapter, run_partition
) -> None:
    """A deletion that failed is tried again by the provider status sensor's next tick."""
    import dagster as dg

    from batch_assets.definitions import defs as load
    from batch_assets.resources import default_resources
    from batch_assets_tests.conftest import DAY1

    wh, task = dagster_env, load_all_tasks()["ticket_triage"]
    keep = replace(task, spec=task.spec.model_copy(update={"retention": RetentionSpec(delete_remote_files=False)}))
    run_partition(wh, keep, DAY1, adapter)
    emulator.configure(fail_next_requests=adapter.settings.max_retries + 1, fail_status=500)
    assert delete_remote_files(wh, lambda _p: adapter).failed
    job = pending_remote_deletions(wh)[0]
    defs = load()
    with dg.instance_for_test() as instance:
        ctx = dg.build_sensor_context(instance=instance, definitions=defs, resources=default_resources())
        defs.resolve_sensor_def("provider_status_sensor").evaluate_tick(ctx)
    assert pending_remote_deletions(wh) == []
    assert _gone(adapter, "openai", job["input_file_id"]) and _gone(adapter, "openai", job["output_file_id"])
