"""Sizes (``'1MiB'``, ``'512 MB'``) and durations (``'10s'``, ``'5 minutes'``).

Sizes: ``B, KB, KiB, MB, MiB, GB, GiB, TB, TiB`` case-insensitively; the decimal units are
powers of 1000 and the binary ones powers of 1024, as IEC says. A bare number is bytes.

Durations: ``ms, s, m, h, d`` and their words (``msec``, ``second(s)``, ``min``, ``minute(s)``,
``hour(s)``, ``day(s)``), optionally compound (``'1m30s'``, ``'1 hour 30 minutes'``). A bare
number is seconds, like Spark's ``trigger(processingTime=...)`` and Materialize's intervals.
"""

from __future__ import annotations

import math
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

_SIZE_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*\Z")
_PART_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")

# Bounds that keep every figure finite and within what Spark and Iceberg store (Java longs):
# a size up to 8 EiB - 1 byte, a duration up to a year.
MAX_SIZE = 2**63 - 1
MAX_DURATION = 365 * 86400.0

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
        raise UnitError(f"invalid size '{_short(text)}'")
    number, unit = m.group(1), m.group(2)
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise UnitError(f"unknown size unit '{unit}'", m.start(2), m.end(2))
    return check_size(float(number) * factor, text)


def check_size(value: float, text: str) -> int:
    """``value`` bytes as an int, or a ``UnitError`` when it is not a positive, finite size."""
    if not math.isfinite(value) or value > MAX_SIZE:
        raise UnitError(f"size '{_short(text)}' is too large (at most 8 EiB)")
    size = round(value)
    if size <= 0:
        raise UnitError(f"size '{_short(text)}' must be positive")
    return size


def check_duration(value: float, text: str) -> float:
    """``value`` seconds, or a ``UnitError`` when it is not a positive duration of a year at most."""
    if not math.isfinite(value) or value > MAX_DURATION:
        raise UnitError(f"duration '{_short(text)}' is too long (at most 365 days)")
    if value <= 0:
        raise UnitError(f"duration '{_short(text)}' must be positive")
    return value


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def parse_duration(text: str) -> float:
    """Seconds in ``text``; raises ``UnitError``."""
    if not text.strip():
        raise UnitError("empty duration")
    pos = 0
    total = 0.0
    while pos < len(text):
        m = _PART_RE.match(text, pos)
        if m is None or m.end() == pos:
            raise UnitError(f"invalid duration '{_short(text)}'", pos, len(text))
        number, unit = m.group(1), m.group(2)
        if unit == "" and (pos != 0 or m.end() != len(text)):
            raise UnitError(f"missing unit in duration '{_short(text)}'", m.start(1), m.end(1))
        factor = 1.0 if unit == "" else _DURATION_UNITS.get(unit.lower())
        if factor is None:
            raise UnitError(f"unknown duration unit '{unit}'", m.start(2), m.end(2))
        total += float(number) * factor
        pos = m.end()
    return check_duration(total, text)


def format_size(n: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"
