"""A window join of a stream's window with that window's own MAX / MIN (Nexmark q7's window-join form) runs as one
window operator, a window Top-N (``sqlwin.streaming.windowrank``): the same rows as the window join it replaces
(forced here by an ON the rewrite does not take), live and replayed, and as DuckDB's batch query over the rows
the watermark keeps; every other form stays a window join."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from streamtools import T0, stream_env, ts

import sqlwin
from sqlwin import dialect
from sqlwin.planner import plan_statement
from sqlwin.streaming import catalog
from sqlwin.streaming.shape import StreamingShape
from sqlwin.streaming.stages import StagedShape, analyse_query

# the rows at their window's MAX (Nexmark q7 as a window join)
TOP = """SELECT B.k, B.v, B.ts, B.window_end FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS) B
JOIN (SELECT MAX(v) AS top, window_start, window_end FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS)
      GROUP BY window_start, window_end) B1
ON B.window_start = B1.window_start AND B.window_end = B1.window_end AND B.v = B1.top"""
# per key, the rows at the key's MIN in the window; the rows side a projection, the statement naming the other side
LOW = """SELECT B.k, B.v, B1.low, B1.window_start FROM (SELECT k, v AS val, v, ts, window_start, window_end
      FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS)) B
JOIN (SELECT k, window_start, window_end, MIN(v) AS low FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS)
      GROUP BY k, window_start, window_end) B1
ON B1.k = B.k AND B.window_start = B1.window_start AND B.window_end = B1.window_end AND B1.low = B.val"""
AS_JOIN = " AND B1.window_end > B.window_start"  # always true, but not an equality: the window join runs
PANE = ["pane_index", "pane_timing", "is_final"]
STREAM = "CREATE STREAM s_rank (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) " \
         "USING json OPTIONS (path '/tmp/x')"


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def shape_of(text: str):
    streams = {"s_rank": plan_statement(dialect.parse_one(STREAM), None)}
    return analyse_query(plan_statement(dialect.parse_one(text), None), streams)


def test_the_window_join_with_its_own_max_or_min_is_one_window_operator():
    for text in (TOP, LOW, TOP.replace("JOIN (", "INNER JOIN (")):
        shape = shape_of(text.format(s="s_rank"))
        assert isinstance(shape, StreamingShape) and "window Top-N" in shape.rewritten


@pytest.mark.parametrize("text", [
    TOP + AS_JOIN,                                                   # another condition
    TOP.replace("JOIN (", "LEFT JOIN ("),                            # an outer join keeps unmatched rows
    TOP.replace("MAX(v)", "SUM(v)"),                                 # not the rows at an extreme
    TOP.replace("MAX(v) AS top", "MAX(v) AS top, COUNT(*) AS n"),    # a second aggregate
    TOP.replace("B.v = B1.top", "B.k = B1.top"),                     # another column than the aggregate's
    TOP.replace("TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS) B\n",
                "TABLE(SELECT * FROM {s} WHERE v > 1), DESCRIPTOR(ts), INTERVAL 5 SECONDS) B\n"),  # other rows
    TOP.replace("GROUP BY window_start, window_end)",
                "GROUP BY window_start, window_end EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 1 ROWS)"),
    TOP.replace("SELECT B.k, B.v", "SELECT k, top"),                 # unqualified and on both sides: Spark's to
    LOW.replace("SELECT B.k, B.v", "SELECT k, v"),                   # resolve (an error there), not sqlwin's
    LOW.replace("ON B1.k = B.k AND ", "ON "),                        # a key the join does not equate
])
def test_other_window_joins_stay_window_joins(text):
    assert isinstance(shape_of(text.format(s="s_rank")), StagedShape)


def _order(row: tuple) -> tuple:
    return tuple((v is None, str(v)) for v in row)


def _rows(df, columns: list[str]) -> list[tuple]:
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=_order)


def _kept(rows: list[tuple], per_file: int, size: int, delay: int) -> list[tuple]:
    """GRAMMAR 4 with lateness 0: a row of file f is kept when its window ends after the watermark in force, the
    largest ts of the files before f minus the delay."""
    kept, top = [], None
    for f in range(0, len(rows), per_file):
        watermark = None if top is None else top - delay
        kept += [r for r in rows[f:f + per_file] if watermark is None or (r[2] // size + 1) * size > watermark]
        top = max([top or -10**9, *(r[2] for r in rows[f:f + per_file])])
    return kept


ROWS = st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.one_of(st.none(), st.integers(0, 3)),
                          st.integers(0, 30)), min_size=0, max_size=14)


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=ROWS, per_file=st.integers(1, 4))
@example(rows=[], per_file=1)  # a replay of no row
@example(rows=[("b", None, 16)], per_file=1)  # a Top-N that fires no pane (its only row has no value)
@example(rows=[("b", 0, 28), ("a", 3, 17), (None, 3, 30)], per_file=2)  # panes of two micro-batches, unioned
def test_generated_replays_equal_the_window_join_and_the_batch_query(spark, duck, tmp_path, monkeypatch, rows,
                                                                    per_file):
    """Ties, NULL values and keys, rows late for their window, windows whose values are all NULL; a column the rows
    side passes on twice (``v AS val, v``). The examples are the three replay failures this test found first."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    data = [(k, v, at(s), i // per_file) for i, (k, v, s) in enumerate(rows)]
    spark.createDataFrame(data, "k string, v int, ts timestamp, f int").createOrReplaceTempView("rank_gen")
    sqlwin.sql(spark, "CREATE STREAM r_rank_gen FROM TABLE rank_gen ARRIVAL ORDER BY f MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 3 SECONDS")
    kept = _kept(rows, per_file, 5, 3)
    duck.execute("CREATE OR REPLACE TABLE rank_kept (k VARCHAR, v INTEGER, ts TIMESTAMP)")
    if kept:
        duck.executemany("INSERT INTO rank_kept VALUES (?, ?, ?)", [(k, v, at(s)) for k, v, s in kept])
    for sql, columns in ((TOP, ["k", "v", "ts", "window_end"]), (LOW, ["k", "v", "low", "window_start"])):
        ranked = _rows(sqlwin.sql(spark, sql.format(s="r_rank_gen")), [*columns, *PANE, "micro_batch"])
        joined = _rows(sqlwin.sql(spark, (sql + AS_JOIN).format(s="r_rank_gen")), [*columns, *PANE])
        assert sorted((r[:-1] for r in ranked), key=_order) == joined
        assert {r[len(columns):-1] for r in ranked} <= {(0, "ON_TIME", True)}
        oracle = duck.execute(sqlwin.rewrite(sql.format(s="rank_kept"), target="duckdb", catalog=duck)).fetchall()
        assert sorted((r[:len(columns)] for r in ranked), key=_order) == sorted(
            (tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in r) for r in oracle),
            key=_order)


