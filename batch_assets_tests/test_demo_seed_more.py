"""The demo ``main.kb_articles`` and ``main.product_reviews`` tables: shape, determinism, edge cases."""

import difflib
import itertools
import random
import re
import unicodedata
from collections import defaultdict
from datetime import date, timedelta

import duckdb
import pytest

from batch_assets.demo import demo_partition_dates, seed_kb_articles, seed_product_reviews, text_banks
from batch_assets.demo.seed_kb import (
    LONG_BODY_MIN_CHARS as KB_LONG,
)
from batch_assets.demo.seed_kb import (
    MAX_WORDS,
    MIN_WORDS,
    REEDIT_LOOKBACK_DAYS,
    REEDITS_PER_DAY,
    article_words,
)
from batch_assets.demo.seed_kb import _slots as kb_slots
from batch_assets.demo.seed_reviews import LONG_BODY_MIN_CHARS as REVIEW_LONG
from batch_assets.demo.seed_reviews import _slots as review_slots

from .seed_checks import outputs_under_hash_seeds, rows_in_one_only, template_fields, templates

DATES = [date.fromisoformat(d) for d in demo_partition_dates()]
KB_PER_DAY, REVIEWS_PER_DAY = 40, 300

KB_HASH = """
SELECT md5(string_agg(concat_ws('|', article_id, updated_date, updated_at, product, language, title, body),
                      chr(30) ORDER BY updated_at, article_id))
FROM main.kb_articles {where}
"""
REVIEWS_HASH = """
SELECT md5(string_agg(concat_ws('|', review_id, review_date, created_at, product, rating, language, title, body),
                      chr(30) ORDER BY created_at, review_id))
FROM main.product_reviews {where}
"""
CJK = re.compile(r"[\u4e00-\u9fff]")
# Typical wording of unhappy and happy reviewers, in both languages.
NEGATIVE = re.compile(
    r"差评|退货|退款|坏了|别买|垃圾|踩雷|DOA|returned it|refund|broke|waste|don't buy|do not buy", re.I
)
POSITIVE = re.compile(r"好评|性价比高|推荐|满意|值了|love|great|excellent|perfect|recommend", re.I)


def _hash(conn, query: str, where: str = "") -> str:
    return conn.execute(query.format(where=where)).fetchone()[0]


def _assert_zh_share(
    conn, table: str, date_column: str, *, per_day: tuple[float, float], overall: tuple[float, float]
) -> None:
    """The share of Chinese rows of ``main.<table>`` lies within ``per_day`` on each day and ``overall`` in all."""
    for day, zh_share in conn.execute(
        f"SELECT {date_column}, avg((language = 'zh')::INT) FROM main.{table} GROUP BY ALL"
    ).fetchall():
        assert per_day[0] <= zh_share <= per_day[1], (day, zh_share)
    assert (
        overall[0] <= conn.execute(f"SELECT avg((language = 'zh')::INT) FROM main.{table}").fetchone()[0] <= overall[1]
    )


def _emoji_only(body: str) -> bool:
    return bool(body.strip()) and not any(unicodedata.category(ch)[0] in "LN" for ch in body)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """Both tables at their default size in one file: (path, kb rows returned, review rows returned)."""
    path = tmp_path_factory.mktemp("demo_more") / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        kb_rows = seed_kb_articles(conn)
        review_rows = seed_product_reviews(conn)
    return path, kb_rows, review_rows


@pytest.fixture
def conn(seeded):
    with duckdb.connect(str(seeded[0]), read_only=True) as connection:
        yield connection


# --- both tables -----------------------------------------------------------------------------------


def test_schemas_and_no_other_tables(conn):
    assert conn.execute("SELECT column_name, column_type FROM (DESCRIBE main.kb_articles)").fetchall() == [
        ("article_id", "VARCHAR"),
        ("updated_date", "DATE"),
        ("updated_at", "TIMESTAMP"),
        ("product", "VARCHAR"),
        ("language", "VARCHAR"),
        ("title", "VARCHAR"),
        ("body", "VARCHAR"),
    ]
    assert conn.execute("SELECT column_name, column_type FROM (DESCRIBE main.product_reviews)").fetchall() == [
        ("review_id", "VARCHAR"),
        ("review_date", "DATE"),
        ("created_at", "TIMESTAMP"),
        ("product", "VARCHAR"),
        ("rating", "INTEGER"),
        ("language", "VARCHAR"),
        ("title", "VARCHAR"),
        ("body", "VARCHAR"),
    ]
    assert sorted(
        conn.execute("SELECT table_schema, table_name, table_type FROM information_schema.tables").fetchall()
    ) == [("main", "kb_articles", "BASE TABLE"), ("main", "product_reviews", "BASE TABLE")]


