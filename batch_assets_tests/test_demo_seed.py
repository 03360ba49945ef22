"""The demo ``main.support_tickets`` table: shape, determinism and the deliberate edge cases."""

import random
import re
import unicodedata
from collections import Counter, defaultdict
from datetime import date

import duckdb
import pytest

from batch_assets.demo import demo_partition_dates, seed_support_tickets, text_banks
from batch_assets.demo.seed import _slots

from .seed_checks import outputs_under_hash_seeds, rows_in_one_only, template_fields, templates

DATES = [date.fromisoformat(d) for d in demo_partition_dates()]
PER_DAY = 1200

# Order by the full row so the hash does not depend on how DuckDB stored it.
CONTENT_HASH = """
SELECT md5(string_agg(
    concat_ws('|', ticket_id, created_date, created_at, channel, language, customer_name,
              customer_email, subject, body IS NULL, coalesce(body, '')),
    chr(30) ORDER BY created_at, ticket_id, body))
FROM main.support_tickets {where}
"""

EMAIL = re.compile(r"[\w.+-]+@example\.(?:com|org|net|cn)\b")
CN_MOBILE = re.compile(r"(?<!\d)(?:\+86[ -]?)?1[3-9]\d[ -]?\d{4}[ -]?\d{4}(?!\d)")
US_PHONE = re.compile(r"(?:\+1[ -]?)?\(?\d{3}\)?[ -]?555[ -]01\d{2}(?!\d)")
CARD = re.compile(r"(?<!\d)(?:\d{4}[ -]?){3}\d{4}(?!\d)")
CJK = re.compile(r"[\u4e00-\u9fff]")
THEME_KEYWORDS = {
    "billing": re.compile(
        r"invoice|refund|charge|bill|VAT|payment|price|discount|receipt|发票|退款|扣|账单|付款|支付|优惠|续费",
        re.IGNORECASE,
    ),
    "technical": re.compile(
        r"error|crash|sync|tim(?:e|ing) ?out|API|HTTP|slow|freez|upload|export|import|"
        r"闪退|同步|超时|报错|失败|导出|上传|卡",
        re.IGNORECASE,
    ),
    "account": re.compile(
        r"password|2FA|log ?in|account|SSO|e-mail|username|admin|"
        r"密码|验证|登录|账号|注销|手机号|管理员|邮箱",
        re.IGNORECASE,
    ),
}


def _content_hash(conn, where: str = "") -> str:
    return conn.execute(CONTENT_HASH.format(where=where)).fetchone()[0]


def _bodies_by_day(conn) -> dict[date, list]:
    grouped = defaultdict(list)
    for created_date, body in conn.execute("SELECT created_date, body FROM main.support_tickets").fetchall():
        grouped[created_date].append(body)
    return grouped


def _has_all_hazards(body: str) -> bool:
    return (
        "\u200d" in body  # zero-width joiner (emoji sequence)
        and "\u200f" in body  # right-to-left mark
        and any(unicodedata.combining(ch) for ch in body)
        and any(ord(ch) >= 0x1F300 for ch in body)  # emoji
        and all(ch in body for ch in ('"', "\\", "\t", "\n"))
    )


def _luhn_valid(number: str) -> bool:
    digits = [int(d) for d in re.sub(r"\D", "", number)][::-1]
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(digits))
    return total % 10 == 0


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """One default-sized seed shared by the read-only tests: (path, rows returned)."""
    path = tmp_path_factory.mktemp("demo") / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        written = seed_support_tickets(conn)
    return path, written


@pytest.fixture
def conn(seeded):
    with duckdb.connect(str(seeded[0]), read_only=True) as connection:
        yield connection


def test_demo_partition_dates():
    assert demo_partition_dates() == [f"2026-11-{day}" for day in range(20, 27)]
    assert demo_partition_dates(start_date=date(2026, 12, 30), days=3) == ["2026-12-30", "2026-12-31", "2027-01-01"]


def test_every_template_fills_from_the_generator_slots():
    """Rarely drawn templates must not hide a misspelt slot until the seed that happens to pick them."""
    framing = {
        "problem",
        "detail",
        "minutes",
        "pii_email",
        "pii_phone",
        "pii_card",
        "greeting",
        "closing",
        "name",
        "combining_name",
        "zwj_emoji",
        "emoji",
        "rtl_text",
        "user",
        "file",
        "kb",
    }
    known = set(_slots(random.Random(0), "en", date(2026, 11, 20))) | framing

    names = (
        "tickets",
        "generic_subjects",
        "details",
        "web_forms",
        "phone_headers",
        "subject_prefixes",
        "resubmit_notes",
        "pii_email",
        "pii_phone",
        "pii_card",
        "hazards",
        "long_intros",
    )
    bank = text_banks.support_tickets()
    checked = 0
    for name in names:
        for template in templates(bank[name]):
            fields = template_fields(template)
            assert fields <= known, (name, template, fields - known)
            checked += 1
    assert checked > 300


