"""Deterministic demo business data: the DuckDB table ``main.kb_articles``.

The help centre of the same fictional SaaS company ("Lumen") as ``main.support_tickets``; the input of
an embedding task that re-embeds each day's changed articles. Columns (in this order):

    article_id VARCHAR       KB-<number>, e.g. KB-1042; stable per article across days
    updated_date DATE        the partition key: the day the article was created or edited
    updated_at TIMESTAMP     within updated_date, weighted towards office hours
    product VARCHAR          a Lumen product name (the same names as in the support tickets)
    language VARCHAR         'en' | 'zh'; fixed per article
    title VARCHAR            fixed per article, never empty
    body VARCHAR             Markdown: "# title", intro, numbered steps, a Troubleshooting section, ...

Articles cover billing (invoices, refunds, VAT, plan changes), technical (sync errors, API timeouts,
SSO setup, mobile crashes) and account topics (password reset, 2FA, deleting an account, changing
e-mail/phone), assembled from the blocks in ``data/kb_articles.json`` (see ``text_banks.py``). Apart
from the edge cases below, a body is 150-1,500 words long; for Chinese, two non-space characters count
as one word (``article_words``).

Deliberate properties, on every seeded day (tested in ``batch_assets_tests/test_demo_seed_more.py``):

* exactly ``per_day`` rows and no article_id twice on one day;
* about 30 % Chinese: the day's new picks are stratified by language (round(0.3 * (per_day - 3))),
  the 3 re-edits follow their article's language;
* exactly ``REEDITS_PER_DAY`` re-edits: articles that were also changed on one of the previous
  ``REEDIT_LOOKBACK_DAYS`` days (inside the seeded range or before it), with an edited body - same
  skeleton, some blocks added/removed, new version numbers, a new "Last updated" footer. Other
  articles may come back by chance, since each day picks from the same catalogue;
* exactly 1 body that is ``''`` (a stub saved before any text was written);
* exactly 1 body longer than 30,000 characters (an article with an appended error-code reference
  or release history); no other body exceeds ``MAX_WORDS``.

Determinism: content depends only on (seed, date, per_day). The catalogue (id -> language, topic,
product, title) depends on the seed alone, each article's skeleton on (seed, id) and each edit on
(seed, id, date), all via ``random.Random`` with string seeds (SHA-512, not ``hash()``). Seeding
fewer days yields exactly a prefix of seeding more. Re-seeding replaces the table in one
``CREATE OR REPLACE TABLE`` statement.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

import duckdb
import pyarrow as pa

from batch_assets.demo import tables as T
from batch_assets.demo import text_banks

K = text_banks.kb_articles()  # the text bank, data/kb_articles.json
P = text_banks.support_tickets()  # shared vocabularies: plans, devices, error codes, ...

TABLE = "main.kb_articles"
DEFAULT_START_DATE = date(2026, 11, 20)

ZH_SHARE = 0.30
FIRST_ARTICLE_NUMBER = 1000
CATALOGUE_SIZE = 2400  # ids KB-1000..KB-3399; grows to 4 * per_day for very large days
REEDITS_PER_DAY = 3
REEDIT_LOOKBACK_DAYS = 3
EMPTY_BODIES_PER_DAY = 1
LONG_BODIES_PER_DAY = 1
LONG_BODY_MIN_CHARS = 30_000
MIN_WORDS, MAX_WORDS = 150, 1_500
# Below this the fixed per-day edge cases and re-edits would crowd out ordinary articles.
MIN_PER_DAY = 10

# Editors work office hours, with a little before and after.
HOUR_WEIGHTS = (0, 0, 0, 0, 0, 0, 1, 2, 6, 10, 12, 11, 6, 9, 11, 11, 9, 6, 3, 2, 1, 1, 0, 0)

_ARROW_SCHEMA = pa.schema(
    [
        ("article_id", pa.string()),
        ("updated_date", pa.date32()),
        ("updated_at", pa.timestamp("us")),
        ("product", pa.string()),
        ("language", pa.string()),
        ("title", pa.string()),
        ("body", pa.string()),
    ]
)
# Fixed month names: strftime("%B") would follow the process locale.
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_TOPICS = tuple(K["topic_weights"])
_DEVICE_NAMES = tuple(P["devices"])


@dataclass(frozen=True)
class _Article:
    """What stays fixed about an article whenever it is edited."""

    article_id: str
    language: str
    topic: str
    product: str
    sso: str
    title: str


def seed_kb_articles(
    conn: duckdb.DuckDBPyConnection,
    *,
    start_date: date = DEFAULT_START_DATE,
    days: int = 7,
    per_day: int = 40,
    seed: int = 20261120,
) -> int:
    """(Re)create ``main.kb_articles`` with ``days * per_day`` article versions; returns rows written."""
    T.check_size(days, per_day, MIN_PER_DAY)
    catalogue = _catalogue(seed, max(CATALOGUE_SIZE, 4 * per_day))
    rows = T.build_rows(
        _ARROW_SCHEMA, start_date, days, lambda columns, day: _append_day(columns, day, per_day, seed, catalogue)
    )
    return T.replace_table(conn, TABLE, rows, order_by="updated_at, article_id")


def article_words(body: str, language: str) -> int:
    """Length in words as the generator measures it: whitespace-separated tokens, or for Chinese
    half the number of non-space characters."""
    if language == "zh":
        return len("".join(body.split())) // 2
    return len(body.split())


# --- catalogue -------------------------------------------------------------------------------------


def _catalogue(seed: int, size: int) -> list[_Article]:
    return [_identity(seed, FIRST_ARTICLE_NUMBER + index) for index in range(size)]


def _identity(seed: int, number: int) -> _Article:
    article_id = f"KB-{number}"
    rng = random.Random(f"{seed}:kb_articles:{article_id}")
    lang = "zh" if rng.random() < ZH_SHARE else "en"
    topic = rng.choices(_TOPICS, tuple(K["topic_weights"].values()))[0]
    product = rng.choice(K["topic_products"][topic])
    sso = rng.choice(P["sso_providers"][lang])
    title = rng.choice(K["articles"][lang][topic]["titles"]).format(product=product, sso=sso)
    return _Article(article_id, lang, topic, product, sso, title)


def _new_picks(seed: int, day: date, count: int, catalogue: list[_Article]) -> list[_Article]:
    """The day's articles that are not deliberate re-edits, stratified by language."""
    rng = random.Random(f"{seed}:kb_articles:{day.isoformat()}:picks")
    n_zh = round(ZH_SHARE * count)
    zh = [article for article in catalogue if article.language == "zh"]
    en = [article for article in catalogue if article.language == "en"]
    return rng.sample(zh, n_zh) + rng.sample(en, count - n_zh)


