"""The Dagster UI end to end, in a real headless Chromium (`make e2e`; excluded from `make test`).

One stack for the module (emulator + `dg dev` on free ports over a seeded temporary data dir);
the tests run in file order and build on each other:

1. materialize manifest -> shards -> submissions of one partition from the asset graph; the sensor's
   collect run applies it and the reconciliation check passes;
2. a 3-day backfill from the UI, with per-item faults so retries are due; while the sensor works
   (WARN while retries are pending), no partition may show a passed
   reconciliation check unless the ledger (`batch-assets report`) has every item of it final;
3. a batch the provider rejects as a whole (emulator `max_requests_per_batch` below the shard's
   size: `too_many_tasks`) ends with a FAILED reconciliation check, shown in the UI;
4. `settled`'s partition bar: green for the done days, red for the failed one, empty for a day in
   flight, red once an operator cancels that day (its check warns `canceled`);
5. a revoke gets a collect run from the sensor that refreshes the business table's row count;
6. a copied task folder with a typo (`provider: opnai`) beside the good ones: after "Reload
   definitions" the code location loads, the good tasks and the sensor are still there and a new
   day of a good task still materializes to `settled`; the broken folder shows as its `task_spec`
   asset holding the file, the field and the fix.

Every wait polls for its condition with a deadline; nothing sleeps to synchronize.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from batch_assets_tests.e2e.stack import Stack, wait_for

pytestmark = pytest.mark.e2e

TASK = "ticket_triage"
APPLIED = f"{TASK}/applied"
CHECK = "reconciliation"
FIRST = "2026-11-20"
BACKFILL = ("2026-11-21", "2026-11-22", "2026-11-23")
FAILING = "2026-11-24"
IN_FLIGHT = "2026-11-25"
AFTER_BREAK = "2026-11-26"  # the last seeded day: a good task's day materialized beside the broken copy
BROKEN_FOLDER = "e2e_broken_copy"  # gitignored; removed (and the location reloaded) after the test
BROKEN = "ticket_triage_copy"
SETTLED = f"{TASK}/settled"
SUBMIT_STAGES = ("manifest", "shards", "submissions")
# Per-item faults during the backfill, drawn per (request, occurrence) so a retried request can succeed.
BACKFILL_FAULTS = {"item_error_rate": 0.01, "item_faults_by_occurrence": True}
DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
# Bounded waits (seconds). Generous: the machine is small and shared; a healthy run takes a fraction.
LAUNCH_TIMEOUT_S = 120
PARTITION_TIMEOUT_S = 420
BACKFILL_TIMEOUT_S = 900  # three partitions, each collected, retried and collected again (~6 min seen under load)


def task_id(partition: str) -> str:
    return f"{TASK}_{partition.replace('-', '')}"


# -- reading the state ---------------------------------------------------------------------------
def evaluations(stack: Stack) -> list[dict]:
    """Every evaluated reconciliation check, newest first: passed, severity, metadata, task_ids."""
    out = []
    for ex in stack.check_executions(APPLIED, CHECK):
        ev = ex["evaluation"]
        if not ev:
            continue  # planned or skipped, nothing evaluated
        md = {m["label"]: m.get("text", m.get("intValue", m.get("jsonString"))) for m in ev["metadataEntries"]}
        ids = [t.strip() for t in str(md.get("partitions", "")).split(",") if t.strip()]
        out.append(
            {
                "run_id": ex["runId"],
                "passed": ev["success"],
                "severity": ev["severity"],
                "metadata": md,
                "task_ids": ids,
                "check_partition": ex["partition"],
            }
        )
    return out


def latest_evaluation(stack: Stack, tid: str) -> dict | None:
    return next((e for e in evaluations(stack) if tid in e["task_ids"]), None)


def all_final(row: dict) -> bool:
    """The ledger's word: every item of the partition has its final outcome, and it balances."""
    final_failed = row["final_failed"]
    final_failed = sum(final_failed.values()) if isinstance(final_failed, dict) else int(final_failed or 0)
    accounted = (
        row["applied"] + row["stale"] + row["quarantined"] + row["canceled"] + row["compliance_held"] + final_failed
    )
    return (
        row["unresolved"] == 0
        and row["in_flight"] == 0
        and row["retry_pending"] == 0
        and row["balanced"]
        and accounted == row["items"]
    )


