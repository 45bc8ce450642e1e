"""Sizes (``'1MiB'``, ``'512 MB'``) and durations (``'10s'``, ``'5 minutes'``).

Sizes: ``B, KB, KiB, MB, MiB, GB, GiB, TB, TiB`` case-insensitively; the decimal units are
powers of 1000 and the binary ones powers of 1024, as IEC says. A bare number is bytes.

Durations: ``ms, s, m, h, d`` and their words (``msec``, ``second(s)``, ``min``, ``minute(s)``,
``hour(s)``, ``day(s)``), optionally compound (``'1m30s'``, ``'1 hour 30 minutes'``). A bare
number is seconds, like Spark's ``trigger(processingTime=...)`` and Materialize's intervals.
"""

from __future__ import annotations

import re

_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "kib": 1024,
    "mb": 1000**2,
    "mib": 1024**2,
    "gb": 1000**3,
    "gib": 1024**3,
    "tb": 1000**4,
    "tib": 1024**4,
}

_DURATION_UNITS: dict[str, float] = {}
for _names, _seconds in (
    (("ms", "msec", "msecs", "millisecond", "milliseconds"), 0.001),
    (("s", "sec", "secs", "second", "seconds"), 1.0),
    (("m", "min", "mins", "minute", "minutes"), 60.0),
    (("h", "hr", "hrs", "hour", "hours"), 3600.0),
    (("d", "day", "days"), 86400.0),
):
    for _n in _names:
        _DURATION_UNITS[_n] = _seconds

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_PART_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")

SIZE_UNITS_HINT = "sizes are written like '512MiB', '64 MB' or '1GiB' (units B, KB, KiB, MB, MiB, GB, GiB)"
DURATION_UNITS_HINT = "durations are written like '500ms', '10s', '5m', '1h' or '5 minutes'"


class UnitError(ValueError):
    """A size or duration that does not parse; ``start``/``end`` locate the bad part."""

    def __init__(self, message: str, start: int = 0, end: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.start = start
        self.end = end


def parse_size(text: str) -> int:
    """Bytes in ``text``; raises ``UnitError``."""
    m = _SIZE_RE.match(text)
    if m is None:
        raise UnitError(f"invalid size '{text}'")
    number, unit = m.group(1), m.group(2)
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise UnitError(f"unknown size unit '{unit}'", m.start(2), m.end(2))
    value = round(float(number) * factor)
    if value <= 0:
        raise UnitError(f"size '{text}' must be positive")
    return value


def parse_duration(text: str) -> float:
    """Seconds in ``text``; raises ``UnitError``."""
    if not text.strip():
        raise UnitError("empty duration")
    pos = 0
    total = 0.0
    while pos < len(text):
        m = _PART_RE.match(text, pos)
        if m is None or m.end() == pos:
            raise UnitError(f"invalid duration '{text}'", pos, len(text))
        number, unit = m.group(1), m.group(2)
        if unit == "" and (pos != 0 or m.end() != len(text)):
            raise UnitError(f"missing unit in duration '{text}'", m.start(1), m.end(1))
        factor = 1.0 if unit == "" else _DURATION_UNITS.get(unit.lower())
        if factor is None:
            raise UnitError(f"unknown duration unit '{unit}'", m.start(2), m.end(2))
        total += float(number) * factor
        pos = m.end()
    if total <= 0:
        raise UnitError(f"duration '{text}' must be positive")
    return total


def format_size(n: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"