# --- one day ---------------------------------------------------------------------------------------


def _append_day(columns: dict[str, list], day: date, per_day: int, seed: int, catalogue: list[_Article]) -> None:
    rng = random.Random(f"{seed}:kb_articles:{day.isoformat()}")
    new = _new_picks(seed, day, per_day - REEDITS_PER_DAY, catalogue)
    taken = {article.article_id for article in new}
    # Re-edits: articles changed on one of the previous days (their picks depend only on those dates,
    # so this stays a function of (seed, day, per_day) and the prefix property holds).
    earlier = {
        article.article_id: article
        for back in range(1, REEDIT_LOOKBACK_DAYS + 1)
        for article in _new_picks(seed, day - timedelta(days=back), per_day - REEDITS_PER_DAY, catalogue)
        if article.article_id not in taken
    }
    reedits = rng.sample(sorted(earlier.values(), key=lambda a: a.article_id), REEDITS_PER_DAY)
    # Edge cases go to new picks, so a re-edit always carries an ordinary body.
    special = rng.sample(range(len(new)), EMPTY_BODIES_PER_DAY + LONG_BODIES_PER_DAY)
    roles = {index: "empty" for index in special[:EMPTY_BODIES_PER_DAY]}
    roles.update({index: "long" for index in special[EMPTY_BODIES_PER_DAY:]})
    articles = [(article, roles.get(index, "normal")) for index, article in enumerate(new)]
    articles += [(article, "normal") for article in reedits]
    rng.shuffle(articles)
    # Candidates for "Related articles": same language and topic family, in catalogue order.
    neighbours: dict[tuple[str, str], list[_Article]] = defaultdict(list)
    for other in catalogue:
        neighbours[(other.language, K["topic_family"][other.topic])].append(other)
    seconds = sorted(T.second_of_day(rng, HOUR_WEIGHTS) for _ in articles)
    midnight = datetime.combine(day, time())
    for (article, role), second in zip(articles, seconds):
        body = "" if role == "empty" else _article_body(seed, article, day, neighbours, long=role == "long")
        T.append_row(
            columns,
            article.article_id,
            day,
            midnight + timedelta(seconds=second),
            article.product,
            article.language,
            article.title,
            body,
        )


# --- one article -----------------------------------------------------------------------------------