def ledger(stack: Stack) -> dict[str, dict]:
    return {row["task_id"]: row for row in stack.report(TASK)}


def runs_for(stack: Stack, partition: str) -> list[dict]:
    out = []
    for run in stack.runs():
        tags = {t["key"]: t["value"] for t in run["tags"]}
        if tags.get("dagster/partition") == partition or (
            tags.get("dagster/asset_partition_range_start", "")
            <= partition
            <= tags.get("dagster/asset_partition_range_end", "")
        ):
            out.append({**run, "tags": tags})
    return out


# -- driving the UI ------------------------------------------------------------------------------
def open_group(page, stack: Stack) -> None:
    page.goto(f"{stack.ui_url}/locations/batch_assets/asset-groups/{TASK}/lineage")
    for stage in ("manifest", "applied"):
        page.get_by_text(stage, exact=True).first.wait_for()


def materialize_submit_stages(page, stack: Stack, partitions: str, launch_button: str) -> None:
    """Asset graph: select manifest, shards, submissions; Materialize selected; pick partitions; launch."""
    open_group(page, stack)
    page.get_by_text(SUBMIT_STAGES[0], exact=True).first.click()
    for stage in SUBMIT_STAGES[1:]:
        page.get_by_text(stage, exact=True).first.click(modifiers=["Shift"])
    page.get_by_role("button", name=f"Materialize selected ({len(SUBMIT_STAGES)})").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text(f"Launch runs to materialize {len(SUBMIT_STAGES)} assets").wait_for()
    partition_input = dialog.locator("input[type=text]").first
    partition_input.fill(partitions)
    partition_input.press("Enter")
    button = dialog.get_by_role("button", name=launch_button, exact=True)
    button.wait_for()
    button.click()
    dialog.wait_for(state="detached")


def show_graph_details(page, stack: Stack) -> None:
    """The group's graph zoomed in until the nodes show their details (latest event, asset checks)."""
    open_group(page, stack)
    if page.get_by_text("Hide navigation").count():
        page.get_by_text("Hide navigation").click()
    zoom_in = page.locator("#zoom-slider-container").get_by_role("button", name="zoom_in")
    for _ in range(10):
        if page.get_by_text("Asset checks").count():
            break
        zoom_in.click()
    page.get_by_text("Asset checks").first.wait_for()
    # Zoomed in, the graph is wider than the viewport: pan left so `applied` and its check show.
    page.mouse.move(700, 650)
    page.mouse.down()
    page.mouse.move(640, 650, steps=10)
    page.mouse.up()


def check_page(page, stack: Stack) -> None:
    page.goto(f"{stack.ui_url}/assets/{APPLIED}?view=checks&checkDetail={CHECK}")
    page.get_by_text("Latest execution").wait_for()


def ui_latest_check(page, stack: Stack) -> tuple[str, str | None]:
    """(evaluation result as the check page shows it, the task_id of its metadata) for the latest execution."""
    check_page(page, stack)
    text = page.inner_text("main") if page.locator("main").count() else page.inner_text("body")
    m = re.search(r"Evaluation result\s+(\w+)", text)
    # The metadata row `task_id <task>_<YYYYMMDD>` (other text on the page may mention task_id too).
    tid = re.search(r"\btask_id\s+([a-z][a-z0-9_]*_\d{8})\b", text)
    return (m.group(1) if m else "?"), (tid.group(1) if tid else None)


def shot(page, artifacts: Path, name: str) -> Path:
    path = artifacts / name
    page.screenshot(path=str(path))
    return path


def publish(path: Path) -> None:
    """With E2E_UPDATE_DOCS=1, copy a screenshot into the tracked docs/images/ (the README shows them);
    otherwise a run leaves the tracked tree alone."""
    if os.environ.get("E2E_UPDATE_DOCS") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOC_IMAGES / path.name)


