"""A streaming query's columns are named as the batch query names them (GRAMMAR 6: output speaks of the user's
SQL, never of a generated identifier).

The custom path computes a pane with the user's query rewritten (aggregates over partial aggregates, ``COUNT(*)``
over ``__present``, GROUP BY keys read as ``__k<i>``), and Spark names an un-aliased item after the expression it
analyses: the rewritten one (``CAST(coalesce(sum(__p0), 0) AS BIGINT)``, or an empty name for ``v % 2``) unless
the pane query aliases it with the name Spark gives the user's own (``count(1)``, ``sum(v)``, ``(v % 2)``). These
tests run each query as a batch query over a table, as a replay of that table and as a streaming table on the
custom path, and compare the columns' names and the rows.
"""

from __future__ import annotations

import datetime as dt

import pytest

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from tests.streamtools import rows_of, stream_env, ts

pytestmark = pytest.mark.slow

T = dt.datetime(2024, 1, 1)
PANES = ["pane_index", "pane_timing", "is_final", "micro_batch"]

# (k, v, second of ts); in time order, so that no row is late and each window's one pane is the batch answer
ROWS = [("a", 1, 1), ("a", 2, 5), ("b", 3, 7), ("a", 4, 12), ("b", 5, 14), ("a", 6, 21), ("b", 7, 26),
        ("a", 8, 33), ("b", 9, 34), ("a", 10, 36)]

UNALIASED = {
    # partial aggregates per micro-batch: COUNT(*) and SUM(v) become aggregates of partials; v % 2 a pane key
    "tumble_partials": "SELECT window_start, COUNT(*), SUM(v), v % 2, (v % 2) + 1, AVG(v), MAX(v) - MIN(v) "
                       "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
                       "GROUP BY window_start, window_end, v % 2",
    # raw rows (DISTINCT does not split): COUNT(*) counts __present
    "tumble_raw_rows": "SELECT window_start, k, COUNT(*), COUNT(DISTINCT v), SUM(v) FILTER (WHERE v > 2) "
                       "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
                       "GROUP BY window_start, window_end, k",
    "session": "SELECT window_start, window_end, k, COUNT(*), SUM(v) "
               "FROM SESSION(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 5 SECONDS) "
               "GROUP BY window_start, window_end, k",
    "count_window": "SELECT window_start, k, COUNT(*), SUM(v) "
                    "FROM TUMBLE(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), ROWS 2) "
                    "GROUP BY window_start, window_end, k",
    # the aggregation inside a query: the names its result passes on are the batch query's too
    "around": "SELECT * FROM (SELECT window_start, window_end, COUNT(*), SUM(v) "
              "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end) w "
              "WHERE `count(1)` > 0",
    # the aggregation in a CTE, reading an earlier one (a scalar subquery: raw rows)
    "in_a_cte": "WITH dim AS (SELECT 10 AS m), w AS (SELECT window_start, window_end, COUNT(*) + (SELECT MAX(m) "
                "FROM dim) FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
                "GROUP BY window_start, window_end) SELECT * FROM w",
}
ALIASED = ("SELECT window_start, COUNT(*) AS c, SUM(v) AS `sum of v`, v % 2 AS parity "
           "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, v % 2")


def at(seconds: float) -> dt.datetime:
    return T + dt.timedelta(seconds=seconds)


def rows_table(spark, name: str) -> None:
    spark.createDataFrame([(k, v, at(s), i) for i, (k, v, s) in enumerate(ROWS)],
                          "k string, v int, ts timestamp, seq int").createOrReplaceTempView(name)


