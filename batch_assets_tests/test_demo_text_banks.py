"""The demo text banks (``batch_assets/demo/data/*.json``): they load, and have the shape the seeders use."""

import json
import unicodedata
from importlib import resources

import pytest

from batch_assets.demo import text_banks

LANGUAGES = {"en", "zh"}
LOADERS = {
    "support_tickets.json": text_banks.support_tickets,
    "kb_articles.json": text_banks.kb_articles,
    "product_reviews.json": text_banks.product_reviews,
}


def _raw(name: str) -> str:
    return resources.files(text_banks.DATA_PACKAGE).joinpath(text_banks.DATA_DIR, name).read_text(encoding="utf-8")


def _lists(value, path: str = "") -> list[str]:
    """Paths of every list left in a loaded bank (there should be none: arrays load as tuples)."""
    if isinstance(value, list):
        return [path]
    if isinstance(value, tuple):
        return [p for i, item in enumerate(value) for p in _lists(item, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _lists(item, f"{path}.{key}")]
    return []


def test_the_data_files_are_the_banks():
    files = {
        entry.name
        for entry in resources.files(text_banks.DATA_PACKAGE).joinpath(text_banks.DATA_DIR).iterdir()
        if entry.name.endswith(".json")
    }
    assert files == set(LOADERS) == set(text_banks.BANK_KEYS)


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_bank_loads_once_with_its_entries_and_no_lists(name):
    bank = LOADERS[name]()
    assert LOADERS[name]() is bank
    assert tuple(json.loads(_raw(name))) == text_banks.BANK_KEYS[name]
    derived = ("topic_family",) if name == "kb_articles.json" else ()
    assert tuple(bank) == text_banks.BANK_KEYS[name] + derived
    assert _lists(bank) == []


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_text_is_utf8_with_invisible_characters_escaped(name):
    raw = _raw(name)
    # Chinese (and every other visible character) as itself, never as an escape ...
    assert "\\u4" not in raw and "\\u5" not in raw and "\\u6" not in raw and "\\u7" not in raw
    assert any("\u4e00" <= ch <= "\u9fff" for ch in raw)
    # ... but marks and format characters (ZWJ, RLM, combining accents, VS16) only as escapes.
    hidden = {ch for ch in raw if unicodedata.category(ch) in ("Mn", "Me", "Cf")}
    assert hidden == set(), sorted(f"U+{ord(ch):04X}" for ch in hidden)


def test_support_ticket_bank_shape():
    bank = text_banks.support_tickets()
    themes = set(bank["themes"])
    assert themes == {"billing", "technical", "account"}
    for key in ("tickets", "generic_subjects", "details"):
        assert set(bank[key]) == LANGUAGES, key
        assert all(set(bank[key][lang]) == themes for lang in LANGUAGES), key
    for lang in LANGUAGES:
        for theme in themes:
            for ticket in bank["tickets"][lang][theme]:
                assert set(ticket) == {"subjects", "problem"}
                assert ticket["subjects"] and all(isinstance(s, str) for s in ticket["subjects"])
    assert all(isinstance(price, float) for lang in LANGUAGES for price in bank["prices"][lang])
    assert all(len(pair) == 2 for key in ("zh_surnames", "zh_given_names") for pair in bank[key])
    assert all(systems for systems in bank["devices"].values())
    for key in (
        "plans",
        "currencies",
        "sso_providers",
        "companies",
        "features",
        "email_domains",
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
        "hazards",
        "long_intros",
        "long_outros",
    ):
        assert set(bank[key]) == LANGUAGES, key


def test_kb_bank_shape():
    bank = text_banks.kb_articles()
    topics = list(bank["topic_weights"])
    assert sorted(topics) == sorted(bank["topic_family"]) == sorted(bank["topic_products"])
    assert set(bank["topic_family"].values()) == set(bank["families"])
    every_product = text_banks.support_tickets()["products"]
    assert all(products and set(products) <= set(every_product) for products in bank["topic_products"].values())
    assert sum(products == every_product for products in bank["topic_products"].values()) >= 1  # "all", spelt out
    assert set(bank["articles"]) == LANGUAGES
    for lang in LANGUAGES:
        assert list(bank["articles"][lang]) == topics
        for topic, article in bank["articles"][lang].items():
            assert set(article) == {"titles", "intros", "procedures", "sections", "troubleshooting"}, topic
            assert all(set(p) == {"heading", "steps"} and p["steps"] for p in article["procedures"])
            assert all(set(s) == {"heading", "text"} for s in article["sections"])
            assert all(set(t) == {"symptom", "fix"} for t in article["troubleshooting"])
            assert len(article["troubleshooting"]) >= 2 and article["procedures"]
        assert all(set(s) == {"heading", "text"} for s in bank["generic_sections"][lang])
        # The appendix tables pair messages, meanings and actions by position.
        assert (
            len(bank["error_messages"][lang]) == len(bank["error_meanings"][lang]) == len(bank["error_actions"][lang])
        )
        assert set(bank["error_area_context"][lang]) == set(bank["error_areas"])
    assert set(bank["before_you_begin"]) == set(bank["families"])


def test_review_bank_shape():
    bank = text_banks.product_reviews()
    categories = set(bank["item"]["en"])
    for name, listing in bank["products"].items():
        assert set(listing) == {"category", "usd", "cny", "weight"}, name
        assert listing["category"] in categories, name
        assert all(isinstance(listing[key], int) and listing[key] > 0 for key in ("usd", "cny", "weight")), name
    assert {listing["category"] for listing in bank["products"].values()} == categories
    for lang in LANGUAGES:
        assert set(bank["item"][lang]) == categories
        assert set(bank["aspects"][lang]) == categories
        assert all(set(tones) == {"pos", "neg"} for tones in bank["aspects"][lang].values())
        assert set(bank["short"][lang]) == set(bank["closers"][lang]) == {"pos", "neg", "neutral", "mixed"}
    assert set(bank["emoji"]) == set(bank["emoji_only"]) == {"pos", "neg", "neutral"}
