"""Window assignment over numpy arrays: which rows belong to which windows (GRAMMAR section 1).

Pure numpy (it ships to Spark executors inside the UDTFs and tests without Spark). Time is int64
microseconds since the epoch. Every function returns index arrays rather than rows: ``row[i]`` is
the position of an input row, ``start[i]``/``end[i]`` the window it belongs to, so a caller can
``take`` the rows (a row may belong to several windows, or to none). Output is ordered by row, then
by window start/end for the time windows; by window, then row for sessions and count windows.

NULL timestamps: time-window and session functions take an optional boolean ``valid`` mask (False =
NULL ts, which belongs to no window; the value in ``ts`` at that position is ignored). The count
functions take the rows of one partition already ordered and without NULL ts (drop them, then
``count_order``): rows with a NULL ts are not numbered, as they belong to no window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

MILLI = 1_000  # window_time = window_end - 1 ms; count windows end 1 ms after their last row


class Windows(NamedTuple):
    row: np.ndarray  # int64 positions into the input
    start: np.ndarray  # int64 micros
    end: np.ndarray  # int64 micros (exclusive)


class CountWindows(NamedTuple):
    row: np.ndarray
    start: np.ndarray
    end: np.ndarray
    index: np.ndarray  # window_index (int64)


def _i64(a: np.ndarray | Sequence[int]) -> np.ndarray:
    return np.asarray(a, dtype=np.int64)


def _rows(n: int, valid: np.ndarray | None) -> np.ndarray:
    return np.arange(n, dtype=np.int64) if valid is None else np.flatnonzero(valid).astype(np.int64)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")


def align(ts: np.ndarray, size: int, offset: int = 0) -> np.ndarray:
    """The single floor rule (``timeunits.window_start``), vectorized: numpy's ``%`` on integers
    is a true modulo, so timestamps before the epoch and negative offsets align correctly."""
    return ts - (ts - offset) % size


def _empty() -> Windows:
    z = np.zeros(0, dtype=np.int64)
    return Windows(z, z.copy(), z.copy())


def tumble(ts: np.ndarray, size: int, offset: int = 0, valid: np.ndarray | None = None) -> Windows:
    """Each row in exactly one window ``[align(ts), align(ts) + size)``."""
    _check_positive(size=size)
    ts = _i64(ts)
    row = _rows(len(ts), valid)
    start = align(ts[row], size, offset)
    return Windows(row, start, start + size)


def hop(ts: np.ndarray, slide: int, size: int, offset: int = 0,
        valid: np.ndarray | None = None) -> Windows:
    """Windows ``[k*slide + offset, ... + size)`` holding ``ts``: up to ceil(size/slide) per row,
    none for a row in a gap (slide > size), as Flink's SlidingWindowAssigner."""
    _check_positive(slide=slide, size=size)
    ts = _i64(ts)
    rows = _rows(len(ts), valid)
    t = ts[rows]
    per_row = -(-size // slide)
    last = align(t, slide, offset)  # the latest window start <= ts
    back = np.arange(per_row - 1, -1, -1, dtype=np.int64) * slide  # ascending starts per row
    start = last[:, None] - back[None, :]
    keep = t[:, None] < start + size
    row = np.broadcast_to(rows[:, None], start.shape)[keep]
    start = start[keep]
    return Windows(row, start, start + size)


def cumulate(ts: np.ndarray, step: int, size: int, offset: int = 0,
             valid: np.ndarray | None = None) -> Windows:
    """Windows ``[s, s + k*step)`` with ``s`` aligned to ``size``, for every k with ``ts`` inside."""
    _check_positive(step=step, size=size)
    if size % step:
        raise ValueError(f"CUMULATE size {size} must be a multiple of step {step}")
    ts = _i64(ts)
    rows = _rows(len(ts), valid)
    t = ts[rows]
    start = align(t, size, offset)
    first_k = (t - start) // step + 1  # the smallest k whose window end is past ts
    count = size // step - first_k + 1
    row = np.repeat(rows, count)
    rep_start = np.repeat(start, count)
    offsets_in_group = np.arange(len(row), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    k = np.repeat(first_k, count) + offsets_in_group
    return Windows(row, rep_start, rep_start + k * step)


def session(ts: np.ndarray, gap: int | np.ndarray, max_duration: int | None = None,
            valid: np.ndarray | None = None) -> Windows:
    """Session windows of ONE partition (the rows are sorted here).

    A row opens ``[ts, ts + gap)``; windows merge when they overlap or touch, so a row at exactly
    the session's current end (the max of ``ts + gap`` so far: with dynamic gaps an earlier row
    may hold the end) joins. ``gap`` is a scalar or one value per row; rows with a gap <= 0 belong
    to no window (callers map a NULL gap to 0). With ``max_duration``, a row at or past
    ``start + max_duration`` opens a new session and ``end = min(max(ts + gap), start + max_duration)``.
    Output: rows in (ts, input position) order, grouped by session.
    """
    ts = _i64(ts)
    ok = np.ones(len(ts), dtype=bool) if valid is None else np.asarray(valid, dtype=bool).copy()
    gaps = np.broadcast_to(_i64(gap), ts.shape)
    ok &= gaps > 0
    if max_duration is not None:
        _check_positive(max_duration=max_duration)
    rows = np.flatnonzero(ok).astype(np.int64)
    if len(rows) == 0:
        return _empty()
    rows = rows[np.argsort(ts[rows], kind="stable")]
    t = ts[rows]
    ends = t + gaps[rows]
    # Natural sessions (no max_duration): a new one where ts is past every earlier end.
    reach = np.maximum.accumulate(ends)
    new = np.ones(len(t), dtype=bool)
    new[1:] = t[1:] > reach[:-1]
    if max_duration is not None:
        new = _split_max_duration(t, ends, new, max_duration)
    first = np.flatnonzero(new)
    start = t[first]
    end = np.maximum.reduceat(ends, first)
    if max_duration is not None:
        end = np.minimum(end, start + max_duration)
    lengths = np.diff(np.append(first, len(t)))
    return Windows(rows, np.repeat(start, lengths), np.repeat(end, lengths))


def _split_max_duration(t: np.ndarray, ends: np.ndarray, new: np.ndarray, max_duration: int) -> np.ndarray:
    """Re-cut the natural sessions that last at least ``max_duration``.

    A cut restarts the reach (max end) from the new first row, so with dynamic gaps later rows may
    no longer connect: each session is found from its first row, scanning ahead in doubling chunks
    so the cost stays proportional to the session's length.
    """
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(t)) - 1
    long_ones = np.flatnonzero(t[last] - t[first] >= max_duration)
    if len(long_ones) == 0:
        return new
    new = new.copy()
    for s in long_ones:
        i, stop = int(first[s]), int(last[s]) + 1
        while i < stop:
            new[i] = True
            limit = int(np.searchsorted(t, t[i] + max_duration, side="left"))
            j = _first_break(t, ends, i, min(limit, stop))
            new[i + 1:j] = False
            i = j
    return new


def _first_break(t: np.ndarray, ends: np.ndarray, i: int, stop: int) -> int:
    """The first position in (i, stop) where ``t`` is past the max end of rows [i, pos), else stop."""
    reach = ends[i]
    pos, chunk = i + 1, 64
    while pos < stop:
        hi = min(pos + chunk, stop)
        r = np.maximum(np.maximum.accumulate(ends[pos - 1:hi - 1]), reach)
        past = np.flatnonzero(t[pos:hi] > r)
        if len(past):
            return pos + int(past[0])
        reach = int(r[-1])
        pos, chunk = hi, chunk * 2
    return stop


# ---------------------------------------------------------------------------------- count windows

def count_order(columns: Sequence[np.ndarray], valid: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
    """The permutation that orders rows by ``columns[0]``, then ``columns[1]``, ... ascending,
    NULLS FIRST (``valid[i]`` False = NULL), ties kept in input order (GRAMMAR: count windows
    number rows by ts, then every other column). Each column must be numpy-sortable; object
    columns are ranked with ``np.unique`` (their values must be mutually comparable)."""
    if not columns:
        return np.zeros(0, dtype=np.int64)
    valid = list(valid) if valid is not None else [None] * len(columns)
    keys: list[np.ndarray] = []
    for col, ok in zip(reversed(columns), reversed(valid), strict=True):  # lexsort: last key is primary
        col = np.asarray(col)
        if ok is None:
            ok = np.array([v is not None for v in col]) if col.dtype == object else np.ones(len(col), bool)
        ok = np.asarray(ok, dtype=bool)
        if col.dtype == object:
            present = col[ok]
            rank = np.zeros(len(col), dtype=np.int64)
            if len(present):
                rank[ok] = np.unique(present, return_inverse=True)[1].reshape(-1)
            col = rank
        else:
            col = np.where(ok, col, col[ok][0] if ok.any() else col.dtype.type(0)) if len(col) else col
        keys.extend([col, ok])
    return np.lexsort(keys).astype(np.int64)


def tumble_rows(ts: np.ndarray, n: int) -> CountWindows:
    """``TUMBLE ROWS n``: window k holds rows [k*n, (k+1)*n); only complete windows."""
    _check_positive(n=n)
    ts = _i64(ts)
    m = (len(ts) // n) * n
    row = np.arange(m, dtype=np.int64)
    k = row // n
    return CountWindows(row, ts[k * n], ts[k * n + n - 1] + MILLI, k)


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows [lo[w], hi[w]) of every window w: (window position, row) pairs."""
    count = hi - lo
    win = np.repeat(np.arange(len(lo), dtype=np.int64), count)
    row = np.arange(len(win), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count) + lo[win]
    return win, row


def hop_rows_rows(ts: np.ndarray, slide: int, n: int) -> CountWindows:
    """``HOP ROWS m, ROWS n``: window k = 1, 2, ... closes at row k*m - 1, holds [max(0, k*m - n), k*m)."""
    _check_positive(slide=slide, n=n)
    ts = _i64(ts)
    k = np.arange(1, len(ts) // slide + 1, dtype=np.int64)
    hi = k * slide
    lo = np.maximum(hi - n, 0)
    win, row = _expand(lo, hi)
    return CountWindows(row, ts[lo][win], (ts[hi - 1] + MILLI)[win], k[win])


def hop_rows_time(ts: np.ndarray, slide: int, size: int) -> CountWindows:
    """``HOP ROWS m, d``: window k closes at row c = k*m - 1, ends at ts[c] + 1 ms, starts d
    earlier, and holds the rows up to c whose ts is in [start, end)."""
    _check_positive(slide=slide, size=size)
    ts = _i64(ts)
    k = np.arange(1, len(ts) // slide + 1, dtype=np.int64)
    close = k * slide - 1
    end = ts[close] + MILLI
    start = end - size
    lo = np.minimum(np.searchsorted(ts, start, side="left"), close + 1)  # ts sorted
    win, row = _expand(lo, close + 1)
    return CountWindows(row, start[win], end[win], k[win])


def hop_time_rows(ts: np.ndarray, slide: int, n: int, offset: int = 0) -> CountWindows:
    """``HOP s, ROWS n``: at each boundary b (aligned like TUMBLE(s, offset)) that follows at least
    one row with ts in [b - s, b), the last n rows with ts < b; end = b, start = first held row's ts.

    ``window_index`` is the ordinal (0, 1, 2, ...) of such boundaries in the partition, as GRAMMAR
    gives no k for this form; boundaries with no row in [b - s, b) are skipped, not counted.
    """
    _check_positive(slide=slide, n=n)
    ts = _i64(ts)
    if len(ts) == 0:
        z = np.zeros(0, dtype=np.int64)
        return CountWindows(z, z.copy(), z.copy(), z.copy())
    bounds = np.unique(align(ts, slide, offset) + slide)  # ts sorted, but unique is cheap and safe
    hi = np.searchsorted(ts, bounds, side="left")
    lo = np.maximum(hi - n, 0)
    win, row = _expand(lo, hi)
    return CountWindows(row, ts[lo][win], bounds[win], win.astype(np.int64))
