"""Every window kind on Spark (native and UDTF plans) against DuckDB and hand-worked tables."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.difftools import EVENTS, assert_same, load

T = dt.datetime


def at(hh: int, mm: int, ss: int = 0) -> dt.datetime:
    return T(2020, 4, 15, hh, mm, ss)


BID_COLUMNS = [("bidtime", "timestamp", "TIMESTAMP"), ("price", "decimal(10,2)", "DECIMAL(10,2)"),
               ("item", "string", "VARCHAR"), ("supplier_id", "string", "VARCHAR")]
BIDS = [
    (at(8, 5), Decimal("4.00"), "C", "supplier1"),
    (at(8, 7), Decimal("2.00"), "A", "supplier1"),
    (at(8, 9), Decimal("5.00"), "D", "supplier2"),
    (at(8, 11), Decimal("3.00"), "B", "supplier2"),
    (at(8, 13), Decimal("1.00"), "E", "supplier1"),
    (at(8, 17), Decimal("6.00"), "F", "supplier2"),
]

# Edge cases: rows exactly on boundaries, ties, out-of-order, NULL ts and keys, before 1970,
# across midnight.
EDGE = [
    (T(2024, 1, 1, 23, 55), "a", 1),
    (T(2024, 1, 2, 0, 0), "a", 2),  # on a boundary, across midnight
    (T(2024, 1, 2, 0, 0), "b", 3),  # tie
    (T(2024, 1, 2, 0, 0), "b", 3),  # duplicate row
    (T(2024, 1, 1, 23, 59, 59), "a", 4),  # out of order
    (T(2024, 1, 2, 0, 10), None, 5),  # NULL key, on a boundary
    (None, "a", 6),  # NULL ts: in no window
    (T(2024, 1, 2, 0, 4, 59), "b", 7),
    (T(2024, 1, 2, 0, 15), "a", 8),
    (T(1969, 12, 31, 23, 58), "c", 9),  # before the epoch
    (T(1969, 12, 31, 23, 59, 30), "c", None),
]


@pytest.fixture()
def bids(spark, duck):
    load(spark, duck, "bids", BID_COLUMNS, BIDS)


@pytest.fixture()
def edge(spark, duck):
    load(spark, duck, "edge", EVENTS, EDGE)


def agg(tvf: str, keys: str = "") -> str:
    return (f"SELECT window_start, window_end, window_time{', ' + keys if keys else ''}, COUNT(*) AS n, "
            f"SUM(v) AS s FROM {tvf} GROUP BY window_start, window_end, window_time{', ' + keys if keys else ''}")


# --- the Flink documentation's Bid examples, worked by hand -----------------------------------

def test_flink_tumble_bids(spark, duck, bids):
    assert_same(spark, duck, "SELECT window_start, window_end, SUM(price) FROM TABLE(TUMBLE(TABLE Bids, "
                "DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end", expected=[
                    (at(8, 0), at(8, 10), 11.0), (at(8, 10), at(8, 20), 10.0)])


def test_flink_hop_bids(spark, duck, bids):
    assert_same(spark, duck, "SELECT window_start, window_end, SUM(price) FROM TABLE(HOP(TABLE Bids, "
                "DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)) GROUP BY window_start, window_end",
                expected=[(at(8, 0), at(8, 10), 11.0), (at(8, 5), at(8, 15), 15.0), (at(8, 10), at(8, 20), 10.0),
                          (at(8, 15), at(8, 25), 6.0)])


def test_flink_cumulate_bids(spark, duck, bids):
    assert_same(spark, duck, "SELECT window_start, window_end, SUM(price) FROM TABLE(CUMULATE(TABLE Bids, "
                "DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES)) "
                "GROUP BY window_start, window_end", expected=[
                    (at(8, 0), at(8, 6), 4.0), (at(8, 0), at(8, 8), 6.0), (at(8, 0), at(8, 10), 11.0),
                    (at(8, 10), at(8, 12), 3.0), (at(8, 10), at(8, 14), 4.0), (at(8, 10), at(8, 16), 4.0),
                    (at(8, 10), at(8, 18), 10.0), (at(8, 10), at(8, 20), 10.0)])


def test_session_touching_merge_bids(spark, duck, bids):
    # gap 2 min: 08:05 -> 08:07 touches (joins), ... 08:13 ends 08:15 < 08:17: new session
    assert_same(spark, duck, "SELECT window_start, window_end, SUM(price) FROM SESSION(TABLE Bids, "
                "DESCRIPTOR(bidtime), INTERVAL '2' MINUTES) GROUP BY window_start, window_end", expected=[
                    (at(8, 5), at(8, 15), 15.0), (at(8, 17), at(8, 19), 6.0)])


def test_session_partitioned_bids(spark, duck, bids):
    assert_same(spark, duck, "SELECT supplier_id, window_start, window_end, SUM(price) FROM SESSION(TABLE Bids "
                "PARTITION BY supplier_id, DESCRIPTOR(bidtime), INTERVAL '4' MINUTES) "
                "GROUP BY supplier_id, window_start, window_end", expected=[
                    ("supplier1", at(8, 5), at(8, 11), 6.0), ("supplier1", at(8, 13), at(8, 17), 1.0),
                    ("supplier2", at(8, 9), at(8, 15), 8.0), ("supplier2", at(8, 17), at(8, 21), 6.0)])


def test_window_topn_bids(spark, duck, bids):
    sql = """
        SELECT * FROM (
          SELECT window_start, window_end, item, price,
                 ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
          FROM TUMBLE(TABLE Bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
        ) WHERE rownum <= 2"""
    assert_same(spark, duck, sql, expected=[
        (at(8, 0), at(8, 10), "D", 5.0, 1), (at(8, 0), at(8, 10), "C", 4.0, 2),
        (at(8, 10), at(8, 20), "F", 6.0, 1), (at(8, 10), at(8, 20), "B", 3.0, 2)])


def test_window_join_bids(spark, duck, bids):
    sql = """
        SELECT l.window_start, l.item, r.item FROM TUMBLE(TABLE Bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES) l
        JOIN TABLE(TUMBLE(TABLE(SELECT * FROM Bids WHERE price > 4), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) r
        ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.supplier_id = r.supplier_id"""
    assert_same(spark, duck, sql, expected=[
        (at(8, 0), "D", "D"), (at(8, 10), "B", "F"), (at(8, 10), "F", "F")])


def test_cte_and_select_star(spark, duck, bids):
    sql = """
        WITH cheap AS (SELECT * FROM Bids WHERE price < 5)
        SELECT * FROM TUMBLE(DATA => TABLE cheap, TIMECOL => DESCRIPTOR(bidtime), SIZE => INTERVAL '10' MINUTES)"""
    rows = assert_same(spark, duck, sql)
    assert len(rows) == 4 and all(r[5] - r[4] == dt.timedelta(minutes=10) for r in rows)
    assert all(r[6] == r[5] - dt.timedelta(milliseconds=1) for r in rows)


# --- edge cases, every kind -------------------------------------------------------------------

TIME_TVFS = [
    "TUMBLE(TABLE edge, DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
    "TUMBLE(TABLE edge, DESCRIPTOR(ts), INTERVAL '1' DAY, INTERVAL '-8' HOURS)",
    "TUMBLE(TABLE edge, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '3' MINUTES)",
    "HOP(TABLE edge, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)",
    "HOP(TABLE edge, DESCRIPTOR(ts), INTERVAL '4' MINUTES, INTERVAL '10' MINUTES, INTERVAL '1' MINUTES)",
    "HOP(TABLE edge, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '3' MINUTES)",  # slide > size: gaps
    "CUMULATE(TABLE edge, DESCRIPTOR(ts), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES)",
    "CUMULATE(TABLE edge, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '1' HOUR, INTERVAL '-7' MINUTES)",
    "SESSION(TABLE edge, DESCRIPTOR(ts), INTERVAL '5' MINUTES)",
    "SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES)",
    "SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '4' MINUTES, INTERVAL '6' MINUTES)",
    "SESSION(TABLE edge PARTITION BY (k), DESCRIPTOR(ts), "
    "CASE WHEN v > 4 THEN INTERVAL '10' MINUTES WHEN v > 1 THEN INTERVAL '1' MINUTES END)",
]

COUNT_TVFS = [
    "TUMBLE(TABLE edge PARTITION BY k, DESCRIPTOR(ts), ROWS 2)",
    "TUMBLE(TABLE edge, DESCRIPTOR(ts), ROWS 3)",
    "HOP(TABLE edge PARTITION BY k, DESCRIPTOR(ts), ROWS 2, ROWS 3)",
    "HOP(TABLE edge, DESCRIPTOR(ts), ROWS 1, ROWS 3)",
    "HOP(TABLE edge, DESCRIPTOR(ts), INTERVAL '10' MINUTES, ROWS 3)",
    "HOP(TABLE edge PARTITION BY k, DESCRIPTOR(ts), ROWS 2, INTERVAL '10' MINUTES)",
    "HOP(TABLE edge, DESCRIPTOR(ts), ROWS 1, INTERVAL '5' MINUTES)",
]


@pytest.mark.parametrize("tvf", TIME_TVFS + COUNT_TVFS)
def test_edge_rows(spark, duck, edge, tvf):
    assert_same(spark, duck, f"SELECT * FROM {tvf}")


@pytest.mark.parametrize("tvf", TIME_TVFS[::3] + COUNT_TVFS[::2])
def test_edge_aggregates(spark, duck, edge, tvf):
    assert_same(spark, duck, agg(tvf, "k"), plans=("auto",))


@pytest.mark.parametrize("tvf", ["TUMBLE(TABLE edge, DESCRIPTOR(ts), INTERVAL '10' MINUTES)",
                                 "SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES)",
                                 "HOP(TABLE edge, DESCRIPTOR(ts), ROWS 1, ROWS 3)"])
def test_empty_input(spark, duck, tvf):
    load(spark, duck, "edge", EVENTS, [])
    assert assert_same(spark, duck, f"SELECT * FROM {tvf}") == []


def test_tumble_hand_worked_edges(spark, duck, edge):
    rows = assert_same(spark, duck, agg("TUMBLE(TABLE edge, DESCRIPTOR(ts), INTERVAL '10' MINUTES)"), plans=("auto",))
    d = dt.timedelta
    assert rows == [
        (T(1969, 12, 31, 23, 50), T(1970, 1, 1), T(1970, 1, 1) - d(milliseconds=1), 2, 9),
        (T(2024, 1, 1, 23, 50), T(2024, 1, 2), T(2024, 1, 2) - d(milliseconds=1), 2, 5),
        (T(2024, 1, 2, 0, 0), T(2024, 1, 2, 0, 10), T(2024, 1, 2, 0, 10) - d(milliseconds=1), 4, 15),
        (T(2024, 1, 2, 0, 10), T(2024, 1, 2, 0, 20), T(2024, 1, 2, 0, 20) - d(milliseconds=1), 2, 13),
    ]


def test_storm_tumble_rows_hand_worked(spark, duck, edge):
    # partition a in ts order: 23:55(1), 23:59:59(4), 00:00(2), 00:15(8) -> windows [1,4], [2,8]
    sql = ("SELECT k, window_index, window_start, window_end, SUM(v) FROM TUMBLE(TABLE edge PARTITION BY k, "
           "DESCRIPTOR(ts), ROWS 2) WHERE k = 'a' GROUP BY k, window_index, window_start, window_end")
    ms = dt.timedelta(milliseconds=1)
    assert_same(spark, duck, sql, expected=[
        ("a", 0, T(2024, 1, 1, 23, 55), T(2024, 1, 1, 23, 59, 59) + ms, 5),
        ("a", 1, T(2024, 1, 2, 0, 0), T(2024, 1, 2, 0, 15) + ms, 10)])


def test_storm_hop_rows_rows_hand_worked(spark, duck, edge):
    # partition b: 00:00(3), 00:00(3), 00:04:59(7); ROWS 1, ROWS 2: windows close at rows 0, 1, 2
    sql = ("SELECT window_index, COUNT(*), SUM(v) FROM HOP(TABLE edge PARTITION BY k, DESCRIPTOR(ts), ROWS 1, "
           "ROWS 2) WHERE k = 'b' GROUP BY window_index")
    assert_same(spark, duck, sql, expected=[(1, 1, 3), (2, 2, 6), (3, 2, 10)])


# --- hypothesis: random tables, several keys, ties, NULLs, out of order -------------------------

BASE = T(2024, 3, 1)
timestamps = st.one_of(st.none(), st.integers(0, 40).map(lambda m: BASE + dt.timedelta(minutes=m)),
                       st.integers(0, 2400).map(lambda s: BASE + dt.timedelta(seconds=s)))
event_rows = st.lists(st.tuples(timestamps, st.sampled_from(["a", "b", None]), st.integers(-5, 5)), max_size=25)
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(rows=event_rows, size=st.integers(1, 12), offset=st.integers(-3, 3))
def test_random_tumble(spark, duck, rows, size, offset):
    load(spark, duck, "rnd", EVENTS, rows)
    offset = offset if abs(offset) < size else 0
    assert_same(spark, duck, agg(f"TUMBLE(TABLE rnd, DESCRIPTOR(ts), INTERVAL '{size}' MINUTES, "
                                 f"INTERVAL '{offset}' MINUTES)", "k"), plans=("auto",))


@SETTINGS
@given(rows=event_rows, slide=st.integers(1, 9), size=st.integers(1, 15))
def test_random_hop(spark, duck, rows, slide, size):
    load(spark, duck, "rnd", EVENTS, rows)
    assert_same(spark, duck, agg(f"HOP(TABLE rnd, DESCRIPTOR(ts), INTERVAL '{slide}' MINUTES, "
                                 f"INTERVAL '{size}' MINUTES)", "k"), plans=("auto",))


@SETTINGS
@given(rows=event_rows, step=st.integers(1, 5), mult=st.integers(1, 4))
def test_random_cumulate(spark, duck, rows, step, mult):
    load(spark, duck, "rnd", EVENTS, rows)
    assert_same(spark, duck, agg(f"CUMULATE(TABLE rnd, DESCRIPTOR(ts), INTERVAL '{step}' MINUTES, "
                                 f"INTERVAL '{step * mult}' MINUTES)", "k"), plans=("auto",))


@SETTINGS
@given(rows=event_rows, gap=st.integers(1, 10), max_dur=st.one_of(st.none(), st.integers(1, 20)))
def test_random_session(spark, duck, rows, gap, max_dur):
    load(spark, duck, "rnd", EVENTS, rows)
    extra = f", INTERVAL '{max_dur}' MINUTES" if max_dur else ""
    assert_same(spark, duck, f"SELECT * FROM SESSION(TABLE rnd PARTITION BY k, DESCRIPTOR(ts), "
                             f"INTERVAL '{gap}' MINUTES{extra})")


@SETTINGS
@given(rows=event_rows, form=st.sampled_from(COUNT_TVFS), n=st.integers(1, 4))
def test_random_count_windows(spark, duck, rows, form, n):
    load(spark, duck, "rnd", EVENTS, rows)
    tvf = form.replace("TABLE edge", "TABLE rnd").replace("ROWS 3", f"ROWS {n}")
    assert_same(spark, duck, f"SELECT * FROM {tvf}")
