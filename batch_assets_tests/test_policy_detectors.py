"""Sensitive-data detection and redaction (batch_assets.policy) on a real in-memory DuckDB."""

from __future__ import annotations

import dataclasses

import duckdb
import pydantic
import pytest
import yaml
from stdnum import luhn

from batch_assets.policy import (
    DEFAULT_DETECTORS,
    PolicySpec,
    default_detectors,
    evaluate,
    find_sensitive,
    load_mapping,
    redact,
    restore,
)
from batch_assets.policy.detectors import (
    confirm_card,
    confirm_cn_id,
    confirm_email,
    confirm_iban,
    make_confirm_phone,
)

MIXED = "请联系张三 13812345678 或 zhang.san@example.cn，卡号 4111 1111 1111 1111"


@pytest.fixture
def conn() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    yield c
    c.close()


def load(conn: duckdb.DuckDBPyConnection, rows: list[tuple], cols: tuple[str, ...] = ("body",)) -> str:
    col_defs = ", ".join(f"{c} VARCHAR" for c in cols)
    conn.execute(f"CREATE OR REPLACE TABLE t (id INTEGER, {col_defs})")
    conn.executemany(f"INSERT INTO t VALUES ({', '.join('?' * (len(cols) + 1))})", rows)
    return "t"


def found(conn, texts: list[str], detectors=DEFAULT_DETECTORS) -> list[tuple[int, str, str]]:
    """(row index, detector, value) for each text, checking every offset against the text."""
    load(conn, list(enumerate(texts)))
    table = find_sensitive(conn, "t", "id", ["body"], detectors)
    rows = conn.execute(
        f"SELECT id, detector, value, start_offset, match_length FROM {table} ORDER BY id, start_offset, detector"
    ).fetchall()
    for i, _det, value, start, length in rows:
        assert texts[i][start : start + length] == value  # offsets are code points, like Python str
    return [(i, det, value) for i, det, value, _s, _l in rows]


def of(results, detector: str) -> list[str]:
    return [v for _i, d, v in results if d == detector]


# --- true positives -------------------------------------------------------------------------------


def test_email_true_positives(conn):
    texts = [
        "mail zhang.san@example.cn please",
        "a+tag@sub.example.co.uk,",
        "UPPER_case@Example.COM.",
        "邮箱li.si@qq.com谢谢",
        "...lead.dots@example.org",
    ]
    r = found(conn, texts)
    assert of(r, "email") == [
        "zhang.san@example.cn",
        "a+tag@sub.example.co.uk",
        "UPPER_case@Example.COM",
        "li.si@qq.com",
        "lead.dots@example.org",
    ]


def test_email_look_alikes_not_reported():
    for s in ["a..b@example.com", "foo@-bad.com", "foo.@example.com", "x@example.c0m"]:
        assert confirm_email(s) == [], s


def test_phone_true_positives(conn):
    texts = [
        "call 13812345678 now",
        "+86 138 1234 5678",
        "86-138-1234-5678",
        "(+86)13812345678",
        "电话13912345678谢谢",
        "座机 010-12345678",
        "US office +1 650-253-0000",
        "London +44 20 7946 0958",
        "0086 138 1234 5678",
        "new range 16873360984 ok",  # mobile shape; not (yet) in libphonenumber's metadata
    ]
    r = found(conn, texts)
    assert of(r, "phone") == [
        "13812345678",
        "+86 138 1234 5678",
        "86-138-1234-5678",
        "(+86)13812345678",
        "13912345678",
        "010-12345678",
        "+1 650-253-0000",
        "+44 20 7946 0958",
        "0086 138 1234 5678",
        "16873360984",
    ]


def test_phone_look_alikes_not_reported(conn):
    texts = [
        "order 20240115123045 shipped",  # order number / compact time stamp
        "at 2024-01-15 12:30:45 UTC",  # time stamp
        "epoch 1700000000",  # unix time
        "only ten 1381234567",  # one digit short of a mobile
        "run 913812345678 of digits",  # a mobile inside a longer digit run
        "date 2024-01-15 12点",
        "order 2760221213 placed",  # a "valid" Wuhan landline only if the trunk 0 is optional
    ]
    assert of(found(conn, texts), "phone") == []


def test_phone_regions_decide_national_formats(conn):
    us = "call (650) 253-0000"
    assert of(found(conn, [us]), "phone") == []
    assert of(found(conn, [us], default_detectors(["CN", "US"])), "phone") == ["(650) 253-0000"]