# files of (k, v, second); W = the largest ts of the earlier files - 2 s
FILES = [
    [("a", 3, 1), ("b", 7, 2), ("a", 7, 4)],   # [0,5): 7 twice (a tie)
    [("a", 5, 6), ("b", 2, 9)],                # W after: 7 ([0,5) fires in the next micro-batch)
    [("a", 9, 3), ("b", 6, 8), ("a", None, 12)],  # at W 7: the 9 at 3 s is late (dropped, counted); W after: 10
    [("b", 1, 16)],                            # at W 10: [5,10) fires (6 at 8 s the largest); W after: 14
]
LIVE = [("a", 7, at(4), at(5)), ("b", 7, at(2), at(5)), ("b", 6, at(8), at(10))]
AT_END = [("b", 1, at(16), at(20))]  # at the end of the input; [10,15) holds only a NULL: no row
# LOW: per key, the rows at the key's MIN in the window; in [5,10) b's 6 (file 2) comes after its 2 (file 1)
LOW_LIVE = [("a", 3, 3, at(0)), ("b", 7, 7, at(0)), ("a", 5, 5, at(5)), ("b", 2, 2, at(5))]


def test_live_rows_at_the_window_max_then_replayed(spark, tmp_path, monkeypatch, request):
    with stream_env(spark, tmp_path, monkeypatch, request.node.name) as (name, feed, _root):
        sqlwin.sql(spark, "CREATE STREAMING TABLE rank_live AS " + TOP.format(s=name))
        table = catalog.find_table("rank_live")
        assert table.path == "custom" and "window Top-N (RANK() = 1)" in table.why
        # unqualified names that one side has (the stream's schema known: its columns, the window's)
        unqualified = TOP.replace("SELECT B.k, B.v, B.ts, B.window_end", "SELECT k, v, top, B.window_end")
        sqlwin.sql(spark, "CREATE STREAMING TABLE rank_unqualified AS " + unqualified.format(s=name))
        other = catalog.find_table("rank_unqualified")
        assert "window Top-N" in other.why
        sqlwin.sql(spark, "CREATE STREAMING TABLE rank_low AS " + LOW.format(s=name))
        low = catalog.find_table("rank_low")
        for n, rows in enumerate(FILES):
            feed.write([{"k": k, "v": v, "ts": ts(s)} for k, v, s in rows])
            for t in (table, other, low):
                t.process_all_available()
            if n == 0:  # only the rows a pane can output are stored: the tie at 7 (not the 3), a's 3 and b's 7
                assert table.status().state_rows == 2 and low.status().state_rows == 2
        live = _rows(spark.table("rank_live"), ["k", "v", "ts", "window_end", *PANE, "micro_batch"])
        assert _rows(spark.table("rank_unqualified"), ["k", "v", "top", "window_end"]) == \
            sorted(((k, v, v, end) for k, v, _, end in LIVE), key=_order)
        assert sorted((r[:4] for r in live), key=_order) == sorted(LIVE, key=_order)
        assert _rows(spark.table("rank_low"), ["k", "v", "low", "window_start"]) == sorted(LOW_LIVE, key=_order)
        assert {r[4:7] for r in live} == {(0, "ON_TIME", True)}
        assert table.status().late_rows_dropped == 1 and table.status().rows_in == 9

        data = [(k, v, at(s), f) for f, rows in enumerate(FILES) for k, v, s in rows]
        spark.createDataFrame(data, "k string, v int, ts timestamp, f int").createOrReplaceTempView("rank_rows")
        sqlwin.sql(spark, "CREATE STREAM r_rank_live FROM TABLE rank_rows ARRIVAL ORDER BY f MICRO BATCH BY f "
                          "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
        replayed = _rows(sqlwin.sql(spark, TOP.format(s="r_rank_live")),
                         ["k", "v", "ts", "window_end", *PANE, "micro_batch"])
        assert set(live) <= set(replayed)
        assert sorted((r[:4] for r in set(replayed) - set(live)), key=_order) == AT_END
