"""Deterministic demo business data: the DuckDB table ``main.support_tickets``.

The table stands in for the support queue of a SaaS company ("Lumen") and is the input of the
ticket-classification task. Columns (in this order):

    ticket_id VARCHAR        TK-<yyyymmdd>-<daily sequence, 6 digits>, e.g. TK-20261120-000123
    created_date DATE        the partition key; one partition per seeded day
    created_at TIMESTAMP     within created_date, weighted towards business hours
    channel VARCHAR          'email' | 'chat' | 'phone' | 'web'
    language VARCHAR         'en' | 'zh' (about 65 % / 35 %)
    customer_name VARCHAR
    customer_email VARCHAR   always on an example.* domain
    subject VARCHAR          never NULL
    body VARCHAR             see the edge cases below

Bodies are slot-filled from the templates in ``data/support_tickets.json`` (see ``text_banks.py``)
around three themes (billing, technical, account) in English and Simplified Chinese, framed per
channel (e-mail, chat, call notes, web form). The theme is not stored: recovering it is the
classification task's job.

Deliberate properties, on every seeded day (tested in ``batch_assets_tests/test_demo_seed.py``):

* exactly ``per_day`` rows, of which exactly one ticket_id appears twice (a double-submitted web
  form: same id, customer and subject, later created_at, different body text);
* personal data in 9-11 % of the rows' bodies (so the share stays inside 8-12 %): an e-mail address
  on an example.* domain and/or a phone number (Chinese mobile such as ``138 1234 5678`` /
  ``+86 13812345678``, or US ``+1 (415) 555-0134``), and in exactly 3 of them a 16-digit
  Luhn-valid card-like number. No other body contains anything of that shape, so the PII share is
  known exactly for testing a sensitive-data gate;
* exactly 2 bodies that are ``''``, exactly 1 that is NULL;
* exactly 2 bodies longer than 40,000 characters (a pasted log dump and a pasted JSON response);
* exactly 5 bodies that each combine every JSON/SQL-escaping hazard: an emoji, a zero-width-joiner
  emoji sequence, an RTL mark next to Arabic/Hebrew text, a combining accent, double quotes,
  backslashes, a tab and newlines.

Determinism: content depends only on (seed, date, per_day). Each day draws from its own
``random.Random(f"{seed}:{date}")`` (string seeds are hashed with SHA-512, not ``hash()``), so the
output is identical across runs and PYTHONHASHSEED values, and seeding fewer days yields exactly a
prefix of seeding more. Re-seeding replaces the table in one ``CREATE OR REPLACE TABLE`` statement.
"""

from __future__ import annotations

import json
import random
import unicodedata
from datetime import date, datetime, time, timedelta

import duckdb
import pyarrow as pa

from batch_assets.demo import tables as T
from batch_assets.demo import text_banks

P = text_banks.support_tickets()  # the text bank, data/support_tickets.json

TABLE = "main.support_tickets"
DEFAULT_START_DATE = date(2026, 11, 20)

EMPTY_BODIES_PER_DAY = 2
NULL_BODIES_PER_DAY = 1
HAZARD_BODIES_PER_DAY = 5
CARD_BODIES_PER_DAY = 3
PII_SHARE_RANGE = (0.09, 0.11)
LONG_BODY_MIN_CHARS = 40_000
# Below this the fixed per-day edge cases would crowd out ordinary tickets.
MIN_PER_DAY = 50

ZH_SHARE = 0.35
THEME_WEIGHTS = (35, 40, 25)  # billing, technical, account
CHANNELS = ("email", "web", "chat", "phone")
CHANNEL_WEIGHTS = (40, 30, 20, 10)
HOUR_WEIGHTS = (1, 1, 1, 1, 1, 2, 3, 6, 9, 11, 12, 11, 9, 10, 11, 10, 9, 7, 5, 4, 3, 3, 2, 1)
CUSTOMERS_PER_LANGUAGE = {"en": 3000, "zh": 1600}  # small enough that customers come back

_ARROW_SCHEMA = pa.schema(
    [
        ("ticket_id", pa.string()),
        ("created_date", pa.date32()),
        ("created_at", pa.timestamp("us")),
        ("channel", pa.string()),
        ("language", pa.string()),
        ("customer_name", pa.string()),
        ("customer_email", pa.string()),
        ("subject", pa.string()),
        ("body", pa.string()),
    ]
)
# Fixed month names: strftime("%b") would follow the process locale.
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
_DEVICE_NAMES = tuple(P["devices"])
_DAY_SECONDS = 86_400
_RESUBMIT_MAX_DELAY = 120


