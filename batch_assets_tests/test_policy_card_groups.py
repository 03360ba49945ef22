"""Card numbers written in groups next to other numbers (issue 43, item 1), on a real in-memory DuckDB.

The card candidate spans the whole run of digit groups; the validator tries every group boundary.
A contiguous run of more than 19 digits is still never a card.
"""

from __future__ import annotations

import duckdb
import pytest
from stdnum import luhn

from batch_assets.policy import PolicySpec, evaluate, find_sensitive, load_mapping
from batch_assets.policy.detectors import CARD_PATTERN, confirm_card

CARD = "4556 7375 8689 9855"
ISSUE_ROWS = [
    (1, f"Call 13912345678 {CARD} billing"),
    (2, f"Invoice 2024 {CARD} charged twice"),
]


@pytest.fixture
def conn() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    yield c
    c.close()


def load(conn: duckdb.DuckDBPyConnection, rows: list[tuple[int, str]]) -> None:
    conn.execute("CREATE OR REPLACE TABLE t (id INTEGER, body VARCHAR)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", rows)


def cards(conn: duckdb.DuckDBPyConnection, texts: list[str]) -> list[list[str]]:
    """The confirmed card values of each text (offsets checked against the text)."""
    load(conn, list(enumerate(texts)))
    table = find_sensitive(conn, "t", "id", ["body"])
    rows = conn.execute(
        f"SELECT id, value, start_offset, match_length FROM {table} WHERE detector = 'card' ORDER BY id, start_offset"
    ).fetchall()
    out: list[list[str]] = [[] for _ in texts]
    for i, value, start, length in rows:
        assert texts[i][start : start + length] == value
        out[i].append(value)
    return out


def test_the_card_is_valid():
    assert luhn.is_valid(CARD.replace(" ", ""))


def test_issue_examples_find_the_card(conn):
    assert cards(conn, [text for _, text in ISSUE_ROWS]) == [[CARD], [CARD]]


@pytest.mark.parametrize(
    "text",
    [
        f"Call 13912345678 {CARD} billing",
        f"Invoice 2024 {CARD} charged twice",
        f"Invoice 2024-{CARD.replace(' ', '-')} charged",
        f"refs 7 88 999 {CARD}",
        f"{CARD} 2024 then more",
        f"{CARD} 123456789012345678901234",
        f"12345678901234567890123 {CARD}",
        f"order 2024 11 20 {CARD} 0001 0002 done",
        f"卡号2024 {CARD}谢谢",
    ],
)
def test_grouped_card_found_whatever_stands_around_it(conn, text):
    (found,) = cards(conn, [text])
    assert len(found) == 1 and CARD.replace(" ", "") in found[0].replace(" ", "").replace("-", "")


def test_amex_and_contiguous_after_another_number(conn):
    texts = ["Call 13912345678 3782 822463 10005 now", "Invoice 2024 4111111111111111 paid"]
    assert cards(conn, texts) == [["3782 822463 10005"], ["4111111111111111"]]


def test_two_cards_in_one_run_are_two_findings(conn):
    text = f"{CARD} 4111 1111 1111 1111"
    assert cards(conn, [text]) == [[CARD, "4111 1111 1111 1111"]]


def test_more_than_19_contiguous_digits_is_still_not_a_card(conn):
    inner = "4111111111111111"
    texts = [
        f"run {inner}0000",  # 20 digits
        f"run 2024 {inner}0000",
        f"run 13912345678 9{inner}",
        "run 41111111111111111111 1111",
    ]
    assert cards(conn, texts) == [[], [], [], []]


def test_overlapping_valid_windows_are_merged():
    # Both "0000 4111 1111 1111" (starts with 0: not a card) and the card itself are windows; with a
    # Luhn-valid neighbour window the union is reported, so no digit of the card stays readable.
    base = "4111 1111 1111 1111"
    prefixes = [f"{n:04d}" for n in range(2000, 2100)]
    found = 0
    for prefix in prefixes:
        candidate = f"{prefix} {base}"
        (only,) = confirm_card(candidate)
        assert base in only[1]
        found += only[1] == candidate
    assert found > 0  # some prefix makes a valid 16-digit neighbour window too


def test_candidate_regex_spans_the_whole_group_run(conn):
    text = f"Call 13912345678 {CARD} 2024 billing"
    (ms,) = conn.execute("SELECT regexp_extract_all(?, ?)", [text, CARD_PATTERN]).fetchone()
    assert ms == [f"13912345678 {CARD} 2024"]


@pytest.mark.parametrize("action", ["block", "redact"])
def test_issue_examples_under_block_and_redact(conn, action):
    load(conn, ISSUE_ROWS)
    out = evaluate(conn, "t", "id", ["body"], PolicySpec.model_validate({"detectors": {"card": action}}))
    counts = {c.detector: (c.findings, c.items) for c in out.counts}
    assert counts["card"] == (2, 2)
    texts = dict(((i, c), t) for i, c, t in conn.execute(f"SELECT * FROM {out.redacted_table}").fetchall())
    if action == "block":
        assert out.blocked(conn) == {1: ("card in column body",), 2: ("card in column body",)}
    else:
        assert out.blocked(conn) == {}
        assert texts[(1, "body")] == "Call [PHONE_1] [CARD_1] billing"
        assert texts[(2, "body")] == "Invoice 2024 [CARD_1] charged twice"
        assert load_mapping(conn, out.mapping_table, 2)["[CARD_1]"] == CARD
    for text in texts.values():
        assert "4556" not in text and "9855" not in text
    out.drop(conn)
