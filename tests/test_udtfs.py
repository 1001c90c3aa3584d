"""The Spark UDTFs on the shared SparkSession: generic table functions from plain Spark SQL and the
per-spec arrow UDTFs, against hand-worked tables and the brute-force references of
test_assigners (over hypothesis data; few examples, Spark is slow)."""

from __future__ import annotations

import os
import sys
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp
from test_assigners import ref_count, ref_session, ref_time

import udtfs
from sqlwin.core.timeunits import MICROS_PER_MILLI as MS
from sqlwin.core.timeunits import MICROS_PER_MINUTE as MIN
from sqlwin.plan.windows import Column, Relation, Rows, TimeType, WindowKind, WindowSpec
from udtfs import _arrow

# arrow UDTFs need pyarrow in the Python workers: run them with this interpreter (read when the
# session fixture starts the SparkContext, after collection).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

SPARK_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))

BID_SQL = """SELECT * FROM VALUES
 (TIMESTAMP'2020-04-15 08:05:00', 4.0, 'C', 's1'), (TIMESTAMP'2020-04-15 08:07:00', 2.0, 'A', 's1'),
 (TIMESTAMP'2020-04-15 08:09:00', 5.0, 'D', 's2'), (TIMESTAMP'2020-04-15 08:11:00', 3.0, 'B', 's2'),
 (TIMESTAMP'2020-04-15 08:13:00', 1.0, 'E', 's1'), (TIMESTAMP'2020-04-15 08:17:00', 6.0, 'F', 's2'),
 (CAST(NULL AS TIMESTAMP), 9.0, 'N', 's1')
 AS t(bidtime, price, item, supplier)"""
BID_COLS = (Column("bidtime", "timestamp"), Column("price", "decimal(2,1)"), Column("item", "string"),
            Column("supplier", "string"))


@pytest.fixture(scope="module")
def bid(spark):
    spark.sql(f"CREATE OR REPLACE TEMP VIEW bid AS {BID_SQL}")
    spark.sql("CREATE OR REPLACE TEMP VIEW bid_ntz AS SELECT CAST(bidtime AS TIMESTAMP_NTZ) AS bidtime, "
              "price, item, supplier FROM bid")
    return "bid"


def sums(spark, from_sql: str) -> dict[tuple[str, str], float]:
    rows = spark.sql(f"""SELECT date_format(window_start, 'HH:mm') s, date_format(window_end, 'HH:mm') e,
        CAST(SUM(price) AS DOUBLE) p, MAX(unix_micros(CAST(window_end AS TIMESTAMP))
                                      - unix_micros(CAST(window_time AS TIMESTAMP))) wt
        FROM {from_sql} GROUP BY 1, 2""").collect()
    assert all(r.wt == MS for r in rows)  # window_time = window_end - 1 ms
    return {(r.s, r.e): r.p for r in rows}


def items(spark, from_sql: str) -> set[tuple]:
    return {tuple(r) for r in spark.sql(
        f"SELECT item, date_format(window_start, 'HH:mm'), date_format(window_end, 'HH:mm') FROM {from_sql}"
    ).collect()}


TUMBLE_BID = {("08:00", "08:10"): 11.0, ("08:10", "08:20"): 10.0}
HOP_BID = {("08:00", "08:10"): 11.0, ("08:05", "08:15"): 15.0, ("08:10", "08:20"): 10.0, ("08:15", "08:25"): 6.0}
CUMULATE_BID = {("08:00", "08:06"): 4.0, ("08:00", "08:08"): 6.0, ("08:00", "08:10"): 11.0,
                ("08:10", "08:12"): 3.0, ("08:10", "08:14"): 4.0, ("08:10", "08:16"): 4.0,
                ("08:10", "08:18"): 10.0, ("08:10", "08:20"): 10.0}
SESSION_BID = {("A", "08:05", "08:12"), ("C", "08:05", "08:12"), ("E", "08:13", "08:18"),
               ("D", "08:09", "08:16"), ("B", "08:09", "08:16"), ("F", "08:17", "08:22")}


# ------------------------------------------------------------------------- generic, plain Spark SQL

