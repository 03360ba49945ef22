"""The ledger's own rules: one writer (batch_assets/ledger/) owns every write to `ledger.*` and names
its columns; one transaction helper; the job-state vocabulary defined once; migrations upgrade a
ledger that holds data and refuse one newer than the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

import batch_assets
from batch_assets.ledger import schema
from batch_assets.ledger.jobs import insert_job_intent, record_snapshot, request_cancel
from batch_assets.ledger.shards import insert_quarantine, mark_shards_deferred
from batch_assets.ledger.states import IN_FLIGHT_SQL, NOT_TERMINAL_SQL, TERMINAL_STATES_SQL, in_flight_sql
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.providers.contract import TERMINAL_STATES, BatchError, JobSnapshot, JobState

PACKAGE = Path(batch_assets.__file__).resolve().parent
LEDGER_PACKAGE = PACKAGE / "ledger"

# A statement that changes a ledger table (or its rows), in any of DuckDB's spellings.
LEDGER_WRITE = re.compile(
    r"\b(INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE|DELETE\s+FROM|MERGE\s+INTO|TRUNCATE(?:\s+TABLE)?|COPY"
    r"|ALTER\s+TABLE|DROP\s+TABLE(?:\s+IF\s+EXISTS)?|CREATE\s+(?:OR\s+REPLACE\s+)?TABLE(?:\s+IF\s+NOT\s+EXISTS)?)"
    r"\s+\"?ledger\"?\.",
    re.IGNORECASE,
)
# An INSERT into a ledger table and the first thing after the table name (must open the column list).
LEDGER_INSERT = re.compile(r"\bINSERT\s+(?:OR\s+\w+\s+)?INTO\s+\"?ledger\"?\.[^\s(]+\s*(\S)", re.IGNORECASE)
HAND_TRANSACTION = re.compile(r"""execute\(\s*f?["']{1,3}\s*(BEGIN|COMMIT|ROLLBACK|ABORT)\b""", re.IGNORECASE)


def _sources(*suffixes: str) -> list[Path]:
    return sorted(p for s in suffixes for p in PACKAGE.rglob(f"*{s}") if "__pycache__" not in p.parts)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# --- one writer ----------------------------------------------------------------------------------


def test_only_the_ledger_package_writes_ledger_tables():
    offenders = []
    for path in _sources(".py", ".sql"):
        if LEDGER_PACKAGE in path.parents:
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [
            f"{path.relative_to(PACKAGE)}:{_line(text, m.start())}: {m.group(0)}" for m in LEDGER_WRITE.finditer(text)
        ]
    assert offenders == [], "ledger writes belong in batch_assets/ledger/ (call its writer functions):\n" + "\n".join(
        offenders
    )


def test_every_ledger_insert_names_its_columns():
    found, offenders = 0, []
    for path in _sources(".py", ".sql"):
        text = path.read_text(encoding="utf-8")
        for m in LEDGER_INSERT.finditer(text):
            found += 1
            if m.group(1) != "(":
                offenders.append(f"{path.relative_to(PACKAGE)}:{_line(text, m.start())}: {m.group(0)}")
    assert found > 0, "the scan found no ledger INSERT at all: the pattern is broken"
    assert offenders == [], "INSERT INTO ledger.<table> must list its columns:\n" + "\n".join(offenders)


def test_transactions_are_opened_only_by_the_transaction_helper():
    offenders = []
    for path in _sources(".py"):
        if path == LEDGER_PACKAGE / "transaction.py":
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.relative_to(PACKAGE)}:{_line(text, m.start())}" for m in HAND_TRANSACTION.finditer(text)]
    assert offenders == [], "use `with transaction(conn):` (batch_assets.ledger.transaction):\n" + "\n".join(offenders)


def test_the_scans_catch_what_they_are_meant_to():
    assert LEDGER_WRITE.search("conn.execute('update ledger.shard SET x = 1')")
    assert LEDGER_WRITE.search('INSERT OR REPLACE INTO "ledger".shard SELECT 1')
    assert not LEDGER_WRITE.search("INSERT INTO main.tickets SELECT * FROM ledger.shard")
    assert LEDGER_INSERT.search("INSERT INTO ledger.shard VALUES (1)").group(1) == "V"
    assert LEDGER_INSERT.search("INSERT INTO ledger.batch_task AS t VALUES (1)").group(1) == "A"
    assert LEDGER_INSERT.search("INSERT INTO ledger.{table} ({cols}) SELECT").group(1) == "("
    assert HAND_TRANSACTION.search('conn.execute("BEGIN TRANSACTION")')


