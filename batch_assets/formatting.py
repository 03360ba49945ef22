"""Small helpers every layer shares: durations (parsed and shown), money, plain-text tables."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(
    value: str | float | int, *, units: str = "smhd", bare_seconds: bool = True, whole: bool = False
) -> float:
    """Seconds from a number (seconds, when `bare_seconds`) or a text like '90s', '30m', '24h', '2d'.

    `units` narrows the suffixes accepted and `whole` refuses fractions; a bad value raises ValueError
    saying what to write."""
    example = ", ".join(f"'{n}{u}'" for n, u in (("90", "s"), ("30", "m"), ("24", "h"), ("2", "d")) if u in units)
    hint = f"write {'seconds or ' if bare_seconds else ''}e.g. {example}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and bare_seconds:
        if value < 0:
            raise ValueError(f"a duration must be >= 0, got {value}")
        return float(value)
    number = r"\d+" if whole else r"\d+(?:\.\d+)?"
    suffix = f"[{units}]" + ("?" if bare_seconds else "")
    m = re.fullmatch(rf"\s*({number})\s*({suffix})\s*", str(value))
    if not m:
        raise ValueError(f"{value!r} is not a duration; {hint}")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def format_duration(seconds: float | None) -> str:
    """'1h 02m', '3m 05s', '12s', '4.2s'; '-' when unknown."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {s:02d}s" if m else f"{s}s"


def format_money(amount: float | None, currency: str | None = None, unknown: str = "-") -> str:
    """An amount with 4 decimals and its currency when known; `unknown` when there is no figure."""
    return unknown if amount is None else f"{amount:.4f} {currency or ''}".rstrip()


def format_table(headers: list[str], rows: list[list]) -> str:
    """Columns padded to their widest cell, the first left-aligned, the rest right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(values):
        return "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths)))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])
