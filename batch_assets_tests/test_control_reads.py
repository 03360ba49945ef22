"""The control-table reads the sensor, the poller, submit runs and the CLI make (ledger.tasks,
ledger.job_reads) answer the same on both backends: the same rows in the Warehouse's DuckDB file and
in a real PostgreSQL give the same values, types and order. And outside ledger/ no module reads or
writes a control table in SQL of its own beyond the ones still listed here to move (the seam)."""

from __future__ import annotations

import ast
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from batch_assets.ledger import job_reads, poll_leases, tasks
from batch_assets.ledger import shards as ledger_shards
from batch_assets.ledger.control_db import DuckControl, connect_postgres, registered
from batch_assets.ledger.control_schema import CONTROL_TABLES, ensure_control_schema
from batch_assets.ledger.partition_control import VIEWS, partition_rows, partition_views
from batch_assets.ledger.retries import latest_operator_detail, record_operator_action
from batch_assets.ledger.warehouse import Warehouse

T1, T2 = "ticket_triage_20261120", "kb_embeddings_20261121"


def _ago(seconds: int) -> str:
    return f"now()::TIMESTAMP - INTERVAL '{seconds} seconds'"


def seed(db) -> None:
    """Two partitions, five shards and six jobs, one of each kind the reads tell apart."""
    for task_id, name, day, provider in ((T1, "ticket_triage", "2026-11-20", "openai"),
                                         (T2, "kb_embeddings", "2026-11-21", "anthropic")):  # fmt: skip
        db.execute(
            "INSERT INTO ledger.batch_task (task_id, task_name, partition_date, item_type, provider, model, "
            "endpoint, prompt_version, output_schema_version, status, manifest_uri, manifest_version, "
            "created_at, updated_at) VALUES (?, ?, CAST(? AS DATE), 'ticket', ?, 'm', '/v1/chat/completions', "
            "'v1', 'v1', 'FROZEN', ?, ?, now()::TIMESTAMP, now()::TIMESTAMP)",
            [task_id, name, day, provider, f"/data/{task_id}.parquet", 1 if task_id == T1 else 0],
        )
    shards = [(T1, n) for n in range(4)] + [(T2, 0)]
    for task_id, n in shards:
        db.execute(
            "INSERT INTO ledger.shard (shard_id, task_id, provider, endpoint, model, attempt, shard_no, path, "
            "line_count, byte_count, est_tokens, created_at, deferred_at, wait_priority) VALUES "
            f"(?, ?, 'openai', '/v1/chat/completions', 'm', ?, ?, ?, 10, 100, 100, now()::TIMESTAMP, "
            f"{_ago(600) if n == 3 else 'NULL'}, {'2' if n == 3 else 'NULL'})",
            [f"{task_id}:s{n}", task_id, 2 if n == 2 else 1, n, f"/data/{task_id}/{n}.jsonl"],
        )
    jobs = [
        # job_key, shard, state, batch, claimed_by, claim expiry, create_outcome, extra columns
        ("j-orphan", (T1, 0), "CREATED", None, "run-dead", _ago(60), None, {}),
        ("j-old", (T1, 1), "CREATED", None, None, None, "abandoned", {"created_at": _ago(900)}),
        ("j-claimed", (T1, 1), "CREATED", None, "run-live", "now()::TIMESTAMP + INTERVAL '1 hour'", None, {}),
        ("j-running", (T1, 2), "RUNNING", "b-2", None, None, None, {"state_changed_at": _ago(100)}),
        ("j-done", (T1, 3), "COMPLETED", "b-3", None, None, None,
         {"terminal_at": _ago(50), "terminal_seq": "7", "results_ready": "true"}),
        ("j-notready", (T2, 0), "COMPLETED", "b-4", None, None, None,
         {"terminal_at": _ago(80), "terminal_seq": "8", "results_ready": "false"}),
    ]  # fmt: skip
    for key, (task_id, n), state, batch, owner, expiry, outcome, extra in jobs:
        cols = {"created_at": _ago(300), "state_changed_at": _ago(300), **extra}
        db.execute(
            "INSERT INTO ledger.provider_job (job_key, task_id, shard_id, provider, endpoint, state, "
            "provider_batch_id, claimed_by, create_outcome, claim_expires_at, "
            f"{', '.join(cols)}) VALUES (?, ?, ?, 'openai', '/v1/chat/completions', ?, ?, ?, ?, "
            f"{expiry or 'NULL'}, {', '.join(cols.values())})",
            [key, task_id, f"{task_id}:s{n}", state, batch, owner, outcome],
        )
    for to_state in ("CREATED", "SUBMITTED", "RUNNING"):  # one observed instant: told apart by insert order
        db.execute(
            "INSERT INTO ledger.status_event (job_key, to_state, observed_at) "
            "VALUES ('j-running', ?, TIMESTAMP '2026-11-20 08:00:00')",
            [to_state],
        )