@pytest.fixture(scope="module")
def replayed(spark):
    """The rows as a table (``names_rows``) and as a replay stream of it, one row per micro-batch."""
    rows_table(spark, "names_rows")
    sqlwin.sql(spark, "CREATE STREAM names_replay FROM TABLE names_rows ARRIVAL ORDER BY seq "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    yield "names_rows", "names_replay"
    catalog.drop_stream(spark, "names_replay")


@pytest.mark.parametrize("name", sorted(UNALIASED))
def test_replay_names_its_columns_as_the_batch_query(spark, replayed, name):
    table, stream = replayed
    sql = UNALIASED[name]
    batch = sqlwin.sql(spark, sql.format(s=table))
    replay = sqlwin.sql(spark, sql.format(s=stream))
    assert replay.columns == [*batch.columns, *PANES]
    assert not [c for c in replay.columns if "__" in c or not c]
    # each window fires once, ON_TIME and final (no row is late): its pane is the batch answer
    assert rows_of(replay, batch.columns) == rows_of(batch)


def test_replay_keeps_the_names_the_user_gave(spark, replayed):
    table, stream = replayed
    replay = sqlwin.sql(spark, ALIASED.format(s=stream))
    assert replay.columns == ["window_start", "c", "sum of v", "parity", *PANES]
    batch = sqlwin.sql(spark, ALIASED.format(s=table))
    assert rows_of(replay, batch.columns) == rows_of(batch)


def test_a_cascade_reads_the_inner_windows_columns_by_their_batch_names(spark, replayed):
    """The outer window reads the inner aggregation's un-aliased ``COUNT(*)`` as the batch query does."""
    table, stream = replayed
    sql = ("SELECT window_start, SUM(`count(1)`), COUNT(*) FROM TUMBLE(TABLE (SELECT window_start AS ws, "
           "window_time AS wt, COUNT(*) FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
           "GROUP BY window_start, window_end, window_time), DESCRIPTOR(wt), INTERVAL 20 SECONDS) "
           "GROUP BY window_start, window_end")
    batch = _replay_equals_batch(spark, sql, table, stream, PANES)
    assert batch.columns == ["window_start", "sum(count(1))", "count(1)"]


def test_a_window_join_reads_each_sides_columns_by_their_batch_names(spark, replayed):
    table, stream = replayed
    sql = ("SELECT L.window_start, L.`count(1)`, R.`sum(v)` FROM (SELECT window_start, window_end, COUNT(*) "
           "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end) L "
           "JOIN (SELECT window_start, window_end, SUM(v) FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
           "GROUP BY window_start, window_end) R ON L.window_start = R.window_start AND L.window_end = R.window_end")
    _replay_equals_batch(spark, sql, table, stream, [*PANES[:3], "micro_batch"])


W10 = "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)"
# GROUP BY written as Spark reads it (ordinals, SELECT aliases, ALL; names in any case) and interval literals in
# Spark's other forms: a replay's panes are the batch query's rows, under its names
SPARK_FORMS = {
    "ordinals_any_case": "SELECT K, Window_Start, window_end, upper(K), COUNT(*), SUM(v) " + W10 +
                         " GROUP BY 2, WINDOW_END, k, 4",
    "aliases_intervals": "SELECT window_start AS ws, window_end AS we, v % 2 AS parity, COUNT(*) AS c FROM HOP("
                         "TABLE {s}, DESCRIPTOR(ts), INTERVAL '0:05' MINUTE TO SECOND, INTERVAL 9 SECONDS 1000 "
                         "MILLISECONDS) GROUP BY ws, we, parity ALLOWED LATENESS INTERVAL '0 00:00:01' DAY TO SECOND",
    "all": "SELECT window_start, window_end, upper(k), COUNT(*) AS c, SUM(v) + 1 " + W10 + " GROUP BY ALL",
}


@pytest.mark.parametrize("name", sorted(SPARK_FORMS))
def test_a_replay_reads_group_by_and_intervals_as_the_batch_query(spark, replayed, name):
    table, stream = replayed
    _replay_equals_batch(spark, SPARK_FORMS[name], table, stream, PANES)


def test_a_group_by_ordinal_spark_refuses_is_its_error_in_a_replay(spark, replayed):
    _table, stream = replayed
    with pytest.raises(SqlwinError, match=r"^line 1, col \d+: .*GROUP BY position 9 is not in select list"):
        sqlwin.sql(spark, "SELECT window_start, window_end, COUNT(*) " + W10.format(s=stream) + " GROUP BY 1, 2, 9")


def _replay_equals_batch(spark, sql: str, table: str, stream: str, panes: list[str]):
    """``sql`` replayed over ``stream``: the batch query's columns (over ``table``), then ``panes``, and its rows;
    returns the batch query's result."""
    batch = sqlwin.sql(spark, sql.format(s=table))
    replay = sqlwin.sql(spark, sql.format(s=stream))
    assert replay.columns == [*batch.columns, *panes]
    assert rows_of(replay, batch.columns) == rows_of(batch)
    return batch


LIVE = {  # custom path (ALLOWED LATENESS; SESSION and count windows run there anyway), and the native one
    "live_tumble": UNALIASED["tumble_partials"] + " ALLOWED LATENESS INTERVAL 1 SECOND",
    "live_raw": UNALIASED["tumble_raw_rows"] + " ALLOWED LATENESS INTERVAL 1 SECOND",
    "live_session": UNALIASED["session"],
    "live_count": UNALIASED["count_window"],
    "live_aliased": ALIASED + " ALLOWED LATENESS INTERVAL 1 SECOND LATE ROWS TO live_aliased_late",
    "live_native": UNALIASED["tumble_partials"],
}


def test_a_streaming_table_names_its_sink_columns_as_the_batch_query(spark, tmp_path, monkeypatch):
    """Files dropped one at a time; a last row far ahead moves the watermark past every earlier window (and
    completes no count window), so each sink holds, per window, the batch query's row under its names."""
    with stream_env(spark, tmp_path, monkeypatch, "test_names_live") as (s, feeder, _root):
        tables = []
        for name, sql in LIVE.items():
            sqlwin.sql(spark, f"CREATE STREAMING TABLE {name} AS {sql.format(s=s)}")
            tables.append(catalog.find_table(name))
        assert [t.path for t in tables] == [*["custom"] * (len(LIVE) - 1), "native"]
        files = [ROWS[:5], ROWS[5:], [("c", 0, 100)]]
        feeder.feed([[{"k": k, "v": v, "ts": ts(sec)} for k, v, sec in rows] for rows in files], *tables)
        rows_table(spark, "names_live_rows")
        for name, sql in LIVE.items():
            batch = sqlwin.sql(spark, sql.format(s="names_live_rows"))
            sink = spark.table(name)
            assert sink.columns == [*batch.columns, *PANES], name
            assert rows_of(sink, batch.columns) == rows_of(batch), name
            assert rows_of(sink, ["pane_index", "pane_timing"]) == [(0, "ON_TIME")] * sink.count(), name
        assert spark.table("live_aliased").columns[:4] == ["window_start", "c", "sum of v", "parity"]


BOUND_ITEMS = {  # an un-aliased item computed from a bound, in each plan that groups by the window
    "tumble_struct": ("SELECT window_start + INTERVAL 1 MINUTE, count(*) FROM TUMBLE(TABLE names_rows, DESCRIPTOR(ts), "
                      "INTERVAL 10 SECONDS) GROUP BY window_start, window_end",
                      ["window_start + INTERVAL '01' MINUTE", "count(1)"]),
    "hop_struct_window_time": ("SELECT window_start, date_format(window_time, 'ss'), count(*) FROM HOP(TABLE "
                               "names_rows, DESCRIPTOR(ts), INTERVAL 10 SECONDS, INTERVAL 20 SECONDS) "
                               "GROUP BY window_start, window_end",
                               ["window_start", "date_format(window_time, ss)", "count(1)"]),
    "session_route": ("SELECT k, unix_seconds(window_end) - unix_seconds(window_start), count(*) FROM SESSION(TABLE "
                      "names_rows PARTITION BY k, DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY k, window_start, "
                      "window_end", ["k", "(unix_seconds(window_end) - unix_seconds(window_start))", "count(1)"]),
    "count_route": ("SELECT k, window_index + 1, count(*) FROM TUMBLE(TABLE names_rows PARTITION BY k, DESCRIPTOR(ts), "
                    "ROWS 2) GROUP BY k, window_index", ["k", "(window_index + 1)", "count(1)"]),
}


@pytest.mark.parametrize("name", sorted(BOUND_ITEMS))
def test_a_batch_query_names_an_item_over_a_bound_as_written(spark, replayed, name):
    """The batch plans that group by one window struct (or by a session or count window's key) read the bounds
    from it; an un-aliased item computed from one is named as the user wrote it (GRAMMAR 6), not ``__w.start +
    ...``: those plans leave it to the per-row plan, whose bounds are columns."""
    sql, columns = BOUND_ITEMS[name]
    assert sqlwin.sql(spark, sql).columns == columns


def test_the_native_path_names_an_item_over_a_bound_as_written(spark, replayed):
    """The native path groups by Spark's window() struct: an un-aliased item computed from a bound is aliased with
    the batch query's name for it (its SQL analysed over the table, nothing started)."""
    from sqlwin.pipeline import parse_single
    from sqlwin.planner import plan_statement
    from sqlwin.streaming.native import native_sql
    from sqlwin.streaming.shape import analyse

    def plan(text: str):
        return plan_statement(parse_single(text), None, text=text)

    stream = plan("CREATE STREAM names_native (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts) "
                  "USING json OPTIONS (path '/nowhere')")
    spark.table("names_rows").createOrReplaceTempView("names_native")  # the stream's view, as CREATE STREAM makes
    sql = BOUND_ITEMS["tumble_struct"][0].replace("names_rows", "names_native")
    native = native_sql(analyse(plan(sql), {"names_native": stream}), "names_rows", spark)
    assert spark.sql(native).columns == [*BOUND_ITEMS["tumble_struct"][1], *PANES[:3]]