def demo_partition_dates(start_date: date = DEFAULT_START_DATE, days: int = 7) -> list[str]:
    """ISO dates (``created_date`` partitions) that ``seed_support_tickets`` writes."""
    return [day.isoformat() for day in T.seeded_days(start_date, days)]


def seed_support_tickets(
    conn: duckdb.DuckDBPyConnection,
    *,
    start_date: date = DEFAULT_START_DATE,
    days: int = 7,
    per_day: int = 1200,
    seed: int = 20261120,
) -> int:
    """(Re)create ``main.support_tickets`` with ``days * per_day`` demo tickets; returns rows written."""
    T.check_size(days, per_day, MIN_PER_DAY)
    customers = _customers(seed)
    rows = T.build_rows(
        _ARROW_SCHEMA, start_date, days, lambda columns, day: _append_day(columns, day, per_day, seed, customers)
    )
    return T.replace_table(conn, TABLE, rows, order_by="created_at, ticket_id")


# --- one day ---------------------------------------------------------------------------------------


def _append_day(columns: dict[str, list], day: date, per_day: int, seed: int, customers: dict) -> None:
    rng = random.Random(f"{seed}:{day.isoformat()}")
    # One id is submitted twice, so a day holds per_day rows but per_day - 1 distinct tickets.
    seconds = sorted(T.second_of_day(rng, HOUR_WEIGHTS) for _ in range(per_day - 1))
    roles = _assign_roles(rng, seconds, per_day)
    midnight = datetime.combine(day, time())

    def add(ticket_id, second, channel, lang, customer, subject, body):
        name, email, _ = customer
        T.append_row(
            columns, ticket_id, day, midnight + timedelta(seconds=second), channel, lang, name, email, subject, body
        )

    for index, second in enumerate(seconds):
        role = roles.get(index, "normal")
        ticket_id = f"TK-{day:%Y%m%d}-{index + 1:06d}"
        lang = "zh" if rng.random() < ZH_SHARE else "en"
        customer = rng.choice(customers[lang])
        theme = "technical" if role.startswith("long") else rng.choices(P["themes"], THEME_WEIGHTS)[0]
        channel = _channel(rng, role)
        slots = _slots(rng, lang, day)
        ticket = rng.choice(P["tickets"][lang][theme])
        subject = _subject(rng, lang, theme, ticket["subjects"], slots)
        body = _body(rng, role, lang, channel, theme, ticket["problem"].format_map(slots), slots, customer[2], day)
        add(ticket_id, second, channel, lang, customer, subject, body)
        if role == "duplicate":
            note = rng.choice(P["resubmit_notes"][lang]).format(detail=_details(rng, lang, theme, slots, 1))
            add(
                ticket_id,
                second + rng.randint(5, _RESUBMIT_MAX_DELAY),
                channel,
                lang,
                customer,
                subject,
                f"{body}\n\n{note}",
            )


def _assign_roles(rng: random.Random, seconds: list[int], per_day: int) -> dict[int, str]:
    """Map ticket index -> edge-case role; the fixed counts make every day carry every edge case."""
    n_pii = round(per_day * rng.uniform(*PII_SHARE_RANGE))
    quotas = (
        ("empty", EMPTY_BODIES_PER_DAY),
        ("null", NULL_BODIES_PER_DAY),
        ("long_log", 1),
        ("long_json", 1),  # two very long bodies: a log dump and a JSON dump
        ("hazard", HAZARD_BODIES_PER_DAY),
        ("card", CARD_BODIES_PER_DAY),
        ("pii", n_pii - CARD_BODIES_PER_DAY),
    )
    # The resubmission must still fall on the same day.
    latest = _DAY_SECONDS - _RESUBMIT_MAX_DELAY
    duplicate = rng.choice([i for i, second in enumerate(seconds) if second < latest])
    picked = iter(rng.sample([i for i in range(len(seconds)) if i != duplicate], sum(k for _, k in quotas)))
    roles = {duplicate: "duplicate"}
    for role, count in quotas:
        for _ in range(count):
            roles[next(picked)] = role
    return roles


def _channel(rng: random.Random, role: str) -> str:
    if role == "duplicate":
        return "web"
    if role == "empty":  # a form sent with only the subject, a chat closed before typing
        return rng.choice(("web", "chat"))
    if role == "null":  # call without notes, e-mail that was only an attachment
        return rng.choice(("phone", "email"))
    if role.startswith("long"):  # nobody pastes 40k characters into a chat or a phone call
        return rng.choice(("email", "web"))
    return rng.choices(CHANNELS, CHANNEL_WEIGHTS)[0]