# -- the tests -----------------------------------------------------------------------------------
def test_one_partition_from_the_asset_graph(stack: Stack, browser_page, artifacts: Path):
    page = browser_page
    materialize_submit_stages(page, stack, FIRST, "Launch 1 run")

    ui_run = wait_for(
        f"the UI's run for {FIRST}",
        lambda: [r for r in runs_for(stack, FIRST) if r["tags"].get("dagster/from_ui") == "true"],
        LAUNCH_TIMEOUT_S,
    )[0]
    assert set(SUBMIT_STAGES) and ui_run["jobName"] == "__ASSET_JOB"

    # The sensor notices the finished batch and requests the collect run; its check passes.
    ev = wait_for(
        f"a passed reconciliation check for {FIRST}",
        lambda: (e := latest_evaluation(stack, task_id(FIRST))) and e["passed"] and e,
        PARTITION_TIMEOUT_S,
    )
    row = ledger(stack)[task_id(FIRST)]
    assert all_final(row) and row["applied"] > 0 and row["status"] == "COMPLETED", row
    collect = [r for r in runs_for(stack, FIRST) if r["tags"].get("dagster/sensor_name") == "provider_status_sensor"]
    assert collect and ev["run_id"] in {r["runId"] for r in collect}, (
        "the passing check came from the sensor's collect run"
    )
    assert ev["metadata"]["applied"] == row["applied"]

    # The UI: the check page shows it passed, for this partition.
    assert ui_latest_check(page, stack) == ("Passed", task_id(FIRST))
    show_graph_details(page, stack)
    page.get_by_text("1 / 1 Passed").first.wait_for()
    publish(shot(page, artifacts, "e2e_asset_graph_with_checks.png"))


def test_backfill_never_passes_before_applied(stack: Stack, browser_page, artifacts: Path):
    page = browser_page
    # A real service's sprinkle of per-item faults (as the demo's): the first collect of a partition
    # finds retries pending, so its check must WARN, and pass only after the retries are applied.
    stack.emulator_settings(**BACKFILL_FAULTS)
    materialize_submit_stages(page, stack, f"[{BACKFILL[0]}...{BACKFILL[-1]}]", "Launch backfill")
    wanted = {task_id(p) for p in BACKFILL}
    seen: dict[str, set[str]] = {tid: set() for tid in wanted}  # verdicts observed per partition

    def watch():
        # UI first, then the ledger: the ledger only moves forward, so a "passed" the UI shows must
        # already be final in a report read afterwards.
        ui_status, ui_tid = ui_latest_check(page, stack)
        evs = evaluations(stack)
        rows = ledger(stack)
        if ui_status == "Passed" and ui_tid in wanted:
            assert all_final(rows[ui_tid]), (
                f"the UI shows {ui_tid} passed but the ledger has open items: {rows[ui_tid]}"
            )
        done = set()
        for e in evs:
            for tid in wanted.intersection(e["task_ids"]):
                seen[tid].add("passed" if e["passed"] else e["severity"])
                if e["passed"]:
                    assert all_final(rows[tid]), f"{tid} passed its check with open items: {rows[tid]}"
                    done.add(tid)
        return done == wanted

    try:
        wait_for(f"passed reconciliation checks for {', '.join(BACKFILL)}", watch, BACKFILL_TIMEOUT_S, interval_s=2.0)
    finally:
        stack.emulator_settings(item_error_rate=0.0)
        (artifacts / "backfill_verdicts.json").write_text(json.dumps({t: sorted(v) for t, v in seen.items()}, indent=2))
    rows = ledger(stack)
    for tid in wanted:
        assert all_final(rows[tid]) and rows[tid]["status"] in ("COMPLETED", "COMPLETED_WITH_FAILURES"), rows[tid]
    # The faults made the pending state real: some partition was seen WARN (retries due) before it passed.
    assert any("WARN" in verdicts for verdicts in seen.values()), seen
    assert any(rows[tid]["retried"] > 0 for tid in wanted), rows
    shot(page, artifacts, "e2e_backfill_checks.png")


