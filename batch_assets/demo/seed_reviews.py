"""Deterministic demo business data: the DuckDB table ``main.product_reviews``.

E-commerce reviews of home appliances, phones, headphones, coffee machines and the like (fictional
brands), the input of a sentiment task (positive / neutral / negative / mixed). Columns (in this order):

    review_id VARCHAR        RV-<yyyymmdd>-<daily sequence, 6 digits>, e.g. RV-20261120-000123
    review_date DATE         the partition key; one partition per seeded day
    created_at TIMESTAMP     within review_date, weighted towards the evening
    product VARCHAR          the listing's name, e.g. 'Sonix Air Pro 3 Earbuds' (same in both languages)
    rating INTEGER           1-5, J-shaped (mostly 5, then 1)
    language VARCHAR         'zh' | 'en' (about 60 % / 40 %)
    title VARCHAR            never NULL or empty
    body VARCHAR             see below

Bodies are composed from ``data/product_reviews.json`` (see ``text_banks.py``): one-liners (好评,
"DOA. Returned it."), a few sentences, or several paragraphs with an update, with emoji now and then.
Sentiment follows the rating but not perfectly: each rating has a mix of "voices" (``VOICES``) - 4-5
star reviews are mostly positive but some are mixed, and some 5-star reviews complain (five stars
"for the seller"); 1-2 star reviews are mostly negative, some sarcastic (positive words, negative
meaning) and a few are misclicks with a glowing text. The voice is not stored: recovering the
sentiment is the task's job.

Deliberate properties, on every seeded day (tested in ``batch_assets_tests/test_demo_seed_more.py``):

* exactly ``per_day`` rows, of which exactly one review_id appears twice (a double post: the same
  review, byte for byte, posted again 1-90 seconds later);
* exactly 1 body that is ``''`` (a rating without text);
* exactly 1 body made only of emoji (no letters or digits), matching its rating;
* exactly 1 body longer than 20,000 characters (a week-by-week usage diary); every other body is
  far shorter (< 3,000 characters).

Determinism: content depends only on (seed, date, per_day). Each day draws from its own
``random.Random(f"{seed}:product_reviews:{date}")`` (string seeds are hashed with SHA-512, not
``hash()``), so the output is identical across runs and PYTHONHASHSEED values, and seeding fewer
days yields exactly a prefix of seeding more. Re-seeding replaces the table in one
``CREATE OR REPLACE TABLE`` statement.
"""

from __future__ import annotations

import random
from datetime import date, datetime, time, timedelta

import duckdb
import pyarrow as pa

from batch_assets.demo import tables as T
from batch_assets.demo import text_banks

R = text_banks.product_reviews()  # the text bank, data/product_reviews.json

TABLE = "main.product_reviews"
DEFAULT_START_DATE = date(2026, 11, 20)

ZH_SHARE = 0.60
RATINGS = (5, 4, 3, 2, 1)
RATING_WEIGHTS = (55, 18, 8, 6, 13)
# Per rating: how the text sounds. "complaint" = five stars but a complaint; "misclick" = a glowing
# text under one star; "sarcastic" = positive words, negative meaning.
VOICES = {
    5: (("positive", 86), ("mixed", 5), ("neutral", 4), ("complaint", 5)),
    4: (("positive", 62), ("mixed", 26), ("neutral", 12)),
    3: (("neutral", 38), ("mixed", 44), ("negative", 12), ("positive", 6)),
    2: (("negative", 64), ("mixed", 24), ("sarcastic", 8), ("neutral", 4)),
    1: (("negative", 76), ("sarcastic", 14), ("mixed", 4), ("misclick", 3), ("neutral", 3)),
}
LENGTHS = ("short", "medium", "long")
LENGTH_WEIGHTS = (35, 50, 15)
EMOJI_SHARE = {"en": 0.2, "zh": 0.3}
LONG_BODY_MIN_CHARS = 20_000
# Below this the fixed per-day edge cases would crowd out ordinary reviews.
MIN_PER_DAY = 20

# People write reviews in the evening.
HOUR_WEIGHTS = (4, 2, 1, 1, 1, 1, 1, 2, 3, 4, 5, 6, 7, 6, 5, 5, 5, 6, 7, 9, 11, 12, 10, 7)