def _slots(base: random.Random, edit: random.Random, article: _Article) -> dict[str, str]:
    lang = article.language
    plan, plan2 = base.sample(P["plans"][lang], 2)
    device = base.choice(_DEVICE_NAMES)
    return {
        "product": article.product,
        "sso": article.sso,
        "plan": plan,
        "plan2": plan2,
        "device": device,
        "os": base.choice(P["devices"][device]),
        "browser": base.choice(P["browsers"]),
        "error": base.choice(P["error_codes"]),
        "http": base.choice(P["http_errors"]),
        "endpoint": base.choice(P["endpoints"]),
        "seconds": str(base.choice((30, 60, 120))),
        "country": base.choice(P["vat_countries"] if lang == "en" else K["vat_countries_zh"]),
        "days": str(base.choice((3, 5, 7, 14))),
        # What an edit typically touches: version numbers and small figures.
        "version": _version(edit),
        "n": str(edit.randint(2, 6)),
    }


def _version(rng: random.Random) -> str:
    return f"{rng.randint(5, 6)}.{rng.randint(0, 24)}.{rng.randint(0, 9)}"


def _format_date(lang: str, value: date) -> str:
    if lang == "zh":
        return f"{value.year}年{value.month}月{value.day}日"
    return f"{_MONTHS[value.month - 1]} {value.day}, {value.year}"


def _numbered(procedure: dict, slots: dict[str, str]) -> str:
    """A procedure ({heading, steps}) as a Markdown section with a numbered list."""
    steps = [f"{number}. {step.format_map(slots)}" for number, step in enumerate(procedure["steps"], 1)]
    return "\n".join([f"## {procedure['heading']}", "", *steps])


def _article_body(
    seed: int, article: _Article, day: date, neighbours: dict[tuple[str, str], list[_Article]], *, long: bool
) -> str:
    """The article as edited on ``day``: a skeleton fixed per article, varied a little per edit."""
    lang, bank = article.language, K["articles"][article.language][article.topic]
    base = random.Random(f"{seed}:kb_articles:{article.article_id}:skeleton")
    edit = random.Random(f"{seed}:kb_articles:{article.article_id}:{day.isoformat()}")
    slots = _slots(base, edit, article)
    heads = K["headings"][lang]
    family = K["topic_family"][article.topic]

    procedures = list(bank["procedures"])
    base.shuffle(procedures)
    trouble = list(bank["troubleshooting"])
    base.shuffle(trouble)
    related = [other for other in neighbours[(lang, family)] if other.article_id != article.article_id]
    related = base.sample(related, base.randint(2, 4))
    scope = base.choice(K["plan_scopes"][lang])
    blocks = _Blocks(article, slots, heads, K["before_you_begin"][family][lang], scope, related)

    # Candidate blocks in the order they are considered; the layout order is fixed in `_layout`.
    candidates: list[tuple[str, object]] = [("trouble", item) for item in trouble[2:]]
    candidates += [("section", item) for item in bank["sections"]]
    candidates += [("procedure", item) for item in procedures[1:]]
    candidates += [("generic", item) for item in K["generic_sections"][lang]]
    candidates += [
        ("before", None),
        ("callout", base.choice(K["callouts"][lang])),
        ("applies", None),
        ("related", None),
    ]
    base.shuffle(candidates)
    target = _edited_target(base, edit, candidates, long=long)

    footer = heads["updated"].format(date=_format_date(lang, day))
    core = {
        "title": f"# {article.title}",
        "intro": base.choice(bank["intros"]).format_map(slots),
        "procedure1": _numbered(procedures[0], slots),
        "trouble_heading": f"## {heads['troubleshooting']}",
        "footer": footer,
    }
    core_troubles = [blocks.render("trouble", item) for item in trouble[:2]]
    size = sum(article_words(text, lang) for text in (*core.values(), *core_troubles))
    chosen = _chosen_blocks(edit, blocks, candidates, size, target)
    body = _layout(core, core_troubles, chosen)
    if long:
        body += "\n\n" + _appendix(edit, lang, family, slots, day)
    return f"{body}\n\n{footer}"


@dataclass(frozen=True)
class _Blocks:
    """Renders an article's blocks as Markdown; rendering draws nothing from the RNGs."""

    article: _Article
    slots: dict[str, str]
    heads: dict[str, str]
    befores: list[str]
    scope: str
    related: list[_Article]

    def render(self, kind: str, item) -> str:
        slots, heads = self.slots, self.heads
        if kind == "trouble":
            return f"**{item['symptom'].format_map(slots)}**\n{item['fix'].format_map(slots)}"
        if kind in ("section", "generic"):
            return f"## {item['heading']}\n\n{item['text'].format_map(slots)}"
        if kind == "procedure":
            return _numbered(item, slots)
        if kind == "before":
            return f"## {heads['before']}\n\n" + "\n".join(f"- {b.format_map(slots)}" for b in self.befores)
        if kind == "callout":
            return item.format_map(slots)
        if kind == "applies":
            return "> " + heads["applies"].format(product=self.article.product, plans=self.scope)
        if kind == "related":
            links = "\n".join(f"- [{other.title}](/hc/articles/{other.article_id})" for other in self.related)
            return f"## {heads['related']}\n\n{links}"
        raise AssertionError(kind)


