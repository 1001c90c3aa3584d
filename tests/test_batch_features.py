"""Batch features beyond the window kinds: Python UDAFs, TIMESTAMP_NTZ, nested windows, EXPLAIN."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
import sqlglot
from pyspark.sql.functions import pandas_udf
from sqlglot import exp

import sqlwin
from tests.difftools import assert_same, load, normalize

T = dt.datetime
ROWS = [(T(2024, 5, 1, 10, 1), "x", 1), (T(2024, 5, 1, 10, 4), "x", 2), (T(2024, 5, 1, 10, 12), "y", 3),
        (T(2024, 5, 1, 10, 14), "x", 4), (T(2024, 5, 1, 10, 29, 59, 999000), "y", 5)]


def test_python_udaf_over_windows(spark, duck):
    @pandas_udf("double")
    def geo_mean(v: pd.Series) -> float:
        return float(v.prod() ** (1.0 / len(v)))

    spark.udf.register("geo_mean", geo_mean)
    load(spark, duck, "ev", [("ts", "timestamp", "TIMESTAMP"), ("k", "string", "VARCHAR"), ("v", "int", "INTEGER")],
         ROWS)
    got = sqlwin.sql(spark, "SELECT window_start, geo_mean(v) AS g FROM TUMBLE(TABLE ev, DESCRIPTOR(ts), "
                            "INTERVAL '10' MINUTES) GROUP BY window_start, window_end").collect()
    assert normalize(tuple(r) for r in got) == [(T(2024, 5, 1, 10, 0), round(2 ** 0.5, 6)),
                                                (T(2024, 5, 1, 10, 10), round(12 ** 0.5, 6)),
                                                (T(2024, 5, 1, 10, 20), 5.0)]


def test_timestamp_ntz_matches_duckdb(spark, duck):
    load(spark, duck, "ntz", [("ts", "timestamp_ntz", "TIMESTAMP"), ("k", "string", "VARCHAR"),
                              ("v", "int", "INTEGER")], ROWS)
    for tvf in ["TUMBLE(TABLE ntz, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '2' MINUTES)",
                "HOP(TABLE ntz, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '15' MINUTES)",
                "CUMULATE(TABLE ntz, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '15' MINUTES)",
                "SESSION(TABLE ntz PARTITION BY k, DESCRIPTOR(ts), INTERVAL '10' MINUTES)"]:
        assert_same(spark, duck, f"SELECT * FROM {tvf}")
    types = dict(sqlwin.sql(spark, "SELECT * FROM TUMBLE(TABLE ntz, DESCRIPTOR(ts), INTERVAL '1' HOUR)").dtypes)
    assert types["window_start"] == types["window_end"] == types["window_time"] == "timestamp_ntz"


def test_window_over_a_windowed_subquery(spark, duck):
    load(spark, duck, "ev", [("ts", "timestamp", "TIMESTAMP"), ("k", "string", "VARCHAR"), ("v", "int", "INTEGER")],
         ROWS)
    sql = """
        SELECT window_start, window_end, SUM(n) FROM TUMBLE(
            TABLE(SELECT window_time AS wt, COUNT(*) AS n FROM TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' MINUTES)
                  GROUP BY window_start, window_end, window_time),
            DESCRIPTOR(wt), INTERVAL '15' MINUTES)
        GROUP BY window_start, window_end"""
    assert_same(spark, duck, sql, expected=[(T(2024, 5, 1, 10, 0), T(2024, 5, 1, 10, 15), 4),
                                            (T(2024, 5, 1, 10, 15), T(2024, 5, 1, 10, 30), 1)])


def test_udtf_spelling_goes_through_the_rewriter(spark):
    spark.createDataFrame(ROWS, "ts timestamp, k string, v int").createOrReplaceTempView("ev2")
    via_sqlwin = sqlwin.sql(spark, "SELECT k, window_start, v FROM tumble(TABLE(ev2), 'ts', INTERVAL 10 MINUTES)")
    via_spark = spark.sql("SELECT k, window_start, v FROM tumble(TABLE(ev2), 'ts', INTERVAL 10 MINUTES)")
    assert sorted(map(tuple, via_sqlwin.collect())) == sorted(map(tuple, via_spark.collect()))
    assert len(via_spark.collect()) == 5


def test_explain_rewrite_returns_the_spark_sql(spark):
    spark.createDataFrame(ROWS, "ts timestamp, k string, v int").createOrReplaceTempView("ev3")
    df = sqlwin.sql(spark, "EXPLAIN REWRITE SELECT * FROM TUMBLE(TABLE ev3, DESCRIPTOR(ts), INTERVAL '1' MINUTE)")
    text = df.collect()[0][0]
    assert "UNIX_MICROS" in text and "TUMBLE" not in text
    assert spark.sql(text).count() == 5  # the produced SQL runs as plain Spark SQL


def test_plain_spark_sql_passes_through_unchanged(spark):
    from sqlwin.pipeline import compile_statement

    sql = "SELECT k, count(*) AS n FROM ev3 GROUP BY k HAVING n > 0 ORDER BY k"
    assert compile_statement(sql, catalog=spark).sql == sql
    assert [tuple(r) for r in sqlwin.sql(spark, sql).collect()] == [("x", 3), ("y", 2)]


def test_unknown_plan_is_an_error(spark):
    with pytest.raises(sqlwin.SqlwinError, match="unknown plan"):
        sqlwin.sql(spark, "SELECT 1", plan="fast")


def test_timestamp_ntz_ignores_the_session_time_zone(spark, duck):
    """NTZ windows align on the wall clock, even in a zone with DST (02:30 on 2024-03-10 does not
    exist in Los Angeles, but is a valid NTZ value)."""
    la = spark.newSession()
    la.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    rows = [(T(2024, 3, 10, 2, 30), "a", 1), (T(2024, 3, 10, 1, 59), "a", 2), (T(1960, 1, 1, 0, 0, 0, 5), "b", 3)]
    la.createDataFrame(rows, "ts timestamp_ntz, k string, v int").createOrReplaceTempView("ntz_la")
    got = sqlwin.sql(la, "SELECT v, window_start, window_end FROM TUMBLE(TABLE ntz_la, DESCRIPTOR(ts), "
                         "INTERVAL '1' HOUR)").collect()
    assert sorted(tuple(r) for r in got) == [(1, T(2024, 3, 10, 2), T(2024, 3, 10, 3)),
                                             (2, T(2024, 3, 10, 1), T(2024, 3, 10, 2)),
                                             (3, T(1960, 1, 1), T(1960, 1, 1, 1))]


def test_schemaless_rewrite_of_hop_runs_on_spark(spark):
    """Without a catalog the HOP plan cannot list columns for window(), so it explodes candidates."""
    spark.createDataFrame(ROWS, "ts timestamp, k string, v int").createOrReplaceTempView("ev4")
    sql = ("SELECT window_start, window_end, SUM(v) FROM HOP(TABLE ev4, DESCRIPTOR(ts), INTERVAL '5' MINUTES, "
           "INTERVAL '12' MINUTES) GROUP BY window_start, window_end")
    schemaless = sorted(tuple(r) for r in spark.sql(sqlwin.rewrite(sql)).collect())
    assert "EXPLODE" in sqlwin.rewrite(sql) and "WINDOW(" in sqlwin.rewrite(sql, catalog=spark)
    assert schemaless == sorted(tuple(r) for r in sqlwin.sql(spark, sql).collect())
    assert (T(2024, 5, 1, 9, 50), T(2024, 5, 1, 10, 2), 1) in schemaless


def test_aggregations_group_time_windows_by_one_struct(spark, duck):
    """GROUP BY window_start, window_end over TUMBLE/HOP groups by one struct on Spark (faster); the
    answer, names and every way of referring to the bounds stay as written (DuckDB is the oracle)."""
    load(spark, duck, "ev5", [("ts", "timestamp", "TIMESTAMP"), ("k", "string", "VARCHAR"), ("v", "int", "INTEGER")],
         ROWS)
    sql = """
        SELECT w.window_start, window_end, window_time, k, COUNT(*) AS n, MIN(window_start) AS first_start,
               date_format(window_start, 'HH:mm') AS label,
               ROW_NUMBER() OVER (PARTITION BY window_start ORDER BY k) AS rn
        FROM HOP(TABLE ev5, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES) AS w
        GROUP BY w.window_start, window_end, window_time, k
        HAVING window_end > TIMESTAMP '2024-05-01 10:05:00'"""
    rows = assert_same(spark, duck, sql, plans=("auto",))
    assert (T(2024, 5, 1, 10, 0), T(2024, 5, 1, 10, 10), T(2024, 5, 1, 10, 9, 59, 999000), "x", 2,
            T(2024, 5, 1, 10, 0), "10:00", 1) in rows
    rewritten = sqlwin.rewrite(sql, catalog=spark)
    assert "GROUP BY k, w.__w" in rewritten
    # the window relation keeps only the bound still read per row (MIN(window_start)); the others are read
    # from the struct, and would only slow Spark's planning (a q8-style window join planned 2x slower)
    derived = next(q for q in sqlglot.parse_one(rewritten, read="spark").find_all(exp.Subquery) if q.alias == "w")
    assert {e.alias_or_name for e in derived.this.expressions} & {"window_start", "window_end", "window_time"} \
        == {"window_start"}
    cols = sqlwin.sql(spark, sql).columns
    assert cols[:3] == ["window_start", "window_end", "window_time"]
