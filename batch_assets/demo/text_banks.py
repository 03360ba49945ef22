"""The demo seeders' text banks: vocabularies and templates, kept as data in ``data/*.json``.

One JSON file per seeder, each an object of named entries (the keys are listed in ``BANK_KEYS``):

``support_tickets.json`` (``seed.py``)
    Slot vocabularies (products, plans, prices, devices -> the operating systems each can run, ...),
    names (``zh_surnames`` / ``zh_given_names`` are [hanzi, pinyin] pairs, so e-mail addresses can be
    derived from Chinese names), ``tickets`` per language and theme as {subjects, problem} (a
    subject is picked from its own problem's variants, or sometimes from the vague
    ``generic_subjects``), per-channel framing, and the only templates allowed to carry personal
    data (``pii_*``) or every JSON/SQL-escaping hazard at once (``hazards``). No other template may
    contain an e-mail address, a phone number or a long digit run: the sensitive-data share of the
    demo table is controlled by the generator alone. ``web_forms`` wrap the already-filled problem
    ({problem}); ``resubmit_notes`` end the second copy of a double-submitted web form;
    ``log_stack_frames`` follow ERROR lines of the pasted logs, without a timestamp.
``kb_articles.json`` (``seed_kb.py``)
    Topic ``families``; ``topic_products`` (a topic's possible products, or "all" for every product
    of the support-ticket bank); ``articles`` per language and topic: titles, intros, procedures as
    {heading, steps}, sections as {heading, text}, troubleshooting as {symptom, fix}; the generic
    blocks shared by every topic; the texts of the long appendices (error-code table, release
    history). Titles may use {product} and {sso} only: those two are fixed per article, the other
    slots may change with an edit. Literal braces (JSON in code blocks) are doubled.
    ``vat_countries_zh`` fill {country} in Chinese articles (English ones use the ticket bank's
    ``vat_countries``); one of the ``edit_notes`` may open a re-edited article; ``error_area_context``
    prefixes the meaning of each code of an area, and ``error_messages`` / ``error_meanings`` /
    ``error_actions`` pair up by position.
``product_reviews.json`` (``seed_reviews.py``)
    ``products``: listing -> {category, usd, cny (list prices), weight (how often it is reviewed,
    relative to the others)}; sentence pools per language, category and tone; one-liners, titles,
    emoji, and the pieces of the long usage diary. English sentences end with their own punctuation
    and are joined with a space; Chinese ones end with 。！？ or an emoji and are joined without one.
    Every sentence outside the ``emoji*`` pools contains letters. ``returns`` is the strongly negative
    pool (dead on arrival, refunds); ``connectors`` lead into the second half of a mixed review, by
    that half's tone; ``sarcasm`` (positive words, negative meaning) goes only under 1-2 stars and
    ``five_star_complaints`` only under 5; in ``diary_headings`` {days} is the diary's running day
    count, and diary entries mix ``diary_notes`` with the category's aspect sentences.

Templates are ``str.format_map`` strings over the slot names each seeder's ``_slots`` produces (the
demo-seed tests check every template against them). Text is UTF-8; combining marks, variation
selectors and format characters (zero-width joiner, right-to-left mark) are written as ``\\uXXXX``
escapes so they stay visible and survive editors that normalise text.

The loaders return JSON arrays as tuples, at every depth (sequences a seeder cannot reorder or extend
by accident), and objects as dicts in file order, which the seeders rely on where they draw from a
mapping's keys. Each file is read once per process; callers must not modify what they get.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

Bank = dict[str, Any]

DATA_PACKAGE = "batch_assets.demo"
DATA_DIR = "data"
BANK_KEYS = {
    "support_tickets.json": (
        "themes",
        "products",
        "plans",
        "prices",
        "currencies",
        "error_codes",
        "http_errors",
        "devices",
        "browsers",
        "endpoints",
        "sso_providers",
        "vat_countries",
        "companies",
        "features",
        "en_first_names",
        "en_last_names",
        "zh_surnames",
        "zh_given_names",
        "email_domains",
        "tickets",
        "generic_subjects",
        "details",
        "greetings",
        "asks",
        "closings",
        "chat_openers",
        "agent_notes",
        "web_forms",
        "phone_headers",
        "subject_prefixes",
        "resubmit_notes",
        "pii_email",
        "pii_phone",
        "pii_card",
        "combining_names",
        "zwj_emoji",
        "emoji",
        "rtl_text",
        "windows_users",
        "file_names",
        "hazards",
        "long_intros",
        "long_outros",
        "log_components",
        "log_messages",
        "log_stack_frames",
    ),
    "kb_articles.json": (
        "families",
        "topic_products",
        "topic_weights",
        "vat_countries_zh",
        "articles",
        "headings",
        "plan_scopes",
        "before_you_begin",
        "callouts",
        "generic_sections",
        "edit_notes",
        "appendix",
        "error_areas",
        "error_area_context",
        "error_messages",
        "error_meanings",
        "error_actions",
        "changelog_items",
    ),
    "product_reviews.json": (
        "products",
        "item",
        "aspects",
        "pos",
        "neg",
        "neutral",
        "logistics",
        "service",
        "value",
        "returns",
        "openers",
        "closers",
        "connectors",
        "updates",
        "short",
        "sarcasm",
        "five_star_complaints",
        "titles",
        "emoji",
        "emoji_only",
        "long_titles",
        "long_intros",
        "diary_headings",
        "diary_notes",
        "long_verdicts",
    ),
}


def support_tickets() -> Bank:
    """The bank of ``seed.py`` (``data/support_tickets.json``)."""
    return _load("support_tickets.json")


@cache
def kb_articles() -> Bank:
    """The bank of ``seed_kb.py`` (``data/kb_articles.json``), plus ``topic_family`` (topic -> its family,
    derived from ``families``) and ``topic_products`` with "all" spelt out as the support-ticket products."""
    bank = dict(_load("kb_articles.json"))
    bank["topic_family"] = {topic: family for family, topics in bank["families"].items() for topic in topics}
    every_product = support_tickets()["products"]
    bank["topic_products"] = {
        topic: every_product if products == "all" else products for topic, products in bank["topic_products"].items()
    }
    return bank


def product_reviews() -> Bank:
    """The bank of ``seed_reviews.py`` (``data/product_reviews.json``)."""
    return _load("product_reviews.json")


@cache
def _load(name: str) -> Bank:
    text = resources.files(DATA_PACKAGE).joinpath(DATA_DIR, name).read_text(encoding="utf-8")
    bank = _frozen(json.loads(text))
    if tuple(bank) != BANK_KEYS[name]:
        raise ValueError(f"{DATA_DIR}/{name}: expected the entries {BANK_KEYS[name]}, found {tuple(bank)}")
    return bank


def _frozen(value):
    """JSON arrays as tuples, at every depth; objects stay dicts (in file order)."""
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, dict):
        return {key: _frozen(item) for key, item in value.items()}
    return value