_ARROW_SCHEMA = pa.schema(
    [
        ("review_id", pa.string()),
        ("review_date", pa.date32()),
        ("created_at", pa.timestamp("us")),
        ("product", pa.string()),
        ("rating", pa.int32()),
        ("language", pa.string()),
        ("title", pa.string()),
        ("body", pa.string()),
    ]
)
_PRODUCTS = tuple(R["products"])
_PRODUCT_WEIGHTS = tuple(listing["weight"] for listing in R["products"].values())
_DAY_SECONDS = 86_400
_REPOST_MAX_DELAY = 90
_TONE = {
    "positive": "pos",
    "misclick": "pos",
    "negative": "neg",
    "complaint": "neg",
    "sarcastic": "neg",
    "neutral": "neutral",
    "mixed": "mixed",
}
_TITLE_KEY = {
    "positive": "pos",
    "misclick": "pos",
    "negative": "neg",
    "neutral": "neutral",
    "mixed": "mixed",
    "sarcastic": "sarcastic",
    "complaint": "complaint",
}


def seed_product_reviews(
    conn: duckdb.DuckDBPyConnection,
    *,
    start_date: date = DEFAULT_START_DATE,
    days: int = 7,
    per_day: int = 300,
    seed: int = 20261120,
) -> int:
    """(Re)create ``main.product_reviews`` with ``days * per_day`` demo reviews; returns rows written."""
    T.check_size(days, per_day, MIN_PER_DAY)
    rows = T.build_rows(_ARROW_SCHEMA, start_date, days, lambda columns, day: _append_day(columns, day, per_day, seed))
    return T.replace_table(conn, TABLE, rows, order_by="created_at, review_id")


# --- one day ---------------------------------------------------------------------------------------


def _append_day(columns: dict[str, list], day: date, per_day: int, seed: int) -> None:
    rng = random.Random(f"{seed}:product_reviews:{day.isoformat()}")
    # One review is posted twice, so a day holds per_day rows but per_day - 1 distinct reviews.
    seconds = sorted(T.second_of_day(rng, HOUR_WEIGHTS) for _ in range(per_day - 1))
    latest = _DAY_SECONDS - _REPOST_MAX_DELAY  # the repost must fall on the same day
    duplicate = rng.choice([i for i, second in enumerate(seconds) if second < latest])
    special = rng.sample([i for i in range(len(seconds)) if i != duplicate], 3)
    roles = {duplicate: "duplicate", special[0]: "empty", special[1]: "emoji_only", special[2]: "long"}
    midnight = datetime.combine(day, time())

    def add(review_id, second, product, rating, lang, title, body):
        T.append_row(columns, review_id, day, midnight + timedelta(seconds=second), product, rating, lang, title, body)

    for index, second in enumerate(seconds):
        role = roles.get(index, "normal")
        review_id = f"RV-{day:%Y%m%d}-{index + 1:06d}"
        lang = "zh" if rng.random() < ZH_SHARE else "en"
        product = rng.choices(_PRODUCTS, _PRODUCT_WEIGHTS)[0]
        rating = rng.choices(RATINGS, RATING_WEIGHTS)[0]
        voices, weights = zip(*VOICES[rating])
        voice = rng.choices(voices, weights)[0]
        slots = _slots(rng, lang, product)
        title, body = _review(rng, role, lang, R["products"][product]["category"], rating, voice, slots)
        add(review_id, second, product, rating, lang, title, body)
        if role == "duplicate":
            add(review_id, second + rng.randint(1, _REPOST_MAX_DELAY), product, rating, lang, title, body)


def _slots(rng: random.Random, lang: str, product: str) -> dict[str, str]:
    listing = R["products"][product]
    category, usd, cny = listing["category"], listing["usd"], listing["cny"]
    if lang == "en":
        price = f"${usd * rng.choice((1, 1, 0.9, 0.8)):,.0f}"
    else:
        paid = round(cny * rng.choice((1, 1, 0.9, 0.85)))
        price = rng.choice((f"¥{paid}", f"{paid}元", f"{paid}块"))
    return {
        "item": R["item"][lang][category],
        "price": price,
        "days": str(rng.randint(2, 20)),
        "weeks": str(rng.randint(2, 8)),
        "months": str(rng.randint(2, 14)),
        "n": str(rng.randint(2, 9)),
        "hours": str(rng.randint(2, 4)),
        "minutes": str(rng.choice((20, 25, 30, 40, 45))),
    }


# --- one review ------------------------------------------------------------------------------------