@pytest.mark.parametrize("view", ["bid", "bid_ntz"])
def test_generic_functions_bid(spark, bid, view):
    assert sums(spark, f"tumble(TABLE({view}), 'bidtime', INTERVAL 10 MINUTES)") == TUMBLE_BID
    assert sums(spark, f"hop(TABLE({view}), 'BIDTIME', INTERVAL 5 MINUTES, INTERVAL 10 MINUTES)") == HOP_BID
    assert sums(spark, f"cumulate(data => TABLE({view}), timecol => 'bidtime', step => INTERVAL 2 MINUTES, "
                       "size => INTERVAL 10 MINUTES)") == CUMULATE_BID
    assert items(spark, f"session(TABLE({view}) PARTITION BY (supplier) ORDER BY (bidtime), 'bidtime', "
                        "INTERVAL 5 MINUTES)") == SESSION_BID
    schema = spark.sql(f"SELECT * FROM tumble(TABLE({view}), 'bidtime', INTERVAL 10 MINUTES)").schema
    t = "timestamp_ntz" if view == "bid_ntz" else "timestamp"
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields[-3:]] == [
        ("window_start", t), ("window_end", t), ("window_time", t)]


def test_generic_offset_max_duration_single_partition(spark, bid):
    got = sums(spark, "tumble(TABLE(bid), 'bidtime', INTERVAL 10 MINUTES, INTERVAL -3 MINUTES)")
    assert got == {("07:57", "08:07"): 4.0, ("08:07", "08:17"): 11.0, ("08:17", "08:27"): 6.0}
    got = items(spark, "session(TABLE(bid) WITH SINGLE PARTITION, 'bidtime', INTERVAL 5 MINUTES, "
                       "INTERVAL 6 MINUTES)")  # 08:05..08:09 (cap 08:11), then 08:11..08:13 (cap 08:17), F
    assert got == {("C", "08:05", "08:11"), ("A", "08:05", "08:11"), ("D", "08:05", "08:11"),
                   ("B", "08:11", "08:17"), ("E", "08:11", "08:17"), ("F", "08:17", "08:22")}


@pytest.mark.parametrize(("call", "message"), [
    ("tumble(TABLE(bid), 'nope', INTERVAL 1 MINUTE)", "no column"),
    ("tumble(TABLE(bid), 'price', INTERVAL 1 MINUTE)", "must be TIMESTAMP"),
    ("cumulate(TABLE(bid), 'bidtime', INTERVAL 3 MINUTES, INTERVAL 10 MINUTES)", "multiple of step"),
    ("hop(TABLE(bid), 'bidtime', INTERVAL 0 MINUTES, INTERVAL 10 MINUTES)", "must be positive"),
    ("tumble(TABLE(bid), 'bidtime', INTERVAL 1 MINUTE, INTERVAL 2 MINUTES)", "offset"),
])
def test_generic_errors_at_analysis(spark, bid, call, message):
    with pytest.raises(Exception, match=message):
        spark.sql(f"SELECT * FROM {call}").schema  # noqa: B018


# ------------------------------------------------------------------------------ per-spec arrow UDTFs

def spec_of(kind: WindowKind, cols=BID_COLS, time_col="bidtime", node="bid", **kw) -> WindowSpec:
    return WindowSpec(kind, Relation(exp.to_table(node), cols), time_col, **kw)


def run_spec(spark, spec: WindowSpec, relation_sql: str):
    name = udtfs.register_for_spec(spark, spec)
    assert udtfs.register_for_spec(spark, spec) == name and name.startswith("__sqlwin_w_")
    return f"{udtfs.udtf_call_sql(spec, name, relation_sql)} AS w"


def test_spec_time_kinds_bid(spark, bid):
    assert sums(spark, run_spec(spark, spec_of(WindowKind.TUMBLE, size=10 * MIN), "bid")) == TUMBLE_BID
    assert sums(spark, run_spec(spark, spec_of(WindowKind.HOP, slide=5 * MIN, size=10 * MIN), "bid")) == HOP_BID
    assert sums(spark, run_spec(spark, spec_of(WindowKind.CUMULATE, step=2 * MIN, size=10 * MIN),
                                "SELECT * FROM bid")) == CUMULATE_BID
    spec = spec_of(WindowKind.SESSION, gap=5 * MIN, partition_by=("supplier",))
    assert items(spark, run_spec(spark, spec, "bid")) == SESSION_BID
    ntz = tuple(Column(c.name, "timestamp_ntz") if c.name == "bidtime" else c for c in BID_COLS)
    spec = spec_of(WindowKind.SESSION, cols=ntz, gap=5 * MIN, max_duration=6 * MIN, node="bid_ntz")
    df = spark.sql("SELECT * FROM " + run_spec(spark, spec, "bid_ntz"))
    assert df.schema["window_end"].dataType.simpleString() == "timestamp_ntz"
    assert items(spark, run_spec(spark, spec, "bid_ntz")) == {
        ("C", "08:05", "08:11"), ("A", "08:05", "08:11"), ("D", "08:05", "08:11"),
        ("B", "08:11", "08:17"), ("E", "08:11", "08:17"), ("F", "08:17", "08:22")}