def test_row_counts_per_day(seeded, conn):
    assert seeded[1] == len(DATES) * KB_PER_DAY
    assert seeded[2] == len(DATES) * REVIEWS_PER_DAY
    assert conn.execute("SELECT updated_date, count(*) FROM main.kb_articles GROUP BY ALL ORDER BY 1").fetchall() == [
        (d, KB_PER_DAY) for d in DATES
    ]
    assert conn.execute(
        "SELECT review_date, count(*) FROM main.product_reviews GROUP BY ALL ORDER BY 1"
    ).fetchall() == [(d, REVIEWS_PER_DAY) for d in DATES]


def _kb_slot_names() -> set[str]:
    from batch_assets.demo.seed_kb import _identity

    # The layout and the appendix fill {plans}, {date} and {version} themselves.
    return set(kb_slots(random.Random(0), random.Random(1), _identity(1, 1000))) | {"plans", "date", "version"}


def _review_slot_names() -> set[str]:
    return set(review_slots(random.Random(0), "en", next(iter(text_banks.product_reviews()["products"]))))


@pytest.mark.parametrize(
    ("load_bank", "slot_names"),
    [(text_banks.kb_articles, _kb_slot_names), (text_banks.product_reviews, _review_slot_names)],
)
def test_every_template_fills_from_the_generator_slots(load_bank, slot_names):
    """Rarely drawn templates must not hide a misspelt slot until the seed that happens to pick them."""
    known = slot_names()

    checked = 0
    for name, entry in load_bank().items():
        for template in templates(entry):
            fields = template_fields(template)
            assert fields <= known, (load_bank.__name__, name, template, fields - known)
            checked += 1
    assert checked > 300


def test_same_arguments_give_identical_files(tmp_path, seeded):
    copy = tmp_path / "again.duckdb"
    with duckdb.connect(str(copy)) as conn:
        seed_kb_articles(conn)
        seed_product_reviews(conn)
        conn.execute(f"ATTACH '{seeded[0]}' AS first (READ_ONLY)")
        for table in ("kb_articles", "product_reviews"):
            assert rows_in_one_only(conn, table) == 0, table
        conn.execute("DETACH first")
        with duckdb.connect(str(seeded[0]), read_only=True) as original:
            for query in (KB_HASH, REVIEWS_HASH):
                assert _hash(conn, query) == _hash(original, query)


def test_content_independent_of_pythonhashseed():
    script = (
        "import sys, duckdb\n"
        "from batch_assets.demo import seed_kb_articles, seed_product_reviews\n"
        "conn = duckdb.connect()\n"
        "seed_kb_articles(conn, days=2, per_day=12)\n"
        "seed_product_reviews(conn, days=2, per_day=40)\n"
        "print(conn.execute(sys.argv[1]).fetchone()[0], conn.execute(sys.argv[2]).fetchone()[0])\n"
    )
    outputs = outputs_under_hash_seeds(script, KB_HASH.format(where=""), REVIEWS_HASH.format(where=""))
    with duckdb.connect() as conn:
        seed_kb_articles(conn, days=2, per_day=12)
        seed_product_reviews(conn, days=2, per_day=40)
        outputs.add(f"{_hash(conn, KB_HASH)} {_hash(conn, REVIEWS_HASH)}")
    assert len(outputs) == 1