def test_schema_and_no_other_tables(conn):
    assert conn.execute("SELECT column_name, column_type FROM (DESCRIBE main.support_tickets)").fetchall() == [
        ("ticket_id", "VARCHAR"),
        ("created_date", "DATE"),
        ("created_at", "TIMESTAMP"),
        ("channel", "VARCHAR"),
        ("language", "VARCHAR"),
        ("customer_name", "VARCHAR"),
        ("customer_email", "VARCHAR"),
        ("subject", "VARCHAR"),
        ("body", "VARCHAR"),
    ]
    assert conn.execute("SELECT table_schema, table_name, table_type FROM information_schema.tables").fetchall() == [
        ("main", "support_tickets", "BASE TABLE")
    ]


def test_row_counts_per_day(seeded, conn):
    assert seeded[1] == len(DATES) * PER_DAY
    counts = conn.execute(
        "SELECT created_date, count(*) FROM main.support_tickets GROUP BY ALL ORDER BY created_date"
    ).fetchall()
    assert counts == [(d, PER_DAY) for d in DATES]


def test_columns_look_like_a_support_queue(conn):
    bad_ids = conn.execute(
        """SELECT count(*) FROM main.support_tickets
           WHERE NOT regexp_full_match(ticket_id, 'TK-\\d{8}-\\d{6}')
              OR ticket_id[4:11] <> strftime(created_date, '%Y%m%d')
              OR created_at::DATE <> created_date"""
    ).fetchone()[0]
    assert bad_ids == 0
    assert {row[0] for row in conn.execute("SELECT DISTINCT channel FROM main.support_tickets").fetchall()} == {
        "email",
        "chat",
        "phone",
        "web",
    }
    assert conn.execute(
        """SELECT count(*) FILTER (WHERE subject IS NULL OR subject = ''),
                  count(*) FILTER (WHERE customer_name IS NULL OR customer_name = ''),
                  count(*) FILTER (WHERE NOT regexp_full_match(customer_email, '[\\w.+-]+@example\\.(com|org|net|cn)'))
           FROM main.support_tickets"""
    ).fetchone() == (0, 0, 0)
    # created_at spreads over the whole day, not a single burst.
    hours = conn.execute(
        "SELECT min(n) FROM (SELECT count(DISTINCT hour(created_at)) AS n "
        "FROM main.support_tickets GROUP BY created_date)"
    ).fetchone()[0]
    assert hours >= 20


def test_language_mix(conn):
    shares = conn.execute(
        """SELECT created_date, avg((language = 'zh')::INT), count(*) FILTER (WHERE language NOT IN ('en', 'zh'))
           FROM main.support_tickets GROUP BY ALL"""
    ).fetchall()
    for created_date, zh_share, other in shares:
        assert 0.30 <= zh_share <= 0.40, (created_date, zh_share)
        assert other == 0
    overall = conn.execute("SELECT avg((language = 'zh')::INT) FROM main.support_tickets").fetchone()[0]
    assert 0.32 <= overall <= 0.38
    # The text really is in the labelled language.
    for language, body in conn.execute("SELECT language, body FROM main.support_tickets WHERE body <> ''").fetchall():
        assert bool(CJK.search(body)) == (language == "zh")


def test_all_three_themes_in_both_languages(conn):
    rows = conn.execute("SELECT language, subject || ' ' || coalesce(body, '') FROM main.support_tickets").fetchall()
    for language in ("en", "zh"):
        texts = [text for lang, text in rows if lang == language]
        for theme, pattern in THEME_KEYWORDS.items():
            share = sum(bool(pattern.search(text)) for text in texts) / len(texts)
            assert share >= 0.15, (language, theme, share)


def test_text_is_varied(conn):
    for created_date, subjects, bodies in conn.execute(
        """SELECT created_date, count(DISTINCT subject) / count(*),
                  count(DISTINCT body) FILTER (WHERE body <> '') / count(*) FILTER (WHERE body <> '')
           FROM main.support_tickets GROUP BY ALL"""
    ).fetchall():
        assert subjects >= 0.4, (created_date, subjects)
        assert bodies >= 0.95, (created_date, bodies)


def test_empty_null_and_long_bodies_every_day(conn):
    per_day = conn.execute(
        """SELECT created_date, count(*) FILTER (WHERE body = ''), count(*) FILTER (WHERE body IS NULL),
                  count(*) FILTER (WHERE length(body) > 40000)
           FROM main.support_tickets GROUP BY ALL ORDER BY created_date"""
    ).fetchall()
    assert per_day == [(d, 2, 1, 2) for d in DATES]


