"""Count-window aggregations grouped by window (spark_groupby.CountRoute) against DuckDB, hand-worked
tables and the per-row plan itself: the routed plan (bounds as MIN / MAX of the group, one sort) must give
the per-row plan's answer, with the same schema, and fall back wherever it could not."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlwin
from sqlwin.backends import spark_groupby
from tests.difftools import assert_same, load, normalize

T = dt.datetime
MS = dt.timedelta(milliseconds=1)
COLUMNS = [("ts", "timestamp", "TIMESTAMP"), ("k", "string", "VARCHAR"), ("k2", "int", "INTEGER"),
           ("v", "int", "INTEGER"), ("p", "decimal(10,2)", "DECIMAL(10,2)")]


def at(mm: int, ss: int = 0) -> dt.datetime:
    return T(2024, 6, 1, 10, mm, ss)


ROWS = [
    # partition a/1 in count-window order (ts, then k, k2, v, p): 10:00(1), 10:01(2), 10:01(3), 10:01(4),
    # 10:01(5), 10:04(6), 10:09(7): ties in time, broken by v
    (at(1), "a", 1, 3, 1.5),
    (at(0), "a", 1, 1, 2.0),
    (at(1), "a", 1, 5, None),
    (at(4), "a", 1, 6, 4.0),
    (at(1), "a", 1, 2, 0.5),
    (at(9), "a", 1, 7, 1.0),
    (at(1), "a", 1, 4, 3.0),
    (None, "a", 1, 8, 9.0),  # NULL ts: in no window, not counted
    (None, "a", 1, 9, 9.0),
    (at(2), "a", 2, 10, 1.0),  # another k2
    (at(3), "a", 2, 11, 1.0),
    (at(7), "b", 1, 12, 2.0),
    (at(7), None, None, 13, 1.0),  # NULL keys form their own partition
    (at(8), None, None, 14, 1.0),
    (at(5), None, None, 15, 1.0),
]


def decimals(rows) -> list[tuple]:
    return [(*r[:4], None if r[4] is None else Decimal(str(r[4]))) for r in rows]


@pytest.fixture()
def cw(spark, duck):
    load(spark, duck, "cw", COLUMNS, decimals(ROWS))


def rewritten(spark, sql: str) -> str:
    return sqlwin.rewrite(sql, catalog=spark)


def routed(spark, sql: str) -> bool:
    """The routed plan groups by the window number; the per-row plan gives every row its bounds with a
    window function partitioned by it."""
    text = rewritten(spark, sql)
    return re.search(r"GROUP BY .*\b__k\b", text) is not None and ") OVER (PARTITION BY" not in text.replace(
        "ROW_NUMBER() OVER (PARTITION BY", "").replace("COUNT(*) OVER (PARTITION BY", "")


def assert_as_per_row_plan(spark, sql: str) -> None:
    """The routed answer equals the per-row plan's answer exactly: schema (names, types, nullability), rows."""
    routed_df = sqlwin.sql(spark, sql)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(spark_groupby, "_route_count", lambda *args: None)
        assert not routed(spark, sql)
        per_row_df = sqlwin.sql(spark, sql)
        per_row = per_row_df.collect()
    assert routed_df.schema == per_row_df.schema
    assert sorted(map(repr, routed_df.collect())) == sorted(map(repr, per_row))


def test_ties_null_times_several_keys_partial_windows_hand_worked(spark, duck, cw):
    sql = ("SELECT k, k2, window_index, window_start, window_end, window_time, COUNT(*) AS n, SUM(v) AS s, "
           "AVG(p) AS a, MAX(p) AS mx FROM TUMBLE(TABLE cw PARTITION BY k, k2, DESCRIPTOR(ts), ROWS 2) "
           "GROUP BY k, k2, window_index, window_start, window_end, window_time")
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",), expected=[
        # a/1: [10:00(1), 10:01(2)], [10:01(3), 10:01(4)], [10:01(5), 10:04(6)]; 10:09(7) is a partial window
        ("a", 1, 0, at(0), at(1) + MS, at(1), 2, 3, 1.25, 2.0),
        ("a", 1, 1, at(1), at(1) + MS, at(1), 2, 7, 2.25, 3.0),
        ("a", 1, 2, at(1), at(4) + MS, at(4), 2, 11, 4.0, 4.0),
        ("a", 2, 0, at(2), at(3) + MS, at(3), 2, 21, 1.0, 1.0),
        # b/1 holds one row only: no complete window
        (None, None, 0, at(5), at(7) + MS, at(7), 2, 28, 1.0, 1.0)])  # 10:05(15), 10:07(13); 10:08 partial
    assert_as_per_row_plan(spark, sql)


