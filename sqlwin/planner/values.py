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
    if isinstance(node, exp.Interval):
        value = node.this
        unit = node.args.get("unit")
        text = value.name if isinstance(value, exp.Literal) else None
        if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
            text = "-" + value.this.name
        if text is None:
            raise SqlwinError.at(node, f"{what} must be a constant interval")
        if unit is None:
            return _parse_interval_text(text, node)
        unit_name = unit.name if not isinstance(unit, exp.IntervalSpan) else ""
        if not unit_name:
            raise SqlwinError.at(node, f"{what}: interval ranges such as HOUR TO MINUTE are not supported; "
                                       "write e.g. INTERVAL '90' MINUTES")
        if " " in text.strip():
            return _parse_interval_text(text, node)
        return _scaled(text.strip(), _unit_micros(unit_name, node), node)
    if isinstance(node, exp.Literal) and node.is_string:
        return _parse_interval_text(node.name, node)
    raise SqlwinError.at(node, f"{what} must be an INTERVAL (e.g. INTERVAL '10' MINUTES), got {node.sql('sqlwin')}")


def is_constant_interval(node: exp.Expr) -> bool:
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
