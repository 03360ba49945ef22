"""Sensitive-data detectors: a DuckDB (RE2) regex that finds CANDIDATES, a Python check that confirms them.

The split is what keeps the scan set-based: DuckDB runs every detector's regex over every row and
column; Python only sees the distinct candidate strings (a small fraction of the text) and confirms
each one once with a real validator (checksums, numbering plans).

A detector's `confirm(candidate)` returns the confirmed values inside the candidate as
`(offset, value)` pairs, offsets in code points relative to the candidate's start. Most detectors
return `[(0, candidate)]` or `[]`; the phone detector can return a number found inside a longer
candidate (several numbers run together with spaces), and the IBAN and e-mail detectors trim
trailing/leading junk the candidate regex had to take along.

RE2 notes (DuckDB's regex engine): there is no look-around, and `\\b`/`\\d` are ASCII-only. The
digit detectors therefore never rely on `\\b`: their patterns start and end with `[0-9]*`, so a
candidate always spans the WHOLE run of digits it sits in (leftmost-first matching starts at the
run's first digit and the greedy tail takes the rest), and the validator rejects a run of the
wrong length. That is how a card number inside a longer digit run is not reported, while digits
right next to Chinese characters (`电话13812345678谢谢`) are: a CJK character is simply not a digit.
The card candidate goes one step further: it spans the whole run of digit GROUPS (numbers joined by
one space or dash) around a card shape, and its validator tries every window of whole groups, so a
grouped card is found whatever number stands before or after it (`Invoice 2024 4556 7375 …`).
Full-width digits (`１３８…`) are not detected.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import phonenumbers
from stdnum import iban as std_iban
from stdnum import luhn
from stdnum.cn import ric

Confirmed = list[tuple[int, str]]


@dataclass(frozen=True)
class Detector:
    """One kind of sensitive value.

    name: stable id used in findings, counts and policies (`email`, `phone`, `card`, `cn_id`, `iban`).
    label: placeholder prefix (`[EMAIL_1]`).
    pattern: DuckDB/RE2 regex for candidates (over-approximates; never matches the empty string).
    confirm: candidate -> confirmed `(offset, value)` pairs. Must not raise on odd input; callers
        treat an exception as a bug and never put the candidate in the error.
    precedence: lower wins when two detectors' confirmed spans overlap and have the same length
        (the longer span always wins).
    """

    name: str
    label: str
    pattern: str
    confirm: Callable[[str], Confirmed]
    precedence: int


# --- e-mail -----------------------------------------------------------------------------------

EMAIL_PATTERN = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,24}"
_EMAIL_STRICT = re.compile(
    r"[A-Za-z0-9_%+\-]+(?:\.[A-Za-z0-9_%+\-]+)*"  # local part: no leading/trailing/double dot
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+"  # labels: no leading/trailing hyphen
    r"[A-Za-z]{2,24}",
    re.ASCII,
)


def confirm_email(candidate: str) -> Confirmed:
    """Strict-enough syntax check (no DNS, no library): RFC 5321 lengths, sane dots and hyphens.

    Leading dots of the local part (`...a@b.cn` in running text) are trimmed, not fatal.
    """
    trimmed = candidate.lstrip(".")
    offset = len(candidate) - len(trimmed)
    local, _, domain = trimmed.partition("@")
    if not local or len(local) > 64 or len(trimmed) > 254:
        return []
    if not _EMAIL_STRICT.fullmatch(trimmed):
        return []
    return [(offset, trimmed)]


# --- phone ------------------------------------------------------------------------------------

# An optional `+` or `(`/`(+`, then at least 7 digits with up to 3 separator characters between
# any two. `:` is a separator on purpose: a time stamp (`2024-01-15 12:30:45`) then arrives whole
# and libphonenumber's own time-stamp filter rejects it. The candidate may hold several numbers
# (`13812345678 4111 1111 …`); the matcher finds each one inside it.
PHONE_PATTERN = r"(?:\+|\(\+?)?[0-9](?:[ ().:/\-]{0,3}[0-9]){6,}"
_DATE_PREFIX = re.compile(r"(?:19|20)[0-9]{2}[-/.](?:0?[1-9]|1[0-2])[-/.]", re.ASCII)


_DATETIME_ONLY = re.compile(r"[0-9]{4}[-/.][0-9]{1,2}[-/.][0-9]{1,2}(?:[ T][0-9]{1,2}(?::[0-9]{2}){1,2})?", re.ASCII)


def make_confirm_phone(regions: Sequence[str] = ("CN",), *, fast_paths: bool = True) -> Callable[[str], Confirmed]:
    """Phone confirmation with `phonenumbers.PhoneNumberMatcher`, leniency VALID.

    Why the matcher and not `parse` + `is_valid_number`: a candidate can hold several numbers or a
    number plus neighbouring digit groups, and the matcher finds valid numbers *inside* text (with
    offsets) while `parse` needs the exact span. VALID (not STRICT_GROUPING) because people type
    numbers with arbitrary grouping (`1381234 5678`) and missing one is worse than an extra
    placeholder.

    Numbers written with `+CC`/`00CC` are validated for any country; national forms are validated
    against each of `regions` in turn (default CN: `13812345678`, `010-12345678`, `86 138…`).
    With CN among the regions, every mainland mobile SHAPE counts too (`1[3-9]` + 9 digits, optional
    `+86`/`0086`/`86`/`(+86)` prefix, spaces or dashes), even in a range libphonenumber's metadata
    does not list as allocated yet (`16x`, `14x`): for a privacy gate a missed number costs more.

    Matches that start like a date (`2024-01-15 12`) are dropped: libphonenumber accepts some of
    them as Chinese landlines. So are national-format fixed lines written WITHOUT the region's
    national prefix: libphonenumber treats the CN trunk `0` as optional, which makes every
    10-digit order number starting 2-9 a "valid" landline (`2760221213` = Wuhan 27 + 8 digits);
    people write `027-60221213`. Mobiles (`13812345678`, US `(650) 253-0000`) need no prefix.
    """
    regions = tuple(r.upper() for r in regions) or ("CN",)
    cn = "CN" in regions
    cn_only = regions == ("CN",)

    def confirm_phone(candidate: str) -> Confirmed:
        if fast_paths and _known_not_phone(candidate, cn_only):
            return []
        found: dict[int, str] = {}
        if cn:
            for m in _CN_MOBILE.finditer(candidate):
                found[m.start()] = m.group(0)
        for region in regions:
            for m in phonenumbers.PhoneNumberMatcher(candidate, region, leniency=phonenumbers.Leniency.VALID):
                if _DATE_PREFIX.match(m.raw_string) or not _plausibly_written(m, region):
                    continue
                prev = found.get(m.start)
                if prev is None or len(m.raw_string) > len(prev):
                    found[m.start] = m.raw_string
        return _without_overlaps(found)

    return confirm_phone


def _known_not_phone(candidate: str, cn_only: bool) -> bool:
    """True where libphonenumber's answer is known to be "nothing" (it is the scan's costliest call):
    a bare date/time, and - for CN alone - a bare digit run that starts with neither the trunk 0, a
    mobile's 1, nor the country code 86 (no + or 00 is possible without a separator-free prefix, and
    prefix-less landlines are rejected anyway). Order numbers and time stamps are most phone
    candidates in real text."""
    if _DATETIME_ONLY.fullmatch(candidate):
        return True
    return cn_only and candidate.isdigit() and candidate.isascii() and not candidate.startswith(("0", "1", "86"))


def _without_overlaps(found: dict[int, str]) -> Confirmed:
    """Different regions can match overlapping spans: keep the earliest, then the longest."""
    out: Confirmed = []
    end = -1
    for start in sorted(found):
        if start >= end:
            out.append((start, found[start]))
            end = start + len(found[start])
    return out


_CN_MOBILE = re.compile(
    r"(?<![0-9+])(?:(?:\+|00)?86[ \-]?|\(\+?86\) ?)?1[3-9][0-9](?:[ \-]?[0-9]){8}(?![0-9])",
    re.ASCII,
)
_MOBILE_TYPES = {phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE}


def _plausibly_written(match: phonenumbers.PhoneNumberMatch, region: str) -> bool:
    try:
        parsed = phonenumbers.parse(match.raw_string, region, keep_raw_input=True)
    except phonenumbers.NumberParseException:
        return False
    if parsed.country_code_source != phonenumbers.CountryCodeSource.FROM_DEFAULT_COUNTRY:
        return True  # +CC, 00CC or CC written out: international form
    if phonenumbers.number_type(parsed) in _MOBILE_TYPES:
        return True
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    prefix = metadata.national_prefix if metadata else None
    return not prefix or phonenumbers.normalize_digits_only(match.raw_string).startswith(prefix)


# --- payment cards ----------------------------------------------------------------------------

# One card's shape: contiguous 13-19 digits, 4-4-4-4(-1..4) / 4-4-4-1..4 groups, or the Amex/Diners
# 4-6-4/5 shape, with spaces or dashes, glued to the digits on either side (`[0-9]*`).
_CARD_SHAPE = (
    r"[0-9]*(?:[0-9]{4}(?:[ \-][0-9]{4}){2,3}(?:[ \-][0-9]{1,4})?"
    r"|[0-9]{4}[ \-][0-9]{6}[ \-][0-9]{4,5}"
    r"|[0-9]{13,19})[0-9]*"
)
# The candidate is the whole run of digit groups (separated by one space or dash) that holds a card
# shape: the numbers written before and after it come along (`Call 13912345678 4556 7375 8689 9855`,
# `Invoice 2024 4556 …`), and `confirm_card` tries the shape at every group boundary inside the run.
# A card shape that starts in the middle of a digit run is never tried on its own, so a contiguous
# run of more than 19 digits is still not a card.
CARD_PATTERN = rf"(?:[0-9]+[ \-])*{_CARD_SHAPE}(?:[ \-][0-9]+)*"
_CARD_SHAPE_RE = re.compile(_CARD_SHAPE, re.ASCII)
_DIGIT_RUN = re.compile(r"[0-9]+", re.ASCII)


def _card_number(text: str) -> bool:
    """13-19 digits (once the separators are gone), Luhn-valid, first digit 2-6 (the card networks'
    major industry identifiers: Mastercard 2/5, Amex/JCB/Diners 3, Visa 4, Discover/UnionPay 6).
    The MII check drops the Luhn-valid-by-chance order numbers and time stamps that start with 1, 7,
    8, 9 or 0."""
    digits = text.replace(" ", "").replace("-", "")
    if not (13 <= len(digits) <= 19) or not digits.isascii() or not digits.isdigit():
        return False
    return digits[0] in "23456" and luhn.is_valid(digits)


def confirm_card(candidate: str) -> Confirmed:
    """The card numbers inside a run of digit groups.

    Every window of whole groups (it starts and ends at group boundaries) that has a card's shape
    and 13-19 digits is checked with `_card_number`; windows that overlap are merged into one value,
    so every digit of a card is masked even when a neighbouring group also forms a valid number
    with part of it. A lone run of more than 19 digits holds no window, hence no card."""
    runs = [(m.start(), m.end()) for m in _DIGIT_RUN.finditer(candidate)]
    spans: list[tuple[int, int]] = []
    for i, (start, _) in enumerate(runs):
        for _, end in runs[i:]:
            window = candidate[start:end]
            digits = len(window) - window.count(" ") - window.count("-")
            if digits > 19:
                break
            if digits >= 13 and _CARD_SHAPE_RE.fullmatch(window) and _card_number(window):
                spans.append((start, end))
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, candidate[start:end]) for start, end in merged]


# --- mainland-China resident identity card number ---------------------------------------------

CN_ID_PATTERN = r"[0-9]*[0-9]{6} ?[0-9]{4} ?[0-9]{4} ?[0-9]{3}[0-9Xx][0-9]*"


def confirm_cn_id(candidate: str) -> Confirmed:
    """18 characters (spaces allowed as 6-4-4-4), GB 11643 check character, a real calendar date
    (python-stdnum `cn.ric`, which also checks the birth-place code's province) that is not in the
    future and not before 1900 (stdnum accepts a 2099 birth date)."""
    compact = candidate.replace(" ", "").upper()
    if len(compact) != 18 or not ric.is_valid(compact):
        return []
    born = ric.get_birth_date(compact)
    if not (datetime.date(1900, 1, 1) <= born <= datetime.date.today()):
        return []
    return [(0, candidate)]


# --- IBAN -------------------------------------------------------------------------------------

IBAN_PATTERN = r"[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?"


def confirm_iban(candidate: str) -> Confirmed:
    """ISO 13616: mod-97 checksum and the country's length/format (python-stdnum `iban`).

    The candidate regex cannot know where a space-grouped IBAN ends (`… 7654 32 ABCD`), so trailing
    groups are dropped one by one until a valid IBAN remains (at least 15 characters)."""
    groups = candidate.split(" ")
    while groups:
        text = " ".join(groups)
        if len(text.replace(" ", "")) < 15:
            return []
        if std_iban.is_valid(text):
            return [(0, text)]
        groups.pop()
    return []


# --- the default set --------------------------------------------------------------------------

EMAIL = Detector("email", "EMAIL", EMAIL_PATTERN, confirm_email, precedence=3)
CARD = Detector("card", "CARD", CARD_PATTERN, confirm_card, precedence=2)
CN_ID = Detector("cn_id", "CN_ID", CN_ID_PATTERN, confirm_cn_id, precedence=0)
IBAN = Detector("iban", "IBAN", IBAN_PATTERN, confirm_iban, precedence=1)


def phone_detector(regions: Sequence[str] = ("CN",)) -> Detector:
    return Detector("phone", "PHONE", PHONE_PATTERN, make_confirm_phone(regions), precedence=4)


PHONE = phone_detector()
DEFAULT_DETECTORS: tuple[Detector, ...] = (EMAIL, PHONE, CARD, CN_ID, IBAN)
DETECTOR_NAMES: tuple[str, ...] = tuple(d.name for d in DEFAULT_DETECTORS)


def default_detectors(phone_regions: Sequence[str] = ("CN",)) -> tuple[Detector, ...]:
    """The five detectors, with the phone detector's national-format regions set."""
    return (EMAIL, phone_detector(phone_regions), CARD, CN_ID, IBAN)