def test_card_true_positives(conn):
    texts = [
        "visa 4111 1111 1111 1111",
        "visa 4111-1111-1111-1111",
        "mc 5500000000000004",
        "amex 3782 822463 10005",
        "unionpay 6212345678901234569",
        "mc2 2223000048400011",
        "discover 6011111111111117 end",
        "卡号4111111111111111。",
    ]
    r = found(conn, texts)
    assert of(r, "card") == [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "5500000000000004",
        "3782 822463 10005",
        "6212345678901234569",
        "2223000048400011",
        "6011111111111117",
        "4111111111111111",
    ]


def test_card_look_alikes_not_reported(conn):
    inner = "4111111111111111"
    longer = inner + "9"
    assert luhn.is_valid(inner) and not luhn.is_valid(longer)
    texts = [
        "luhn-bad 4111111111111112",
        f"card inside a longer run {longer}",
        f"and on the left 0{inner}",
        "20 digits 41111111111111111111",  # contiguous: more than 19 digits is never a card
        "ts 17000000000000004",  # Luhn-valid by chance but starts with 1
    ]
    assert luhn.is_valid("17000000000000004")
    assert of(found(conn, texts), "card") == []


def test_cn_id_true_positives(conn):
    texts = [
        "身份证 11010519491231002X",
        "身份证号码：320106198510151234 之后",
        "id 110105 1949 1231 002x",
        "号440301199001011234号",
    ]
    r = found(conn, texts)
    assert of(r, "cn_id") == [
        "11010519491231002X",
        "320106198510151234",
        "110105 1949 1231 002x",
        "440301199001011234",
    ]


def test_cn_id_look_alikes_not_reported(conn):
    texts = [
        "wrong check digit 110105194912310020",
        "31 February 110105194902310026",  # right check digit, impossible date
        "future 110105209901010020",  # right check digit, born in 2099
        "longer run 111010519491231002X",
        "longer run 3201061985101512345",
    ]
    assert confirm_cn_id("110105194902310026") == [] and confirm_cn_id("110105209901010020") == []
    assert confirm_cn_id("320106198510151234") != []
    assert of(found(conn, texts), "cn_id") == []


def test_iban_true_positives(conn):
    texts = [
        "IBAN GB82 WEST 1234 5698 7654 32 please",
        "DE89370400440532013000",
        "FR14 2004 1010 0505 0001 3M02 606 BIC BNPAFRPP",
        "账户NL91ABNA0417164300。",
    ]
    r = found(conn, texts)
    assert of(r, "iban") == [
        "GB82 WEST 1234 5698 7654 32",
        "DE89370400440532013000",
        "FR14 2004 1010 0505 0001 3M02 606",
        "NL91ABNA0417164300",
    ]


def test_iban_look_alikes_not_reported():
    assert confirm_iban("GB83 WEST 1234 5698 7654 32") == []  # checksum
    assert confirm_iban("NL91ABNA041716430") == []  # one character short for NL
    assert confirm_iban("XX82WEST12345698765432") == []  # no such country


def test_validators_directly():
    assert confirm_card("4111 1111 1111 1111") == [(0, "4111 1111 1111 1111")]
    assert confirm_card("4111 1111 1111 1112") == []
    assert make_confirm_phone(["CN"])("13812345678 4111 1111 1111 1111") == [(0, "13812345678")]


def test_phone_fast_paths_agree_with_libphonenumber():
    import random

    rng = random.Random(11)
    fast, slow = make_confirm_phone(["CN"]), make_confirm_phone(["CN"], fast_paths=False)
    samples = [str(rng.randrange(10 ** (k - 1), 10**k)) for k in range(7, 16) for _ in range(150)]
    samples += [
        f"20{rng.randrange(10, 30)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d} "
        f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:05"
        for _ in range(100)
    ]
    samples += ["2024-01-15 12", "2024-01-15", "8613812345678", "4008123123", "2760221213"]
    for s in samples:
        assert fast(s) == slow(s), s


# --- mixed text, overlaps -------------------------------------------------------------------------


def test_mixed_chinese_english(conn):
    r = found(conn, [MIXED])
    assert [(d, v) for _i, d, v in r] == [
        ("phone", "13812345678"),
        ("email", "zhang.san@example.cn"),
        ("card", "4111 1111 1111 1111"),
    ]