def test_no_job_state_is_spelled_out_in_sql():
    """Job states reach SQL through batch_assets.ledger.states (or JobState) only: no `IN ('COMPLETED', …)`,
    `state = 'FAILED'` or `WHEN 'EXPIRED'` typed by hand."""
    pattern = re.compile(r"(?:\bIN\s*\(\s*|[=<>]\s*|\bWHEN\s+|,\s*)'(%s)'" % "|".join(s.value for s in JobState))
    offenders = []
    for path in _sources(".py"):
        rel = path.relative_to(PACKAGE)
        if (
            rel.parts[0] not in ("pipeline", "ledger", "bench", "defs", "components")
            or path == LEDGER_PACKAGE / "states.py"
        ):
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{rel}:{_line(text, m.start())}: {m.group(0)}" for m in pattern.finditer(text)]
    assert offenders == [], "\n".join(offenders)


# --- transaction() -------------------------------------------------------------------------------


def _conn() -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect()
    conn.execute("CREATE TABLE t (x INTEGER)")
    return conn


def test_transaction_commits_a_block_that_ends_normally():
    conn = _conn()
    with transaction(conn):
        conn.execute("INSERT INTO t (x) VALUES (1)")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1


@pytest.mark.parametrize("exc", [ValueError("boom"), KeyboardInterrupt()])
def test_transaction_rolls_back_on_any_exception(exc):
    conn = _conn()
    with pytest.raises(type(exc)):
        with transaction(conn):
            conn.execute("INSERT INTO t (x) VALUES (1)")
            raise exc
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    with transaction(conn):  # the connection is usable again
        conn.execute("INSERT INTO t (x) VALUES (2)")
    assert conn.execute("SELECT x FROM t").fetchall() == [(2,)]


def test_transaction_rolls_back_after_a_failed_statement():
    conn = _conn()
    conn.execute("CREATE TABLE k (id INTEGER PRIMARY KEY)")
    with pytest.raises(duckdb.ConstraintException):
        with transaction(conn):
            conn.execute("INSERT INTO t (x) VALUES (1)")
            conn.execute("INSERT INTO k (id) VALUES (1), (1)")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0


def test_a_nested_transaction_joins_the_outer_one():
    conn = _conn()
    with pytest.raises(RuntimeError):
        with transaction(conn):
            with transaction(conn):
                conn.execute("INSERT INTO t (x) VALUES (1)")
            conn.execute("INSERT INTO t (x) VALUES (2)")
            raise RuntimeError("outer fails after the inner block ended")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0


# --- job states ----------------------------------------------------------------------------------


def test_state_sql_matches_the_provider_contract():
    conn = duckdb.connect()
    conn.execute("CREATE TABLE j (state VARCHAR, provider_batch_id VARCHAR)")
    conn.executemany(
        "INSERT INTO j (state, provider_batch_id) VALUES (?, ?)",
        [(s.value, b) for s in JobState for b in (None, "batch_1")],
    )
    terminal = {
        r[0] for r in conn.execute(f"SELECT DISTINCT state FROM j WHERE state IN {TERMINAL_STATES_SQL}").fetchall()
    }
    assert terminal == {s.value for s in TERMINAL_STATES}
    not_terminal = {r[0] for r in conn.execute(f"SELECT DISTINCT state FROM j WHERE {NOT_TERMINAL_SQL}").fetchall()}
    assert not_terminal == {s.value for s in JobState} - terminal
    in_flight = conn.execute(f"SELECT state, provider_batch_id FROM j WHERE {IN_FLIGHT_SQL} ORDER BY 1").fetchall()
    assert in_flight == sorted((s, "batch_1") for s in not_terminal)
    aliased = conn.execute(f"SELECT count(*) FROM j AS x WHERE {in_flight_sql('x')}").fetchone()[0]
    assert aliased == len(in_flight)


# --- writer functions ----------------------------------------------------------------------------


