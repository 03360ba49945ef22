"""One source for every figure: `batch-assets report` (JSON), the HTML report page and the `report`
asset's metadata give the same estimated and actual cost, and the same queue, run and total time,
for one finished partition (ticket_triage, with quarantined items: they are never sent, so they cost
nothing). Its batch ran on a held emulator clock (30 s queued, then 14 s running and finalizing), so
the times come from the provider's own timestamps: the ledger saw the whole batch in well under a
second of real time."""

from __future__ import annotations

import html
import json
import re
import shutil
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from batch_assets.emulator import clock as emulator_clock
from batch_assets.emulator.testing import running_emulator
from batch_assets.formatting import format_duration, format_money
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.cost import partition_gates
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.providers.contract import ClientSettings
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
from batch_assets.resources import EMULATOR_API_KEY

from .cli_calls import TASK_ID, run
from .conftest import DAY1

pytestmark = pytest.mark.slow

QUEUE_S, PER_REQUEST_S, FINALIZE_S = 30.0, 0.2, 4.0  # 50 requests: running at +30 s, ended at +44 s


@pytest.fixture(scope="module")
def timed(tmp_path_factory, _seeded_template, ticket_task) -> Warehouse:
    """DAY1 of ticket_triage run to the end, its batch timed by the emulator's held clock."""
    root = tmp_path_factory.mktemp("figures")
    wh = Warehouse.at(root / "warehouse.duckdb", root / "data")
    shutil.copy(_seeded_template, wh.database)
    held = {"now": time.time()}
    knobs = {"queue_delay_s": QUEUE_S, "seconds_per_request": PER_REQUEST_S, "finalize_delay_s": FINALIZE_S}
    with (
        pytest.MonkeyPatch.context() as mp,
        running_emulator(root / "emulator", **knobs, log_requests=False) as emu,
    ):
        mp.setattr(emulator_clock, "now", lambda: held["now"])
        adapter = OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emu.openai_base_url, max_retries=2))
        freeze_manifest(wh, ticket_task, DAY1)
        cut_shards(wh, ticket_task, DAY1)
        submit_pending(wh, ticket_task, DAY1, adapter)
        for advance in (QUEUE_S + 1, 60.0):  # seen running, then ended: one poll each
            held["now"] += advance
            poll_jobs(wh, lambda _provider: adapter)
        collect_raw_results(wh, ticket_task, DAY1, adapter)
        parse_results(wh, ticket_task, DAY1)
        apply_results(wh, ticket_task, DAY1)
    rec = reconcile(wh, TASK_ID)
    assert rec.problems() == [] and rec.verdict().passed and rec.jobs == 1
    return wh


def _report_asset_metadata(monkeypatch, wh: Warehouse, instance) -> dict:
    """The `report` asset materialized for DAY1 through the project's definitions: its metadata."""
    from batch_assets.definitions import defs as load_defs

    monkeypatch.setenv("BATCH_ASSETS_DATABASE", str(wh.database))
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(wh.data_dir))
    report = load_defs().resolve_assets_def(dg.AssetKey(["ticket_triage", "report"]))
    result = dg.materialize([report], partition_key=DAY1, instance=instance)
    assert result.success
    (event,) = [e for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION" and e.partition == DAY1]
    return {k: v.value for k, v in event.event_specific_data.materialization.metadata.items()}


def _html_rows(page: str) -> dict[str, str]:
    """The page's two-cell table rows (label -> value), as shown."""
    return {
        html.unescape(k): html.unescape(v) for k, v in re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", page)
    }


def test_cli_html_report_and_asset_metadata_give_the_same_cost_and_times(capsys, monkeypatch, timed, instance):
    monkeypatch.setenv("BATCH_ASSETS_DATA_DIR", str(timed.data_dir))
    code, out, _ = run(capsys, "--database", timed.database, "report", "--format", "json", "--html")
    assert code == 0
    [row] = json.loads(out)
    page = (Path(timed.data_dir) / "reports" / f"{TASK_ID}.html").read_text(encoding="utf-8")
    shown = _html_rows(page)
    asset = _report_asset_metadata(monkeypatch, timed, instance)
    with duckdb.connect(str(timed.database), read_only=True) as conn:
        gate = partition_gates(conn, [TASK_ID])[TASK_ID]
        everything = conn.execute(
            "SELECT sum(est_cost) FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [TASK_ID]
        ).fetchone()[0]

    # Cost: the gate's figures (quarantined items left out), everywhere.
    assert row["quarantined"] > 0 and gate.cost_estimated < everything and gate.cost_actual > 0
    for cli, number, label in (
        (row["cost_estimated"], asset["estimated_cost"], "estimated cost"),
        (row["cost_actual"], asset["actual_cost"], "actual cost"),
    ):
        expected = gate.cost_estimated if label == "estimated cost" else gate.cost_actual
        assert cli == pytest.approx(expected, abs=1e-6) and number == pytest.approx(expected, abs=1e-6)
        assert shown[label] == format_money(expected, gate.currency)

    # Times: the provider's own (whole seconds on OpenAI, on the held clock), not the poll observations
    # (under a second). The created time is lifted to the ledger's intent time when it reads earlier,
    # which takes the real seconds the submit took off the queue: bounds, not an exact figure.
    assert QUEUE_S / 2 < row["queue_time_s"] <= QUEUE_S + 1
    assert row["run_time_s"] == pytest.approx(50 * PER_REQUEST_S + FINALIZE_S, abs=1.0)
    assert row["total_time_s"] > 0
    labels = {
        "queue_time_s": "queue (a batch waiting at the provider, none running)",
        "run_time_s": "run (a batch running at the provider)",
        "total_time_s": "total (first job → done)",
    }
    for name, label in labels.items():
        assert asset[name] == pytest.approx(row[name], abs=1e-6), name
        assert shown[label] == format_duration(row[name]), name
