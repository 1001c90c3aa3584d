"""Arrow <-> numpy glue shared by the per-spec arrow UDTFs: timestamps as int64 micros, the
deterministic row order of count windows, and the output table (input rows taken + window columns).

Spark hands an arrow UDTF a TIMESTAMP as ``timestamp[us, tz=<session tz>]`` (the int64 inside is
UTC epoch micros whatever the tz) and a TIMESTAMP_NTZ as ``timestamp[us]`` (wall-clock micros);
it accepts window columns back as ``timestamp[us, tz=UTC]`` / ``timestamp[us]``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlwin.core import assigners as A

MILLI = A.MILLI


def micros(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 micros with NULLs as 0, validity mask) of a timestamp or integer column."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_timestamp(col.type):
        unit = col.type.unit
        col = col.cast(pa.int64())
        if unit != "us":
            scale = {"s": 1_000_000, "ms": 1_000, "ns": 1}[unit]
            col = pc.multiply(col, scale) if unit != "ns" else pc.divide(col, 1_000)
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    values = col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return values, valid


def time_type(ntz: bool) -> pa.DataType:
    return pa.timestamp("us") if ntz else pa.timestamp("us", tz="UTC")


def count_order(table: pa.Table, ts: np.ndarray, ts_col: int) -> np.ndarray:
    """Rows of one partition (NULL ts already dropped) in ``ts`` order, ties broken by every other
    column in schema order, ascending, NULLS FIRST, NaN above every number (Spark's order).
    Columns arrow cannot rank (struct, list, map) are skipped as tie-breakers."""
    order = np.argsort(ts, kind="stable")
    s = ts[order]
    if len(s) < 2 or not (s[1:] == s[:-1]).any():
        return order
    keys = [ts]
    for i, col in enumerate(table.columns):
        if i != ts_col:
            keys.extend(_sort_keys(col))
    return A.count_order(keys)


def _sort_keys(col: pa.ChunkedArray) -> list[np.ndarray]:
    if pa.types.is_floating(col.type):
        values = col.to_numpy(zero_copy_only=False).astype(np.float64)  # NULL -> NaN
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        nan = np.isnan(values) & valid
        return [valid, nan, np.where(np.isnan(values), 0.0, values)]
    try:
        rank = pc.rank(col, sort_keys=[("c", "ascending", "at_start")], tiebreaker="dense")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return []
    return [rank.to_numpy(zero_copy_only=False).astype(np.int64)]


def output(table: pa.Table, rows: np.ndarray, start: np.ndarray, end: np.ndarray, ntz: bool,
           index: np.ndarray | None = None) -> pa.Table:
    """The input rows at ``rows`` plus window_start, window_end, window_time [, window_index]."""
    t = time_type(ntz)
    identity = len(rows) == table.num_rows and bool((rows == np.arange(len(rows))).all())
    out = table if identity else table.take(pa.array(rows, pa.int64()))
    names = [*out.column_names, "window_start", "window_end", "window_time"]
    arrays = [*out.columns, pa.array(start, t), pa.array(end, t), pa.array(end - MILLI, t)]
    if index is not None:
        names.append("window_index")
        arrays.append(pa.array(index, pa.int64()))
    return pa.Table.from_arrays(arrays, names=names)