def _job_row(conn, job_key: str) -> dict:
    cur = conn.execute("SELECT * FROM ledger.provider_job WHERE job_key = ?", [job_key])
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def test_record_snapshot_accepts_batch_errors_and_dicts_and_a_terminal_state_is_final(warehouse: Warehouse):
    with warehouse.connect() as conn:
        for key in ("t_1:job1", "t_2:job1"):
            insert_job_intent(conn, key, "t", key.split(":")[0], "openai", "/v1/chat/completions")
        failed = JobSnapshot(
            "batch_1", "failed", JobState.FAILED, errors=(BatchError("invalid_request", "bad line", line=3),)
        )
        assert record_snapshot(conn, "t_1:job1", failed, submitted=True) is True
        row = _job_row(conn, "t_1:job1")
        assert json.loads(row["provider_errors"]) == [{"code": "invalid_request", "message": "bad line", "line": 3}]
        assert row["terminal_at"] is not None and row["terminal_seq"] is not None and row["submitted_at"] is not None
        # A late observation never moves a job out of a terminal state.
        late = JobSnapshot("batch_1", "in_progress", JobState.RUNNING)
        assert record_snapshot(conn, "t_1:job1", late) is False
        assert _job_row(conn, "t_1:job1")["state"] == "FAILED"

        # Today's adapters report errors as a list of dicts.
        legacy = JobSnapshot("batch_2", "failed", JobState.FAILED, errors=[{"code": "x", "message": "y"}])
        assert record_snapshot(conn, "t_2:job1", legacy) is True
        assert json.loads(_job_row(conn, "t_2:job1")["provider_errors"]) == [{"code": "x", "message": "y"}]
        request_cancel(conn, "t_2:job1")
        assert _job_row(conn, "t_2:job1")["cancel_requested"] is True
        events = conn.execute(
            "SELECT job_key, from_state, to_state FROM ledger.status_event ORDER BY 1, observed_at, 3"
        ).fetchall()
    assert events == [
        ("t_1:job1", None, "CREATED"),
        ("t_1:job1", "CREATED", "FAILED"),
        ("t_2:job1", None, "CREATED"),
        ("t_2:job1", "CREATED", "FAILED"),
    ]


def test_record_snapshot_of_an_unknown_job_raises(warehouse: Warehouse):
    with warehouse.connect() as conn, pytest.raises(KeyError):
        record_snapshot(conn, "nope", JobSnapshot("b", "completed", JobState.COMPLETED))


def test_set_based_writers_read_the_query_by_column_name(warehouse: Warehouse):
    with warehouse.connect() as conn:
        n = insert_quarantine(
            conn,
            "t",
            """
            SELECT 'why' AS reason, 'empty_input' AS reason_code, 't:x:' || i AS custom_id, i AS item_no
            FROM range(3) r(i)""",
        )
        assert n == 3
        rows = conn.execute(
            "SELECT custom_id, task_id, reason_code, reason FROM ledger.quarantine ORDER BY 1"
        ).fetchall()
    assert rows == [(f"t:x:{i}", "t", "empty_input", "why") for i in range(3)]


def test_supersede_marks_live_items_not_current_and_skips_a_first_freeze(warehouse: Warehouse):
    from batch_assets.ledger.manifest import insert_manifest_items, supersede_items_not_in

    def items(conn, task_id: str) -> None:
        insert_manifest_items(
            conn,
            task_id,
            f"""
            SELECT '{task_id}:x:' || i AS custom_id, i AS item_no, 'b' || i AS business_id, 'h' AS input_hash,
                   1 AS est_input_tokens, 0.1 AS est_cost FROM range(3) r(i)""",
            item_type="x",
            prompt_version="v1",
            model="m",
            params_json="{}",
            output_schema_version="v1",
            manifest_version=1,
        )

    with warehouse.connect() as conn:
        items(conn, "t1")
        # A partition without live items (its first freeze) supersedes nothing and does not read the
        # current ids at all (this query would fail if it were run).
        assert supersede_items_not_in(conn, "t2", "SELECT custom_id FROM no_such_table") == 0
        with pytest.raises(duckdb.CatalogException):
            supersede_items_not_in(conn, "t1", "SELECT custom_id FROM no_such_table")
        assert supersede_items_not_in(conn, "t1", "SELECT 't1:x:' || i AS custom_id FROM range(2) r(i)") == 1
        live = conn.execute(
            "SELECT custom_id FROM ledger.manifest_item WHERE superseded_at IS NULL ORDER BY 1"
        ).fetchall()
    assert live == [("t1:x:0",), ("t1:x:1",)]