def test_bench_shape_is_one_sort(spark, cw):
    # the Nexmark count_window query's shape: the bounds come from the aggregation, not a second window pass
    sql = ("SELECT k, window_index, window_start, window_end, COUNT(*) AS n, AVG(p) AS avg_p, MAX(p) AS max_p "
           "FROM TUMBLE(TABLE cw PARTITION BY k, DESCRIPTOR(ts), ROWS 3) GROUP BY k, window_index, window_start, "
           "window_end")
    text = rewritten(spark, sql)
    assert routed(spark, sql)
    assert "TIMESTAMP_MICROS(MIN(UNIX_MICROS(cw.`ts`))) AS window_start" in text
    assert "__cnt" not in text and text.endswith("HAVING COUNT(*) = 3")
    plan = sqlwin.sql(spark, sql)._jdf.queryExecution().executedPlan().toString()
    assert len(re.findall(r"\bSort \[", plan)) == 1, plan
    assert len(re.findall(r"\bWindow \[", plan)) == 1, plan


def test_order_of_keys_having_order_by_and_qualified_names(spark, duck, cw):
    sql = ("SELECT w.window_end, k2, window_index, k, COUNT(*) AS n FROM TUMBLE(TABLE cw PARTITION BY k, k2, "
           "DESCRIPTOR(ts), ROWS 2) AS w GROUP BY w.k2, w.window_start, w.window_index, k, w.window_end "
           "HAVING SUM(v) > 6 OR window_end > TIMESTAMP '2024-06-01 10:03:00' ORDER BY window_end DESC, k")
    assert routed(spark, sql)
    rows = assert_same(spark, duck, sql, plans=("auto",))
    assert rows == normalize([(at(1) + MS, 1, 1, "a", 2), (at(4) + MS, 1, 2, "a", 2),  # a/1's window 0: SUM 3
                              (at(3) + MS, 2, 0, "a", 2), (at(7) + MS, None, 0, None, 2)])
    assert [tuple(r) for r in sqlwin.sql(spark, sql).collect()][:2] == [(at(7) + MS, None, 0, None, 2),
                                                                       (at(4) + MS, 1, 2, "a", 2)]
    assert_as_per_row_plan(spark, sql)


def test_window_index_alone_and_per_row(spark, duck, cw):
    # grouped by window_index only (no bound): still one group per window; window_index read per row too
    sql = ("SELECT k, window_index, SUM(window_index) AS si, COUNT(*) FILTER (WHERE window_index > 0) AS f, "
           "MIN(v) AS lo FROM TUMBLE(TABLE cw PARTITION BY k, DESCRIPTOR(ts), ROWS 3) GROUP BY k, window_index")
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))
    assert_as_per_row_plan(spark, sql)


def test_no_partition_and_window_functions(spark, duck, cw):
    sql = ("SELECT window_index, window_start, window_end, SUM(v) AS s, RANK() OVER (ORDER BY window_end DESC, "
           "window_index) AS r FROM TUMBLE(TABLE cw, DESCRIPTOR(ts), ROWS 4) GROUP BY window_index, window_start, "
           "window_end")
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))
    assert_as_per_row_plan(spark, sql)


@pytest.mark.parametrize("sizes", ["ROWS 1, ROWS 3", "ROWS 2, ROWS 3", "ROWS 3, ROWS 2", "ROWS 2, ROWS 2"])
def test_hop_rows_rows(spark, duck, cw, sizes):
    sql = (f"SELECT k, k2, window_index, window_start, window_end, window_time, COUNT(*) AS n, SUM(v) AS s "
           f"FROM HOP(TABLE cw PARTITION BY k, k2, DESCRIPTOR(ts), {sizes}) "
           "GROUP BY k, k2, window_index, window_start, window_end, window_time")
    assert routed(spark, sql)
    assert "__cnt" in rewritten(spark, sql)  # HOP keeps its partition count: its first windows are short
    assert_same(spark, duck, sql, plans=("auto",))
    assert_as_per_row_plan(spark, sql)


def test_ntz_and_empty_input(spark, duck):
    load(spark, duck, "cw_ntz", [("ts", "timestamp_ntz", "TIMESTAMP"), *COLUMNS[1:]], decimals(ROWS))
    sql = ("SELECT k, window_index, window_start, window_end, window_time, SUM(v) FROM TUMBLE(TABLE cw_ntz "
           "PARTITION BY k, DESCRIPTOR(ts), ROWS 2) GROUP BY k, window_index, window_start, window_end, window_time")
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))
    types = dict(sqlwin.sql(spark, sql).dtypes)
    assert types["window_start"] == types["window_end"] == types["window_time"] == "timestamp_ntz"
    assert types["window_index"] == "bigint"
    assert_as_per_row_plan(spark, sql)
    load(spark, duck, "cw_ntz", [("ts", "timestamp_ntz", "TIMESTAMP"), *COLUMNS[1:]], [])
    assert assert_same(spark, duck, sql, plans=("auto",)) == []