def test_rejected_batch_fails_the_check(stack: Stack, browser_page, artifacts: Path):
    page = browser_page
    # Every earlier partition is final (test order), so only the next batch meets the small limit.
    stack.emulator_settings(max_requests_per_batch=100)
    try:
        materialize_submit_stages(page, stack, FAILING, "Launch 1 run")
        ev = wait_for(
            f"an evaluated reconciliation check for {FAILING} that is not pending",
            lambda: (
                (e := latest_evaluation(stack, task_id(FAILING))) and e["severity"] == "ERROR" and not e["passed"] and e
            ),
            PARTITION_TIMEOUT_S,
        )
    finally:
        stack.emulator_settings(max_requests_per_batch=50_000)
    row = ledger(stack)[task_id(FAILING)]
    assert row["status"] == "FAILED" and row["applied"] == 0 and row["unresolved"] == 0, row
    assert row["final_failed"]["validation_error"] > 0, row
    assert "validation_error" in ev["metadata"]["verdict"] and ev["metadata"]["final_status"] == "FAILED"

    # The provider's reason reaches the sensor's tick log (Automation -> provider_status_sensor).
    wait_for(
        "too_many_tasks in the sensor's tick log",
        lambda: [m for m in stack.sensor_log() if task_id(FAILING) in m and "too_many_tasks" in m],
        LAUNCH_TIMEOUT_S,
    )

    status, tid = ui_latest_check(page, stack)
    assert (status, tid) == ("Failed", task_id(FAILING))
    text = page.inner_text("body")
    assert "final failure(s) (validation_error" in text and "FAILED" in text
    # The verdict is the last row of the (alphabetical) metadata: bring it to the bottom of the view,
    # so the picture shows final_status FAILED, the validation failures, task_id and the verdict.
    page.get_by_text(f"{task_id(FAILING)}: failed:").first.evaluate("e => e.scrollIntoView({block: 'end'})")
    publish(shot(page, artifacts, "e2e_failed_check.png"))


def test_failed_check_names_the_providers_reason(stack: Stack, browser_page):
    page = browser_page
    check_page(page, stack)
    texts = [page.inner_text("body")]
    for run in runs_for(stack, FAILING):
        page.goto(f"{stack.ui_url}/runs/{run['runId']}")
        page.get_by_text(run["runId"][:8]).first.wait_for()
        texts.append(page.inner_text("body"))
    assert any("too_many_tasks" in t for t in texts)


def partitions_page(page, stack: Stack, asset: str, day: str) -> None:
    """The asset's Partitions tab: its bar (green done, red failed, empty not yet), `day` picked in the list."""
    page.goto(f"{stack.ui_url}/assets/{asset}?view=partitions")
    page.get_by_text(day, exact=True).first.click()
    page.wait_for_load_state("networkidle")


def test_the_settled_bar_is_green_for_done_days_and_red_for_the_failed_one(stack: Stack, browser_page, artifacts: Path):
    page = browser_page
    statuses = wait_for(
        f"{SETTLED} red for {FAILING}",
        lambda: (s := stack.partition_statuses(SETTLED)).get(FAILING) == "FAILED" and s,
        LAUNCH_TIMEOUT_S,
    )
    assert all(statuses.get(day) == "MATERIALIZED" for day in (FIRST, *BACKFILL)), statuses
    # `applied` ran for the failed day as well: its own bar says the step ran, not that the day is done.
    assert stack.partition_statuses(APPLIED).get(FAILING) == "MATERIALIZED"
    partitions_page(page, stack, SETTLED, FAILING)
    publish(shot(page, artifacts, "e2e_settled_failed_partition.png"))


def test_an_in_flight_partition_is_not_green_and_a_canceled_one_turns_red(stack: Stack, browser_page, artifacts: Path):
    page = browser_page
    stack.emulator_settings(force_batch_status="stuck")  # its batch stays in progress
    try:
        materialize_submit_stages(page, stack, IN_FLIGHT, "Launch 1 run")
        wait_for(
            f"the submit run of {IN_FLIGHT} succeeded",
            lambda: [r for r in runs_for(stack, IN_FLIGHT) if r["status"] == "SUCCESS"],
            PARTITION_TIMEOUT_S,
        )
    finally:
        stack.emulator_settings(force_batch_status=None)
    row = ledger(stack)[task_id(IN_FLIGHT)]
    assert row["in_flight"] > 0 and row["applied"] == 0, row
    assert IN_FLIGHT not in stack.partition_statuses(SETTLED)  # empty, not green
    assert stack.partition_statuses(f"{TASK}/submissions").get(IN_FLIGHT) == "MATERIALIZED"
    partitions_page(page, stack, SETTLED, IN_FLIGHT)
    publish(shot(page, artifacts, "e2e_in_flight_partition.png"))

    # An operator cancels it: the day ends CANCELED, red, and its check warns `canceled`.
    out = stack.cli("cancel", task_id(IN_FLIGHT))
    assert out.returncode == 0, out.stderr
    wait_for(
        f"{SETTLED} red for the canceled {IN_FLIGHT}",
        lambda: stack.partition_statuses(SETTLED).get(IN_FLIGHT) == "FAILED",
        PARTITION_TIMEOUT_S,
    )
    ev = latest_evaluation(stack, task_id(IN_FLIGHT))
    assert ev and not ev["passed"] and ev["severity"] == "WARN" and "canceled" in ev["metadata"]["verdict"], ev
    assert ledger(stack)[task_id(IN_FLIGHT)]["status"] == "CANCELED"