def test_fewer_days_are_a_prefix_and_seed_matters(conn):
    first_two = "WHERE {column} < DATE '2026-11-22'"
    with duckdb.connect() as small:
        seed_kb_articles(small, days=2)
        seed_product_reviews(small, days=2)
        assert _hash(small, KB_HASH) == _hash(conn, KB_HASH, first_two.format(column="updated_date"))
        assert _hash(small, REVIEWS_HASH) == _hash(conn, REVIEWS_HASH, first_two.format(column="review_date"))
        seed_kb_articles(small, days=2, seed=1)
        seed_product_reviews(small, days=2, seed=1)
        assert _hash(small, KB_HASH) != _hash(conn, KB_HASH, first_two.format(column="updated_date"))
        assert _hash(small, REVIEWS_HASH) != _hash(conn, REVIEWS_HASH, first_two.format(column="review_date"))


def test_reseeding_replaces_the_tables(tmp_path):
    with duckdb.connect(str(tmp_path / "reseed.duckdb")) as conn:
        assert seed_kb_articles(conn, days=2, per_day=12) == 24
        assert seed_product_reviews(conn, days=2, per_day=40) == 80
        first = (_hash(conn, KB_HASH), _hash(conn, REVIEWS_HASH))
        # _hash leaves its result half-read (fetchone); seeding must still work after that.
        assert seed_kb_articles(conn, days=2, per_day=12) == 24
        assert seed_product_reviews(conn, days=2, per_day=40) == 80
        assert (_hash(conn, KB_HASH), _hash(conn, REVIEWS_HASH)) == first
        assert seed_kb_articles(conn, start_date=date(2027, 1, 1), days=1, per_day=10) == 10
        assert seed_product_reviews(conn, start_date=date(2027, 1, 1), days=1, per_day=20) == 20
        assert conn.execute(
            "SELECT count(*), min(updated_date), max(updated_date) FROM main.kb_articles"
        ).fetchone() == (10, date(2027, 1, 1), date(2027, 1, 1))
        assert conn.execute(
            "SELECT count(*), min(review_date), max(review_date) FROM main.product_reviews"
        ).fetchone() == (20, date(2027, 1, 1), date(2027, 1, 1))
        # The edge cases hold at the smallest supported sizes as well.
        assert conn.execute(
            f"SELECT count(*) FILTER (WHERE body = ''), count(*) FILTER (WHERE length(body) > {KB_LONG}), "
            "count(DISTINCT article_id) FROM main.kb_articles"
        ).fetchone() == (1, 1, 10)
        bodies = [row[0] for row in conn.execute("SELECT body FROM main.product_reviews").fetchall()]
        assert (bodies.count(""), sum(map(_emoji_only, bodies)), sum(len(b) > REVIEW_LONG for b in bodies)) == (1, 1, 1)
        assert conn.execute("SELECT count(*) - count(DISTINCT review_id) FROM main.product_reviews").fetchone()[0] == 1


@pytest.mark.parametrize(
    ("seeder", "smallest", "kwargs"),
    [
        (seed_kb_articles, 10, {"per_day": 9}),
        (seed_kb_articles, 10, {"days": 0}),
        (seed_product_reviews, 20, {"per_day": 19}),
        (seed_product_reviews, 20, {"days": 0}),
    ],
)
def test_rejects_sizes_that_cannot_hold_the_edge_cases(tmp_path, seeder, smallest, kwargs):
    table = "kb_articles" if seeder is seed_kb_articles else "product_reviews"
    with duckdb.connect(str(tmp_path / "bad.duckdb")) as conn:
        seeder(conn, days=1, per_day=smallest)
        with pytest.raises(ValueError):
            seeder(conn, **kwargs)
        assert conn.execute(f"SELECT count(*) FROM main.{table}").fetchone()[0] == smallest


# --- kb_articles -----------------------------------------------------------------------------------


def test_kb_columns_look_like_a_help_centre(conn):
    assert (
        conn.execute(
            """SELECT count(*) FROM main.kb_articles
           WHERE NOT regexp_full_match(article_id, 'KB-\\d{4}') OR updated_at::DATE <> updated_date
              OR title IS NULL OR title = '' OR body IS NULL OR language NOT IN ('en', 'zh')"""
        ).fetchone()[0]
        == 0
    )
    products = {row[0] for row in conn.execute("SELECT DISTINCT product FROM main.kb_articles").fetchall()}
    assert products <= set(text_banks.support_tickets()["products"]) and len(products) >= 8
    # No article twice on one day.
    assert (
        conn.execute(
            "SELECT count(*) FROM (SELECT updated_date, article_id FROM main.kb_articles "
            "GROUP BY ALL HAVING count(*) > 1)"
        ).fetchone()[0]
        == 0
    )
    # An article keeps its title, product and language through every edit.
    assert (
        conn.execute(
            """SELECT count(*) FROM (SELECT article_id FROM main.kb_articles GROUP BY 1
                                 HAVING count(DISTINCT (title, product, language)) > 1)"""
        ).fetchone()[0]
        == 0
    )


