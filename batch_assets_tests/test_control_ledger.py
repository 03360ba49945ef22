"""The control protocols — intent claims, leases and quota admission — hold the same on both ledger
backends: the Warehouse's DuckDB file (`local`) and a real PostgreSQL (`distributed`). On PostgreSQL,
processes racing for the same intents and the same account's batch slots never win one twice and
never hold more than the account's limit."""

from __future__ import annotations

import multiprocessing
import sys

import pytest

from batch_assets.ledger.admission import PRIORITY_RANKS, Candidate, QuotaLimits, admit, usage
from batch_assets.ledger.control_db import DuckControl, PgControl, as_control, connect_postgres
from batch_assets.ledger.control_schema import (
    CONTROL_TABLES,
    ControlSchemaError,
    control_schema_sql,
    ensure_control_schema,
    upgrade_control_schema,
)
from batch_assets.ledger.jobs import claim_intent, claim_new_intent, release_claim, release_claims_of, renew_claim
from batch_assets.ledger.warehouse import Warehouse

TASK_ID = "ticket_triage_20261120"


def seed(db, shards: int = 10) -> None:
    """One partition of one task and `shards` cut shards (the rows admission joins)."""
    db.execute(
        "INSERT INTO ledger.batch_task (task_id, task_name, partition_date, item_type, provider, model, endpoint, "
        "prompt_version, output_schema_version, status, created_at, updated_at) VALUES "
        "(?, 'ticket_triage', DATE '2026-11-20', 'ticket', 'openai', 'gpt-4o-mini', '/v1/chat/completions', "
        "'v1', 'v1', 'FROZEN', now()::TIMESTAMP, now()::TIMESTAMP)",
        [TASK_ID],
    )
    for n in range(shards):
        db.execute(
            "INSERT INTO ledger.shard (shard_id, task_id, provider, endpoint, model, attempt, shard_no, path, "
            "line_count, byte_count, est_tokens, created_at) VALUES "
            "(?, ?, 'openai', '/v1/chat/completions', 'gpt-4o-mini', 1, ?, ?, 100, 1000, 1000, now()::TIMESTAMP)",
            [shard_id(n), TASK_ID, n, f"/data/shards/{n}.jsonl"],
        )


def shard_id(n: int) -> str:
    return f"{TASK_ID}:a1:s{n:04d}"


def new_intent(db, n: int, owner: str, lease_s: float = 900.0) -> bool:
    return claim_new_intent(
        db, f"job-{n}", TASK_ID, shard_id(n), "openai", "/v1/chat/completions", owner, lease_s=lease_s
    )


def candidate(n: int, priority: str = "normal") -> Candidate:
    return Candidate("openai", "default", "gpt-4o-mini", "ticket_triage", shard_id(n), 1000, PRIORITY_RANKS[priority])


@pytest.fixture
def control(empty_control):
    """The control tables with one partition and its shards, on each backend."""
    seed(empty_control)
    return empty_control


def test_a_new_intent_is_won_once_and_records_its_first_event(control):
    assert new_intent(control, 0, "run-a")
    assert not new_intent(control, 0, "run-b")  # the second run loses on the key: no upload, no create
    assert control.execute("SELECT claimed_by FROM ledger.provider_job WHERE job_key = 'job-0'").scalar() == "run-a"
    assert control.execute("SELECT count(*) FROM ledger.status_event WHERE job_key = 'job-0'").scalar() == 1


def test_a_live_claim_holds_an_expired_one_is_taken_over(control):
    assert new_intent(control, 0, "run-a")
    assert not claim_intent(control, "job-0", "run-b")
    assert claim_intent(control, "job-0", "run-a")  # already ours
    assert new_intent(control, 1, "run-a", lease_s=-1.0)  # its lease has run out: the run died
    assert claim_intent(control, "job-1", "run-b")
    assert not renew_claim(control, "job-1", "run-a")  # lost: nothing may be created
    assert renew_claim(control, "job-1", "run-b")


def test_claims_are_released_by_their_owner_only(control):
    for n in range(3):
        assert new_intent(control, n, "run-a" if n < 2 else "run-c")
    release_claim(control, "job-0", "run-b")  # not its claim: nothing changes
    assert not claim_intent(control, "job-0", "run-b")
    release_claim(control, "job-0", "run-a")
    assert claim_intent(control, "job-0", "run-b")
    assert release_claims_of(control, ["run-a", "run-c"]) == 2
    assert release_claims_of(control, []) == 0


def test_admission_holds_the_accounts_batch_limit_and_records_the_waiter(control):
    limits = QuotaLimits(max_jobs=2, max_tokens=10_000)
    waits = [admit(control, candidate(n), limits, lambda n=n: new_intent(control, n, "run-a")) for n in range(3)]
    assert waits[:2] == [None, None]
    assert waits[2].kind == "jobs" and "2 of 2 concurrent batches" in waits[2].reason
    assert usage(control, candidate(9)).jobs == 2
    assert (
        control.execute("SELECT wait_reason FROM ledger.shard WHERE shard_id = ?", [shard_id(2)])
        .scalar()
        .startswith("account default")
    )


def test_admission_holds_the_enqueued_tokens_and_lets_urgent_work_go_first(control):
    limits = QuotaLimits(max_jobs=10, max_tokens=2_500)
    assert admit(control, candidate(0), limits, lambda: new_intent(control, 0, "run-a")) is None
    assert admit(control, candidate(1), limits, lambda: new_intent(control, 1, "run-a")) is None
    low = admit(control, candidate(2, "low"), limits, lambda: new_intent(control, 2, "run-a"))
    assert low.kind == "tokens"
    release_claim(control, "job-0", "run-a")  # the place comes back (the create was never made)
    # An urgent shard that has not waited goes before the waiting low one; the low one then waits behind it.
    assert admit(control, candidate(3, "urgent"), limits, lambda: new_intent(control, 3, "run-a")) is None
    assert admit(control, candidate(2, "low"), limits, lambda: new_intent(control, 2, "run-a")).kind == "tokens"


