"""Partial-aggregate state (``sqlwin.streaming.partials``): which queries keep accumulators instead of rows,
and that a pane computed from partial aggregates equals the same pane computed from the stored rows.

The oracle for the Spark tests is the raw-row path itself: the same query with one aggregate that does not
split (``COUNT(DISTINCT ...)``) keeps rows, and every other column must come out identical, pane by pane.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlglot
from sqlglot import exp

import sqlwin
from sqlwin.streaming import catalog
from sqlwin.streaming.partials import aggregate_units
from sqlwin.streaming.sessions import SessionAssigner
from tests.streamtools import Feeder, rows_of, ts


def units(sql: str):
    select = sqlglot.parse_one(sql, read="spark")
    assert isinstance(select, exp.Select)
    return aggregate_units(select)


@pytest.mark.parametrize("sql, count", [
    ("SELECT k, SUM(v), COUNT(*), COUNT(v), MIN(v), MAX(v), AVG(v) FROM t GROUP BY k", 6),
    ("SELECT k, SUM(v) FILTER (WHERE v > 1) AS s FROM t GROUP BY k HAVING COUNT(*) > 2", 2),
    ("SELECT k, SUM(SUM(v)) OVER (PARTITION BY k) FROM t GROUP BY k", 1),  # the analytic SUM is not a unit
    ("SELECT k, SUM(v) * 2 + MAX(v) FROM t GROUP BY k ORDER BY MIN(v)", 3),
])
def test_decomposable_aggregates_are_found_in_order(sql, count):
    found = units(sql)
    assert found is not None and [u.index for u in found] == list(range(count))


@pytest.mark.parametrize("sql", [
    "SELECT k, COUNT(DISTINCT v) FROM t GROUP BY k",
    "SELECT k, SUM(DISTINCT v) FROM t GROUP BY k",
    "SELECT k, PERCENTILE(v, 0.5) FROM t GROUP BY k",
    "SELECT k, COLLECT_LIST(v) FROM t GROUP BY k",
    "SELECT k, my_udaf(v) FROM t GROUP BY k",  # a user-defined function may be a UDAF: keep rows
    "SELECT k, SUM(v), (SELECT MAX(x) FROM u) FROM t GROUP BY k",
])
def test_other_aggregates_keep_rows(sql):
    assert units(sql) is None


def test_avg_splits_into_sum_and_count():
    (unit,) = units("SELECT AVG(v) FILTER (WHERE v > 0) FROM t")
    parts = [(name, e.sql("spark")) for name, e in unit.partials()]
    assert parts == [("__p0s", "SUM(v) FILTER(WHERE v > 0)"), ("__p0c", "COUNT(v) FILTER(WHERE v > 0)")]


T = dt.datetime(2024, 1, 1)

AGGREGATES = ("SUM(v) AS s, COUNT(*) AS c, COUNT(v) AS cv, MIN(v) AS lo, MAX(v) AS hi, AVG(v) AS a, "
              "SUM(d) AS sd, MAX(name) AS top, SUM(v) FILTER (WHERE v > 2) AS big, MAX(ts) AS last")
COLUMNS = ["window_start", "k", "s", "c", "cv", "lo", "hi", "a", "sd", "top", "big", "last", "pane_index",
           "pane_timing", "is_final", "micro_batch"]


def _row(k, v, seconds, name="x"):
    return {"k": k, "v": v, "ts": ts(seconds), "d": 1.25 if v is None else v + 0.5, "name": f"{name}{v}"}


# lateness 5 s, watermark delay 2 s, 10 s windows: ON_TIME panes, LATE panes, an empty-window key, NULLs,
# a dropped row, a HAVING that removes a pane, and several micro-batches per window
BATCHES = [
    [_row("a", 1, 1), _row("a", 2, 5), _row("b", None, 7), _row("b", 3, 2)],
    [_row("a", 4, 12), _row("c", 9, 13)],
    [_row("a", 5, 3), _row("b", 6, 4), _row("b", None, 9)],
    [_row("a", 6, 30)],
    [_row("a", 7, 8)],
]


def _query(src: str, extra: str = "") -> str:
    return (f"SELECT window_start, window_end, k, {AGGREGATES}{extra} "
            f"FROM TUMBLE(TABLE {src}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
            "GROUP BY window_start, window_end, k HAVING COUNT(*) < 3 "
            "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {late} "
            "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS")


@pytest.mark.slow
def test_partial_state_equals_row_state_in_a_streaming_table(spark, tmp_path, monkeypatch):
    """Same feed, three streaming tables: partial aggregates (state one row per key, window and micro-batch),
    written from the scan's Arrow result by the driver or, when a partial's type might not survive pyarrow's
    parquet, by Spark; and stored rows (forced by a COUNT(DISTINCT)). Every pane and every late row agree,
    schemas too."""
    from sqlwin.streaming import operator

    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "in"
    sqlwin.sql(spark, "CREATE STREAM p_src (k STRING, v INT, d DECIMAL(10, 2), name STRING, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
    try:
        sqlwin.sql(spark, "CREATE STREAMING TABLE p_partial AS " + _query("p_src").format(late="p_late_partial"))
        with monkeypatch.context() as m:
            m.setattr(operator, "_parquet_safe", lambda _type: False)
            sqlwin.sql(spark, "CREATE STREAMING TABLE p_spark AS " + _query("p_src").format(late="p_late_spark"))
        sqlwin.sql(spark, "CREATE STREAMING TABLE p_rows AS "
                   + _query("p_src", ", COUNT(DISTINCT v) AS dv").format(late="p_late_rows"))
        partial, by_spark, raw = (catalog.find_table(n) for n in ("p_partial", "p_spark", "p_rows"))
        assert partial.operator.query.decomposition is not None and partial.operator.arrow_rows
        assert by_spark.operator.query.decomposition is not None and not by_spark.operator.arrow_rows
        assert raw.operator.query.decomposition is None
        Feeder(folder).feed(BATCHES, partial, by_spark, raw)
        assert rows_of(spark.table("p_spark"), COLUMNS) == rows_of(spark.table("p_rows"), COLUMNS)
        assert rows_of(spark.table("p_late_spark")) == rows_of(spark.table("p_late_rows"))
        got, want = spark.table("p_partial"), spark.table("p_rows")
        assert [(f.name, f.dataType) for f in got.schema.fields] == \
            [(f.name, f.dataType) for f in want.schema.fields if f.name != "dv"]
        assert rows_of(got, COLUMNS) == rows_of(want, COLUMNS)
        assert len(rows_of(got)) >= 6  # early, on-time and late panes of several windows
        assert rows_of(spark.table("p_late_partial")) == rows_of(spark.table("p_late_rows"))
        assert len(rows_of(spark.table("p_late_partial"))) == 1
        # the open window [30, 40) of key a: one stored partial row vs one stored input row here; the
        # decimal sum keeps its type (SUM over DECIMAL(10,2) is DECIMAL(20,2), not the partials' wider one)
        assert partial.status().state_rows == 1
        sd = dict((f.name, f.dataType.simpleString()) for f in got.schema.fields)["sd"]
        assert sd == "decimal(20,2)"
        values = {r.window_start: r.sd for r in got.where("k = 'a' AND pane_timing = 'ON_TIME'").collect()}
        assert values[T] == decimal.Decimal("4.00")
    finally:
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)


@pytest.mark.slow
def test_partial_state_equals_row_state_in_replay(spark):
    """Replay computes every pane from the one assignment: again partial aggregates == stored rows."""
    rows = [(r["k"], r["v"], decimal.Decimal(str(r["d"])), r["name"], dt.datetime.fromisoformat(r["ts"]), mb)
            for mb, batch in enumerate(BATCHES) for r in batch]
    spark.createDataFrame([(*r, seq) for seq, r in enumerate(rows)],
                          "k string, v int, d decimal(10,2), name string, ts timestamp, mb int, seq int") \
        .createOrReplaceTempView("p_table")
    sqlwin.sql(spark, "CREATE STREAM p_replay FROM TABLE p_table ARRIVAL ORDER BY seq MICRO BATCH BY mb "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    got = sqlwin.sql(spark, _query("p_replay").format(late="p_rl1"))
    late_partial = rows_of(spark.table("p_rl1"))
    want = sqlwin.sql(spark, _query("p_replay", ", COUNT(DISTINCT v) AS dv").format(late="p_rl2"))
    assert rows_of(got, COLUMNS) == rows_of(want, COLUMNS)
    assert late_partial == rows_of(spark.table("p_rl2")) and len(late_partial) == 1


def _session_query(src: str, trigger: str, extra: str = "") -> str:
    return (f"SELECT window_start, window_end, k, {AGGREGATES}{extra} "
            f"FROM SESSION(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 3 SECONDS) "
            "GROUP BY window_start, window_end, k "
            "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {late} " + trigger)


@pytest.mark.slow
def test_session_partials_equal_session_rows(spark, tmp_path, monkeypatch):
    """SESSION windows whose trigger never finishes keep one partial row per micro-batch session (sessions only
    grow and merge, so each lies whole in one session): every pane (sessions merging across micro-batches,
    early, on-time and late panes) and every late row equal those of the same query over stored rows."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    # early, on-time and late firings: the default trigger's on-time and late panes, and early ones
    trigger = "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS"
    folder = tmp_path / "in"
    sqlwin.sql(spark, "CREATE STREAM s_src (k STRING, v INT, d DECIMAL(10, 2), name STRING, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
    try:
        sqlwin.sql(spark, "CREATE STREAMING TABLE s_partial AS "
                   + _session_query("s_src", trigger).format(late="s_late_partial"))
        sqlwin.sql(spark, "CREATE STREAMING TABLE s_rows AS "
                   + _session_query("s_src", trigger, ", COUNT(DISTINCT v) AS dv").format(late="s_late_rows"))
        partial, raw = catalog.find_table("s_partial"), catalog.find_table("s_rows")
        assert partial.operator.query.decomposition is not None
        assert isinstance(partial.operator.assigner, SessionAssigner)
        assert raw.operator.query.decomposition is None
        Feeder(folder).feed(BATCHES, partial, raw)
        got, want = spark.table("s_partial"), spark.table("s_rows")
        assert rows_of(got, COLUMNS) == rows_of(want, COLUMNS)
        assert len({(r.k, r.window_start) for r in got.collect()}) >= 4  # several sessions, some merged
        assert rows_of(spark.table("s_late_partial")) == rows_of(spark.table("s_late_rows"))
        assert partial.status().state_rows == raw.status().state_rows == 1  # the open session [30, 33) of a
    finally:
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)


def test_sessions_that_may_close_keep_rows():
    """A session merged into a closed one drops the rows it held, one by one in LATE ROWS TO: rows."""
    from sqlwin.plan import triggers as plan
    from sqlwin.streaming.sessions import never_finishes

    assert never_finishes(plan.DEFAULT_TRIGGER) and never_finishes(plan.EmitFinal())
    assert never_finishes(plan.Repeatedly(plan.AfterCount(2)))
    assert not never_finishes(plan.AfterWatermark()) and not never_finishes(plan.AfterCount(2))
    assert not never_finishes(plan.OrFinally(plan.Repeatedly(plan.AfterCount(1)), plan.AfterCount(5)))