def test_kb_language_mix(conn):
    _assert_zh_share(conn, "kb_articles", "updated_date", per_day=(0.2, 0.4), overall=(0.25, 0.35))
    for language, title, body in conn.execute("SELECT language, title, body FROM main.kb_articles").fetchall():
        assert bool(CJK.search(title)) == (language == "zh"), title
        if body:
            assert bool(CJK.search(body)) == (language == "zh"), title


def test_kb_bodies_are_help_centre_markdown(conn):
    rows = conn.execute(
        f"SELECT language, title, body FROM main.kb_articles WHERE body <> '' AND length(body) <= {KB_LONG}"
    ).fetchall()
    lengths = []
    for language, title, body in rows:
        assert body.startswith(f"# {title}\n\n"), title
        assert re.search(r"^## .+\n\n1\. .+\n2\. ", body, re.M), title  # numbered steps
        assert ("\n## Troubleshooting\n" if language == "en" else "\n## 故障排查\n") in body, title
        words = article_words(body, language)
        assert MIN_WORDS <= words <= MAX_WORDS, (title, words)
        lengths.append(words)
    assert max(lengths) - min(lengths) > 500  # short and long articles, not one size
    # Every topic family shows up in both languages.
    for language in ("en", "zh"):
        titles = " ".join(t for lang, t, _ in rows if lang == language)
        for family_words in (
            ("invoice", "refund", "VAT", "plan", "发票", "退款", "税", "套餐"),
            ("sync", "API", "SSO", "crash", "同步", "超时", "单点登录", "闪退"),
            ("password", "two-step", "2FA", "delete", "e-mail", "密码", "两步验证", "注销", "邮箱"),
        ):
            assert any(word in titles for word in family_words), (language, family_words)


def test_kb_edge_cases_every_day(conn):
    per_day = conn.execute(
        f"""SELECT updated_date, count(*) FILTER (WHERE body = ''), count(*) FILTER (WHERE body IS NULL),
                   count(*) FILTER (WHERE length(body) > {KB_LONG})
            FROM main.kb_articles GROUP BY ALL ORDER BY 1"""
    ).fetchall()
    assert per_day == [(d, 1, 0, 1) for d in DATES]


def test_kb_re_edits_across_days(conn):
    versions = defaultdict(list)
    for article_id, updated_date, updated_at, body in conn.execute(
        "SELECT article_id, updated_date, updated_at, body FROM main.kb_articles ORDER BY updated_at"
    ).fetchall():
        versions[article_id].append((updated_date, updated_at, body))
    reedited = {article_id: v for article_id, v in versions.items() if len(v) > 1}
    assert len(reedited) >= 10
    for article_id, history in reedited.items():
        ordinary = [body for _, _, body in history if body and len(body) <= KB_LONG]
        assert len(set(ordinary)) == len(ordinary), article_id  # every edit changes the body...
        for before, after in itertools.combinations(ordinary, 2):  # ...but it stays the same article
            ratio = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines()).ratio()
            assert ratio > 0.6, (article_id, ratio)
    # Once the look-back window lies inside the seeded range, every day re-edits earlier articles.
    for day in DATES[REEDIT_LOOKBACK_DAYS:]:
        earlier = sum(
            1
            for history in versions.values()
            if any(d == day for d, _, _ in history)
            and any(day - timedelta(days=REEDIT_LOOKBACK_DAYS) <= d < day for d, _, _ in history)
        )
        assert earlier >= REEDITS_PER_DAY, day


# --- product_reviews -------------------------------------------------------------------------------