@pytest.fixture
def both(tmp_path: Path, postgres_url):
    """The same control rows in a DuckDB Warehouse and in PostgreSQL."""
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path)
    pg = connect_postgres(postgres_url)
    ensure_control_schema(pg)
    seed(pg)
    with wh.connect() as conn:
        duck = DuckControl(conn)
        seed(duck)
        try:
            yield duck, pg
        finally:
            pg.conn.close()


def _rounded(value):
    """Seconds computed from now() differ between the two engines' clocks by a little."""
    if isinstance(value, float):
        return round(value, -1)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_rounded(v) for v in value)
    return value


READS = {
    "task_ids": (lambda db: tasks.task_ids(db), [T2, T1]),
    "task_ids of a provider": (lambda db: tasks.task_ids(db, provider="openai"), [T1]),
    "task_row": (lambda db: {k: tasks.task_row(db, T1)[k] for k in ("task_name", "day", "manifest_uri")},
                 {"task_name": "ticket_triage", "day": "2026-11-20", "manifest_uri": f"/data/{T1}.parquet"}),
    "task_row frozen only": (lambda db: tasks.task_row(db, T2, frozen=True), None),
    "task_names": (lambda db: tasks.task_names(db), {T1: "ticket_triage", T2: "kb_embeddings"}),
    "providers_of": (lambda db: tasks.providers_of(db, [T2]), {"anthropic"}),
    "max_terminal_seq": (job_reads.max_terminal_seq, 8),
    "shard_attempts": (job_reads.shard_attempts,
                       {("ticket_triage", "2026-11-20"): (2, 2), ("kb_embeddings", "2026-11-21"): (1, 1)}),
    "intent_claim_owners": (job_reads.intent_claim_owners, ["run-live"]),
    "orphaned intents": (lambda db: [r[:3] for r in job_reads.partitions_with_orphaned_intents(db)],
                         [("ticket_triage", "2026-11-20", 1)]),
    "jobs to poll (leased)": (lambda db: [j["job_key"] for j in poll_leases.take_poll_leases(db, "t", 60).jobs],
                              ["j-notready", "j-running"]),
    "jobs to poll of one partition, at most one": (
        lambda db: [j["job_key"] for j in poll_leases.take_poll_leases(db, "t", 60, task_id=T1, max_jobs=1).jobs],
        ["j-running"]),
    "in_flight_jobs": (lambda db: [(j["job_key"], j["seconds_in_state"]) for j in job_reads.in_flight_jobs(db)],
                       [("j-running", 100.0)]),
    "results_not_ready": (lambda db: [(j["job_key"], j["seconds"]) for j in job_reads.results_not_ready(db)],
                          [("j-notready", 80.0)]),
    "running_jobs of a partition": (lambda db: [j["job_key"] for j in job_reads.running_jobs(db, T1)], ["j-running"]),
    "running_jobs of nothing": (lambda db: job_reads.running_jobs(db, "nope"), None),
    "job_counts": (job_reads.job_counts, (6, 4, 0)),
    "known_batch_ids": (lambda db: job_reads.known_batch_ids(db, "openai"), frozenset({"b-2", "b-3", "b-4"})),
    "has_batch": (lambda db: (job_reads.has_batch(db, "j-done"), job_reads.has_batch(db, "j-claimed")),
                  (True, False)),
    "shards_with_live_jobs": (
        lambda db: [(s["shard_id"], s["job_key"], s["jobs_of_shard"])
                    for s in job_reads.shards_with_live_jobs(db, T1, 300.0)],
        [(f"{T1}:s3", "j-done", 1), (f"{T1}:s0", "j-orphan", 1), (f"{T1}:s1", "j-claimed", 2),
         (f"{T1}:s2", "j-running", 1)]),
    "job_listing with a limit": (lambda db: ([j["job_key"] for j in job_reads.job_listing(db, [T1], 2)[0]],
                                             job_reads.job_listing(db, [T1], 2)[1]),
                                 (["j-running", "j-done"], 5)),
    "job notes": (lambda db: {j["job_key"]: j["note"] for j in job_reads.job_listing(db, [T1])[0]}["j-claimed"],
                  "being submitted by run-live"),
    "job_with_shard": (lambda db: job_reads.job_with_shard(db, "j-done")["line_count"], 10),
    "job_of_batch": (lambda db: job_reads.job_of_batch(db, "b-3", "j-other"), "j-done"),
    "jobs_to_download": (lambda db: [j["job_key"] for j in job_reads.jobs_to_download(db, T1)], ["j-done"]),
    "tasks_with_jobs_created_today": (
        lambda db: _after(db, "UPDATE ledger.provider_job SET created_at = now()::TIMESTAMP "
                              "WHERE job_key = 'j-notready'",
                          lambda: T2 in job_reads.tasks_with_jobs_created_today(db)), True),
    "shard_send_states": (
        lambda db: _after(db, "UPDATE ledger.provider_job SET create_outcome = 'abandoned' WHERE job_key = 'j-claimed'",
                          lambda: sorted(r["shard_id"] for r in job_reads.shard_send_states(db, [T1]).to_pylist()
                                         if r["unsent"])), [f"{T1}:s1"]),
    "jobs_with_remote_files": (
        lambda db: _after(db, "UPDATE ledger.provider_job SET downloaded_at = now()::TIMESTAMP, "
                              "remote_delete_attempts = 1 WHERE job_key IN ('j-done', 'j-notready')",
                          lambda: job_reads.jobs_with_remote_files(db, task_names=["ticket_triage"], retry_only=True)
                          .column("job_key").to_pylist()), ["j-done"]),
    "final_task_ids_before": (
        lambda db: _after(db, f"UPDATE ledger.batch_task SET final_status = 'BALANCED', "
                              f"finished_at = {_ago(3 * 86400)} WHERE task_id = '{T1}'",
                          lambda: tasks.final_task_ids_before(db, _days_ago(1), "ticket_triage")), [T1]),
    "unsettled_without_jobs": (lambda db: tasks.unsettled_without_jobs(db).num_rows, 0),
    "task_rows": (lambda db: tasks.task_rows(db, [T2]).column("task_name").to_pylist(),
                  ["kb_embeddings"]),
    "latest_operator_detail": (
        lambda db: (record_operator_action(db, "budget_override", task_id=T1, detail="first"),
                    record_operator_action(db, "budget_override", task_id=T1, detail="second"),
                    latest_operator_detail(db, "budget_override", T1))[2], "second"),
    "shard reads": (lambda db: (ledger_shards.shard_count(db, T1), ledger_shards.next_shard_no(db, T1, 1),
                                [s["shard_id"] for s in ledger_shards.unpurged_shards(db, [T2])]),
                    (4, 4, [f"{T2}:s0"])),
}  # fmt: skip


