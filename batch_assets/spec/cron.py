"""Whether a text is a five-field cron expression (or @hourly, @daily, @weekly, @monthly), as a task's
`schedule.cron` must be; without Dagster, as the spec stays Dagster-free. Never laxer than Dagster's
own check (a test compares them); stricter on its extensions (`L`, `?`, a range written backwards)."""

from __future__ import annotations

import re

_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
_DAYS = "sun mon tue wed thu fri sat".split()
# (lowest, highest, names) of minute, hour, day of month, month, day of week (7 is Sunday too).
_FIELDS = ((0, 59, []), (0, 23, []), (1, 31, []), (1, 12, _MONTHS), (0, 7, _DAYS))
_PART = re.compile(r"^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(\d+))?$")


def _value(text: str, low: int, high: int, names: list[str]) -> int | None:
    if text.isdigit():
        value = int(text)
    elif text in names:
        value = names.index(text) + (1 if names is _MONTHS else 0)
    else:
        return None
    return value if low <= value <= high else None


def _field_ok(field: str, low: int, high: int, names: list[str]) -> bool:
    for part in field.lower().split(","):
        m = _PART.match(part)
        if m is None or (m.group(2) is not None and int(m.group(2)) < 1):
            return False
        if m.group(1) == "*":
            continue
        bounds = [_value(v, low, high, names) for v in m.group(1).split("-")]
        if None in bounds or (len(bounds) == 2 and bounds[0] > bounds[1]):
            return False
    return True


ALIASES = ("@hourly", "@daily", "@weekly", "@monthly")


def is_cron(text: str) -> bool:
    if text.strip() in ALIASES:
        return True
    fields = text.split()
    return len(fields) == 5 and all(_field_ok(f, *spec) for f, spec in zip(fields, _FIELDS, strict=True))