def test_udtf_call_sql_convention():
    tumble = spec_of(WindowKind.TUMBLE, size=MIN, partition_by=("supplier",))
    assert udtfs.udtf_call_sql(tumble, "f", "bid") == "f(TABLE(bid))"
    session = spec_of(WindowKind.SESSION, gap=MIN, partition_by=("supplier", "it`em"))
    assert udtfs.udtf_call_sql(session, "f", "SELECT * FROM bid") == \
        "f(TABLE(SELECT * FROM bid) PARTITION BY (`supplier`, `it``em`))"
    count = spec_of(WindowKind.TUMBLE, size=Rows(3))
    assert udtfs.udtf_call_sql(count, "f", "bid") == "f(TABLE(bid) WITH SINGLE PARTITION)"
    assert udtfs.spec.udtf_name(count) != udtfs.spec.udtf_name(spec_of(WindowKind.TUMBLE, size=Rows(4)))


# --------------------------------------------------- hypothesis: Spark vs the brute-force references

HYP_COLS = (Column("k", "int"), Column("ts", "timestamp"), Column("v", "int"))
rows_st = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 2)),  # k: NULL is a partition too
                             st.one_of(st.none(), st.integers(-20, 40)),  # ts in ms (NULL: no window)
                             st.one_of(st.none(), st.integers(0, 3)),  # v: tie-breaker
                             st.one_of(st.none(), st.integers(-2, 9))),  # dynamic gap in ms
                   max_size=30)


def load(spark, rows) -> None:
    df = spark.createDataFrame(rows, "k int, t bigint, v int, g bigint")
    df.selectExpr("k", "timestamp_millis(t) AS ts", "v", "g * 1000 AS g").createOrReplaceTempView("hyp")


def collect(spark, from_sql: str) -> Counter:
    cols = "k, unix_micros(ts), v, unix_micros(window_start), unix_micros(window_end)"
    has_index = "window_index" in spark.sql(f"SELECT * FROM {from_sql}").columns
    return Counter(tuple(r) for r in spark.sql(
        f"SELECT {cols}{', window_index' if has_index else ''} FROM {from_sql}").collect())


def by_partition(rows):
    parts: dict = {}
    for r in rows:
        parts.setdefault(r[0], []).append(r)
    return parts.values()


def expected(rows, windows_of) -> Counter:
    """``windows_of(part_rows)`` -> set of (position, start, end[, index]) within one partition."""
    out: Counter = Counter()
    for part in by_partition(rows):
        for pos, *w in windows_of(part):
            k, t, v, _ = part[pos]
            out[(k, t * MS, v, *w)] += 1
    return out


@SPARK_SETTINGS
@given(rows_st, st.one_of(st.none(), st.integers(1, 25)))
def test_spec_session_dynamic_gap_matches_reference(spark, rows, md):
    load(spark, rows)
    spec = spec_of(WindowKind.SESSION, cols=HYP_COLS, time_col="ts", node="hyp", gap=exp.column("g"),
                   max_duration=md and md * MS, partition_by=("k",))
    got = collect(spark, run_spec(spark, spec, "SELECT k, ts, v, g AS __sqlwin_gap_us FROM hyp"))

    def windows(part):
        ts = [r[1] * MS if r[1] is not None else 0 for r in part]
        gap = [r[3] * MS if r[3] is not None else 0 for r in part]
        return ref_session(ts, gap, [r[1] is not None for r in part], md and md * MS)
    assert got == expected(rows, windows)