def test_mark_shards_deferred_keeps_the_first_time(warehouse: Warehouse):
    with warehouse.connect() as conn:
        conn.execute("""
            INSERT INTO ledger.shard (shard_id, task_id, provider, endpoint, model, attempt, shard_no, path, line_count,
                                      byte_count, est_tokens, sha256, created_at)
            SELECT 's' || i, 't', 'openai', '/v1/chat/completions', 'm', 1, i, '/x', 1, 1, 1, NULL, now()::TIMESTAMP
            FROM range(3) r(i)""")
        mark_shards_deferred(conn, ["s0"])
        first = conn.execute("SELECT deferred_at FROM ledger.shard WHERE shard_id = 's0'").fetchone()[0]
        mark_shards_deferred(conn, ["s0", "s1"])
        mark_shards_deferred(conn, [])
        rows = dict(conn.execute("SELECT shard_id, deferred_at FROM ledger.shard").fetchall())
    assert rows["s0"] == first and rows["s1"] is not None and rows["s2"] is None


# --- migrations ----------------------------------------------------------------------------------

V1_ROWS = """
INSERT INTO ledger.batch_task (task_id, task_name, partition_date, item_type, provider, model, endpoint, prompt_version,
    output_schema_version, manifest_uri, manifest_version, status, total_items, est_input_tokens, est_output_tokens,
    created_at, updated_at)
VALUES ('ticket_triage_20261120', 'ticket_triage', DATE '2026-11-20', 'ticket', 'openai', 'gpt-4o-mini',
    '/v1/chat/completions', 'v1', 'v1', '/data/manifests/v1.parquet', 1, 'SUBMITTED', 3, 900, 600,
    TIMESTAMP '2026-11-20 08:00:00', TIMESTAMP '2026-11-20 08:05:00');
INSERT INTO ledger.manifest_item (custom_id, task_id, business_id, item_type, input_hash, prompt_version, model,
    params_json, output_schema_version, manifest_version, frozen_at, superseded_at)
SELECT 'ticket_triage_20261120:ticket:T' || i || ':abcd', 'ticket_triage_20261120', 'T' || i, 'ticket', md5('T' || i),
       'v1', 'gpt-4o-mini', '{"max_tokens": 200}', 'v1', 1, TIMESTAMP '2026-11-20 08:00:00', NULL
FROM range(3) r(i);
INSERT INTO ledger.shard (shard_id, task_id, provider, endpoint, model, attempt, shard_no, path, line_count, byte_count,
    est_tokens, sha256, created_at)
VALUES ('ticket_triage_20261120_a1_s0000', 'ticket_triage_20261120', 'openai', '/v1/chat/completions', 'gpt-4o-mini',
    1, 0, '/data/shards/s0000.jsonl', 3, 1500, 1500, 'f00d', TIMESTAMP '2026-11-20 08:01:00');
INSERT INTO ledger.shard_line (shard_id, line_no, custom_id, request_id, task_id, attempt, line_bytes, est_tokens)
SELECT 'ticket_triage_20261120_a1_s0000', i + 1, 'ticket_triage_20261120:ticket:T' || i || ':abcd', 'r' || i,
       'ticket_triage_20261120', 1, 500, 500
FROM range(3) r(i);
INSERT INTO ledger.provider_job (job_key, task_id, shard_id, provider, endpoint, provider_batch_id, input_file_id,
    output_file_id, error_file_id, raw_status, state, cancel_requested, request_total, request_completed,
    request_failed, provider_errors, created_at, submitted_at, state_changed_at, terminal_at, last_polled_at,
    terminal_seq, downloaded_at)
VALUES ('ticket_triage_20261120_a1_s0000:job1', 'ticket_triage_20261120', 'ticket_triage_20261120_a1_s0000', 'openai',
    '/v1/chat/completions', 'batch_abc', 'file-in', 'file-out', NULL, 'expired', 'EXPIRED', false, 3, 1, 0, NULL,
    TIMESTAMP '2026-11-20 08:02:00', TIMESTAMP '2026-11-20 08:02:01', TIMESTAMP '2026-11-21 08:02:00',
    TIMESTAMP '2026-11-21 08:02:00', TIMESTAMP '2026-11-21 08:02:00', nextval('ledger.terminal_seq'),
    TIMESTAMP '2026-11-21 08:03:00');
INSERT INTO ledger.status_event (job_key, from_state, to_state, raw_status, request_total, request_completed,
    request_failed, observed_at)
VALUES ('ticket_triage_20261120_a1_s0000:job1', NULL, 'CREATED', NULL, NULL, NULL, NULL,
        TIMESTAMP '2026-11-20 08:02:00'),
       ('ticket_triage_20261120_a1_s0000:job1', 'CREATED', 'EXPIRED', 'expired', 3, 1, 0,
        TIMESTAMP '2026-11-21 08:02:00');
INSERT INTO ledger.raw_file (file_key, job_key, task_id, kind, provider_file_id, path, sha256, byte_count, line_count,
    downloaded_at, ingested_at)
VALUES ('ticket_triage_20261120_a1_s0000:job1:output', 'ticket_triage_20261120_a1_s0000:job1', 'ticket_triage_20261120',
    'output', 'file-out', '/data/raw/out.jsonl', 'beef', 700, 1, TIMESTAMP '2026-11-21 08:03:00',
    TIMESTAMP '2026-11-21 08:04:00');
INSERT INTO ledger.raw_result (file_key, line_no, job_key, task_id, request_id, custom_id, status, line_id, status_code,
    provider_request_id, body, error, malformed_line, ingested_at)
VALUES ('ticket_triage_20261120_a1_s0000:job1:output', 1, 'ticket_triage_20261120_a1_s0000:job1',
    'ticket_triage_20261120', 'r0', 'ticket_triage_20261120:ticket:T0:abcd', 'ok', 'batch_req_1', 200, 'req_1',
    '{"choices": []}', NULL, NULL, TIMESTAMP '2026-11-21 08:04:00');
INSERT INTO ledger.parsed_result (custom_id, task_id, job_key, provider_succeeded, error_class, error_code,
    error_message, http_status, output_json, finish_reason, input_tokens, output_tokens, provider_request_id,
    output_schema_version, parsed_at)
VALUES ('ticket_triage_20261120:ticket:T0:abcd', 'ticket_triage_20261120', 'ticket_triage_20261120_a1_s0000:job1',
        true, NULL, NULL, NULL, 200, '{"category": "billing"}', 'stop', 300, 20, 'req_1', 'v1',
        TIMESTAMP '2026-11-21 08:05:00'),
       ('ticket_triage_20261120:ticket:T1:abcd', 'ticket_triage_20261120', 'ticket_triage_20261120_a1_s0000:job1',
        false,
        'expired', 'batch_expired', 'the batch ended expired before this request ran', NULL, NULL, NULL, NULL, NULL,
        NULL, 'v1', TIMESTAMP '2026-11-21 08:05:00'),
       ('ticket_triage_20261120:ticket:T2:abcd', 'ticket_triage_20261120', 'ticket_triage_20261120_a1_s0000:job1',
        false,
        'expired', 'batch_expired', 'the batch ended expired before this request ran', NULL, NULL, NULL, NULL, NULL,
        NULL, 'v1', TIMESTAMP '2026-11-21 08:05:00');
INSERT INTO ledger.applied_result (custom_id, task_id, business_id, outcome, target_table, output_version, applied_at)
VALUES ('ticket_triage_20261120:ticket:T0:abcd', 'ticket_triage_20261120', 'T0', 'applied', 'ticket_triage_results',
    'v1', TIMESTAMP '2026-11-21 08:06:00');
"""
V1_TABLES = (
    "batch_task",
    "manifest_item",
    "shard",
    "shard_line",
    "provider_job",
    "status_event",
    "raw_file",
    "raw_result",
    "parsed_result",
    "applied_result",
)