def test_exactly_one_double_submitted_ticket_per_day(conn):
    duplicates = conn.execute(
        """SELECT created_date, ticket_id, count(*) AS copies, count(DISTINCT body) AS bodies,
                  count(DISTINCT (customer_email, subject, channel)) AS senders, count(DISTINCT created_at) AS times
           FROM main.support_tickets GROUP BY created_date, ticket_id HAVING count(*) > 1
           ORDER BY created_date"""
    ).fetchall()
    assert [(row[0], row[2:]) for row in duplicates] == [(d, (2, 2, 1, 2)) for d in DATES]
    # Ids are unique across days too: the date is part of the id.
    assert conn.execute("SELECT count(DISTINCT ticket_id) FROM main.support_tickets").fetchone()[0] == len(DATES) * (
        PER_DAY - 1
    )


def test_personal_data_share_every_day(conn):
    formats = Counter()
    for created_date, bodies in _bodies_by_day(conn).items():
        with_pii = cards = 0
        for body in filter(None, bodies):
            hits = {
                name: pattern.findall(body)
                for name, pattern in (("email", EMAIL), ("cn", CN_MOBILE), ("us", US_PHONE), ("card", CARD))
            }
            formats.update(name for name, found in hits.items() if found)
            if any(hits.values()):
                with_pii += 1
            if hits["card"]:
                cards += 1
                assert all(_luhn_valid(number) for number in hits["card"])
        assert 0.08 <= with_pii / len(bodies) <= 0.12, (created_date, with_pii)
        assert cards == 3, (created_date, cards)
    assert formats["email"] > 0 and formats["cn"] > 0 and formats["us"] > 0


def test_escaping_hazards_every_day(conn):
    for created_date, bodies in _bodies_by_day(conn).items():
        assert sum(_has_all_hazards(body) for body in filter(None, bodies)) == 5, created_date


def test_same_arguments_give_identical_files(tmp_path, seeded):
    copy = tmp_path / "again.duckdb"
    with duckdb.connect(str(copy)) as conn:
        seed_support_tickets(conn)
        conn.execute(f"ATTACH '{seeded[0]}' AS first (READ_ONLY)")
        assert rows_in_one_only(conn, "support_tickets") == 0
        conn.execute("DETACH first")
        with duckdb.connect(str(seeded[0]), read_only=True) as original:
            assert _content_hash(conn) == _content_hash(original)


def test_content_independent_of_pythonhashseed():
    script = (
        "import sys, duckdb\n"
        "from batch_assets.demo import seed_support_tickets\n"
        "conn = duckdb.connect()\n"
        "seed_support_tickets(conn, days=2, per_day=100)\n"
        "print(conn.execute(sys.argv[1]).fetchone()[0])\n"
    )
    hashes = outputs_under_hash_seeds(script, CONTENT_HASH.format(where=""))
    with duckdb.connect() as conn:
        seed_support_tickets(conn, days=2, per_day=100)
        hashes.add(_content_hash(conn))
    assert len(hashes) == 1


def test_fewer_days_are_a_prefix_and_seed_matters(conn):
    with duckdb.connect() as small:
        seed_support_tickets(small, days=2)
        assert _content_hash(small) == _content_hash(conn, "WHERE created_date < DATE '2026-11-22'")
        seed_support_tickets(small, days=2, seed=1)
        assert _content_hash(small) != _content_hash(conn, "WHERE created_date < DATE '2026-11-22'")


def test_reseeding_replaces_the_table(tmp_path):
    with duckdb.connect(str(tmp_path / "reseed.duckdb")) as conn:
        assert seed_support_tickets(conn, days=2, per_day=100) == 200
        first = _content_hash(conn)
        # _content_hash leaves its result half-read (fetchone); seeding must still work after that.
        assert seed_support_tickets(conn, days=2, per_day=100) == 200
        assert conn.execute("SELECT count(*) FROM main.support_tickets").fetchone()[0] == 200
        assert _content_hash(conn) == first
        assert seed_support_tickets(conn, start_date=date(2027, 1, 1), days=1, per_day=60) == 60
        assert conn.execute(
            "SELECT count(*), min(created_date), max(created_date) FROM main.support_tickets"
        ).fetchone() == (60, date(2027, 1, 1), date(2027, 1, 1))
        # The edge cases hold at the smallest supported size as well.
        assert conn.execute(
            """SELECT count(*) FILTER (WHERE body = ''), count(*) FILTER (WHERE body IS NULL),
                      count(*) FILTER (WHERE length(body) > 40000), count(*) - count(DISTINCT ticket_id)
               FROM main.support_tickets"""
        ).fetchone() == (2, 1, 2, 1)


@pytest.mark.parametrize("kwargs", [{"per_day": 49}, {"days": 0}])
def test_rejects_sizes_that_cannot_hold_the_edge_cases(tmp_path, kwargs):
    with duckdb.connect(str(tmp_path / "bad.duckdb")) as conn:
        seed_support_tickets(conn, days=1, per_day=50)
        with pytest.raises(ValueError):
            seed_support_tickets(conn, **kwargs)
        assert conn.execute("SELECT count(*) FROM main.support_tickets").fetchone()[0] == 50
