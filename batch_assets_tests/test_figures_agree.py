"""One source for every cost figure: `batch-assets report` (JSON), the HTML report's numbers and the
gate the asset metadata reads give the same estimated and actual cost for one finished partition
(ticket_triage, with quarantined items: they are never sent, so they cost nothing)."""

from __future__ import annotations

import json

import duckdb
import pytest

from batch_assets.pipeline.govern.cost import partition_gates
from batch_assets.pipeline.report.partition_report import build_report, report_numbers

from .cli_calls import TASK_ID, run

pytestmark = pytest.mark.slow


def test_cli_html_report_and_gate_give_the_same_cost(capsys, finished_db):
    code, out, _ = run(capsys, "--database", finished_db, "report", "--format", "json")
    assert code == 0
    [row] = json.loads(out)
    with duckdb.connect(str(finished_db), read_only=True) as conn:
        gate = partition_gates(conn, [TASK_ID])[TASK_ID]
        numbers = report_numbers(build_report(conn, TASK_ID))
        everything = conn.execute(
            "SELECT sum(est_cost) FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [TASK_ID]
        ).fetchone()[0]
    assert row["quarantined"] > 0 and gate.cost_estimated < everything  # the quarantined items are left out
    for shown in (row["cost_estimated"], numbers["estimated_cost"]):  # both shown to 6 decimals
        assert shown == pytest.approx(gate.cost_estimated, abs=1e-6)
    for shown in (row["cost_actual"], numbers["actual_cost"]):
        assert shown == pytest.approx(gate.cost_actual, abs=1e-6)
    assert gate.cost_actual > 0