def _table_rows(conn, table: str, columns: list[str]) -> list[tuple]:
    return conn.execute(f"SELECT {', '.join(columns)} FROM ledger.{table} ORDER BY ALL").fetchall()


def _v1_columns(conn, table: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT column_name FROM duckdb_columns() "
            "WHERE schema_name = 'ledger' AND table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()
    ]


def test_a_v1_ledger_holding_data_upgrades_to_the_latest_version_intact(warehouse: Warehouse):
    assert schema.latest_version() >= 3
    warehouse.database.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(warehouse.database)) as conn:
        assert schema.migrate(conn, target=1) == 1
        assert schema.current_version(conn) == 1
        conn.execute(V1_ROWS)
        v1_columns = {t: _v1_columns(conn, t) for t in V1_TABLES}
        before = {t: _table_rows(conn, t, v1_columns[t]) for t in V1_TABLES}
    assert "from_line" not in v1_columns["parsed_result"] and "deferred_at" not in v1_columns["shard"]
    assert all(before[t] for t in V1_TABLES)

    with warehouse.connect() as conn:  # the current code opens it: every later migration is applied
        assert schema.current_version(conn) == schema.latest_version()
        versions = [r[0] for r in conn.execute("SELECT version FROM ledger.schema_version ORDER BY 1").fetchall()]
        assert versions == list(range(1, schema.latest_version() + 1))
        after = {t: _table_rows(conn, t, v1_columns[t]) for t in V1_TABLES}
        from_line = dict(conn.execute("SELECT custom_id, from_line FROM ledger.parsed_result").fetchall())
        deferred = conn.execute("SELECT deferred_at FROM ledger.shard").fetchall()
        usage_apart = conn.execute(
            "SELECT DISTINCT thinking_tokens, cached_input_tokens FROM ledger.parsed_result"
        ).fetchall()
        options = conn.execute("SELECT DISTINCT request_options FROM ledger.provider_job").fetchall()
        item_nos = dict(conn.execute("SELECT custom_id, item_no FROM ledger.manifest_item").fetchall())
        keys = conn.execute(
            "SELECT constraint_column_names FROM duckdb_constraints() WHERE schema_name = 'ledger' "
            "AND table_name = 'manifest_item' AND constraint_type = 'PRIMARY KEY'"
        ).fetchall()
        with pytest.raises(duckdb.ConstraintException):  # a repeated item: its number repeats with it
            conn.execute(
                "INSERT INTO ledger.manifest_item SELECT * REPLACE ('again' AS custom_id) "
                "FROM ledger.manifest_item LIMIT 1"
            )
        carried = {
            t: conn.execute(f"SELECT custom_id, item_no FROM ledger.{t}").fetchall()
            for t in ("shard_line", "raw_result", "parsed_result", "applied_result")
        }
        body_column = conn.execute(
            "SELECT sql FROM duckdb_tables() WHERE schema_name = 'ledger' AND table_name = 'raw_result'"
        ).fetchone()[0]
        # The upgraded ledger takes new rows through the writer, defaults included.
        insert_job_intent(conn, "later:job1", "ticket_triage_20261120", "later", "openai", "/v1/chat/completions")
        next_seq = conn.execute("SELECT nextval('ledger.terminal_seq')").fetchone()[0]
    assert after == before
    # v2: parsed_result.from_line — false for outcomes taken from the batch's end state, true otherwise.
    assert from_line == {
        "ticket_triage_20261120:ticket:T0:abcd": True,
        "ticket_triage_20261120:ticket:T1:abcd": False,
        "ticket_triage_20261120:ticket:T2:abcd": False,
    }
    # v3: shard.deferred_at — NULL (never deferred) for existing shards.
    assert deferred == [(None,)]
    assert next_seq == 2  # the terminal sequence continues where v1 left it
    # v6: usage kept apart and request options: unknown (NULL) for what was recorded before.
    assert usage_apart == [(None, None)] and options == [(None,)]
    # v10: every manifest item numbered (distinct within its partition), and every row of the item
    # in the other per-item tables carries its number; a row of no known item has none.
    assert sorted(item_nos.values()) == [0, 1, 2]
    for table, rows in carried.items():
        assert rows and all(n == item_nos.get(c) for c, n in rows), (table, rows)
    # v11: manifest_item keyed by (task_id, item_no), its rows kept (`after == before` above).
    assert keys == [(["task_id", "item_no"],)]
    r = reconcile(warehouse, "ticket_triage_20261120")
    assert (r.manifest_items, r.succeeded, r.expired, r.applied) == (3, 1, 2, 1)
    # v12: raw_result rebuilt with its body column compressed by ZSTD, its rows kept (`after == before`),
    # and bodies written after the upgrade are stored with ZSTD (a checkpoint writes them out). Done
    # last: the extra line it writes would be a duplicate answer to the reconciliation above.
    with warehouse.connect() as conn:
        conn.execute("INSERT INTO ledger.raw_result SELECT * REPLACE (line_no + 1 AS line_no) FROM ledger.raw_result")
        conn.execute("CHECKPOINT")
        body_storage = {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT compression FROM pragma_storage_info('ledger.raw_result') WHERE column_name = 'body' "
                "AND segment_type <> 'VALIDITY'"
            ).fetchall()
        }
    assert "body JSON USING COMPRESSION ZSTD" in body_column and body_storage == {"ZSTD"}


