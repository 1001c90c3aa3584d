"""The executor side of the per-spec arrow UDTFs: plain values in, arrow tables out.

Imports only numpy, pyarrow and the pure assigners (shipped by value), never the plan or sqlglot,
so Python workers need no sqlwin installation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from sqlwin.core import assigners as A
from udtfs import _arrow

# WindowKind / CountForm values of sqlwin.plan.windows (strings: see the module docstring)
TUMBLE, HOP, CUMULATE, SESSION = "TUMBLE", "HOP", "CUMULATE", "SESSION"
TUMBLE_ROWS, HOP_ROWS_ROWS, HOP_ROWS_TIME, HOP_TIME_ROWS = (
    "TUMBLE_ROWS", "HOP_ROWS_ROWS", "HOP_ROWS_TIME", "HOP_TIME_ROWS")


@dataclass(frozen=True)
class Params:
    """Everything the UDTF needs from a WindowSpec, as plain picklable values."""

    kind: str  # WindowKind value
    count_form: str | None  # CountForm value
    ts_col: int  # position of the time column in the input
    ntz: bool
    size: int | None = None  # micros, or n for ROWS n
    slide: int | None = None  # micros, or m for ROWS m
    step: int | None = None
    offset: int = 0
    gap: int | None = None  # None with a dynamic gap (then the trailing column holds it)
    max_duration: int | None = None
    dynamic_gap: bool = False

    @property
    def whole_partition(self) -> bool:
        return self.kind == SESSION or self.count_form is not None


def assign(table: pa.Table, p: Params) -> pa.Table:
    """Window rows of ``table`` (one batch for row-local kinds, one whole partition otherwise)."""
    gap_us: np.ndarray | None = None
    if p.dynamic_gap:
        gap_us, gap_ok = _arrow.micros(table.column(table.num_columns - 1))
        gap_us = np.where(gap_ok, gap_us, 0)
        table = table.remove_column(table.num_columns - 1)
    ts, valid = _arrow.micros(table.column(p.ts_col))
    if p.count_form is not None:
        return _assign_count(table, ts, valid, p)
    if p.kind == TUMBLE:
        w = A.tumble(ts, p.size, p.offset, valid)
    elif p.kind == HOP:
        w = A.hop(ts, p.slide, p.size, p.offset, valid)
    elif p.kind == CUMULATE:
        w = A.cumulate(ts, p.step, p.size, p.offset, valid)
    else:
        w = A.session(ts, gap_us if p.dynamic_gap else p.gap, p.max_duration, valid)
    return _arrow.output(table, w.row, w.start, w.end, p.ntz)


def _assign_count(table: pa.Table, ts: np.ndarray, valid: np.ndarray, p: Params) -> pa.Table:
    keep = np.flatnonzero(valid)
    if len(keep) < len(ts):
        table, ts = table.take(pa.array(keep, pa.int64())), ts[keep]
    order = _arrow.count_order(table, ts, p.ts_col)
    s = ts[order]
    if p.count_form == TUMBLE_ROWS:
        w = A.tumble_rows(s, p.size)
    elif p.count_form == HOP_ROWS_ROWS:
        w = A.hop_rows_rows(s, p.slide, p.size)
    elif p.count_form == HOP_ROWS_TIME:
        w = A.hop_rows_time(s, p.slide, p.size)
    else:
        w = A.hop_time_rows(s, p.slide, p.size, p.offset)
    return _arrow.output(table, order[w.row], w.start, w.end, p.ntz, w.index)


def make_udtf_class(p: Params) -> type:
    """The arrow UDTF handler with ``p`` baked in (cloudpickle ships it by value)."""

    class SqlwinWindowUDTF:
        def __init__(self) -> None:
            self.batches: list[pa.RecordBatch] = []

        def eval(self, batch: pa.RecordBatch) -> Any:
            if p.whole_partition:
                self.batches.append(batch)
            elif batch.num_rows:
                yield assign(pa.Table.from_batches([batch]), p)

        def terminate(self) -> Any:
            if self.batches:
                table = pa.Table.from_batches(self.batches)
                self.batches = []
                yield assign(table, p)

    return SqlwinWindowUDTF