def test_a_ledger_function_takes_a_duckdb_connection_or_a_control_db(tmp_path):
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path)
    with wh.connect() as conn:
        seed(DuckControl(conn))
        assert new_intent(conn, 0, "run-a")  # the raw connection, as every stage passes it today
        assert as_control(conn).execute("SELECT count(*) FROM ledger.provider_job").scalar() == 1


def test_the_postgres_schema_comes_from_the_one_schema_file():
    statements = control_schema_sql()
    for table in CONTROL_TABLES:
        assert any(s.startswith(f"CREATE TABLE ledger.{table} (") for s in statements), table
    assert any(s.startswith("CREATE SEQUENCE ledger.terminal_seq") for s in statements)
    assert PgControl.translate("WHERE a = ? AND b LIKE 'x%'", [1]) == "WHERE a = %s AND b LIKE 'x%%'"
    assert PgControl.translate("WHERE a = $name", {"name": 1}) == "WHERE a = %(name)s"


def test_a_postgres_ledger_at_another_version_is_refused(postgres_url):
    db = connect_postgres(postgres_url)
    try:
        ensure_control_schema(db)
        assert ensure_control_schema(db) > 0  # a second start finds it and goes on
        db.execute("UPDATE ledger.schema_version SET version = version + 1")
        with pytest.raises(ControlSchemaError, match=r"schema version \d+, this code needs \d+: upgrade"):
            ensure_control_schema(db)
    finally:
        db.conn.close()


def test_an_older_postgres_ledger_is_brought_up_to_the_schema_file(postgres_url):
    db = connect_postgres(postgres_url)
    try:
        latest = ensure_control_schema(db)
        # An older ledger: a control table listed since, a column added since, an older version.
        db.execute("DROP TABLE ledger.dry_run")
        db.execute("ALTER TABLE ledger.provider_job DROP COLUMN collected_at")
        db.execute("UPDATE ledger.schema_version SET version = version - 1")
        assert sorted(upgrade_control_schema(db)) == [
            "added ledger.provider_job.collected_at",
            "created ledger.dry_run",
        ]
        db.execute("DROP TABLE ledger.account_pause")
        db.execute("DELETE FROM ledger.schema_version")
        db.execute("INSERT INTO ledger.schema_version VALUES (1, 'old', now())")
        assert ensure_control_schema(db) == latest
        assert db.execute("SELECT max(version) FROM ledger.schema_version").scalar() == latest
        assert db.execute("SELECT count(*) FROM ledger.account_pause").scalar() == 0
        assert upgrade_control_schema(db) == []  # nothing left to do
        # A type that differs is refused by name; nothing is rewritten.
        db.execute("ALTER TABLE ledger.shard ALTER COLUMN line_count TYPE VARCHAR")
        with pytest.raises(ControlSchemaError, match=r"ledger\.shard\.line_count is character varying.*BIGINT"):
            ensure_control_schema(db)
    finally:
        db.conn.close()


def test_an_unreachable_postgres_is_one_line_without_the_password():
    with pytest.raises(ConnectionError) as info:
        connect_postgres("postgresql://u:s3cret@127.0.0.1:1/ledger")
    assert "127.0.0.1:1/ledger" in str(info.value) and "s3cret" not in str(info.value)
    assert "\n" not in str(info.value)


# -- processes racing on PostgreSQL -----------------------------------------------------------------
INTENTS = 60
PROCESSES = 8


def _race_claims(url: str, owner: str, out) -> None:
    db = connect_postgres(url)
    won = [n for n in range(INTENTS) if new_intent(db, n, owner)]
    out.put((owner, won))


def _race_admissions(url: str, owner: str, out) -> None:
    db = connect_postgres(url)
    limits = QuotaLimits(max_jobs=5, max_tokens=1_000_000)
    admitted = []
    for n in range(10):
        won: list[bool] = []

        def take(n=n, won=won) -> bool:
            won.append(new_intent(db, n, owner))
            return won[-1]

        if admit(db, candidate(n), limits, take) is None and won == [True]:
            admitted.append(n)
    out.put((owner, admitted))


def _race(target, url: str) -> list[tuple[str, list[int]]]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(url, f"proc-{i}", out)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


@pytest.mark.skipif(sys.platform != "linux", reason="spawned processes against a local server")
def test_processes_racing_for_intents_win_each_exactly_once(postgres_url):
    db = connect_postgres(postgres_url)
    ensure_control_schema(db)
    seed(db, shards=INTENTS)
    won = [n for _, ns in _race(_race_claims, postgres_url) for n in ns]
    assert sorted(won) == list(range(INTENTS))  # every intent won, none twice
    assert db.execute("SELECT count(*) FROM ledger.status_event").scalar() == INTENTS
    db.conn.close()


@pytest.mark.skipif(sys.platform != "linux", reason="spawned processes against a local server")
def test_processes_racing_for_an_accounts_slots_never_exceed_its_limit(postgres_url):
    db = connect_postgres(postgres_url)
    ensure_control_schema(db)
    seed(db, shards=10)
    admitted = [n for _, ns in _race(_race_admissions, postgres_url) for n in ns]
    assert len(admitted) == len(set(admitted)) == 5, admitted  # the limit, each shard once
    assert usage(db, candidate(0)).jobs == 5
    db.conn.close()