FORMS = {  # spec kwargs, ref_count(form, a, b) with a/b in ms or rows
    "tumble": (WindowKind.TUMBLE, lambda a, b: {"size": Rows(a)}),
    "rows_rows": (WindowKind.HOP, lambda a, b: {"slide": Rows(a), "size": Rows(b)}),
    "rows_time": (WindowKind.HOP, lambda a, b: {"slide": Rows(a), "size": b * MS}),
    "time_rows": (WindowKind.HOP, lambda a, b: {"slide": a * MS, "size": Rows(b)}),
}


@SPARK_SETTINGS
@given(rows_st, st.sampled_from(sorted(FORMS)), st.integers(1, 5), st.integers(1, 8), st.booleans())
def test_spec_count_windows_match_reference(spark, rows, form, a, b, partitioned):
    load(spark, rows)
    kind, kw = FORMS[form]
    spec = spec_of(kind, cols=HYP_COLS, time_col="ts", node="hyp", partition_by=("k",) if partitioned else (),
                   **kw(a, b))
    got = collect(spark, run_spec(spark, spec, "SELECT k, ts, v FROM hyp"))
    groups = by_partition(rows) if partitioned else [rows]
    want: Counter = Counter()
    for part in groups:  # GRAMMAR order: ts, then the other columns (k, v) ascending, NULLS FIRST
        live = sorted((r for r in part if r[1] is not None),
                      key=lambda r: (r[1], r[0] is not None, r[0] or 0, r[2] is not None, r[2] or 0))
        ts = [r[1] * MS for r in live]
        a_, b_ = (a * MS if form == "time_rows" else a), (b * MS if form == "rows_time" else b)
        for pos, s, e, idx in ref_count(ts, form, a_, b_):
            k, t, v, _ = live[pos]
            want[(k, t * MS, v, s, e, idx)] += 1
    assert got == want


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows_st, st.integers(1, 12), st.integers(1, 12), st.integers(-5, 5))
def test_generic_hop_matches_reference(spark, rows, slide, size, offset):
    load(spark, rows)
    offset = offset % size if abs(offset) >= size else offset
    got = collect(spark, f"hop(TABLE(hyp), 'ts', INTERVAL {slide} MILLISECONDS, INTERVAL {size} MILLISECONDS, "
                         f"INTERVAL {offset} MILLISECONDS)")
    sl, sz, off = slide * MS, size * MS, offset * MS

    def windows(part):
        ts = [r[1] * MS if r[1] is not None else 0 for r in part]
        return ref_time(ts, [r[1] is not None for r in part],
                        lambda t: [(k * sl + off, k * sl + off + sz) for k in range(-100, 100)], sz)
    assert got == expected(rows, windows)


def test_spec_types_pass_through(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW typed AS SELECT * FROM VALUES
        (TIMESTAMP_NTZ'1969-12-31 23:59:59.5', CAST(1.5 AS DECIMAL(10, 3)), DATE'2020-01-01', 'x', true,
         ARRAY(1, 2), NAMED_STRUCT('a', 1), CAST(NULL AS BINARY))
        AS t(ts, d, dt, s, b, arr, st, bin)""")
    cols = (Column("ts", "timestamp_ntz"), Column("d", "decimal(10,3)"), Column("dt", "date"),
            Column("s", "string"), Column("b", "boolean"), Column("arr", "array<int>"),
            Column("st", "struct<a:int>"), Column("bin", "binary"))
    spec = WindowSpec(WindowKind.TUMBLE, Relation(exp.to_table("typed"), cols), "ts", TimeType.TIMESTAMP_NTZ,
                      size=Rows(1))
    row = spark.sql("SELECT * FROM " + run_spec(spark, spec, "typed")).collect()[0]
    assert (str(row.d), row.s, row.b, row.arr, row.st.a, row.bin, row.window_index) == \
        ("1.500", "x", True, [1, 2], 1, None, 0)
    assert str(row.window_end) == "1969-12-31 23:59:59.501000"


def test_count_order_ties_like_spark():
    t = pa.table({"ts": [1, 1, 1, 1, 1, 0], "f": [1.0, float("nan"), None, -1.0, 1.0, 9.0],
                  "s": ["b", "a", None, "x", "a", "z"], "l": [[1], [0], None, [2], [3], [4]]})
    # ts, then f: NULL first, NaN last (Spark), then s; list columns are not tie-breakers
    assert list(_arrow.count_order(t, np.array([1, 1, 1, 1, 1, 0]), 0)) == [5, 2, 3, 4, 0, 1]