def _after(db, update: str, read):
    """`read()` after `update` ran (on the backend under test)."""
    db.execute(update)
    return read()


def _days_ago(days: int):
    return datetime.now(UTC).replace(tzinfo=None) - timedelta(days=days)


@pytest.mark.parametrize("name", READS)
def test_a_control_read_answers_the_same_on_both_backends(both, name):
    read, expected = READS[name]
    duck, pg = both
    assert _rounded(read(duck)) == _rounded(expected)
    assert _rounded(read(pg)) == _rounded(read(duck))


def test_collect_candidates_come_as_the_same_arrow_table_and_join_in_duckdb(both):
    duck, pg = both
    on_duck, on_pg = job_reads.collect_candidates(duck), job_reads.collect_candidates(pg)
    assert on_pg.schema == on_duck.schema
    assert on_duck.column("job_key").to_pylist() == ["j-done"]
    assert on_pg.drop(["downloaded_at"]).equals(on_duck.drop(["downloaded_at"]))
    # What a stage does with them: join the control rows with its partition's per-item tables.
    duck.conn.execute("CREATE TEMP TABLE items AS SELECT 'j-done' AS job_key, 3 AS n")
    with registered(duck.conn, "candidates", on_pg):
        joined = duck.conn.execute("SELECT c.task_name, i.n FROM candidates c JOIN items i USING (job_key)").fetchall()
    assert joined == [("ticket_triage", 3)]


