"""Generic window table functions for plain Spark SQL over ANY table (no sqlwin rewrite needed):

    SELECT * FROM tumble(TABLE(t), 'ts', INTERVAL 10 MINUTES [, offset])
    SELECT * FROM hop(TABLE(t), 'ts', slide, size [, offset])
    SELECT * FROM cumulate(TABLE(t), 'ts', step, size [, offset])
    SELECT * FROM session(TABLE(t) PARTITION BY (k) ORDER BY (ts), 'ts', gap [, max_duration])
    SELECT * FROM session(TABLE(t) WITH SINGLE PARTITION, 'ts', gap [, max_duration])

Output: every input column, then window_start, window_end, window_time (window_end - 1 ms) typed
like the time column (TIMESTAMP or TIMESTAMP_NTZ). The schema depends on the input, so these are
plain ``udtf``s with ``analyze`` (DataType objects: analyze runs without a JVM) on the row path
(``useArrow=False``: the Arrow-per-row path is 118-250x slower). Rows are buffered and assigned
vectorized (``sqlwin.core.assigners``) every ``FLUSH_ROWS`` rows, or per partition for session.

``session`` must get whole partitions: write ``PARTITION BY (cols)`` (parenthesized, see
SPARK_NOTES) or ``WITH SINGLE PARTITION``. Spark does not tell ``analyze`` whether either clause
is present, so a call with neither computes sessions per input split (wrong across splits).

TIMESTAMP values reach the row path as naive datetimes in the Python worker's local time zone
(NTZ as naive wall clock); window columns are returned as aware UTC datetimes so Spark converts
them exactly.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql.types import StructField, StructType, TimestampNTZType, TimestampType
from pyspark.sql.udtf import AnalyzeArgument, AnalyzeResult

from sqlwin.core import assigners as A
from sqlwin.core.timeunits import MICROS_PER_SECOND, timedelta_micros

FLUSH_ROWS = 8192
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH = dt.datetime(1970, 1, 1)


def _interval(arg: AnalyzeArgument | None, what: str, fn: str, required: bool = True) -> int | None:
    if arg is None or (not required and arg.isConstantExpression and arg.value is None):
        return None
    if not arg.isConstantExpression or not isinstance(arg.value, dt.timedelta):
        raise ValueError(f"{fn}: {what} must be a constant day-time INTERVAL, e.g. INTERVAL 10 MINUTES")
    return timedelta_micros(arg.value)


def _schema(fn: str, data: AnalyzeArgument, timecol: AnalyzeArgument) -> StructType:
    if not data.isTable:
        raise ValueError(f"{fn}: the first argument must be a table, e.g. TABLE(t)")
    if not timecol.isConstantExpression or not isinstance(timecol.value, str):
        raise ValueError(f"{fn}: the second argument must be the time column's name as a string, e.g. 'ts'")
    fields = {f.name.lower(): f for f in data.dataType.fields}
    field = fields.get(timecol.value.lower())
    if field is None:
        raise ValueError(f"{fn}: no column {timecol.value!r} in the input ({', '.join(fields)})")
    if not isinstance(field.dataType, (TimestampType, TimestampNTZType)):
        raise ValueError(f"{fn}: column {field.name!r} must be TIMESTAMP or TIMESTAMP_NTZ, "
                         f"not {field.dataType.simpleString()}")
    t = field.dataType
    extra = [StructField(n, t) for n in ("window_start", "window_end", "window_time")]
    return StructType([*data.dataType.fields, *extra])


def _check(fn: str, **values: int | None) -> None:
    for name, value in values.items():
        if value is not None and value <= 0:
            raise ValueError(f"{fn}: {name} must be positive")


def _check_offset(fn: str, offset: int | None, size: int) -> None:
    if offset is not None and abs(offset) >= size:
        raise ValueError(f"{fn}: |offset| must be smaller than size")


def _to_micros(value: dt.datetime, ntz: bool) -> int:
    if value.tzinfo is not None:
        delta = value - _EPOCH_UTC
    elif ntz:
        delta = value - _EPOCH
    else:  # naive local time of this worker; timestamp() honours fold (DST)
        return int(value.replace(microsecond=0).timestamp()) * MICROS_PER_SECOND + value.microsecond
    return (delta.days * 86_400 + delta.seconds) * MICROS_PER_SECOND + delta.microseconds


def _from_micros(us: int, ntz: bool) -> dt.datetime:
    return (_EPOCH if ntz else _EPOCH_UTC) + dt.timedelta(microseconds=int(us))


@dataclass
class WindowAnalyzeResult(AnalyzeResult):
    """Carries the resolved time column to ``__init__`` (the row path cannot tell NTZ from LTZ)."""

    ts_name: str = ""
    ntz: bool = False


def _result(fn: str, data: AnalyzeArgument, timecol: AnalyzeArgument) -> WindowAnalyzeResult:
    schema = _schema(fn, data, timecol)
    field = next(f for f in data.dataType.fields if f.name.lower() == timecol.value.lower())
    return WindowAnalyzeResult(schema=schema, ts_name=field.name,
                               ntz=isinstance(field.dataType, TimestampNTZType))


class _Buffered:
    """Row buffer: eval collects (row, micros); ``_flush`` assigns windows and yields output rows."""

    def __init__(self, analyze_result: WindowAnalyzeResult) -> None:
        self.ts_name = analyze_result.ts_name
        self.ntz = analyze_result.ntz
        self.ts_idx = -1
        self.rows: list[tuple] = []
        self.ts: list[int] = []
        self.params: tuple = ()

    def _add(self, row: Any) -> None:
        value = row[self.ts_name]
        if value is None:
            return
        us = _to_micros(value, self.ntz)
        self.ts.append(us)
        if self.ntz:
            self.rows.append(tuple(row))
        else:  # hand the time back aware: a naive local time is ambiguous in a DST fall-back hour
            if self.ts_idx < 0:
                self.ts_idx = row.__fields__.index(self.ts_name)
            values = list(row)
            values[self.ts_idx] = _from_micros(us, False)
            self.rows.append(tuple(values))

    def _emit(self, w: A.Windows) -> Any:
        ntz = self.ntz
        for r, s, e in zip(w.row.tolist(), w.start.tolist(), w.end.tolist(), strict=True):
            yield (*self.rows[r], _from_micros(s, ntz), _from_micros(e, ntz), _from_micros(e - A.MILLI, ntz))

    def _assign(self) -> A.Windows:  # pragma: no cover - overridden
        raise NotImplementedError

    def _flush(self) -> Any:
        if self.rows:
            yield from self._emit(self._assign())
            self.rows, self.ts = [], []

    def terminate(self) -> Any:
        yield from self._flush()


class TumbleUDTF(_Buffered):
    @staticmethod
    def analyze(data: AnalyzeArgument, timecol: AnalyzeArgument, size: AnalyzeArgument,
                offset: AnalyzeArgument | None = None) -> WindowAnalyzeResult:
        s, o = _interval(size, "size", "tumble"), _interval(offset, "offset", "tumble", required=False)
        _check("tumble", size=s)
        _check_offset("tumble", o, s)
        return _result("tumble", data, timecol)

    def eval(self, data: Any, timecol: str, size: dt.timedelta, offset: dt.timedelta | None = None) -> Any:
        self.params = (timedelta_micros(size), timedelta_micros(offset) if offset else 0)
        self._add(data)
        if len(self.rows) >= FLUSH_ROWS:
            yield from self._flush()

    def _assign(self) -> A.Windows:
        return A.tumble(np.array(self.ts, dtype=np.int64), *self.params)


class HopUDTF(_Buffered):
    @staticmethod
    def analyze(data: AnalyzeArgument, timecol: AnalyzeArgument, slide: AnalyzeArgument,
                size: AnalyzeArgument, offset: AnalyzeArgument | None = None) -> WindowAnalyzeResult:
        sl, s = _interval(slide, "slide", "hop"), _interval(size, "size", "hop")
        _check("hop", slide=sl, size=s)
        _check_offset("hop", _interval(offset, "offset", "hop", required=False), s)
        return _result("hop", data, timecol)

    def eval(self, data: Any, timecol: str, slide: dt.timedelta, size: dt.timedelta,
             offset: dt.timedelta | None = None) -> Any:
        self.params = (timedelta_micros(slide), timedelta_micros(size), timedelta_micros(offset) if offset else 0)
        self._add(data)
        if len(self.rows) >= FLUSH_ROWS:
            yield from self._flush()

    def _assign(self) -> A.Windows:
        return A.hop(np.array(self.ts, dtype=np.int64), *self.params)


class CumulateUDTF(_Buffered):
    @staticmethod
    def analyze(data: AnalyzeArgument, timecol: AnalyzeArgument, step: AnalyzeArgument,
                size: AnalyzeArgument, offset: AnalyzeArgument | None = None) -> WindowAnalyzeResult:
        st, s = _interval(step, "step", "cumulate"), _interval(size, "size", "cumulate")
        _check("cumulate", step=st, size=s)
        if s % st:
            raise ValueError("cumulate: size must be a multiple of step")
        _check_offset("cumulate", _interval(offset, "offset", "cumulate", required=False), s)
        return _result("cumulate", data, timecol)

    def eval(self, data: Any, timecol: str, step: dt.timedelta, size: dt.timedelta,
             offset: dt.timedelta | None = None) -> Any:
        self.params = (timedelta_micros(step), timedelta_micros(size), timedelta_micros(offset) if offset else 0)
        self._add(data)
        if len(self.rows) >= FLUSH_ROWS:
            yield from self._flush()

    def _assign(self) -> A.Windows:
        return A.cumulate(np.array(self.ts, dtype=np.int64), *self.params)


class SessionUDTF(_Buffered):
    """One instance per PARTITION BY partition: buffer everything, assign in ``terminate``."""

    @staticmethod
    def analyze(data: AnalyzeArgument, timecol: AnalyzeArgument, gap: AnalyzeArgument,
                max_duration: AnalyzeArgument | None = None) -> WindowAnalyzeResult:
        _check("session", gap=_interval(gap, "gap", "session"),
               max_duration=_interval(max_duration, "max_duration", "session", required=False))
        return _result("session", data, timecol)

    def eval(self, data: Any, timecol: str, gap: dt.timedelta, max_duration: dt.timedelta | None = None) -> Any:
        self.params = (timedelta_micros(gap), timedelta_micros(max_duration) if max_duration else None)
        self._add(data)
        return iter(())

    def _assign(self) -> A.Windows:
        return A.session(np.array(self.ts, dtype=np.int64), *self.params)


GENERIC = {"tumble": TumbleUDTF, "hop": HopUDTF, "cumulate": CumulateUDTF, "session": SessionUDTF}