# --- text --------------------------------------------------------------------------------------


def _slots(rng: random.Random, lang: str, day: date) -> dict[str, str]:
    low, high = sorted(rng.sample(P["prices"][lang], 2))
    currency = rng.choice(P["currencies"][lang])
    plan, plan2 = rng.sample(P["plans"][lang], 2)
    device = rng.choice(_DEVICE_NAMES)
    return {
        "product": rng.choice(P["products"]),
        "plan": plan,
        "plan2": plan2,
        "amount": _money(rng, lang, currency, high),
        "amount2": _money(rng, lang, currency, low),
        "order": f"ORD-{rng.randint(100000, 999999)}",
        "invoice": f"INV-{day.year}-{rng.randint(1, 9999):04d}",
        "error": rng.choice(P["error_codes"]),
        "http": rng.choice(P["http_errors"]),
        "device": device,
        "os": rng.choice(P["devices"][device]),
        "browser": rng.choice(P["browsers"]),
        "version": f"{rng.randint(4, 6)}.{rng.randint(0, 24)}.{rng.randint(0, 9)}",
        "date": _format_date(rng, lang, day - timedelta(days=rng.randint(1, 40))),
        "endpoint": rng.choice(P["endpoints"]),
        "seconds": str(rng.choice((10, 30, 60, 120))),
        "n": str(rng.randint(2, 12)),
        "files": str(rng.choice((12, 48, 200, 350, 1200, 5000, 20000))),
        "seats": str(rng.randint(3, 250)),
        "sso": rng.choice(P["sso_providers"][lang]),
        "country": rng.choice(P["vat_countries"]),
        "company": rng.choice(P["companies"][lang]),
        # Chinese unified social credit code shape; the letters keep digit runs short.
        "tax_id": f"91{rng.randint(110000, 659999)}MA{''.join(rng.choices('0123456789ABCDEFGHJKLMNPQRTUWXY', k=8))}",
        "last4": f"{rng.randrange(10000):04d}",
        "feature": rng.choice(P["features"][lang]),
    }


def _money(rng: random.Random, lang: str, currency: str, amount: float) -> str:
    if lang == "zh" and rng.random() < 0.3:
        return f"{amount:,.0f}元"
    return f"{currency}{amount:,.2f}"


def _format_date(rng: random.Random, lang: str, value: date) -> str:
    if lang == "zh":
        return rng.choice((f"{value.month}月{value.day}日", value.isoformat()))
    month = _MONTHS[value.month - 1]
    return rng.choice((f"{month[:3]} {value.day}", f"{value.day} {month}", value.isoformat()))


def _subject(rng: random.Random, lang: str, theme: str, variants: tuple[str, ...], slots: dict[str, str]) -> str:
    # Customers do not always write a subject that matches their message.
    pool = P["generic_subjects"][lang][theme] if rng.random() < 0.12 else variants
    subject = rng.choice(pool).format_map(slots)
    if rng.random() < 0.15:
        subject = rng.choice(P["subject_prefixes"][lang]).format_map(slots) + subject
    return subject


def _details(rng: random.Random, lang: str, theme: str, slots: dict[str, str], count: int) -> str:
    separator = " " if lang == "en" else ""
    return separator.join(d.format_map(slots) for d in rng.sample(P["details"][lang][theme], count))


def _body(rng, role, lang, channel, theme, problem, slots, signoff, day) -> str | None:
    if role == "empty":
        return ""
    if role == "null":
        return None
    if role == "long_log":
        return _long_body(rng, lang, problem, _log_dump(rng, day))
    if role == "long_json":
        return _long_body(rng, lang, problem, _json_dump(rng, day))
    if role == "hazard":
        return _hazard_body(rng, lang, problem, slots, signoff)
    if role in ("pii", "card"):
        kind = "card" if role == "card" else rng.choices(("email", "phone", "both"), (45, 40, 15))[0]
        problem += (" " if lang == "en" else "") + _pii_sentence(rng, lang, kind)
    return _frame(rng, lang, channel, theme, problem, slots, signoff)


