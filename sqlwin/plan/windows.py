"""Typed logical plan of a window table-valued function call (GRAMMAR section 1).

A ``WindowSpec`` is built and validated once by the planner; backends only read it.
Durations are integer microseconds; count extents are ``Rows``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union

from sqlglot import exp


@dataclass(frozen=True)
class Rows:
    """A count extent: ``ROWS n`` (Apache Storm count windows)."""

    n: int


Extent = Union[int, Rows]  # int = microseconds


class WindowKind(str, enum.Enum):
    TUMBLE = "TUMBLE"
    HOP = "HOP"
    CUMULATE = "CUMULATE"
    SESSION = "SESSION"


class CountForm(str, enum.Enum):
    """The count-based forms of GRAMMAR 1 ("Count-based sizes"), one per distinct semantics."""

    TUMBLE_ROWS = "TUMBLE_ROWS"  # TUMBLE ... ROWS n
    HOP_ROWS_ROWS = "HOP_ROWS_ROWS"  # HOP ... ROWS m, ROWS n
    HOP_ROWS_TIME = "HOP_ROWS_TIME"  # HOP ... ROWS m, d   (duration window sliding by rows)
    HOP_TIME_ROWS = "HOP_TIME_ROWS"  # HOP ... s, ROWS n   (count window sliding by duration)


class TimeType(str, enum.Enum):
    TIMESTAMP = "timestamp"  # Spark TIMESTAMP (LTZ); aligned on UTC epoch micros, like Spark's window()
    TIMESTAMP_NTZ = "timestamp_ntz"


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark simple type string: 'timestamp', 'timestamp_ntz', 'bigint', 'string', ...


@dataclass(frozen=True)
class Relation:
    """The data argument of a window TVF: a table name or a subquery, with its schema if known."""

    node: exp.Expr  # exp.Table or exp.Subquery/Select (sqlwin dialect AST, already rewritten inside)
    columns: tuple[Column, ...] | None = None

    def column(self, name: str) -> Column | None:
        for c in self.columns or ():
            if c.name.lower() == name.lower():
                return c
        return None

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns or ())


WINDOW_COLUMNS = ("window_start", "window_end", "window_time")
# Types that do not break ties among equal timestamps in count windows (not comparable everywhere).
NESTED_TYPE_PREFIXES = ("map<", "struct<", "array<", "variant")
COUNT_WINDOW_COLUMNS = (*WINDOW_COLUMNS, "window_index")


@dataclass(frozen=True)
class WindowSpec:
    """One validated window TVF: which rows belong to which windows.

    ``gap`` is microseconds, or a sqlglot expression over the row (dynamic gap, in microseconds
    once the backend converts it; the expression itself is an INTERVAL-valued SQL expression).
    """

    kind: WindowKind
    relation: Relation
    time_col: str
    time_type: TimeType | None = None  # None when the schema is unknown
    size: Extent | None = None  # TUMBLE/HOP/CUMULATE
    slide: Extent | None = None  # HOP
    step: int | None = None  # CUMULATE
    offset: int = 0
    gap: int | exp.Expr | None = None  # SESSION
    max_duration: int | None = None  # SESSION
    partition_by: tuple[str, ...] = ()
    alias: str | None = None
    node: exp.Expr | None = field(default=None, compare=False, repr=False)

    @property
    def count_form(self) -> CountForm | None:
        size_rows = isinstance(self.size, Rows)
        slide_rows = isinstance(self.slide, Rows)
        if self.kind is WindowKind.TUMBLE and size_rows:
            return CountForm.TUMBLE_ROWS
        if self.kind is WindowKind.HOP and (size_rows or slide_rows):
            if size_rows and slide_rows:
                return CountForm.HOP_ROWS_ROWS
            return CountForm.HOP_ROWS_TIME if slide_rows else CountForm.HOP_TIME_ROWS
        return None

    @property
    def is_count_based(self) -> bool:
        return self.count_form is not None

    @property
    def output_window_columns(self) -> tuple[str, ...]:
        return COUNT_WINDOW_COLUMNS if self.is_count_based else WINDOW_COLUMNS

    @property
    def tiebreak_columns(self) -> tuple[str, ...]:
        """Count windows order rows by ts, then by these columns (schema order, ASC NULLS FIRST)."""
        return tuple(c.name for c in self.relation.columns or ()
                     if c.name.lower() != self.time_col.lower() and not c.type.startswith(NESTED_TYPE_PREFIXES))

    @property
    def dynamic_gap(self) -> bool:
        return isinstance(self.gap, exp.Expr)

    def windows_per_row(self) -> int:
        """Upper bound of windows one row belongs to (HOP: ceil(size/slide); CUMULATE: size/step)."""
        if self.kind is WindowKind.HOP and isinstance(self.size, int) and isinstance(self.slide, int):
            return -(-self.size // self.slide)
        if self.kind is WindowKind.CUMULATE and isinstance(self.size, int) and self.step:
            return self.size // self.step
        return 1