@pytest.mark.parametrize("sql", [
    # the bounds alone do not name a window: 10:01-10:01 is both of a/1's windows 1 and 2 with ROWS 1
    "SELECT k, window_start, window_end, COUNT(*) FROM TUMBLE(TABLE cw PARTITION BY k, DESCRIPTOR(ts), ROWS 1) "
    "GROUP BY k, window_start, window_end",
    # WHERE drops rows after windows formed: the bounds still span them
    "SELECT k, window_index, window_start, window_end, COUNT(*) FROM TUMBLE(TABLE cw PARTITION BY k, "
    "DESCRIPTOR(ts), ROWS 2) WHERE v <> 2 GROUP BY k, window_index, window_start, window_end",
    # a key beyond the partition splits a window without changing its bounds
    "SELECT k, k2, window_index, window_start, COUNT(*) FROM TUMBLE(TABLE cw PARTITION BY k, DESCRIPTOR(ts), "
    "ROWS 2) GROUP BY k, k2, window_index, window_start",
    # windows of different partitions with one index are one group
    "SELECT window_index, window_start, window_end, COUNT(*) FROM TUMBLE(TABLE cw PARTITION BY k, "
    "DESCRIPTOR(ts), ROWS 2) GROUP BY window_index, window_start, window_end",
    # a bound read per row
    "SELECT k, window_index, MAX(window_end) AS e, COUNT(*) FROM TUMBLE(TABLE cw PARTITION BY k, DESCRIPTOR(ts), "
    "ROWS 2) GROUP BY k, window_index",
    # an output named like a bound: ORDER BY means it
    "SELECT k, window_index, MAX(v) AS window_start FROM TUMBLE(TABLE cw PARTITION BY k, DESCRIPTOR(ts), "
    "ROWS 2) GROUP BY k, window_index ORDER BY window_start",
    # HOP with a duration keeps its UDTF
    "SELECT k, window_index, window_start, window_end, COUNT(*) FROM HOP(TABLE cw PARTITION BY k, DESCRIPTOR(ts), "
    "ROWS 2, INTERVAL '5' MINUTES) GROUP BY k, window_index, window_start, window_end",
])
def test_not_routed_where_the_answer_could_differ(spark, duck, cw, sql):
    assert not routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))


def test_not_routed_keeps_errors(spark, cw):
    # window_end not grouped: an error on the per-row plan, so on every plan
    sql = ("SELECT k, window_index, window_end, COUNT(*) FROM TUMBLE(TABLE cw PARTITION BY k, DESCRIPTOR(ts), "
           "ROWS 2) GROUP BY k, window_index")
    assert not routed(spark, sql)
    with pytest.raises(Exception, match="window_end"):
        sqlwin.sql(spark, sql).collect()


def test_udtf_plan_agrees(spark, duck, cw):
    sql = ("SELECT k, window_index, window_start, window_end, COUNT(*) AS n, SUM(v) FROM TUMBLE(TABLE cw "
           "PARTITION BY k, DESCRIPTOR(ts), ROWS 2) GROUP BY k, window_index, window_start, window_end")
    assert_same(spark, duck, sql, plans=("auto", "udtf"))


# --- hypothesis: minute-grid times (ties are common), NULLs, several keys, partial last windows ---

BASE = T(2024, 3, 1)
timestamps = st.one_of(st.none(), st.integers(0, 10).map(lambda m: BASE + dt.timedelta(minutes=m)),
                       st.integers(0, 1200).map(lambda s: BASE + dt.timedelta(seconds=s)))
rows = st.lists(st.tuples(timestamps, st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, None]),
                          st.integers(-5, 5), st.sampled_from([None, 1.25, 2.5])), max_size=30)
PARTITIONS = ["", " PARTITION BY k", " PARTITION BY k, k2", " PARTITION BY (k2, k)"]
FORMS = ["TUMBLE({data}, DESCRIPTOR(ts), ROWS {n})", "HOP({data}, DESCRIPTOR(ts), ROWS {m}, ROWS {n})"]
SHAPES = [
    "SELECT {keys}window_index, window_start, window_end, COUNT(*) AS n, SUM(v) AS s, AVG(p) AS a FROM {tvf} "
    "GROUP BY {keys}window_index, window_start, window_end",
    "SELECT {keys}window_index, window_time, MIN(v), MAX(p) FROM {tvf} "
    "GROUP BY {keys}window_index, window_end, window_time, window_start HAVING COUNT(*) > 1",
    "SELECT window_end, {keys}COUNT(*) FROM {tvf} GROUP BY window_index, {keys}window_end "
    "HAVING MAX(v) >= 0 AND window_end > TIMESTAMP '2024-03-01 00:05:00'",
]
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(data=rows, n=st.integers(1, 4), m=st.integers(1, 4), partition=st.sampled_from(PARTITIONS),
       form=st.sampled_from(FORMS), shape=st.sampled_from(SHAPES))
def test_random_routed_count_windows(spark, duck, data, n, m, partition, form, shape):
    load(spark, duck, "rnd_cw", COLUMNS, decimals(data))
    keys = "".join(f"{k.strip('() ')}, " for k in partition.removeprefix(" PARTITION BY ").split(",") if partition)
    tvf = form.format(data=f"TABLE rnd_cw{partition}", n=n, m=m)
    sql = shape.format(keys=keys, tvf=tvf)
    assert routed(spark, sql)
    assert_same(spark, duck, sql, plans=("auto",))
