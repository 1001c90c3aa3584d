"""sqlwin.core.assigners: hand-worked tables (Flink Bid example, Storm count windows), edge cases,
and hypothesis properties against brute-force references written from GRAMMAR section 1."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlwin.core import assigners as A
from sqlwin.core.timeunits import MICROS_PER_MILLI as MS
from sqlwin.core.timeunits import MICROS_PER_MINUTE as MIN
from sqlwin.core.timeunits import MICROS_PER_SECOND as SEC
from sqlwin.core.timeunits import to_micros


def T(hhmm: str, day: str = "2020-04-15") -> int:
    return to_micros(dt.datetime.fromisoformat(f"{day} {hhmm}"))


# Flink's Bid table (window TVF docs): bidtime, price, item, supplier
BID = [("08:07", 2.0, "A", "s1"), ("08:11", 3.0, "B", "s2"), ("08:05", 4.0, "C", "s1"),
       ("08:09", 5.0, "D", "s2"), ("08:13", 1.0, "E", "s1"), ("08:17", 6.0, "F", "s2")]
BID_TS = np.array([T(b[0]) for b in BID], dtype=np.int64)
ITEM = [b[2] for b in BID]


def hm(us: int) -> str:
    d = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(us))
    return d.strftime("%H:%M") if d.second == 0 and d.microsecond == 0 else d.strftime("%H:%M:%S.%f")[:-3]


def table(w: A.Windows | A.CountWindows, labels=ITEM) -> set[tuple]:
    """(label, start, end[, index]) rows, with times as hh:mm[:ss.fff] strings for readability."""
    extra = (w.index,) if isinstance(w, A.CountWindows) else ()
    return {(labels[r], hm(s), hm(e), *[int(x[i]) for x in extra])
            for i, (r, s, e) in enumerate(zip(w.row, w.start, w.end, strict=True))}


def sums(w: A.Windows) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for r, s, e in zip(w.row, w.start, w.end, strict=True):
        out[(hm(s), hm(e))] = out.get((hm(s), hm(e)), 0.0) + BID[r][1]
    return out


# --------------------------------------------------------------------------- hand-worked: Flink Bid

def test_tumble_bid_10_minutes():
    w = A.tumble(BID_TS, 10 * MIN)
    assert sums(w) == {("08:00", "08:10"): 11.0, ("08:10", "08:20"): 10.0}
    assert len(w.row) == 6


def test_hop_bid_slide_5_size_10():
    w = A.hop(BID_TS, 5 * MIN, 10 * MIN)
    assert sums(w) == {("08:00", "08:10"): 11.0, ("08:05", "08:15"): 15.0,
                       ("08:10", "08:20"): 10.0, ("08:15", "08:25"): 6.0}
    assert table(w) >= {("C", "08:00", "08:10"), ("C", "08:05", "08:15"), ("F", "08:15", "08:25")}


def test_cumulate_bid_step_2_size_10():
    w = A.cumulate(BID_TS, 2 * MIN, 10 * MIN)
    assert sums(w) == {("08:00", "08:06"): 4.0, ("08:00", "08:08"): 6.0, ("08:00", "08:10"): 11.0,
                       ("08:10", "08:12"): 3.0, ("08:10", "08:14"): 4.0, ("08:10", "08:16"): 4.0,
                       ("08:10", "08:18"): 10.0, ("08:10", "08:20"): 10.0}


def test_session_bid_gap_5_per_supplier():
    out = set()
    for sup in ("s1", "s2"):
        idx = np.array([i for i, b in enumerate(BID) if b[3] == sup])
        w = A.session(BID_TS[idx], 5 * MIN)
        out |= table(A.Windows(idx[w.row], w.start, w.end))
    assert out == {("A", "08:05", "08:12"), ("C", "08:05", "08:12"), ("E", "08:13", "08:18"),
                   ("D", "08:09", "08:16"), ("B", "08:09", "08:16"), ("F", "08:17", "08:22")}


def test_session_bid_one_partition_chains():
    w = A.session(BID_TS, 5 * MIN)
    assert {(s, e) for _, s, e in table(w)} == {("08:05", "08:22")}
    assert [ITEM[r] for r in w.row] == ["C", "A", "D", "B", "E", "F"]  # ts order


# --------------------------------------------------------------------------------- time edge cases

def test_tumble_boundaries_negative_offset_and_pre_epoch():
    ts = np.array([0, 10, 9, -1, -10, -11], dtype=np.int64)
    w = A.tumble(ts, 10)
    assert list(w.start) == [0, 10, 0, -10, -10, -20]
    w = A.tumble(ts, 10, offset=-3)  # windows [-3, 7), [7, 17), [-13, -3)
    assert list(w.start) == [-3, 7, 7, -3, -13, -13]
    day = 24 * 60 * MIN  # Flink: TUMBLE(1 DAY, -8 HOUR) = days in UTC+8
    w = A.tumble(np.array([T("15:59:59"), T("16:00")]), day, -8 * 60 * MIN)
    assert list(w.start) == [T("16:00", "2020-04-14"), T("16:00")]


def test_tumble_valid_mask_drops_null_ts():
    w = A.tumble(np.array([5, 0, 15]), 10, valid=np.array([True, False, True]))
    assert list(w.row) == [0, 2] and list(w.start) == [0, 10]


def test_hop_gaps_when_slide_exceeds_size():
    w = A.hop(np.array([0, 4, 5, 9, 10, -6]), slide=10, size=5)
    assert list(zip(w.row, w.start, w.end, strict=True)) == [(0, 0, 5), (1, 0, 5), (4, 10, 15), (5, -10, -5)]


def test_hop_uneven_and_on_boundary():
    w = A.hop(np.array([10]), slide=4, size=10)  # starts 4, 8 hold 10 ([4,14), [8,18)); 0 ends at 10
    assert list(w.start) == [4, 8]
    w = A.hop(np.array([7]), slide=3, size=7, offset=-1)  # starts ..., 2, 5 (aligned to -1 mod 3)
    assert list(w.start) == [2, 5]


def test_cumulate_offset_and_pre_epoch():
    w = A.cumulate(np.array([-1]), step=2, size=6)  # window start -6: ends -4,-2,0 -> holds in [-6,0)
    assert list(w.end) == [0] and list(w.start) == [-6]
    w = A.cumulate(np.array([-3]), step=2, size=6, offset=1)  # start -5: ends -3, -1, 1 -> -1, 1
    assert list(zip(w.start, w.end, strict=True)) == [(-5, -1), (-5, 1)]
    with pytest.raises(ValueError):
        A.cumulate(np.array([0]), step=4, size=6)


def test_empty_inputs():
    e = np.zeros(0, dtype=np.int64)
    for w in (A.tumble(e, 5), A.hop(e, 2, 5), A.cumulate(e, 1, 5), A.session(e, 5), A.session(e, 5, 9),
              A.tumble_rows(e, 2), A.hop_rows_rows(e, 1, 2), A.hop_rows_time(e, 1, 5), A.hop_time_rows(e, 5, 2)):
        assert len(w.row) == len(w.start) == len(w.end) == 0


def test_session_touching_merges_and_ties():
    w = A.session(np.array([10, 0, 5, 5, 11]), 5)  # 0->5 touches, 5 tie, 10 touches 5+5, 11 joins
    assert set(zip(w.start, w.end, strict=True)) == {(0, 16)} and list(w.row) == [1, 2, 3, 0, 4]
    w = A.session(np.array([0, 6]), 5)
    assert list(zip(w.start, w.end, strict=True)) == [(0, 5), (6, 11)]


def test_session_dynamic_gap_end_is_max():
    # row 0 gap 100 keeps the session open past row 1's own end; row 2 (gap 0) and NULL ts: no window
    w = A.session(np.array([0, 10, 50, 90, 200]), np.array([100, 5, 0, 3, 1]),
                  valid=np.array([True, True, True, True, False]))
    assert list(w.row) == [0, 1, 3] and set(zip(w.start, w.end, strict=True)) == {(0, 100)}


def test_session_max_duration():
    ts = np.array([0, 4, 8, 12, 16, 30])
    w = A.session(ts, 5, max_duration=10)  # 0,4,8 then 12 >= 0+10 starts anew: 12,16; 30 alone
    assert list(zip(w.row, w.start, w.end, strict=True)) == [
        (0, 0, 10), (1, 0, 10), (2, 0, 10), (3, 12, 21), (4, 12, 21), (5, 30, 35)]
    w = A.session(np.array([0, 4, 8, 10]), 5, max_duration=10)  # end capped at 10; 10 is past it
    assert list(zip(w.start, w.end, strict=True)) == [(0, 10), (0, 10), (0, 10), (10, 15)]


def test_session_max_duration_dynamic_gap_recut():
    # row 0's long gap bridges rows 1..3 naturally; after the cut at 10 the reach restarts, so
    # 10 (gap 1) and 15 are separate sessions
    w = A.session(np.array([0, 10, 15]), np.array([30, 1, 1]), max_duration=10)
    assert list(zip(w.start, w.end, strict=True)) == [(0, 10), (10, 11), (15, 16)]


# ------------------------------------------------------------------------------ count: hand-worked

TS8 = np.array([T("10:00:0" + str(i)) for i in (1, 2, 2, 4, 5, 7, 8, 9)], dtype=np.int64)
E = [f"e{i}" for i in range(1, 9)]


def test_count_order_nulls_first_ties_by_other_columns():
    ts = np.array([3, 1, 1, 1, 2])
    other = np.array(["b", None, "a", "a", "z"], dtype=object)
    assert list(A.count_order([ts, other])) == [1, 2, 3, 4, 0]
    order = A.count_order([np.array([5, 0, 1]), np.array([1.0, 2.0, 3.0])], [np.array([True, False, True]), None])
    assert list(order) == [1, 2, 0]


def test_tumble_rows_storm():
    w = A.tumble_rows(TS8, 3)  # Storm withTumblingWindow(Count 3): e1-e3, e4-e6; e7, e8 incomplete
    assert table(w, E) == {("e1", "10:00:01.000", "10:00:02.001", 0), ("e2", "10:00:01.000", "10:00:02.001", 0),
                           ("e3", "10:00:01.000", "10:00:02.001", 0), ("e4", "10:00:04.000", "10:00:07.001", 1),
                           ("e5", "10:00:04.000", "10:00:07.001", 1), ("e6", "10:00:04.000", "10:00:07.001", 1)}


def test_hop_rows_rows_storm():
    w = A.hop_rows_rows(TS8[:5], 2, 3)  # withWindow(Count 3, Count 2): windows close at rows 1, 3
    got = {}
    for r, k in zip(w.row, w.index, strict=True):
        got.setdefault(int(k), []).append(E[r])
    assert got == {1: ["e1", "e2"], 2: ["e2", "e3", "e4"]}
    assert set(zip(w.index, w.start, w.end, strict=True)) == {(1, TS8[0], TS8[1] + MS), (2, TS8[1], TS8[3] + MS)}


def test_hop_rows_time_storm():
    w = A.hop_rows_time(TS8, 2, 3 * SEC)  # withWindow(Duration 3s, Count 2)
    got = {}
    for r, k, s, e in zip(w.row, w.index, w.start, w.end, strict=True):
        got.setdefault((int(k), int(s), int(e)), []).append(E[r])
    end = [TS8[c] + MS for c in (1, 3, 5, 7)]
    assert got == {(1, end[0] - 3 * SEC, end[0]): ["e1", "e2"],  # [07:58.001, 10:00:02.001)
                   (2, end[1] - 3 * SEC, end[1]): ["e2", "e3", "e4"],  # ts >= 10:00:01.001
                   (3, end[2] - 3 * SEC, end[2]): ["e5", "e6"],  # ts >= 10:00:04.001
                   (4, end[3] - 3 * SEC, end[3]): ["e6", "e7", "e8"]}


def test_hop_rows_time_excludes_tied_rows_after_close():
    w = A.hop_rows_time(np.array([0, 0, 0]), 1, 5 * MS)
    assert [list(w.row[w.index == k]) for k in (1, 2, 3)] == [[0], [0, 1], [0, 1, 2]]


def test_hop_time_rows_storm():
    w = A.hop_time_rows(TS8, 3 * SEC, 2)  # withWindow(Count 2, Duration 3s): boundaries :03, :06, :09, :12
    got = {}
    for r, k, s, e in zip(w.row, w.index, w.start, w.end, strict=True):
        got.setdefault((int(k), int(s), int(e)), []).append(E[r])
    b = [T(f"10:00:{x:02d}") for x in (3, 6, 9, 12)]
    assert got == {(0, TS8[1], b[0]): ["e2", "e3"], (1, TS8[3], b[1]): ["e4", "e5"],
                   (2, TS8[5], b[2]): ["e6", "e7"], (3, TS8[6], b[3]): ["e7", "e8"]}


def test_hop_time_rows_skips_empty_boundaries_and_offset():
    w = A.hop_time_rows(np.array([1, 2, 25]), 10, 5, offset=-5)  # boundaries 5 and 35 (15, 25 empty)
    assert list(zip(w.row, w.index, w.end, strict=True)) == [(0, 0, 5), (1, 0, 5), (0, 1, 35), (1, 1, 35), (2, 1, 35)]
    assert list(w.start) == [1, 1, 1, 1, 1]


# ------------------------------------------------------------------ brute-force references (naive)

def ref_time(ts, valid, starts_for, size_for) -> set[tuple[int, int, int]]:
    out = set()
    for r, t in enumerate(ts):
        if valid[r]:
            for s, e in starts_for(int(t)):
                if s <= t < e:
                    out.add((r, s, e))
    return out


def ref_session(ts, gap, valid, md):
    """Flink's definition literally: every row opens [t, t+gap); merge overlapping/touching
    windows until none do (no max_duration), or the sequential rule of GRAMMAR (max_duration)."""
    live = sorted((int(ts[r]), r) for r in range(len(ts)) if valid[r] and gap[r] > 0)
    if md is None:
        wins = [[t, t + int(gap[r]), [r]] for t, r in live]
        merged = True
        while merged:
            merged = False
            for i in range(len(wins)):
                for j in range(i + 1, len(wins)):
                    a, b = wins[i], wins[j]
                    if a[0] <= b[1] and b[0] <= a[1]:
                        wins[i] = [min(a[0], b[0]), max(a[1], b[1]), a[2] + b[2]]
                        del wins[j]
                        merged = True
                        break
                if merged:
                    break
        return {(r, s, e) for s, e, rs in wins for r in rs}
    out, cur = set(), None
    for t, r in live:
        if cur is None or t > cur[1] or t >= cur[0] + md:
            if cur:
                out |= {(x, cur[0], min(cur[1], cur[0] + md)) for x in cur[2]}
            cur = [t, t + int(gap[r]), [r]]
        else:
            cur[1] = max(cur[1], t + int(gap[r]))
            cur[2].append(r)
    if cur:
        out |= {(x, cur[0], min(cur[1], cur[0] + md)) for x in cur[2]}
    return out


def as_set(w) -> set[tuple]:
    cols = [w.row, w.start, w.end] + ([w.index] if isinstance(w, A.CountWindows) else [])
    got = [tuple(int(c[i]) for c in cols) for i in range(len(w.row))]
    assert len(got) == len(set(got)), "duplicate assignment"
    return set(got)


times = st.lists(st.integers(-60, 60), max_size=25).map(lambda xs: np.array(xs, dtype=np.int64))
masks = st.lists(st.booleans(), min_size=25, max_size=25)


@settings(max_examples=200, deadline=None)
@given(times, masks, st.integers(1, 13), st.integers(1, 13), st.integers(-12, 12))
def test_time_windows_match_bruteforce(ts, mask, a, b, off):
    valid = np.array(mask[: len(ts)], dtype=bool)
    assert as_set(A.tumble(ts, a, off % a, valid)) == ref_time(
        ts, valid, lambda t: [(k * a + off % a, k * a + off % a + a) for k in range(-150, 150)], a)
    assert as_set(A.hop(ts, a, b, off, valid)) == ref_time(
        ts, valid, lambda t: [(k * a + off, k * a + off + b) for k in range(-150, 150)], b)
    size = a * (b % 4 + 1)
    assert as_set(A.cumulate(ts, a, size, off, valid)) == ref_time(
        ts, valid, lambda t: [(k * size + off, k * size + off + j * a)
                              for k in range(-150, 150) for j in range(1, size // a + 1)], size)


@settings(max_examples=300, deadline=None)
@given(times, st.lists(st.integers(-2, 12), min_size=25, max_size=25), masks,
       st.one_of(st.none(), st.integers(1, 30)), st.booleans())
def test_session_matches_bruteforce(ts, gaps, mask, md, dynamic):
    valid = np.array(mask[: len(ts)], dtype=bool)
    gap = np.array(gaps[: len(ts)], dtype=np.int64) if dynamic else max(1, gaps[0])
    g = gap if dynamic else np.full(len(ts), gap)
    assert as_set(A.session(ts, gap, md, valid)) == ref_session(ts, g, valid, md)


def ref_count(ts, form, a, b, off=0):
    """Per window, literally from GRAMMAR; rows indexed 0..N-1 in order."""
    n_rows, out = len(ts), set()
    if form == "tumble":
        for k in range(n_rows // a):
            held = range(k * a, (k + 1) * a)
            out |= {(r, ts[held[0]], ts[held[-1]] + MS, k) for r in held}
    elif form == "rows_rows":  # slide a, size b
        for k in range(1, n_rows // a + 1):
            held = range(max(0, k * a - b), k * a)
            out |= {(r, ts[held[0]], ts[held[-1]] + MS, k) for r in held}
    elif form == "rows_time":  # slide a rows, duration b
        for k in range(1, n_rows // a + 1):
            c = k * a - 1
            end = ts[c] + MS
            out |= {(r, end - b, end, k) for r in range(c + 1) if end - b <= ts[r] < end}
    else:  # slide a (duration), size b rows
        idx = 0
        for bound in range(-200 * a + off, 200 * a, a):
            if any(bound - a <= t < bound for t in ts):
                held = [r for r in range(n_rows) if ts[r] < bound][-b:]
                out |= {(r, ts[held[0]], bound, idx) for r in held}
                idx += 1
    return {tuple(int(x) for x in t) for t in out}


@settings(max_examples=300, deadline=None)
@given(times.map(np.sort), st.integers(1, 6), st.integers(1, 7), st.integers(-5, 5))
def test_count_windows_match_bruteforce(ts, a, b, off):
    ts = ts * MS  # whole milliseconds, so the +1 ms of count windows is visible
    assert as_set(A.tumble_rows(ts, a)) == ref_count(ts, "tumble", a, b)
    assert as_set(A.hop_rows_rows(ts, a, b)) == ref_count(ts, "rows_rows", a, b)
    assert as_set(A.hop_rows_time(ts, a, b * MS)) == ref_count(ts, "rows_time", a, b * MS)
    assert as_set(A.hop_time_rows(ts, a * MS, b, off % a * MS)) == ref_count(ts, "time_rows", a * MS, b, off % a * MS)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(-3, 3)), st.one_of(st.none(), st.sampled_from("abc")),
                          st.floats(-2, 2, allow_nan=False)), max_size=20))
def test_count_order_matches_sorted(rows):
    cols = [np.array([r[i] for r in rows], dtype=object) for i in range(3)]
    cols[2] = np.array([r[2] for r in rows], dtype=np.float64)
    order = A.count_order(cols)
    key = [((r[0] is not None, r[0] or 0), (r[1] is not None, r[1] or ""), r[2], i) for i, r in enumerate(rows)]
    assert list(order) == [i for *_, i in sorted(key)]