def test_overlapping_findings_are_masked_as_one(conn):
    load(conn, [(1, "mail 13812345678@qq.com")])
    findings = find_sensitive(conn, "t", "id", ["body"])
    assert sorted(conn.execute(f"SELECT detector FROM {findings}").fetchall()) == [("email",), ("phone",)]
    red = redact(conn, "t", "id", ["body"], findings)
    assert conn.execute(f"SELECT redacted_text FROM {red.table}").fetchall() == [("mail [EMAIL_1]",)]


# --- redaction --------------------------------------------------------------------------------------

REDACT_ROWS = [
    (1, MIXED, "again 13812345678 and 138-1234-5678, cc zhang.san@example.cn"),
    (2, "nothing sensitive here 2024-01-15 12:30:45", None),
    (3, "😀 a@b.co 😀 a@b.co then b@b.co, 电话13912345678", "b@b.co first? no, body came first"),
    (4, "ID 11010519491231002X, IBAN GB82 WEST 1234 5698 7654 32", ""),
]


def test_placeholders_stable_per_item(conn):
    load(conn, REDACT_ROWS, ("body", "note"))
    findings = find_sensitive(conn, "t", "id", ["body", "note"])
    red = redact(conn, "t", "id", ["body", "note"], findings)
    got = dict(((i, c), t) for i, c, t in conn.execute(f"SELECT * FROM {red.table}").fetchall())
    assert got[(1, "body")] == "请联系张三 [PHONE_1] 或 [EMAIL_1]，卡号 [CARD_1]"
    assert got[(1, "note")] == "again [PHONE_1] and [PHONE_2], cc [EMAIL_1]"
    assert got[(2, "body")] == REDACT_ROWS[1][1] and got[(2, "note")] is None
    assert got[(3, "body")] == "😀 [EMAIL_1] 😀 [EMAIL_1] then [EMAIL_2], 电话[PHONE_1]"
    assert got[(3, "note")] == "[EMAIL_2] first? no, body came first"
    assert got[(4, "body")] == "ID [CN_ID_1], IBAN [IBAN_1]" and got[(4, "note")] == ""
    assert load_mapping(conn, red.mapping_table, 1) == {
        "[PHONE_1]": "13812345678",
        "[PHONE_2]": "138-1234-5678",
        "[EMAIL_1]": "zhang.san@example.cn",
        "[CARD_1]": "4111 1111 1111 1111",
    }


def test_redacted_text_has_no_values_and_restores(conn):
    load(conn, REDACT_ROWS, ("body", "note"))
    findings = find_sensitive(conn, "t", "id", ["body", "note"])
    red = redact(conn, "t", "id", ["body", "note"], findings)
    values = conn.execute(f"SELECT DISTINCT value FROM {findings}").fetchall()
    assert len(values) >= 8
    originals = {(i, "body"): b for i, b, _n in REDACT_ROWS} | {(i, "note"): n for i, _b, n in REDACT_ROWS}
    for i, col, text in conn.execute(f"SELECT * FROM {red.table}").fetchall():
        if text is None:
            continue
        for (value,) in values:
            assert value not in text
        assert restore(text, load_mapping(conn, red.mapping_table, i)) == originals[(i, col)]


def test_redact_only_selected_detectors(conn):
    load(conn, [(1, MIXED)])
    findings = find_sensitive(conn, "t", "id", ["body"])
    red = redact(conn, "t", "id", ["body"], findings, detectors=["card"])
    assert conn.execute(f"SELECT redacted_text FROM {red.table}").fetchone() == (
        "请联系张三 13812345678 或 zhang.san@example.cn，卡号 [CARD_1]",
    )


def test_restore_leaves_unknown_placeholders():
    assert restore("[EMAIL_1] and [EMAIL_9] [x]", {"[EMAIL_1]": "a@b.co"}) == "a@b.co and [EMAIL_9] [x]"


# --- policy model and evaluate ----------------------------------------------------------------------


