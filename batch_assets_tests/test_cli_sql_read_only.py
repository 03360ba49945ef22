"""`batch-assets sql` runs one plain query and touches no file (issue 43, item 3).

DuckDB's read-only mode still lets `COPY … TO` write files: `sql` now refuses every statement that
is not one SELECT (or WITH … SELECT) before it opens the warehouse, and runs the query with external
access disabled and the configuration locked, so a SELECT cannot read or write files either.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from batch_assets.cli import main
from batch_assets.cli.sql import check_query
from batch_assets.ledger.warehouse import Warehouse

RAW_TEXT = '{"custom_id": "c1", "response": {"status_code": 200}}\n'


@pytest.fixture
def db(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """A migrated warehouse with one business table, one ledger row and one raw result file."""
    with warehouse.connect() as conn:
        conn.execute("CREATE TABLE ticket_labels (ticket_id VARCHAR, category VARCHAR)")
        conn.execute("INSERT INTO ticket_labels VALUES ('t1', 'billing'), ('t2', 'technical')")
        conn.execute(
            "INSERT INTO ledger.quarantine (custom_id, task_id, reason_code, reason, recorded_at) "
            "VALUES ('c9', 'ticket_triage_20261120', 'sensitive_data', "
            "'card in column body', TIMESTAMP '2026-11-20 08:00:00')"
        )
    warehouse.path("raw", "job1_output.jsonl").write_text(RAW_TEXT, encoding="utf-8")
    for name in ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR", "BATCH_ASSETS_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return warehouse


def raw_file(wh: Warehouse) -> Path:
    return wh.data_dir / "raw" / "job1_output.jsonl"


def files_under(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def sql(capsys, wh: Warehouse, query: str) -> tuple[int, str, str]:
    code = main(["--database", str(wh.database), "sql", query])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("batch-assets sql:"), lines[0]
    return lines[0]


def refused_statements(wh: Warehouse, tmp: Path) -> list[tuple[str, str]]:
    raw = raw_file(wh)
    return [
        (f"COPY (SELECT 'x' AS y) TO '{raw}' (FORMAT csv, HEADER false)", "COPY writes or reads files"),
        (f"COPY ledger.quarantine TO '{tmp / 'leak.csv'}'", "batch-assets export"),
        (f"COPY ticket_labels FROM '{raw}'", "COPY"),
        (f"EXPORT DATABASE '{tmp / 'dump'}'", "EXPORT writes files"),
        (f"ATTACH '{tmp / 'other.duckdb'}' AS other", "ATTACH opens other database files"),
        ("DETACH other", "DETACH"),
        ("INSTALL httpfs", "INSTALL and LOAD"),
        ("LOAD httpfs", "INSTALL and LOAD"),
        ("SET enable_external_access = true", "SET, RESET and USE"),
        ("RESET threads", "SET, RESET and USE"),
        ("PRAGMA show_tables", "SHOW ALL TABLES"),
        ("CALL pragma_version()", "SELECT * FROM fn(...)"),
        ("CHECKPOINT", "CALL runs commands"),
        (f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{tmp / 'x.csv'}'", "run the SELECT itself"),
        ("DELETE FROM ticket_labels", "read-only"),
        ("CREATE TABLE t2 AS SELECT 1", "read-only"),
        ("SELECT 1; SELECT 2", "runs one statement, got 2"),
        (f"SELECT 1; COPY (SELECT 'x') TO '{raw}'", "runs one statement, got 2"),
        ("", "no SQL statement given"),
        ("  ;  ", "no SQL statement given"),
        ("PIVOT ticket_labels ON category", "IN (a, b)"),
    ]


def test_every_refused_statement_is_one_line_and_writes_nothing(capsys, db: Warehouse, tmp_path: Path):
    before = files_under(tmp_path)
    raw_sha = hashlib.sha256(raw_file(db).read_bytes()).hexdigest()
    for query, expected in refused_statements(db, tmp_path):
        code, out, err = sql(capsys, db, query)
        assert (code, out) == (1, ""), query
        line = one_line(err)
        assert expected in line, (query, line)
        assert files_under(tmp_path) == before, query
    assert hashlib.sha256(raw_file(db).read_bytes()).hexdigest() == raw_sha
    assert raw_file(db).read_text(encoding="utf-8") == RAW_TEXT


@pytest.mark.parametrize(
    "query",
    [
        "COPY t TO 'x.csv'",
        "ATTACH 'x.duckdb'",
        "SET threads = 1",
        "PRAGMA version",
        "SELECT 1; SELECT 2",
    ],
)
def test_check_query_refuses_before_anything_is_opened(query):
    from batch_assets.cli.errors import CliError

    with pytest.raises(CliError) as exc:
        check_query(query)
    assert "\n" not in str(exc.value)


def test_a_syntax_error_quotes_the_parser(capsys, db: Warehouse):
    code, _, err = sql(capsys, db, "SELEC 1")
    assert code == 1 and "SQL error: Parser Error: syntax error" in one_line(err)


@pytest.mark.parametrize(
    "call",
    [
        "read_csv('{raw}')",
        "read_json('{raw}')",
        "read_text('{raw}')",
        "read_blob('{raw}')",
        "glob('{raw_dir}/*')",
        "read_parquet('{raw_dir}/*.parquet')",
        "sniff_csv('{raw}')",
    ],
)
def test_a_select_reads_no_file(capsys, db: Warehouse, call: str):
    raw = raw_file(db)
    code, out, err = sql(capsys, db, "SELECT * FROM " + call.format(raw=raw, raw_dir=raw.parent))
    assert (code, out) == (1, "")
    line = one_line(err)
    assert "file system operations are disabled" in line and "no file is read or written" in line
    assert RAW_TEXT.strip() not in err


def test_plain_queries_over_business_and_ledger_tables_still_work(capsys, db: Warehouse):
    code, out, err = sql(
        capsys,
        db,
        "WITH q AS (SELECT task_id, reason FROM ledger.quarantine) "
        "SELECT l.category, q.reason FROM ticket_labels l, q WHERE l.ticket_id = 't1'",
    )
    assert code == 0, err
    assert "billing" in out and "card in column body" in out
    code, out, err = sql(capsys, db, "SELECT category, count(*) AS n FROM ticket_labels GROUP BY ALL ORDER BY ALL")
    assert code == 0 and out.split().count("1") == 2, err
    for query, expected in [
        ("SHOW ALL TABLES", "quarantine"),
        ("DESCRIBE ledger.quarantine", "reason_code"),
        ("FROM ledger.quarantine", "c9"),
        ("SELECT * FROM query('SELECT 41 + 1 AS answer')", "42"),
    ]:
        code, out, err = sql(capsys, db, query)
        assert code == 0 and expected in out, (query, err)


def test_the_locked_configuration_cannot_be_reopened_from_a_select(capsys, db: Warehouse):
    code, _, err = sql(capsys, db, "SELECT * FROM query('SET enable_external_access = true')")
    assert code == 1
    one_line(err)
    code, _, err = sql(capsys, db, f"SELECT * FROM read_csv('{raw_file(db)}')")
    assert code == 1 and "disabled" in one_line(err)