def test_a_ledger_newer_than_the_code_is_refused(warehouse: Warehouse):
    with warehouse.connect() as conn:
        conn.execute(
            "INSERT INTO ledger.schema_version (version, description, applied_at) "
            "VALUES (?, 'from a newer release', now()::TIMESTAMP)",
            [schema.latest_version() + 1],
        )
    with pytest.raises(RuntimeError, match="newer than this code"):
        with warehouse.connect():
            pass
    with duckdb.connect(str(warehouse.database), read_only=True) as conn:  # left as it was
        assert (
            conn.execute("SELECT max(version) FROM ledger.schema_version").fetchone()[0] == schema.latest_version() + 1
        )


def test_a_read_only_open_refuses_a_newer_ledger_too(warehouse: Warehouse):
    with warehouse.connect() as conn:
        conn.execute(
            "INSERT INTO ledger.schema_version (version, description, applied_at) "
            "VALUES (?, 'from a newer release', now()::TIMESTAMP)",
            [schema.latest_version() + 1],
        )
    with pytest.raises(RuntimeError, match="newer than this code"):
        with warehouse.connect(read_only=True):
            pass


def test_a_read_only_open_of_an_older_ledger_upgrades_it_first(warehouse: Warehouse):
    warehouse.database.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(warehouse.database)) as conn:
        schema.migrate(conn, target=1)
    with warehouse.connect(read_only=True) as conn:  # readers would otherwise meet missing columns
        assert schema.stored_version(conn) == schema.latest_version()
        conn.execute("SELECT deferred_at FROM ledger.shard").fetchall()