def test_policy_spec_defaults_and_strictness():
    p = PolicySpec()
    assert p.detectors.model_dump() == {
        "email": "redact",
        "phone": "redact",
        "card": "block",
        "cn_id": "block",
        "iban": "block",
    }
    assert p.sensitive_columns == [] and p.sensitive_columns_action == "redact" and p.restore_on_apply is False
    assert p.phone_regions == ["CN"]
    with pytest.raises(pydantic.ValidationError):
        PolicySpec.model_validate({"detectors": {"emial": "block"}})
    with pytest.raises(pydantic.ValidationError):
        PolicySpec.model_validate({"detectors": {"email": "mask"}})
    with pytest.raises(pydantic.ValidationError):
        PolicySpec.model_validate({"restore": True})
    with pytest.raises(pydantic.ValidationError):
        PolicySpec.model_validate({"phone_regions": ["ZZ"]})
    with pytest.raises(pydantic.ValidationError):
        p.restore_on_apply = True  # frozen
    y = PolicySpec.model_validate(
        yaml.safe_load("""
        detectors: {phone: allow, email: block}
        sensitive_columns: [customer_name]
        sensitive_columns_action: block
        restore_on_apply: true
        phone_regions: [cn, us]
    """)
    )
    assert y.detectors.phone == "allow" and y.detectors.card == "block" and y.phone_regions == ["CN", "US"]


def test_evaluate_counts_block_and_redact(conn):
    rows = [
        (1, MIXED, "张三"),
        (2, "nothing here", None),
        (3, "ID 11010519491231002X, IBAN GB82 WEST 1234 5698 7654 32", "李四"),
        (4, "mail li.si@qq.com or 13912345678", "  "),
    ]
    load(conn, rows, ("body", "customer_name"))
    policy = PolicySpec.model_validate({"detectors": {"phone": "allow"}, "sensitive_columns": ["customer_name"]})
    out = evaluate(conn, "t", "id", ["body"], policy)
    counts = {c.detector: (c.action, c.findings, c.items) for c in out.counts}
    assert counts == {
        "email": ("redact", 2, 2),
        "phone": ("allow", 2, 2),
        "card": ("block", 1, 1),
        "cn_id": ("block", 1, 1),
        "iban": ("block", 1, 1),
        "sensitive_column": ("redact", 2, 2),
    }
    assert out.blocked(conn) == {1: ("card in column body",), 3: ("cn_id in column body", "iban in column body")}
    got = dict(((i, c), t) for i, c, t in conn.execute(f"SELECT * FROM {out.redacted_table}").fetchall())
    assert got[(1, "body")] == "请联系张三 13812345678 或 [EMAIL_1]，卡号 [CARD_1]"  # phone allowed
    assert got[(1, "customer_name")] == "[CUSTOMER_NAME_1]"
    assert got[(4, "body")] == "mail [EMAIL_1] or 13912345678" and got[(4, "customer_name")] == "  "
    assert load_mapping(conn, out.mapping_table, 3)["[CUSTOMER_NAME_1]"] == "李四"
    # Nothing reported outside the local tables carries a value.
    reported = repr(out.counts) + repr(out.blocked(conn))
    for v in ("13812345678", "4111", "11010519491231002X", "GB82", "li.si", "张三", "李四"):
        assert v not in reported
    out.drop(conn)
    assert conn.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'policy_%'").fetchone() == (0,)


def test_evaluate_sensitive_columns_block(conn):
    load(conn, [(1, "hi", "张三"), (2, "hi", None)], ("body", "customer_name"))
    policy = PolicySpec(sensitive_columns=["customer_name"], sensitive_columns_action="block")
    out = evaluate(conn, "t", "id", ["body", "customer_name"], policy)
    assert out.blocked(conn) == {1: ("sensitive column customer_name",)}


def test_ids_must_be_unique_and_set(conn):
    load(conn, [(1, "a"), (1, "b")])
    with pytest.raises(ValueError, match="not unique"):
        find_sensitive(conn, "t", "id", ["body"])
    load(conn, [(1, "a"), (None, "b")])
    with pytest.raises(ValueError, match="NULL"):
        find_sensitive(conn, "t", "id", ["body"])


def test_relation_can_be_a_query(conn):
    load(conn, [(1, MIXED), (2, "none")])
    table = find_sensitive(conn, "SELECT id * 10 AS item, body FROM t", "item", ["body"])
    assert conn.execute(f"SELECT DISTINCT id FROM {table}").fetchall() == [(10,)]


def test_failing_validator_never_quotes_the_value(conn):
    load(conn, [(1, MIXED)])

    def boom(candidate: str):
        raise ValueError(f"bad {candidate}")

    dets = [dataclasses.replace(d, confirm=boom) if d.name == "card" else d for d in DEFAULT_DETECTORS]
    with pytest.raises(RuntimeError) as exc:
        find_sensitive(conn, "t", "id", ["body"], dets)
    assert "4111" not in str(exc.value) and exc.value.__cause__ is None and exc.value.__suppress_context__