def _frame(rng, lang, channel, theme, problem, slots, signoff) -> str:
    """Wrap a problem statement the way the given channel would deliver it."""
    detail_count = rng.choices((0, 1, 2), (3, 5, 2))[0]
    details = _details(rng, lang, theme, slots, detail_count)
    separator = " " if lang == "en" else ""
    text = separator.join(part for part in (problem, details) if part)
    if channel == "email":
        parts = (
            rng.choice(P["greetings"][lang]),
            text,
            rng.choice(P["asks"][lang]),
            f"{rng.choice(P['closings'][lang])}\n{signoff}",
        )
        return "\n\n".join(part for part in parts if part)
    if channel == "chat":
        return "\n".join(part for part in (rng.choice(P["chat_openers"][lang]), problem, details) if part)
    if channel == "phone":
        header = P["phone_headers"][lang].format(minutes=rng.randint(2, 25))
        return f"{header}{text}\n{rng.choice(P['agent_notes'][lang])}"
    return rng.choice(P["web_forms"][lang]).format_map({**slots, "problem": text})


def _hazard_body(rng, lang, problem, slots, signoff) -> str:
    values = {
        **slots,
        "problem": problem,
        "greeting": rng.choice([g for g in P["greetings"][lang] if g]),
        "closing": rng.choice(P["closings"][lang]),
        "name": signoff,
        "combining_name": rng.choice(P["combining_names"]),
        "zwj_emoji": rng.choice(P["zwj_emoji"]),
        "emoji": rng.choice(P["emoji"]),
        "rtl_text": rng.choice(P["rtl_text"]),
        "user": rng.choice(P["windows_users"]),
        "file": rng.choice(P["file_names"]),
        "kb": str(rng.randint(12, 9000)),
    }
    return rng.choice(P["hazards"][lang]).format_map(values)


# --- personal data ---------------------------------------------------------------------------------


def _pii_sentence(rng: random.Random, lang: str, kind: str) -> str:
    if kind == "card":
        return rng.choice(P["pii_card"][lang]).format(pii_card=_card_number(rng))
    email = rng.choice(P["pii_email"][lang]).format(pii_email=_email(rng, lang, _person(rng, lang)[1]))
    us_share = 0.8 if lang == "en" else 0.05
    number = _us_phone(rng) if rng.random() < us_share else _cn_mobile(rng)
    phone = rng.choice(P["pii_phone"][lang]).format(pii_phone=number)
    if kind == "email":
        return email
    if kind == "phone":
        return phone
    return email + (" " if lang == "en" else "") + phone


def _us_phone(rng: random.Random) -> str:
    # 555-01xx is the range reserved for fictional use.
    area = rng.choice((206, 212, 305, 312, 415, 503, 617, 646, 702, 718))
    line = f"01{rng.randrange(100):02d}"
    return rng.choice(
        (f"+1 ({area}) 555-{line}", f"({area}) 555-{line}", f"{area}-555-{line}", f"+1 {area} 555 {line}")
    )


def _cn_mobile(rng: random.Random) -> str:
    prefix = rng.choice(
        (
            "130",
            "133",
            "135",
            "136",
            "138",
            "139",
            "150",
            "152",
            "158",
            "159",
            "176",
            "177",
            "180",
            "186",
            "187",
            "188",
            "189",
            "199",
        )
    )
    middle, last = f"{rng.randrange(10000):04d}", f"{rng.randrange(10000):04d}"
    return rng.choice(
        (
            f"{prefix} {middle} {last}",
            f"+86 {prefix}{middle}{last}",
            f"{prefix}{middle}{last}",
            f"{prefix}-{middle}-{last}",
            f"+86 {prefix} {middle} {last}",
        )
    )


def _card_number(rng: random.Random) -> str:
    digits = [4] + [rng.randrange(10) for _ in range(14)]
    # Luhn check digit, so detectors that validate checksums fire too.
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2 == 0:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    number = "".join(map(str, digits)) + str(-total % 10)
    groups = [number[i : i + 4] for i in range(0, 16, 4)]
    return rng.choice((" ".join(groups), "-".join(groups), number))


# --- customers -------------------------------------------------------------------------------------


def _customers(seed: int) -> dict[str, list[tuple[str, str, str]]]:
    """(name, e-mail, sign-off) pools per language; unique e-mails, reused across tickets and days."""
    rng = random.Random(f"{seed}:customers")
    seen: set[str] = set()
    pools: dict[str, list[tuple[str, str, str]]] = {}
    for lang, size in CUSTOMERS_PER_LANGUAGE.items():
        pool = []
        for _ in range(size):
            name, local, signoff = _person(rng, lang)
            email = _email(rng, lang, local)
            while email in seen:
                email = _email(rng, lang, f"{local}{rng.randint(2, 999)}")
            seen.add(email)
            pool.append((name, email, signoff))
        pools[lang] = pool
    return pools


