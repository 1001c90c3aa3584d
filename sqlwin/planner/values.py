"""Constant folding of TVF and clause arguments: intervals to microseconds, counts to ints.

Window parameters are checked when the window is built (Flink's rule), so every value here is
validated with a message that states the rule and points at the argument.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from sqlwin.core.timeunits import CALENDAR_UNITS, UNIT_MICROS, normalize_unit
from sqlwin.dialect.nodes import RowsExtent
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import Rows

_PAIR = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*")


def _unit_micros(unit: str, node: exp.Expr) -> int:
    u = normalize_unit(unit)
    if u in CALENDAR_UNITS:
        raise SqlwinError.at(node, f"{unit.upper()} intervals have no fixed length; use DAY, HOUR, MINUTE, "
                                   "SECOND or MILLISECOND")
    if u not in UNIT_MICROS:
        raise SqlwinError.at(node, f"unknown interval unit {unit!r}")
    return UNIT_MICROS[u]


def _scaled(number: str, micros: int, node: exp.Expr) -> int:
    try:
        value = Decimal(number) * micros
    except InvalidOperation:
        raise SqlwinError.at(node, f"expected a number in the interval, got {number!r}") from None
    if value != value.to_integral_value():
        raise SqlwinError.at(node, "interval is finer than a microsecond")
    return int(value)


def _parse_interval_text(text: str, node: exp.Expr) -> int:
    """``'10 minutes'``, ``'1 day 2 hours'``, ``'-8 hours'``."""
    pos, total, seen = 0, 0, False
    text = text.strip()
    while pos < len(text):
        m = _PAIR.match(text, pos)
        if not m:
            raise SqlwinError.at(node, f"cannot read interval {text!r}: expected '<number> <unit>'")
        total += _scaled(m.group(1), _unit_micros(m.group(2), node), node)
        pos, seen = m.end(), True
    if not seen:
        raise SqlwinError.at(node, f"cannot read interval {text!r}")
    return total


# Bounds that keep every sum sqlwin forms (a timestamp plus a size, an offset and a lateness) well
# inside a signed 64-bit microsecond count, so no value can overflow later in Spark.
MAX_INTERVAL_US = 10**18  # about 31,700 years
MAX_COUNT = 2**62


def interval_micros(node: exp.Expr | None, what: str) -> int:
    """An interval-valued constant expression in microseconds (may be negative), within
    +-``MAX_INTERVAL_US``."""
    value = _interval_micros(node, what)
    if abs(value) > MAX_INTERVAL_US:
        raise SqlwinError.at(node, f"{what}: interval is too large ({abs(value)} microseconds); at most "
                                   f"{MAX_INTERVAL_US // 86_400_000_000} days (10^18 microseconds) are supported")
    return value


def _interval_micros(node: exp.Expr | None, what: str) -> int:
    if node is None:
        raise SqlwinError(f"{what}: missing interval")
    if isinstance(node, exp.Paren):
        return _interval_micros(node.this, what)
    if isinstance(node, exp.Neg):
        return -_interval_micros(node.this, what)
    if isinstance(node, exp.Add):  # Spark's multi-unit form, INTERVAL 9 MINUTES 60 SECONDS: the sum of its parts
        return _interval_micros(node.this, what) + _interval_micros(node.expression, what)
    if isinstance(node, exp.Interval):
        return _literal_micros(node, what)
    if isinstance(node, exp.Literal) and node.is_string:
        return _parse_interval_text(node.name, node)
    raise SqlwinError.at(node, f"{what} must be an INTERVAL (e.g. INTERVAL '10' MINUTES), got {node.sql('sqlwin')}")


def _literal_micros(node: exp.Interval, what: str) -> int:
    """``INTERVAL '10' MINUTES``, ``INTERVAL '1 day 2 hours'``, ``INTERVAL '0:10' HOUR TO MINUTE``."""
    value = node.this
    unit = node.args.get("unit")
    text = value.name if isinstance(value, exp.Literal) else None
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
        text = "-" + value.this.name
    if text is None:
        raise SqlwinError.at(node, f"{what} must be a constant interval")
    if unit is None:
        return _parse_interval_text(text, node)
    if isinstance(unit, exp.IntervalSpan):
        return _span_micros(text, unit, node)
    if " " in text.strip():
        return _parse_interval_text(text, node)
    return _scaled(text.strip(), _unit_micros(unit.name, node), node)


# Spark's day-time ranges (``unit TO unit``): the fields from the first unit to the last, ``d h:m:s.f``; the first
# field may be any size, each later one is bounded (an hour below 24, a minute or a second below 60)
_SPAN_FIELDS = ("DAY", "HOUR", "MINUTE", "SECOND")
_SPAN_BELOW = {"HOUR": 24, "MINUTE": 60, "SECOND": 60}
_SPAN_PATTERN = {"DAY": r"(\d+)", "HOUR": r"(\d+)", "MINUTE": r"(\d+)", "SECOND": r"(\d+(?:\.\d+)?)"}
_SPAN_SHOWN = {"DAY": "d", "HOUR": "h", "MINUTE": "m", "SECOND": "s[.f]"}


def _span_micros(text: str, span: exp.IntervalSpan, node: exp.Expr) -> int:
    """``INTERVAL '[+|-]1 2:03:04.5' DAY TO SECOND`` and the other day-time ranges, as Spark reads them."""
    first, last = normalize_unit(span.this.name), normalize_unit(span.expression.name)
    written = f"{span.this.name.upper()} TO {span.expression.name.upper()}"
    if first in CALENDAR_UNITS or last in CALENDAR_UNITS:
        raise SqlwinError.at(node, f"{written} intervals have no fixed length; use DAY, HOUR, MINUTE, SECOND or "
                                   "MILLISECOND")
    if first not in _SPAN_FIELDS or last not in _SPAN_FIELDS or _SPAN_FIELDS.index(first) >= _SPAN_FIELDS.index(last):
        raise SqlwinError.at(node, f"unknown interval range {written}: expected DAY TO HOUR, DAY TO MINUTE, DAY TO "
                                   "SECOND, HOUR TO MINUTE, HOUR TO SECOND or MINUTE TO SECOND")
    fields = _SPAN_FIELDS[_SPAN_FIELDS.index(first):_SPAN_FIELDS.index(last) + 1]

    def joined(parts: dict[str, str]) -> str:
        return parts[fields[0]] + "".join((" " if f == "HOUR" else ":") + parts[f] for f in fields[1:])

    match = re.fullmatch(r"\s*([+-]?)" + joined(_SPAN_PATTERN) + r"\s*", text)
    if match is None:
        raise SqlwinError.at(node, f"cannot read interval {text!r} as {written}: expected '[+|-]{joined(_SPAN_SHOWN)}'")
    total = 0
    for field, part in zip(fields, match.groups()[1:], strict=True):
        if field != first and Decimal(part) >= _SPAN_BELOW[field]:
            raise SqlwinError.at(node, f"interval {text!r}: {field.lower()} {part} is outside [0, "
                                       f"{_SPAN_BELOW[field] - 1}]")
        total += _scaled(part, UNIT_MICROS[field], node)
    return -total if match.group(1) == "-" else total


def is_constant_interval(node: exp.Expr) -> bool:
    if isinstance(node, exp.Add):  # the multi-unit form
        return is_constant_interval(node.this) and is_constant_interval(node.expression)
    return isinstance(node, (exp.Interval, exp.Neg, exp.Paren)) and not list(node.find_all(exp.Column))


def positive_int(node: exp.Expr | None, what: str) -> int:
    """A positive integer literal (``AFTER COUNT n``, ``ROWS n``, ``KEEP LAST n ROWS``)."""
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            value = Decimal(node.name)
        except InvalidOperation:
            value = Decimal(-1)
        if value == value.to_integral_value() and value > MAX_COUNT:
            raise SqlwinError.at(node, f"{what} is too large: at most {MAX_COUNT} (2^62) is supported")
        if value == value.to_integral_value() and value > 0:
            return int(value)
    shown = node.sql("sqlwin") if isinstance(node, exp.Expr) else "nothing"
    raise SqlwinError.at(node, f"{what} must be a positive integer, got {shown}")


def extent(node: exp.Expr, what: str) -> int | Rows:
    """A window size/slide/step: an interval (microseconds) or ``ROWS n``."""
    if isinstance(node, RowsExtent):
        return Rows(positive_int(node.this, f"{what} ROWS n"))
    return interval_micros(node, what)