def _review(rng, role, lang, category, rating, voice, slots) -> tuple[str, str]:
    if role == "long":
        return _diary(rng, lang, category, rating, slots)
    title = rng.choice(R["titles"][lang][_TITLE_KEY[voice]]).format_map(slots)
    if role == "empty":
        return title, ""
    if role == "emoji_only":
        tone = "pos" if rating >= 4 else "neg" if rating <= 2 else "neutral"
        return rng.choice(R["titles"][lang][tone]).format_map(slots), rng.choice(R["emoji_only"][tone])
    length = rng.choices(LENGTHS, LENGTH_WEIGHTS)[0]
    if voice in ("sarcastic", "complaint", "misclick") and length == "long":
        length = "medium"
    body = _body(rng, lang, category, rating, voice, length, slots)
    if rng.random() < EMOJI_SHARE[lang]:
        body += ("" if lang == "zh" else " ") + _emoji(rng, voice)
    return title, body


def _emoji(rng: random.Random, voice: str) -> str:
    if voice == "sarcastic":
        return rng.choice(("🙃", "🙂", "👏👏"))
    tone = _TONE[voice]
    if tone == "mixed":
        tone = rng.choice(("pos", "neg", "neutral"))
    return rng.choice(R["emoji"][tone]) * rng.choice((1, 1, 2, 3))


def _join(lang: str, sentences: list[str]) -> str:
    return ("" if lang == "zh" else " ").join(s for s in sentences if s)


def _pick(
    rng: random.Random,
    lang: str,
    category: str,
    tone: str,
    rating: int,
    count: int,
    used: set[str],
    aspects_first: bool = True,
) -> list[str]:
    """``count`` sentences of one tone ('pos' / 'neg'), mostly about the product's aspects, none of
    them in ``used`` (the chosen ones are added to it). The pools hold about 20 sentences per tone;
    a review uses at most 10."""
    aspects = [s for s in R["aspects"][lang][category][tone] if s not in used]
    extra = (
        list((R["pos"] if tone == "pos" else R["neg"])[lang])
        + list(R["logistics"][lang][tone])
        + list(R["service"][lang][tone])
        + list(R["value"][lang][tone])
    )
    if tone == "neg" and rating <= 2:
        extra += R["returns"][lang]
    extra = [s for s in extra if s not in used]
    n_aspects = min(len(aspects), count, max(1, round(count * 0.6))) if aspects_first else 0
    chosen = rng.sample(aspects, n_aspects) + rng.sample(extra, count - n_aspects)
    used.update(chosen)
    rng.shuffle(chosen)
    return chosen


def _connect(rng: random.Random, lang: str, tone: str, sentence: str) -> str:
    connector = rng.choice(R["connectors"][lang][tone])
    if lang == "en" and len(sentence) > 1 and sentence[1].islower() and not sentence.startswith("I "):
        sentence = sentence[0].lower() + sentence[1:]
    return connector + sentence


def _body(rng, lang, category, rating, voice, length, slots) -> str:
    used: set[str] = set()  # no sentence twice in one review
    if voice == "sarcastic":
        return _join(lang, _fill(_sarcastic_parts(rng, lang, category, rating, length, used), slots))
    if voice == "complaint":
        return _join(lang, _fill(_complaint_parts(rng, lang, category, rating, length, used), slots))
    tone = _TONE[voice]
    if length == "short":
        return _short_body(rng, lang, category, tone, rating, slots, used)
    if length == "medium":
        return _join(lang, _fill(_medium_parts(rng, lang, category, tone, rating, used), slots))
    return _long_body(rng, lang, category, tone, rating, slots, used)


def _fill(parts: list[str], slots: dict[str, str]) -> list[str]:
    return [part.format_map(slots) for part in parts]


def _sarcastic_parts(rng, lang, category, rating, length, used) -> list[str]:
    parts = rng.sample(R["sarcasm"][lang], 1 if length == "short" else 2)
    if length != "short" and rng.random() < 0.4:
        parts += _pick(rng, lang, category, "neg", rating, 1, used)
    return parts


def _complaint_parts(rng, lang, category, rating, length, used) -> list[str]:
    parts = [rng.choice(R["five_star_complaints"][lang])]
    if length != "short":
        parts += _pick(rng, lang, category, "neg", rating, rng.randint(1, 2), used)
    return parts


def _short_body(rng, lang, category, tone, rating, slots, used) -> str:
    if tone in ("pos", "neg") and rng.random() < 0.35:
        return _join(lang, _fill(_pick(rng, lang, category, tone, rating, 1, used), slots))
    return rng.choice(R["short"][lang][tone]).format_map(slots)