def test_arrow_types_follow_the_column_types_not_the_values(both):
    _, pg = both
    table = pg.arrow("SELECT NULL::BIGINT AS n, NULL::TIMESTAMP AS t, CAST(NULL AS VARCHAR) AS s, true AS b")
    assert table.schema == pa.schema([("n", pa.int64()), ("t", pa.timestamp("us")), ("s", pa.string()),
                                      ("b", pa.bool_())])  # fmt: skip


def test_a_partitions_views_hold_its_control_rows_alike_from_either_backend(both):
    duck, pg = both
    from_duck, from_pg = partition_rows(duck, T1), partition_rows(pg, T1)
    assert set(from_duck) == set(VIEWS)
    assert [from_duck[v].num_rows for v in VIEWS] == [1, 4, 5, 3, 0]
    events = from_duck["part_event"].sort_by("event_no").column("to_state").to_pylist()
    assert events == ["CREATED", "SUBMITTED", "RUNNING"]
    assert from_pg["part_event"].sort_by("event_no").column("to_state").to_pylist() == events
    for view in VIEWS:
        assert from_pg[view].column_names == from_duck[view].column_names, view
        assert from_pg[view].num_rows == from_duck[view].num_rows, view
    # The stage's SQL reads the views, whichever backend filled them; the views go with the block.
    conn = duck.conn
    with partition_views(conn, T1, control=pg):
        with partition_views(conn, T1):  # nested for the same partition: the same views
            jobs = conn.execute("SELECT count(*) FROM part_job j JOIN part_shard s USING (shard_id)").fetchall()
        with pytest.raises(RuntimeError, match="not of kb_embeddings"):
            with partition_views(conn, T2):
                pass
        assert conn.execute("SELECT task_name FROM part_task").fetchall() == [("ticket_triage",)]
    assert jobs == [(5,)]
    with pytest.raises(duckdb.CatalogException):
        conn.execute("SELECT * FROM part_job")


# --- The seam: SQL on the control tables lives in ledger/ -----------------------------------------

PACKAGE = Path(__file__).resolve().parents[1] / "batch_assets"
# A control table named where SQL names a table it reads or writes.
_CONTROL_REF = re.compile(rf"\b(?:FROM|JOIN|INTO|UPDATE)\s+ledger\.(?:{'|'.join(CONTROL_TABLES)})\b", re.IGNORECASE)
# Modules outside ledger/ that still read a control table in SQL of their own, with how many
# references: the benchmark and soak tools, which measure the local ledger they seeded. The count
# may only go down; every stage, the sensor and the CLI are at zero.
NOT_YET_MOVED = {
    "bench/sensor.py": 5,
    "bench/synth.py": 2,
    "bench/work.py": 1,
}


def _code_strings(tree: ast.AST) -> list[str]:
    """Every string constant of a module but its docstrings (the text SQL is written in)."""
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def _sql_references() -> dict[str, int]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("ledger/"):
            continue
        strings = _code_strings(ast.parse(path.read_text(encoding="utf-8")))
        n = sum(len(_CONTROL_REF.findall(s)) for s in strings)
        if n:
            found[rel] = n
    return found


def test_control_tables_are_read_in_sql_only_inside_ledger():
    found = _sql_references()
    grew = {m: n for m, n in found.items() if n > NOT_YET_MOVED.get(m, 0)}
    assert not grew, f"control-table SQL outside ledger/ (move it into a ledger read): {grew}"
    moved = {m: n for m, n in NOT_YET_MOVED.items() if found.get(m, 0) < n}
    assert not moved, f"lower these counts in NOT_YET_MOVED to what is left: { {m: found.get(m, 0) for m in moved} }"
