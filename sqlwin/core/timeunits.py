"""Time as integers: every duration and timestamp inside sqlwin is microseconds since the epoch.

One representation keeps window arithmetic exact (no float seconds) and matches Spark's
internal TIMESTAMP encoding and DuckDB's ``epoch_us``.
"""

from __future__ import annotations

import datetime as _dt

MICROS_PER_MILLI = 1_000
MICROS_PER_SECOND = 1_000_000
MICROS_PER_MINUTE = 60 * MICROS_PER_SECOND
MICROS_PER_HOUR = 60 * MICROS_PER_MINUTE
MICROS_PER_DAY = 24 * MICROS_PER_HOUR
MICROS_PER_WEEK = 7 * MICROS_PER_DAY

# Singular, upper-case unit name -> microseconds. Month/year units are deliberately absent:
# they have no fixed length, and Flink's window TVFs reject them too.
UNIT_MICROS: dict[str, int] = {
    "MICROSECOND": 1,
    "MILLISECOND": MICROS_PER_MILLI,
    "SECOND": MICROS_PER_SECOND,
    "MINUTE": MICROS_PER_MINUTE,
    "HOUR": MICROS_PER_HOUR,
    "DAY": MICROS_PER_DAY,
    "WEEK": MICROS_PER_WEEK,
}

CALENDAR_UNITS = frozenset({"MONTH", "YEAR", "QUARTER", "DECADE", "CENTURY"})

EPOCH = _dt.datetime(1970, 1, 1)


def normalize_unit(unit: str) -> str:
    """``minutes`` / ``MINS`` / ``Minute`` -> ``MINUTE``."""
    u = unit.strip().upper()
    aliases = {"MIN": "MINUTE", "MINS": "MINUTE", "SEC": "SECOND", "SECS": "SECOND",
               "MS": "MILLISECOND", "US": "MICROSECOND", "HR": "HOUR", "HRS": "HOUR"}
    u = aliases.get(u, u)
    if (u.endswith("S") and u[:-1] in UNIT_MICROS) or u[:-1] in CALENDAR_UNITS:
        u = u[:-1]
    return u


def floor_div(a: int, b: int) -> int:
    """Floor division for the window-start rule (Python's // already floors)."""
    return a // b


def window_start(ts: int, size: int, offset: int = 0) -> int:
    """The single floor rule for aligned windows (Flink ``TimeWindow.getWindowStartWithOffset``
    with the remainder taken as a true modulo so timestamps before the epoch align too)."""
    return ts - (ts - offset) % size


def to_micros(value: _dt.datetime) -> int:
    """Naive datetimes are read as UTC wall-clock; aware ones are converted."""
    if value.tzinfo is not None:
        value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    delta = value - EPOCH
    return (delta.days * MICROS_PER_DAY) + delta.seconds * MICROS_PER_SECOND + delta.microseconds


def from_micros(us: int) -> _dt.datetime:
    return EPOCH + _dt.timedelta(microseconds=us)


def timedelta_micros(td: _dt.timedelta) -> int:
    return td.days * MICROS_PER_DAY + td.seconds * MICROS_PER_SECOND + td.microseconds