def _edited_target(
    base: random.Random, edit: random.Random, candidates: list[tuple[str, object]], *, long: bool
) -> float:
    """The body's length target in words. An edit makes the article a little longer or shorter, and
    may drop one candidate block and move another (``candidates`` is changed in place)."""
    target = base.triangular(MIN_WORDS, MAX_WORDS, 420)
    target = min(MAX_WORDS, max(MIN_WORDS, target * edit.uniform(0.85, 1.2)))
    if edit.random() < 0.5:
        candidates.pop(edit.randrange(len(candidates)))
    i = edit.randrange(len(candidates) - 1)
    candidates[i], candidates[i + 1] = candidates[i + 1], candidates[i]
    if long:
        return MAX_WORDS
    return target


def _chosen_blocks(
    edit: random.Random, blocks: _Blocks, candidates: list[tuple[str, object]], size: int, target: float
) -> list[tuple[str, str]]:
    """(kind, text) of the blocks added to the core: maybe an edit note, then candidates in order until
    the body of ``size`` words reaches ``target``, skipping any that would exceed ``MAX_WORDS``."""
    lang = blocks.article.language
    chosen: list[tuple[str, str]] = []
    if edit.random() < 0.3:
        note = edit.choice(K["edit_notes"][lang]).format_map(blocks.slots)
        chosen.append(("edit_note", note))
        size += article_words(note, lang)
    for kind, item in candidates:
        if size >= target:
            break
        text = blocks.render(kind, item)
        words = article_words(text, lang)
        if size + words <= MAX_WORDS:
            chosen.append((kind, text))
            size += words
    return chosen


def _layout(core: dict[str, str], core_troubles: list[str], chosen: list[tuple[str, str]]) -> str:
    """The body without its footer: the core and the chosen blocks in their fixed order."""

    def picked(*kinds: str) -> list[str]:
        return [text for kind, text in chosen if kind in kinds]

    parts = [
        core["title"],
        *picked("applies"),
        core["intro"],
        *picked("edit_note"),
        *picked("callout"),
        *picked("before"),
        core["procedure1"],
        *picked("procedure"),
        *picked("section", "generic"),
        core["trouble_heading"],
        *core_troubles,
        *picked("trouble"),
        *picked("related"),
    ]
    return "\n\n".join(parts)


# --- the very long article -------------------------------------------------------------------------


def _appendix(rng: random.Random, lang: str, family: str, slots: dict[str, str], day: date) -> str:
    """A long reference appendix: an error-code table (technical articles) or a release history."""
    target = rng.randint(LONG_BODY_MIN_CHARS + 2_000, 60_000)
    texts = K["appendix"][lang]
    if family == "technical":
        lines = [texts["errors_heading"], "", texts["errors_intro"], "", texts["errors_header"]]
        size = sum(len(line) + 1 for line in lines)
        codes = sorted(
            rng.sample([f"{area}-{number}" for area in K["error_areas"] for number in range(100, 1000)], k=2_000)
        )
        for code in codes:
            if size >= target:
                break
            kind = rng.randrange(len(K["error_messages"][lang]))
            area = K["error_area_context"][lang][code.split("-")[0]]
            line = (
                f"| `{code}` | {K['error_messages'][lang][kind]} | {area}{K['error_meanings'][lang][kind]} | "
                f"{K['error_actions'][lang][kind]} |"
            )
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)
    lines = [texts["changelog_heading"], "", texts["changelog_intro"]]
    size = sum(len(line) + 1 for line in lines)
    major, minor, patch = 6, rng.randint(10, 24), rng.randint(0, 9)
    released = day
    while size < target:
        block = [
            "",
            texts["version_heading"].format(version=f"{major}.{minor}.{patch}", date=_format_date(lang, released)),
            "",
        ]
        for template in rng.sample(K["changelog_items"][lang], rng.randint(2, 5)):
            values = {
                **slots,
                "version": f"{major}.{minor}.{patch}",
                "n": str(rng.choice((1, 2, 12, 24, 48))),
                "error": rng.choice(P["error_codes"]),
                "device": rng.choice(_DEVICE_NAMES),
            }
            block.append(f"- {template.format_map(values)}")
        lines += block
        size += sum(len(line) + 1 for line in block)
        released -= timedelta(days=rng.randint(6, 21))
        if patch:
            patch -= 1
        elif minor:
            minor, patch = minor - 1, rng.randint(2, 6)
        else:
            major, minor, patch = major - 1, 24, rng.randint(2, 6)
    return "\n".join(lines)