def _sentences(rng, lang, category, tone, rating, count, used) -> list[str]:
    """About ``count`` sentences in ``tone`` ('pos' / 'neg' / 'neutral' / 'mixed'), none of them in ``used``
    (the chosen ones are added to it)."""
    if tone == "neutral":
        fresh = [s for s in R["neutral"][lang] if s not in used]
        chosen = rng.sample(fresh, min(count, len(fresh)))
        used.update(chosen)
        return chosen
    if tone == "mixed":
        # Both halves talk about the product itself, so they contrast rather than contradict.
        # (5 aspects per tone; a long review takes at most 2 + 2 of each, so neither half runs dry.)
        good = [s for s in R["aspects"][lang][category]["pos"] if s not in used]
        good = rng.sample(good, min(2, max(1, count // 2)))
        bad = [s for s in R["aspects"][lang][category]["neg"] if s not in used]
        bad = rng.sample(bad, min(2, max(1, count - len(good))))
        used.update(good + bad)
        (first, second), turn = ((good, bad), "neg") if rng.random() < 0.7 else ((bad, good), "pos")
        second[0] = _connect(rng, lang, turn, second[0])
        return first + second
    return _pick(rng, lang, category, tone, rating, count, used)


def _medium_parts(rng, lang, category, tone, rating, used) -> list[str]:
    parts = []
    if rng.random() < 0.35:
        parts.append(rng.choice(R["openers"][lang]))
    parts += _sentences(rng, lang, category, tone, rating, rng.randint(2, 4), used)
    if rng.random() < 0.5:
        parts.append(rng.choice(R["closers"][lang][tone]))
    return parts


def _long_body(rng, lang, category, tone, rating, slots, used) -> str:
    """Several paragraphs: how it arrived, what it is like, service/value, maybe an update, a verdict."""
    paragraphs = [
        [rng.choice(R["openers"][lang])] + _sentences(rng, lang, category, tone, rating, rng.randint(1, 2), used),
        _sentences(rng, lang, category, tone, rating, rng.randint(2, 4), used),
    ]
    if tone in ("pos", "neg"):
        paragraphs.append(_pick(rng, lang, category, tone, rating, rng.randint(1, 2), used, aspects_first=False))
    if rng.random() < 0.5:
        later = "neg" if tone in ("neg", "mixed") else "pos" if tone == "pos" else rng.choice(("pos", "neg"))
        update = _pick(rng, lang, category, later, rating, rng.randint(1, 2), used)
        paragraphs.append([rng.choice(R["updates"][lang]) + update[0]] + update[1:])
    paragraphs[-1].append(rng.choice(R["closers"][lang][tone]))
    return "\n\n".join(_join(lang, _fill(paragraph, slots)) for paragraph in paragraphs)


def _diary(rng: random.Random, lang: str, category: str, rating: int, slots: dict[str, str]) -> tuple[str, str]:
    """(title, body) of a day-by-day usage diary longer than LONG_BODY_MIN_CHARS; its tone leans with
    the rating."""
    target = rng.randint(LONG_BODY_MIN_CHARS + 1_000, 32_000)
    positive_share = {5: 0.8, 4: 0.65, 3: 0.45, 2: 0.3, 1: 0.15}[rating]
    aspects = R["aspects"][lang][category]
    heading = rng.choice(R["diary_headings"][lang])
    paragraphs = [rng.choice(R["long_intros"][lang]).format_map(slots)]
    size = len(paragraphs[0])
    day = 0
    while size < target:
        day += rng.randint(1, 3)
        sentences: list[str] = []
        for _ in range(rng.randint(3, 6)):
            if rng.random() < 0.35:
                pool = R["diary_notes"][lang]
            else:
                pool = aspects["pos" if rng.random() < positive_share else "neg"]
            fresh = [s for s in pool if s not in sentences] or [s for s in R["diary_notes"][lang] if s not in sentences]
            sentences.append(rng.choice(fresh))
        values = {**slots, "days": str(day), "n": str(rng.randint(1, 4))}
        text = (
            heading.format_map(values)
            + ("" if lang == "zh" else " ")
            + _join(lang, [s.format_map(values) for s in sentences])
        )
        paragraphs.append(text)
        size += len(text) + 2
    paragraphs.append(rng.choice(R["long_verdicts"][lang]).format_map(slots))
    title = rng.choice(R["long_titles"][lang]).format_map({**slots, "months": str(max(1, round(day / 30)))})
    return title, "\n\n".join(paragraphs)