def _person(rng: random.Random, lang: str) -> tuple[str, str, str]:
    """A random (display name, e-mail local part, sign-off)."""
    if lang == "en":
        first, last = rng.choice(P["en_first_names"]), rng.choice(P["en_last_names"])
        fn, ln = _ascii(first), _ascii(last)
        local = rng.choice(
            (f"{fn}.{ln}", f"{fn[0]}.{ln}", f"{fn}{ln[0]}", f"{fn}_{ln}", f"{fn[0]}{ln}{rng.randint(1, 99)}")
        )
        return f"{first} {last}", local, first
    (surname, s), (given, g) = rng.choice(P["zh_surnames"]), rng.choice(P["zh_given_names"])
    local = rng.choice((f"{s}.{g}", f"{g}.{s}", f"{s}{g}{rng.randint(1, 99)}", f"{s}_{g}"))
    if rng.random() < 0.1:  # some Chinese customers register with a romanised name
        name = f"{g.capitalize()} {s.capitalize()}"
        return name, local, name
    return surname + given, local, rng.choice((surname + given, given))


def _email(rng: random.Random, lang: str, local: str) -> str:
    return f"{local}@{rng.choice(P['email_domains'][lang])}"


def _ascii(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text.replace("ø", "o")).encode("ascii", "ignore").decode()
    return "".join(ch for ch in folded.lower() if ch.isalnum())


# --- very long bodies ------------------------------------------------------------------------------


def _long_body(rng: random.Random, lang: str, problem: str, dump: str) -> str:
    separator = " " if lang == "en" else ""
    return f"{problem}{separator}{rng.choice(P['long_intros'][lang])}\n\n{dump}\n\n{rng.choice(P['long_outros'][lang])}"


def _long_target(rng: random.Random) -> int:
    return rng.randint(LONG_BODY_MIN_CHARS + 2_000, 90_000)


def _log_dump(rng: random.Random, day: date) -> str:
    target = _long_target(rng)
    clock_ms = rng.randrange(_DAY_SECONDS - 3 * 3600) * 1000  # leaves room so the log stays on `day`
    lines, size = [], 0
    while size < target:
        clock_ms += rng.randint(1, 4000)
        seconds, millis = divmod(clock_ms, 1000)
        stamp = f"{day.isoformat()} {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{millis:03d}"
        level = rng.choices(("DEBUG", "INFO", "WARN", "ERROR"), (3, 10, 3, 1))[0]
        a = rng.randint(1, 999)
        message = rng.choice(P["log_messages"]).format(
            a=a,
            b=a + rng.randint(0, 9000),
            attempt=rng.randint(1, 5),  # b >= a: "chunk a/b"
            file=rng.choice(P["file_names"]),
            kb=rng.randint(1, 4096),
            endpoint=rng.choice(P["endpoints"]),
            ms=rng.randint(3, 30000),
            status=rng.choice((200, 200, 200, 201, 204, 409, 429, 502, 504)),
            error=rng.choice(P["error_codes"]),
            # Two 6-hex groups: request ids never form digit runs that look like phone or card numbers.
            rid=f"{rng.getrandbits(24):06x}-{rng.getrandbits(24):06x}",
        )
        entry = [f"{stamp} {level:<5} [{rng.choice(P['log_components'])}] {message}"]
        if level == "ERROR":
            entry += [
                frame.format(a=rng.randint(1, 2000), b=rng.randint(1, 120))
                for frame in rng.sample(P["log_stack_frames"], rng.randint(2, 4))
            ]
        lines += entry
        size += sum(len(line) + 1 for line in entry)
    return "\n".join(lines)


def _json_dump(rng: random.Random, day: date) -> str:
    target = _long_target(rng)
    items, size = [], 0
    while size < target:
        second = rng.randrange(_DAY_SECONDS)
        failed = rng.random() < 0.3
        item = {
            "id": f"doc_{rng.getrandbits(32):08x}",
            "name": rng.choice(P["file_names"]),
            "status": rng.choice(("failed", "conflict")) if failed else rng.choice(("synced", "pending")),
            "size_kb": rng.randint(1, 90_000),
            "modified": f"{day.isoformat()}T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z",
            "error": {"code": rng.choice(P["error_codes"]), "retryable": rng.random() < 0.5} if failed else None,
        }
        items.append(item)
        # Nested indentation only adds characters, so the final dump is at least `target` long.
        size += len(json.dumps(item, ensure_ascii=False, indent=2))
    return json.dumps({"items": items, "next_cursor": None}, ensure_ascii=False, indent=2)