def test_a_failing_migration_is_rolled_back(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch):
    real = schema.migrations()
    broken = schema.Migration(
        len(real) + 1, "broken", "ALTER TABLE ledger.shard ADD COLUMN x INTEGER; SELECT nope;", Path("broken.sql")
    )
    monkeypatch.setattr(schema, "migrations", lambda: (*real, broken))
    warehouse.database.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(warehouse.database)) as conn:
        with pytest.raises(duckdb.Error):
            schema.migrate(conn)
        assert schema.current_version(conn) == len(real)
        assert "x" not in _v1_columns(conn, "shard")


def test_an_item_is_recorded_applied_once_per_partition(warehouse: Warehouse):
    """applied_result holds one row per item, keyed by (task_id, item_no): a second decision for the
    same item is refused by the database, while the same number in another partition is another item."""
    from batch_assets.ledger.results import insert_applied_results

    def decide(conn, task_id: str, custom_id: str) -> int:
        return insert_applied_results(
            conn,
            task_id,
            f"""
            SELECT '{custom_id}' AS custom_id, 7 AS item_no, 'b7' AS business_id, 'applied' AS outcome""",
            target_table="t",
            output_version="v1",
        )

    with warehouse.connect() as conn:
        assert decide(conn, "t_20261120", "t_20261120:x:b7:aaaa") == 1
        assert decide(conn, "t_20261121", "t_20261121:x:b7:aaaa") == 1  # another partition's item 7
        with pytest.raises(duckdb.ConstraintException):
            decide(conn, "t_20261120", "t_20261120:x:b7:bbbb")
        assert conn.execute("SELECT count(*) FROM ledger.applied_result").fetchone()[0] == 2