def test_review_columns_look_like_a_shop(conn):
    assert (
        conn.execute(
            """SELECT count(*) FROM main.product_reviews
           WHERE NOT regexp_full_match(review_id, 'RV-\\d{8}-\\d{6}')
              OR review_id[4:11] <> strftime(review_date, '%Y%m%d')
              OR created_at::DATE <> review_date OR rating NOT BETWEEN 1 AND 5 OR title IS NULL OR title = ''
              OR body IS NULL OR language NOT IN ('en', 'zh')"""
        ).fetchone()[0]
        == 0
    )
    products = {row[0] for row in conn.execute("SELECT DISTINCT product FROM main.product_reviews").fetchall()}
    assert products == set(text_banks.product_reviews()["products"])
    for review_date, ratings, top in conn.execute(
        "SELECT review_date, count(DISTINCT rating), mode(rating) FROM main.product_reviews GROUP BY ALL"
    ).fetchall():
        assert (ratings, top) == (5, 5), review_date
    hours = conn.execute(
        """SELECT min(n) FROM (SELECT count(DISTINCT hour(created_at)) AS n
                               FROM main.product_reviews GROUP BY review_date)"""
    ).fetchone()[0]
    assert hours >= 20


def test_review_language_mix(conn):
    _assert_zh_share(conn, "product_reviews", "review_date", per_day=(0.5, 0.7), overall=(0.55, 0.65))
    for language, title, body in conn.execute("SELECT language, title, body FROM main.product_reviews").fetchall():
        if body and not _emoji_only(body):
            assert bool(CJK.search(body)) == (language == "zh"), body[:80]
        if language == "en":
            assert not CJK.search(title), title


def test_review_edge_cases_every_day(conn):
    grouped = defaultdict(list)
    for review_date, body in conn.execute("SELECT review_date, body FROM main.product_reviews").fetchall():
        grouped[review_date].append(body)
    assert sorted(grouped) == DATES
    for review_date, bodies in grouped.items():
        empty, emoji, long = bodies.count(""), sum(map(_emoji_only, bodies)), sum(len(b) > REVIEW_LONG for b in bodies)
        assert (empty, emoji, long) == (1, 1, 1), review_date
        assert max(len(b) for b in bodies if len(b) <= REVIEW_LONG) < 3_000, review_date


def test_exactly_one_double_post_per_day(conn):
    duplicates = conn.execute(
        """SELECT review_date, count(*), count(DISTINCT (product, rating, language, title, body)),
                  max(created_at) - min(created_at)
           FROM main.product_reviews GROUP BY review_date, review_id HAVING count(*) > 1 ORDER BY 1"""
    ).fetchall()
    assert [row[:3] for row in duplicates] == [(d, 2, 1) for d in DATES]
    assert all(timedelta(seconds=1) <= row[3] <= timedelta(seconds=90) for row in duplicates)


def test_review_texts_vary_in_length_and_style(conn):
    rows = conn.execute("SELECT language, body FROM main.product_reviews WHERE body <> ''").fetchall()
    bodies = [body for _, body in rows]
    assert sum("\n\n" in b for b in bodies) / len(bodies) > 0.05  # several paragraphs
    assert sum(len(b) < 20 for b in bodies) / len(bodies) > 0.15  # one-liners
    assert sum(any(ord(ch) >= 0x1F300 for ch in b) for b in bodies) / len(bodies) > 0.1  # emoji
    assert len(set(bodies)) / len(bodies) > 0.6
    text = "\n".join(bodies)
    for slang in ("好评", "差评", "物流很快", "性价比高", "DOA", "Returned it", "退货"):
        assert slang in text, slang


def test_rating_correlates_with_sentiment_but_not_perfectly(conn):
    rows = conn.execute("SELECT rating, body FROM main.product_reviews WHERE body <> ''").fetchall()
    negative = [rating for rating, body in rows if NEGATIVE.search(body)]
    positive = [rating for rating, body in rows if POSITIVE.search(body)]
    assert len(negative) > 100 and len(positive) > 300
    assert sum(negative) / len(negative) + 1.5 < sum(positive) / len(positive)
    # Some five-star reviews complain, and some one- or two-star reviews use glowing words (sarcasm, misclicks).
    assert sum(1 for rating, body in rows if rating == 5 and NEGATIVE.search(body)) >= 10
    assert sum(1 for rating, body in rows if rating <= 2 and POSITIVE.search(body)) >= 10