# --- set-based over a large partition ---------------------------------------------------------------


def test_200k_rows_validate_each_distinct_candidate_once(conn):
    n = 200_000
    conn.execute(f"""
        CREATE TABLE big AS
        SELECT i AS id,
               CASE WHEN i % 50 = 0 THEN
                    CASE (i // 50) % 4
                        WHEN 0 THEN '客户 ' || i || ' 电话 1380000' || lpad(CAST(i % 1000 AS VARCHAR), 4, '0')
                        WHEN 1 THEN 'mail user' || (i % 300) || '@example.cn 谢谢'
                        WHEN 2 THEN '卡号 4111 1111 1111 1111 ticket ' || i
                        ELSE 'ID 11010519491231002X order ' || i END
                    ELSE 'ticket ' || i || ' 的内容 about order status and delivery, ref ' || (i % 997) END AS body,
               'note ' || (i % 13) AS note
        FROM range({n}) AS r(i)
    """)
    calls: dict[str, int] = {}

    def counting(d):
        def confirm(candidate: str):
            calls[d.name] = calls.get(d.name, 0) + 1
            return d.confirm(candidate)

        return dataclasses.replace(d, confirm=confirm)

    table = find_sensitive(conn, "big", "id", ["body", "note"], [counting(d) for d in DEFAULT_DETECTORS])
    distinct = {
        d.name: conn.execute(
            "SELECT count(DISTINCT c) FROM (SELECT unnest(regexp_extract_all(body, ?)) AS c FROM big "
            "UNION ALL SELECT unnest(regexp_extract_all(note, ?)) FROM big)",
            [d.pattern, d.pattern],
        ).fetchone()[0]
        for d in DEFAULT_DETECTORS
    }
    total_calls = sum(calls.values())
    assert total_calls <= sum(distinct.values())
    for name, c in calls.items():
        assert c <= distinct[name]
    assert total_calls < n // 50 + 1000  # far fewer than rows
    per_det = dict(conn.execute(f"SELECT detector, count(*) FROM {table} GROUP BY detector").fetchall())
    hits = n // 50 // 4
    assert per_det == {"phone": hits, "email": hits, "card": hits, "cn_id": hits}


def test_candidates_are_confirmed_in_slices_each_once_with_the_same_findings(conn, monkeypatch):
    """Python holds one slice of distinct candidates at a time; slicing changes nothing found."""
    import batch_assets.policy.scan as scan

    conn.execute("""
        CREATE TABLE t AS SELECT i AS id,
               'mail u' || (i % 37) || '@example.cn, 电话 1380000' || lpad(CAST(i % 23 AS VARCHAR), 4, '0')
               || CASE WHEN i % 5 = 0 THEN ' card 4111 1111 1111 1111' ELSE '' END AS body
        FROM range(300) r(i)""")
    calls: list[str] = []

    def counting(d):
        def confirm(candidate: str):
            calls.append(f"{d.name}:{candidate}")
            return d.confirm(candidate)

        return dataclasses.replace(d, confirm=confirm)

    def findings() -> list[tuple]:
        calls.clear()
        table = find_sensitive(conn, "t", "id", ["body"], [counting(d) for d in DEFAULT_DETECTORS])
        rows = conn.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        conn.execute(f"DROP TABLE {table}")
        return rows

    whole = findings()
    confirmed_whole = sorted(calls)
    assert len(calls) == len(set(calls)) >= 37 + 23 + 1
    monkeypatch.setattr(scan, "CONFIRM_BATCH", 4)
    sliced = findings()
    assert sorted(calls) == confirmed_whole  # 16 slices, every distinct pair confirmed once
    assert sliced == whole
    # Inside a transaction too (the freeze scans in its transaction, where a new table's rowids
    # start at 2^62: slices by rowid never ended).
    conn.execute("BEGIN TRANSACTION")
    assert findings() == whole and sorted(calls) == confirmed_whole
    conn.execute("COMMIT")
    assert {d for _, _, _, d, *_ in whole} == {"email", "phone", "card"} and len(whole) >= 300 * 2 + 60
    assert not [
        t
        for (t,) in conn.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()
        if t.startswith("policy_")
    ]  # no slice or pair table left behind
