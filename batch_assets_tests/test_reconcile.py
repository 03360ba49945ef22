"""The reconciliation equation: every term an independent ledger query; a finished run
balances with the expected numbers, and a tampered ledger makes it fail with the numbers spelled out."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from batch_assets.emulator.testing import running_emulator
from batch_assets.ledger.history import copy_partition_rows
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle import reconcile as reconcile_module
from batch_assets.pipeline.settle.reconcile import reconcile, reconcile_conn
from batch_assets.providers.contract import ClientSettings
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter
from batch_assets.resources import EMULATOR_API_KEY

from .conftest import DAY1, FAST_EMULATOR, _run_partition
from .profiles import EARLIER_DAYS, ledger_scans

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

TASK_ID1 = "ticket_triage_20261120"
ITEMS, REJECTED_ROWS, QUARANTINED, LINES = 58, 2, 8, 50  # 3 of 8 quarantined: card numbers blocked


def test_a_clean_run_balances_with_the_expected_numbers(seeded_copy, ticket_task, adapter, run_partition):
    r = run_partition(seeded_copy, ticket_task, DAY1, adapter)
    assert r.problems() == []
    assert (r.manifest_items, r.source_rejects, r.quarantined, r.shard_lines) == (
        ITEMS,
        REJECTED_ROWS,
        QUARANTINED,
        LINES,
    )
    assert (r.submitted_lines, r.provider_request_total) == (LINES, LINES)
    assert (r.succeeded, r.failed_total, r.expired, r.canceled, r.missing, r.in_flight) == (LINES, 0, 0, 0, 0, 0)
    assert (r.applied, r.stale, r.failed_to_parse) == (LINES, 0, 0)
    assert (r.orphan_lines, r.duplicate_lines, r.malformed_lines, r.jobs, r.jobs_terminal) == (0, 0, 0, 1, 1)
    meta = r.as_metadata()
    assert meta["manifest_items"] == ITEMS and meta["failed_total"] == 0 and meta["applied"] == LINES


def test_a_run_in_flight_balances_with_items_counted_as_missing(seeded_copy, ticket_task, adapter):
    wh, task = (
        seeded_copy,
        dataclasses.replace(ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=20)),
    )
    freeze_manifest(wh, task, DAY1)
    cut_shards(wh, task, DAY1)
    submit_pending(wh, task, DAY1, adapter)
    r = reconcile(wh, TASK_ID1)
    assert r.problems() == []
    assert (r.missing, r.in_flight, r.jobs, r.jobs_terminal) == (LINES, LINES, 3, 0)


# --- tampering ----------------------------------------------------------------------------------------


def _three_shard_run(root, template, ticket_task, **faults) -> tuple[Warehouse, object]:
    """A copy of the seeded warehouse with DAY1 run to the end in three shards (emulator `faults`)."""
    wh = Warehouse.at(root / "warehouse.duckdb", root / "data")
    shutil.copy(template, wh.database)
    task = dataclasses.replace(ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=20))
    with running_emulator(root / "emulator", **FAST_EMULATOR, **faults) as emu:
        adapter = OpenAIBatchAdapter(ClientSettings(EMULATOR_API_KEY, emu.openai_base_url, max_retries=2))
        return wh, _run_partition(wh, task, DAY1, adapter)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, _seeded_template, ticket_task) -> tuple[Warehouse, object]:
    """One partition run to the end (three shards, some item errors); tests tamper with copies of it."""
    wh, r = _three_shard_run(
        tmp_path_factory.mktemp("finished_run"), _seeded_template, ticket_task, item_error_rate=0.2, truncate_rate=0.05
    )
    assert r.problems() == [] and r.failed_total > 0 and r.failed_to_parse > 0 and r.jobs == 3
    return wh, r


def tampered(finished_run, tmp_path, *statements: str):
    """The reconciliation of a copy of `finished_run` after `statements`, and the run's own. The
    per-item pass runs by ranges of item numbers: in ranges of 7 and 1 numbers (with gaps, numbers
    past the manifest's and lines without one) it must give exactly what one range gives."""
    wh, baseline = finished_run
    copy = Warehouse.at(tmp_path / "warehouse.duckdb", wh.data_dir)
    shutil.copy(wh.database, copy.database)
    with copy.connect() as conn:
        for sql in statements:
            conn.execute(sql)
    whole = reconcile(copy, TASK_ID1)
    for chunk in (7, 1):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(reconcile_module, "RECONCILE_CHUNK", chunk)
            assert reconcile(copy, TASK_ID1) == whole, f"in ranges of {chunk} item numbers"
    return whole, baseline


def one_succeeded(cls_filter: str) -> str:
    return (
        f"(SELECT custom_id FROM ledger.parsed_result WHERE task_id = '{TASK_ID1}' AND {cls_filter} "
        "ORDER BY custom_id LIMIT 1)"
    )


def test_untampered_copy_balances(finished_run, tmp_path):
    r, base = tampered(finished_run, tmp_path)
    assert r.problems() == [] and r == base


def test_deleting_a_parsed_result_is_detected(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        f"DELETE FROM ledger.parsed_result WHERE custom_id = {one_succeeded('error_class IS NULL')}",
    )
    problems = r.problems()
    assert any(
        f"applied {b.applied} + stale {b.stale} + failed to parse {b.failed_to_parse} != succeeded "
        f"{b.succeeded - 1}" in p
        for p in problems
    ), problems


def test_deleting_a_failed_items_parsed_result_is_detected(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        f"DELETE FROM ledger.parsed_result WHERE custom_id = {one_succeeded('NOT provider_succeeded')}",
    )
    assert r.failed_total == b.failed_total - 1
    assert r.problems() != []


def test_a_bogus_shard_line_is_detected(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        f"""
        INSERT INTO ledger.shard_line SELECT shard_id, 999, '{TASK_ID1}:ticket:TK-BOGUS:00000000',
               '{TASK_ID1}:ticket:TK-BOGUS:00000000', task_id, attempt, line_bytes, est_tokens,
               NULL AS item_no  -- an id the manifest does not know has no item number
        FROM ledger.shard_line WHERE task_id = '{TASK_ID1}' LIMIT 1""",
    )
    problems = r.problems()
    assert any(
        f"first-attempt shard lines {b.shard_lines + 1} + unsharded 0 != "
        f"manifest items {b.manifest_items} - quarantined {b.quarantined}" in p
        for p in problems
    ), problems
    assert any(
        f"manifest items {b.manifest_items} != " in p and f"missing 1 + unsharded 0 (= {b.manifest_items + 1})" in p
        for p in problems
    ), problems


def test_deleting_an_applied_result_is_detected(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        """
        DELETE FROM ledger.applied_result WHERE custom_id = (SELECT min(custom_id) FROM ledger.applied_result)""",
    )
    (problem,) = r.problems()
    assert (
        f"applied {b.applied - 1} + stale {b.stale} + failed to parse {b.failed_to_parse} != succeeded {b.succeeded}"
    ) in problem


def test_a_changed_provider_request_count_is_detected(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        """
        UPDATE ledger.provider_job SET request_total = request_total + 1
        WHERE job_key = (SELECT min(job_key) FROM ledger.provider_job)""",
    )
    (problem,) = r.problems()
    assert f"provider request counts {b.submitted_lines + 1} != lines submitted {b.submitted_lines}" in problem


def test_a_lost_quarantine_row_is_detected(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        "DELETE FROM ledger.quarantine WHERE custom_id = (SELECT min(custom_id) FROM ledger.quarantine)",
    )
    problems = r.problems()
    assert any(
        f"first-attempt shard lines {b.shard_lines} + unsharded 0 != "
        f"manifest items {b.manifest_items} - quarantined {b.quarantined - 1}" in p
        for p in problems
    ), problems
    assert any(
        f"quarantined {b.quarantined - 1}" in p and f"(= {b.manifest_items - 1})" in p
        for p in problems
        if p.startswith("manifest items")
    ), problems


def test_a_lost_manifest_item_is_detected(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        """
        DELETE FROM ledger.manifest_item WHERE custom_id = (SELECT min(custom_id) FROM ledger.shard_line)""",
    )
    problems = r.problems()
    assert any(p.startswith(f"manifest items {b.manifest_items - 1} != ") for p in problems), problems
    assert any(
        f"first-attempt shard lines {b.shard_lines} + unsharded 0 != "
        f"manifest items {b.manifest_items - 1} - quarantined {b.quarantined}" in p
        for p in problems
    ), problems


# --- terms found in one pass over the latest attempts stay each table's own count ---------------------


def test_a_duplicated_latest_line_without_a_result_is_missing_twice(finished_run, tmp_path):
    """'missing' counts latest lines, not items: a duplicated line whose result is lost is two."""
    item = one_succeeded("error_class IS NULL")
    r, b = tampered(
        finished_run,
        tmp_path,
        f"INSERT INTO ledger.shard_line SELECT * FROM ledger.shard_line WHERE custom_id = {item}",
        f"DELETE FROM ledger.parsed_result WHERE custom_id = {item}",
    )
    assert (r.missing, r.succeeded, r.shard_lines) == (2, b.succeeded - 1, b.shard_lines + 1)
    problems = r.problems()
    assert any(
        p.startswith(f"manifest items {b.manifest_items} != succeeded {b.succeeded - 1}")
        and f"missing 2 + unsharded 0 (= {b.manifest_items + 1})" in p
        for p in problems
    ), problems


def test_a_result_filed_under_another_task_is_missing_here_and_unbalances_the_result_lines(finished_run, tmp_path):
    """Only the partition's own results are matched to its lines (matching every partition's made
    reconcile grow with the ledger's history): a result moved to another task_id is missing here,
    and the result lines the partition matched no longer equal the outcomes taken from them."""
    r, b = tampered(
        finished_run,
        tmp_path,
        f"""
        UPDATE ledger.parsed_result SET task_id = 'elsewhere'
        WHERE custom_id = {one_succeeded("error_class IS NULL")}""",
    )
    assert (r.succeeded, r.missing, r.parsed_from_lines) == (b.succeeded - 1, 1, b.parsed_from_lines - 1)
    assert r.answered_lines == b.answered_lines
    assert r.problems() == [
        f"outcomes from result lines {b.parsed_from_lines - 1} != result lines matched to items {b.answered_lines}",
        f"applied {b.applied} + stale {b.stale} + failed to parse {b.failed_to_parse} != succeeded {b.succeeded - 1}",
    ]
    assert r.verdict().status == "failed"


def test_other_partitions_results_are_not_matched(finished_run, tmp_path):
    """Another partition's results, decisions and lines (here: a copy of this one's under another
    task_id and custom_ids) change nothing in this partition's reconciliation."""
    other = "ticket_triage_20261001"
    copies = [
        f"""INSERT INTO ledger.{t} SELECT * REPLACE (replace(custom_id, '{TASK_ID1}', '{other}') AS custom_id,
                                                          '{other}' AS task_id)
                  FROM ledger.{t} WHERE task_id = '{TASK_ID1}'"""
        for t in ("manifest_item", "shard_line", "parsed_result", "retry_decision", "applied_result")
    ]
    r, b = tampered(finished_run, tmp_path, *copies)
    assert r.problems() == [] and r == b


def test_the_per_item_pass_reads_only_the_partitions_own_rows(finished_run, tmp_path):
    """With nine other partitions in the ledger, every big ledger table's scan in the per-item
    statement yields only this partition's rows (its cost follows the partition, not the ledger's
    history). Read from DuckDB's profile of the statement: row counts, not times."""
    wh, base = finished_run
    copy = Warehouse.at(tmp_path / "warehouse.duckdb", wh.data_dir)
    shutil.copy(wh.database, copy.database)
    tables = ("manifest_item", "shard_line", "parsed_result", "retry_decision", "applied_result", "quarantine")
    with copy.connect() as conn:
        own = {
            t: conn.execute(f"SELECT count(*) FROM ledger.{t} WHERE task_id = ?", [TASK_ID1]).fetchone()[0]
            for t in tables
        }
        copy_partition_rows(conn, DAY1, EARLIER_DAYS)
        found = {}
        scans = ledger_scans(
            conn,
            lambda: found.update(r=reconcile_conn(conn, TASK_ID1)),  # per-item pass last
            tmp_path / "profile.json",
        )
    assert found["r"].problems() == [] and found["r"] == base
    assert {"manifest_item", "shard_line", "parsed_result", "applied_result"} <= set(scans), scans
    for table, rows in scans.items():
        if table in own:
            assert max(rows) <= own[table], (table, rows, own[table])


def test_a_superseded_item_leaves_every_term(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        """
        UPDATE ledger.manifest_item SET superseded_at = frozen_at
        WHERE custom_id = (SELECT a.custom_id FROM ledger.applied_result a JOIN ledger.parsed_result p USING (custom_id)
                           WHERE a.outcome = 'applied' AND p.error_class IS NULL AND p.from_line
                           ORDER BY a.custom_id LIMIT 1)""",
    )
    assert r.problems() == []
    assert (r.manifest_items, r.shard_lines, r.succeeded, r.applied, r.answered_lines, r.parsed_from_lines) == (
        b.manifest_items - 1,
        b.shard_lines - 1,
        b.succeeded - 1,
        b.applied - 1,
        b.answered_lines - 1,
        b.parsed_from_lines - 1,
    )
    assert (r.unresolved, r.final_failed, r.undecided) == (b.unresolved, b.final_failed, b.undecided)


def test_a_line_moved_to_another_items_number_is_detected(finished_run, tmp_path):
    """The tables are matched by item number: a line whose number is changed to another item's leaves
    its own item without a line (its answer is no longer an outcome of a latest line) and gives the
    other two, which unbalances the equations."""
    item = one_succeeded("error_class IS NULL")
    r, b = tampered(
        finished_run,
        tmp_path,
        f"""
        UPDATE ledger.shard_line SET item_no = (SELECT max(item_no) FROM ledger.manifest_item
                                                WHERE task_id = '{TASK_ID1}' AND custom_id <> {item})
        WHERE custom_id = {item}""",
    )
    assert r.succeeded == b.succeeded - 1 and r.problems() != []
    assert any(f"!= succeeded {b.succeeded - 1}" in p for p in r.problems()), r.problems()


def test_an_item_without_an_answer_in_a_batch_still_running_is_in_flight_not_missing(finished_run, tmp_path):
    """Lines of a shard whose batch has not ended are open: an item there without a result is in
    flight (pending), not missing. (A finished partition's pass skips the shards' states.)"""
    item = one_succeeded("error_class IS NULL")
    shard = f"(SELECT shard_id FROM ledger.shard_line WHERE custom_id = {item})"
    r, b = tampered(
        finished_run,
        tmp_path,
        f"UPDATE ledger.provider_job SET state = 'RUNNING', terminal_at = NULL WHERE shard_id = {shard}",
        f"DELETE FROM ledger.applied_result WHERE custom_id = {item}",
        f"DELETE FROM ledger.parsed_result WHERE custom_id = {item}",
    )
    assert (r.in_flight, r.unresolved_missing, r.missing) == (1, b.unresolved_missing, b.missing + 1)
    assert r.pending == b.pending + 1


def test_lines_of_two_ids_unknown_to_the_manifest_are_two_ids(finished_run, tmp_path):
    """Rows without an item number are told apart by their custom_id: of two unknown ids, the one
    with a result of its own is an answered line, the other a missing one."""
    bogus = [f"'{TASK_ID1}:ticket:TK-BOGUS-{i}:00000000'" for i in (1, 2)]
    r, b = tampered(
        finished_run,
        tmp_path,
        *(
            f"""
        INSERT INTO ledger.shard_line SELECT shard_id, 999, {cid}, {cid}, task_id, 1, line_bytes, est_tokens, NULL
        FROM ledger.shard_line WHERE task_id = '{TASK_ID1}' LIMIT 1"""
            for cid in bogus
        ),
        f"""
        INSERT INTO ledger.parsed_result SELECT * REPLACE ({bogus[0]} AS custom_id, NULL AS item_no)
        FROM ledger.parsed_result WHERE custom_id = {one_succeeded("error_class IS NULL")}""",
    )
    assert (r.missing, r.succeeded, r.shard_lines, r.unresolved) == (
        b.missing + 1,
        b.succeeded + 1,
        b.shard_lines + 2,
        b.unresolved,
    )
    assert any(f"missing 1 + unsharded 0 (= {b.manifest_items + 2})" in p for p in r.problems()), r.problems()


def test_a_line_of_an_id_unknown_to_the_manifest_is_missing_but_no_items_state(finished_run, tmp_path):
    r, b = tampered(
        finished_run,
        tmp_path,
        f"""
        INSERT INTO ledger.shard_line SELECT shard_id, 999, '{TASK_ID1}:ticket:TK-BOGUS:00000000',
               '{TASK_ID1}:ticket:TK-BOGUS:00000000', task_id, attempt, line_bytes, est_tokens,
               NULL AS item_no  -- an id the manifest does not know has no item number
        FROM ledger.shard_line WHERE task_id = '{TASK_ID1}' LIMIT 1""",
    )
    assert (r.missing, r.unresolved_missing, r.unresolved) == (b.missing + 1, b.unresolved_missing, b.unresolved)


# --- a finished partition of first attempts only (the per-item pass's shortest form) ------------------


@pytest.fixture(scope="module")
def first_attempts_run(tmp_path_factory, _seeded_template, ticket_task) -> tuple[Warehouse, object]:
    """One partition run to the end without item errors: every line at attempt 1, every batch ended."""
    wh, r = _three_shard_run(tmp_path_factory.mktemp("first_attempts_run"), _seeded_template, ticket_task)
    with wh.connect(read_only=True) as conn:
        assert conn.execute("SELECT max(attempt) FROM ledger.shard_line").fetchone()[0] == 1
    assert r.problems() == [] and r.jobs == 3 and r.succeeded == LINES
    return wh, r


def test_a_first_attempts_partition_balances(first_attempts_run, tmp_path):
    r, b = tampered(first_attempts_run, tmp_path)
    assert r.problems() == [] and r == b and (r.missing, r.unresolved) == (0, 0)


def test_a_duplicated_line_of_an_answered_item_is_one_result_not_two(first_attempts_run, tmp_path):
    """Lines are taken without grouping them only when no item has two: an item whose line was
    duplicated still has one result (its latest attempt's), and the extra line unbalances the lines."""
    item = one_succeeded("error_class IS NULL")
    r, b = tampered(
        first_attempts_run,
        tmp_path,
        f"INSERT INTO ledger.shard_line SELECT * FROM ledger.shard_line WHERE custom_id = {item}",
    )
    assert (r.succeeded, r.answered_lines, r.shard_lines, r.missing) == (
        b.succeeded,
        b.answered_lines,
        b.shard_lines + 1,
        0,
    )
    assert any(
        f"first-attempt shard lines {b.shard_lines + 1} + unsharded 0 != manifest items" in p for p in r.problems()
    ), r.problems()


def test_two_lines_of_a_number_no_item_has_count_its_result_once(first_attempts_run, tmp_path):
    """Lines are taken without grouping them only when every row of the outer join is a manifest
    row's: two lines (and a result) under an item number the manifest does not have still give one
    outcome for that number, as the grouped form does, and unbalance the equations."""
    item, stray = one_succeeded("error_class IS NULL"), f"'{TASK_ID1}:ticket:TK-STRAY:00000000'"
    renumbered = f"* REPLACE ({stray} AS custom_id, 10000000 AS item_no)"
    r, b = tampered(
        first_attempts_run,
        tmp_path,
        f"INSERT INTO ledger.shard_line SELECT {renumbered} FROM ledger.shard_line WHERE custom_id = {item}",
        f"INSERT INTO ledger.shard_line SELECT {renumbered} FROM ledger.shard_line WHERE custom_id = {item}",
        f"INSERT INTO ledger.parsed_result SELECT {renumbered} FROM ledger.parsed_result WHERE custom_id = {item}",
    )
    assert (r.succeeded, r.shard_lines, r.missing) == (b.succeeded + 1, b.shard_lines + 2, 0)
    assert r.problems() and r.verdict().status == "failed"


def test_a_duplicated_line_without_a_result_in_a_first_attempts_partition_is_missing_twice(
    first_attempts_run, tmp_path
):
    item = one_succeeded("error_class IS NULL")
    r, b = tampered(
        first_attempts_run,
        tmp_path,
        f"INSERT INTO ledger.shard_line SELECT * FROM ledger.shard_line WHERE custom_id = {item}",
        f"DELETE FROM ledger.applied_result WHERE custom_id = {item}",
        f"DELETE FROM ledger.parsed_result WHERE custom_id = {item}",
    )  # last: `item` reads it
    assert (r.missing, r.succeeded, r.shard_lines, r.unresolved_missing) == (2, b.succeeded - 1, b.shard_lines + 1, 1)
