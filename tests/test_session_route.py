"""SESSION aggregations grouped by session (spark_groupby.SessionRoute) against DuckDB and hand-worked
tables: the routed plan must give the per-row plan's answer, and fall back wherever it could not."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlwin
from tests.difftools import assert_same, load, normalize

T = dt.datetime
MS = dt.timedelta(milliseconds=1)
COLUMNS = [("ts", "timestamp", "TIMESTAMP"), ("k", "string", "VARCHAR"), ("k2", "int", "INTEGER"),
           ("v", "int", "INTEGER")]
ROUTED = "LAG("  # the routed plan names sessions with LAG; the per-row plan has no LAG


def at(mm: int, ss: int = 0) -> dt.datetime:
    return T(2024, 6, 1, 10, mm, ss)


ROWS = [
    (at(0), "a", 1, 1),
    (at(5), "a", 1, 2),  # exactly gap (5 min) after the previous row: joins
    (at(10, 1), "a", 1, 3),  # 5 min 1 s after: a new session
    (at(10, 1), "a", 1, 4),  # tie
    (at(3), "a", 2, 5),  # another k2: its own session when partitioned by (k, k2)
    (None, "a", 1, 6),  # NULL ts: in no window
    (at(0), None, None, 7),  # NULL keys form their own partition
    (at(5), None, None, 8),
    (at(2), "b", 1, 9),
]


@pytest.fixture()
def sess(spark, duck):
    load(spark, duck, "sess", COLUMNS, ROWS)


def routed(spark, sql: str) -> bool:
    return ROUTED in sqlwin.rewrite(sql, catalog=spark)


def test_touching_rows_ties_and_null_ts_hand_worked(spark, duck, sess):
    sql = ("SELECT k, window_start, window_end, window_time, COUNT(*) AS n, SUM(v) AS s FROM SESSION(TABLE sess "
           "PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES) GROUP BY k, window_start, window_end, window_time")
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",), expected=[
        ("a", at(0), at(10), at(10) - MS, 3, 8),  # 10:00, 10:03, 10:05 chain; 10:05 + 5 min = 10:10
        ("a", at(10, 1), at(15, 1), at(15, 1) - MS, 2, 7),
        ("b", at(2), at(7), at(7) - MS, 1, 9),
        (None, at(0), at(10), at(10) - MS, 2, 15)])


def test_several_partition_keys_having_and_order(spark, duck, sess):
    sql = ("SELECT window_end, k2, k, COUNT(*) AS n FROM SESSION(TABLE sess PARTITION BY k, k2, DESCRIPTOR(ts), "
           "INTERVAL '5' MINUTES) AS w GROUP BY w.k2, w.window_start, k, w.window_end "
           "HAVING COUNT(*) > 1 OR window_end > TIMESTAMP '2024-06-01 10:14:00' ORDER BY window_end, k")
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",), expected=[
        (at(10), 1, "a", 2), (at(10), None, None, 2), (at(15, 1), 1, "a", 2)])


def test_aggregates_over_window_columns(spark, duck, sess):
    per_row_start = ("SELECT k, window_start, window_end, MIN(window_start) AS lo, COUNT(window_start) AS n, "
                     "MAX(v) - MIN(v) AS spread FROM SESSION(TABLE sess PARTITION BY k, DESCRIPTOR(ts), "
                     "INTERVAL '5' MINUTES) GROUP BY k, window_start, window_end")
    assert routed(spark, per_row_start)
    assert_same(spark, duck, per_row_start, plans=("auto",))
    # window_end is known per session, not per row: this stays on the per-row plan
    per_row_end = per_row_start.replace("MIN(window_start)", "MAX(window_end)")
    assert not routed(spark, per_row_end)
    assert_same(spark, duck, per_row_end, plans=("auto",))


def test_window_functions_over_the_grouped_bounds(spark, duck, sess):
    sql = ("SELECT k, window_start, window_end, SUM(v) AS s, RANK() OVER (PARTITION BY k ORDER BY window_end DESC) "
           "AS r FROM SESSION(TABLE sess PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES) "
           "GROUP BY k, window_start, window_end")
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))


@pytest.mark.parametrize("sql", [
    # WHERE drops rows after sessions formed
    "SELECT k, window_start, window_end, COUNT(*) FROM SESSION(TABLE sess PARTITION BY k, DESCRIPTOR(ts), "
    "INTERVAL '5' MINUTES) WHERE v <> 2 GROUP BY k, window_start, window_end",
    # sessions of different keys with equal bounds are one group
    "SELECT window_start, window_end, COUNT(*) FROM SESSION(TABLE sess PARTITION BY k, DESCRIPTOR(ts), "
    "INTERVAL '5' MINUTES) GROUP BY window_start, window_end",
    # a key beyond the partition splits a session without changing its bounds
    "SELECT k, k2, window_start, window_end, COUNT(*) FROM SESSION(TABLE sess PARTITION BY k, DESCRIPTOR(ts), "
    "INTERVAL '5' MINUTES) GROUP BY k, k2, window_start, window_end",
    # dynamic gap and max_duration keep their own plans
    "SELECT k, window_start, window_end, COUNT(*) FROM SESSION(TABLE sess PARTITION BY k, DESCRIPTOR(ts), "
    "CASE WHEN v > 4 THEN INTERVAL '10' MINUTES ELSE INTERVAL '2' MINUTES END) GROUP BY k, window_start, window_end",
    "SELECT k, window_start, window_end, COUNT(*) FROM SESSION(TABLE sess PARTITION BY k, DESCRIPTOR(ts), "
    "INTERVAL '5' MINUTES, INTERVAL '7' MINUTES) GROUP BY k, window_start, window_end",
])
def test_not_routed_where_the_answer_could_differ(spark, duck, sess, sql):
    assert not routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))


def test_timestamp_ntz(spark, duck):
    load(spark, duck, "sess_ntz", [("ts", "timestamp_ntz", "TIMESTAMP"), *COLUMNS[1:]], ROWS)
    sql = ("SELECT k, window_start, window_end, window_time, SUM(v) FROM SESSION(TABLE sess_ntz PARTITION BY k, "
           "DESCRIPTOR(ts), INTERVAL '5' MINUTES) GROUP BY k, window_start, window_end, window_time")
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))
    types = dict(sqlwin.sql(spark, sql).dtypes)
    assert types["window_start"] == types["window_end"] == types["window_time"] == "timestamp_ntz"


def test_explain_rewrite_shows_the_routed_plan(spark, sess):
    sql = ("SELECT k, window_start, window_end, COUNT(*) FROM SESSION(TABLE sess PARTITION BY k, DESCRIPTOR(ts), "
           "INTERVAL '5' MINUTES) GROUP BY k, window_start, window_end")
    text = sqlwin.sql(spark, f"EXPLAIN REWRITE {sql}").collect()[0][0]
    assert ROUTED in text and "GROUP BY k, " in text and "SESSION(" not in text
    assert normalize(map(tuple, spark.sql(text).collect())) == normalize(map(tuple, sqlwin.sql(spark, sql).collect()))


# --- hypothesis: minute-grid times (rows exactly gap apart are common), ties, NULLs, several keys ---

BASE = T(2024, 3, 1)
timestamps = st.one_of(st.none(), st.integers(0, 40).map(lambda m: BASE + dt.timedelta(minutes=m)),
                       st.integers(0, 2400).map(lambda s: BASE + dt.timedelta(seconds=s)))
rows = st.lists(st.tuples(timestamps, st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, None]),
                          st.integers(-5, 5)), max_size=30)
PARTITIONS = ["", " PARTITION BY k", " PARTITION BY k, k2", " PARTITION BY (k2, k)"]
SHAPES = [
    "SELECT {keys}window_start, window_end, COUNT(*) AS n, SUM(v) AS s FROM {tvf} GROUP BY {keys}window_start, "
    "window_end",
    "SELECT {keys}window_start, window_end, window_time, MIN(v), MAX(window_start) AS last_start FROM {tvf} "
    "GROUP BY {keys}window_start, window_end, window_time HAVING COUNT(*) > 1",
    "SELECT {keys}window_time, COUNT(*) FROM {tvf} GROUP BY window_end, {keys}window_start, window_time "
    "HAVING MAX(v) >= 0 AND window_end > TIMESTAMP '2024-03-01 00:10:00'",
]
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(data=rows, gap=st.integers(1, 10), partition=st.sampled_from(PARTITIONS), shape=st.sampled_from(SHAPES))
def test_random_routed_sessions(spark, duck, data, gap, partition, shape):
    load(spark, duck, "rnd_sess", COLUMNS, data)
    keys = "".join(f"{k.strip('() ')}, " for k in partition.removeprefix(" PARTITION BY ").split(",") if partition)
    tvf = f"SESSION(TABLE rnd_sess{partition}, DESCRIPTOR(ts), INTERVAL '{gap}' MINUTES)"
    sql = shape.format(keys=keys, tvf=tvf)
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))