def test_a_revoke_refreshes_the_business_tables_row_count(stack: Stack):
    table = "warehouse/ticket_labels"
    out = stack.cli("revoke", "--task-id", task_id(FIRST), "--reason", "e2e: labels taken back", "--yes")
    assert out.returncode == 0, out.stderr
    counted = stack.cli("sql", "SELECT count(*) AS n FROM ticket_labels")
    assert counted.returncode == 0, counted.stderr
    rows = int(re.findall(r"\b(\d+)\b", counted.stdout)[-1])
    # The sensor requests a collect run for the revoked day; its observation carries the new count.
    wait_for(
        f"{table} observed with {rows} rows",
        lambda: stack.latest_observation(table).get("dagster/row_count") == rows,
        PARTITION_TIMEOUT_S,
    )


def test_a_broken_task_beside_good_ones_is_isolated(stack: Stack, browser_page, artifacts: Path):
    page = browser_page
    tasks = Path(__file__).resolve().parents[2] / "batch_assets" / "defs" / "tasks"
    copy = tasks / BROKEN_FOLDER
    shutil.copytree(tasks / TASK, copy)
    defs = copy / "defs.yaml"
    text = defs.read_text(encoding="utf-8")
    defs.write_text(
        text.replace(f"  name: {TASK}\n", f"  name: {BROKEN}\n", 1).replace(
            "  provider: openai\n", "  provider: opnai\n", 1
        ),
        encoding="utf-8",
    )
    try:
        stack.reload_location()  # raises if the code location failed to load
        keys = stack.asset_keys()
        assert {SETTLED, APPLIED, "review_sentiment/settled"} <= keys, sorted(keys)
        assert f"{BROKEN}/task_spec" in keys and not any(
            k.startswith(f"{BROKEN}/") and k != f"{BROKEN}/task_spec" for k in keys
        )
        assert stack.sensor_status() == "RUNNING"
        node = stack.asset_node(f"{BROKEN}/task_spec")
        error = node["metadata"]["error"]
        assert str(defs) in error and "opnai" in error and node["metadata"]["field"] == "provider", node
        assert "Fix:" in error and error in node["description"]

        listed = stack.cli("tasks")
        assert listed.returncode == 1 and f"BROKEN {BROKEN_FOLDER}: {error}" in listed.stdout, listed

        page.goto(f"{stack.ui_url}/assets/{BROKEN}/task_spec")
        page.get_by_text("opnai").first.wait_for()
        page.wait_for_load_state("networkidle")
        publish(shot(page, artifacts, "e2e_broken_task.png"))

        # The good task still materializes a new day from the UI, and the sensor carries it to done.
        materialize_submit_stages(page, stack, AFTER_BREAK, "Launch 1 run")
        wait_for(
            f"{SETTLED} green for {AFTER_BREAK} beside the broken task",
            lambda: stack.partition_statuses(SETTLED).get(AFTER_BREAK) == "MATERIALIZED",
            PARTITION_TIMEOUT_S,
        )
        assert ledger(stack)[task_id(AFTER_BREAK)]["status"] in ("COMPLETED", "COMPLETED_WITH_FAILURES")
    finally:
        shutil.rmtree(copy, ignore_errors=True)
        stack.reload_location()
    assert f"{BROKEN}/task_spec" not in stack.asset_keys()
