"""Punctuated watermarks (``WATERMARK FOR ts AS expr ON ROWS WHERE predicate``) and processing-time-lag
watermarks (``PROCTIME() - INTERVAL lag``), GRAMMAR 3: live on Structured Streaming (files dropped one at a
time, each processed fully), in replay, and against tables worked by hand from GRAMMAR's rules."""

from __future__ import annotations

import datetime as dt

import pytest

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from tests.streamtools import Feeder, rows_of, start_clocked, ts

T = dt.datetime(2024, 1, 1)
SECOND = 1_000_000


def at(seconds: float) -> dt.datetime:
    return T + dt.timedelta(seconds=seconds)


def data(seq: int, v: int, seconds: float) -> dict:
    return {"seq": seq, "kind": "data", "v": v, "ts": ts(seconds)}


def marker(seq: int, seconds: float) -> dict:
    """A marker row: no event time of its own (so in no window), only the watermark it announces."""
    return {"seq": seq, "kind": "marker", "mark": ts(seconds)}


# Data rows run far ahead of the markers; only markers move W (to their `mark`), never backwards.
# f0 -> mb 0 (W stays -inf: no marker, so nothing fires although rows reach 25 s), f1 -> 1, f2 (marker 10)
# -> 2, W -> 10: the no-data mb 3 fires [0, 10); f3 -> 4: the row at 8 s is late (W = 10 >= 10) and dropped;
# f4 (marker 30) -> 5, W -> 30: mb 6 fires [10, 20) and [20, 30); f5 (marker 20) -> 7, W stays 30;
# f6 -> 8 (in time for [30, 40)); a replay's end of input (mb 9) fires [30, 40).
MARKER_FILES = [
    [data(0, 1, 1), data(1, 2, 5), data(2, 3, 12), data(3, 4, 25)],
    [data(4, 5, 31)],
    [marker(5, 10)],
    [data(6, 6, 8)],
    [marker(7, 30)],
    [marker(8, 20)],
    [data(9, 7, 35)],
]
# (window_start, sum, count, pane_index, pane_timing, is_final, micro_batch)
MARKER_PANES = [
    (at(0), 3, 2, 0, "ON_TIME", True, 3),
    (at(10), 3, 1, 0, "ON_TIME", True, 6),
    (at(20), 4, 1, 0, "ON_TIME", True, 6),
]
MARKER_END_PANE = (at(30), 12, 2, 0, "ON_TIME", True, 9)
# (seq, window_start, watermark, reason, micro_batch)
MARKER_LATE = [(6, at(0), at(10), "late", 4)]
PANE_COLUMNS = ["window_start", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
LATE_COLUMNS = ["seq", "window_start", "watermark", "reason", "micro_batch"]
MARKER_QUERY = """SELECT window_start, window_end, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
    GROUP BY window_start, window_end
    LATE ROWS TO {late}"""


@pytest.fixture(autouse=True)
def streaming_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))


def test_punctuated_replay_matches_hand_worked_panes(spark):
    rows = [(r["seq"], r["kind"], r.get("v"), at_or_none(r.get("ts")), at_or_none(r.get("mark")), n)
            for n, batch in enumerate(MARKER_FILES) for r in batch]
    spark.createDataFrame(rows, "seq int, kind string, v int, ts timestamp, mark timestamp, batch int") \
        .createOrReplaceTempView("marker_rows")
    sqlwin.sql(spark, "CREATE STREAM marker_replay FROM TABLE marker_rows ARRIVAL ORDER BY seq MICRO BATCH BY batch "
                      "WATERMARK FOR ts AS mark ON ROWS WHERE kind = 'marker'")
    out = sqlwin.sql(spark, MARKER_QUERY.format(s="marker_replay", late="marker_replay_late"))
    assert rows_of(out, PANE_COLUMNS) == [*MARKER_PANES, MARKER_END_PANE]
    assert rows_of(spark.table("marker_replay_late"), LATE_COLUMNS) == MARKER_LATE


@pytest.mark.slow
def test_punctuated_replay_of_sessions_steps_through_spark(spark):
    """SESSION windows replay micro-batch by micro-batch through Spark (the live path's scan): rows up to 20 s
    (mb 0) fire nothing; the marker at 10 s (mb 1) closes the session [1, 8) in the no-data mb 2; the row at 2 s
    (its span [2, 7) behind W) is then dropped in mb 3; the end of input (mb 4) closes [20, 25)."""
    rows = [(0, "data", 1, at(1), None, 0), (1, "data", 2, at(3), None, 0), (2, "data", 4, at(20), None, 0),
            (3, "marker", None, None, at(10), 1), (4, "data", 8, at(2), None, 2)]
    spark.createDataFrame(rows, "seq int, kind string, v int, ts timestamp, mark timestamp, batch int") \
        .createOrReplaceTempView("marker_sess_rows")
    sqlwin.sql(spark, "CREATE STREAM marker_sess FROM TABLE marker_sess_rows ARRIVAL ORDER BY seq MICRO BATCH BY "
                      "batch WATERMARK FOR ts AS mark ON ROWS WHERE kind = 'marker'")
    out = sqlwin.sql(spark, """SELECT window_start, window_end, kind, SUM(v) AS s, COUNT(*) AS c
        FROM SESSION(TABLE marker_sess PARTITION BY kind, DESCRIPTOR(ts), INTERVAL 5 SECONDS)
        GROUP BY window_start, window_end, kind LATE ROWS TO marker_sess_late""")
    assert rows_of(out, ["window_start", "window_end", "s", "c", "pane_timing", "micro_batch"]) == [
        (at(1), at(8), 3, 2, "ON_TIME", 2), (at(20), at(25), 4, 1, "ON_TIME", 4)]
    assert rows_of(spark.table("marker_sess_late"), ["seq", "watermark", "reason", "micro_batch"]) == [
        (4, at(10), "late", 3)]


@pytest.mark.slow
def test_punctuated_and_ordinary_streams_take_the_minimum(spark, tmp_path):
    """A query over a punctuated stream and a bounded-delay one: W = min of the two; the data rows of the
    punctuated stream never move its part, however far ahead they run."""
    marks, plain = Feeder(tmp_path / "mk_a"), Feeder(tmp_path / "mk_b")
    sqlwin.sql(spark, f"CREATE STREAM mk_a (seq INT, kind STRING, v INT, ts TIMESTAMP, mark TIMESTAMP, "
                      f"WATERMARK FOR ts AS mark ON ROWS WHERE kind = 'marker') USING json "
                      f"OPTIONS (path '{marks.folder}')")
    sqlwin.sql(spark, f"CREATE STREAM mk_b (v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json "
                      f"OPTIONS (path '{plain.folder}')")
    sqlwin.sql(spark, """CREATE STREAMING TABLE mk_out AS
        SELECT window_start, window_end, SUM(v) AS s FROM TUMBLE(TABLE(SELECT v, ts FROM mk_a UNION ALL
        SELECT v, ts FROM mk_b), DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end""")
    table = catalog.find_table("mk_out")

    def panes() -> list[tuple]:
        return rows_of(spark.table("mk_out"), ["window_start", "s", "pane_timing"])

    try:
        assert "several streams" in table.why and "punctuated watermark (ON ROWS WHERE)" in table.why
        marks.feed([[data(0, 10, 3), data(1, 20, 31)]], table)
        plain.feed([[{"v": 1, "ts": ts(4)}, {"v": 2, "ts": ts(12)}]], table)
        assert panes() == []  # W = min(-inf: no marker yet, 12)
        marks.feed([[marker(2, 15)]], table)  # W = min(15, 12): [0, 10) fires
        assert panes() == [(at(0), 11, "ON_TIME")]
        marks.feed([[marker(3, 40)]], table)  # W = min(40, 12): nothing more
        assert panes() == [(at(0), 11, "ON_TIME")]
        plain.feed([[{"v": 3, "ts": ts(25)}]], table)  # W = min(40, 25): [10, 20) fires
        assert panes() == [(at(0), 11, "ON_TIME"), (at(10), 2, "ON_TIME")]
    finally:
        table.stop()
        catalog.remove_table(table.name)


def at_or_none(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text is not None else None


@pytest.mark.slow
def test_punctuated_live_equals_replay_and_hand_worked_panes(spark, tmp_path):
    """The live run is the replay but for what the end of input fires; the native path cannot move a watermark
    on marker rows only, so the query runs on the custom path and says why."""
    feeder = Feeder(tmp_path / "markers")
    sqlwin.sql(spark, f"CREATE STREAM marker_live (seq INT, kind STRING, v INT, ts TIMESTAMP, mark TIMESTAMP, "
                      f"WATERMARK FOR ts AS mark ON ROWS WHERE kind = 'marker') USING json "
                      f"OPTIONS (path '{feeder.folder}')")
    sqlwin.sql(spark, "CREATE STREAMING TABLE marker_out AS " + MARKER_QUERY.format(s="marker_live",
                                                                                    late="marker_live_late"))
    table = catalog.find_table("marker_out")
    try:
        assert (table.path, table.why) == ("custom", "LATE ROWS TO, punctuated watermark (ON ROWS WHERE)")
        feeder.write(MARKER_FILES[0])
        table.process_all_available()
        assert spark.table("marker_out").count() == 0  # rows up to 25 s, but no marker: nothing is complete
        feeder.feed(MARKER_FILES[1:], table)
        assert rows_of(spark.table("marker_out"), PANE_COLUMNS) == MARKER_PANES
        assert rows_of(spark.table("marker_live_late"), LATE_COLUMNS) == MARKER_LATE
        assert table.status().watermark == "2024-01-01 00:00:30"
    finally:
        table.stop()
        catalog.remove_table(table.name)


WRONG_STREAMS = [
    ("CREATE STREAM bad_m (kind STRING, ts TIMESTAMP, mark TIMESTAMP,\n"
     "  WATERMARK FOR ts AS mark ON ROWS WHERE kind) USING json OPTIONS (path '{path}')",
     "line 2, col 42: ON ROWS WHERE expects a condition (BOOLEAN); kind is STRING"),
    ("CREATE STREAM bad_m (kind STRING, ts TIMESTAMP, mark TIMESTAMP,\n"
     "  WATERMARK FOR ts AS kind ON ROWS WHERE kind = 'm') USING json OPTIONS (path '{path}')",
     "line 2, col 23: WATERMARK FOR ts AS kind: the watermark of a marker row must be a TIMESTAMP, as ts is; "
     "got STRING"),
    ("CREATE STREAM bad_m (kind STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts ON ROWS WHERE kindd = 'm') "
     "USING json OPTIONS (path '{path}')", "line 1, col 86: ON ROWS WHERE: [UNRESOLVED_COLUMN"),
    ("CREATE STREAM bad_m FROM TABLE marker_rows ARRIVAL ORDER BY seq\n"
     "WATERMARK FOR ts AS mark ON ROWS WHERE v + 1", "line 2, col 40: ON ROWS WHERE expects a condition (BOOLEAN); "
                                                    "v + 1 is INT"),
]


@pytest.mark.parametrize(("sql", "message"), WRONG_STREAMS)
def test_punctuated_watermark_types_are_checked(spark, tmp_path, sql, message):
    """Checked with Spark when the stream is created (nothing read), positioned in the statement as written."""
    spark.createDataFrame([], "seq int, kind string, v int, ts timestamp, mark timestamp") \
        .createOrReplaceTempView("marker_rows")
    with pytest.raises(SqlwinError) as err:
        sqlwin.sql(spark, sql.format(path=tmp_path))
    assert str(err.value).startswith(message)
    assert catalog.find_stream(spark, "bad_m") is None


# PROCTIME() - 5 s: the watermark in force for a micro-batch at processing time p is p - 5 s, whatever its rows
# say. f0 at p = 3 -> mb 0 (W -2); f1 at p = 11 -> mb 1 (W 6: the row at 9 s is in time); f2 at p = 18 -> mb 2
# (W 13: [0, 10) fires in it, and its row at 7 s is late, dropped). Then the stream is quiet: [10, 20) closes
# when the clock reaches 20 + 5 s, in a micro-batch without rows (live: the one the operator asks for then; a
# replay has no such micro-batch, so its end of input (mb 3) fires [10, 20) and [20, 30)).
LAG_FILES = [(3, [("a", 1, 1), ("a", 2, 4), ("a", 4, 12)]), (11, [("a", 3, 9)]),
             (18, [("a", 5, 7), ("a", 6, 15), ("a", 7, 27)])]
LAG_PANES = [(at(0), 6, 3, 0, "ON_TIME", True, 2)]
LAG_QUIET_PANE = (at(10), 10, 2, 0, "ON_TIME", True, 3)  # live, at p = 25 s
LAG_END_PANES = [(at(10), 10, 2, 0, "ON_TIME", True, 3), (at(20), 7, 1, 0, "ON_TIME", True, 3)]  # replay's end
LAG_LATE = [(5, at(0), at(13), "late", 2)]
LAG_QUERY = """SELECT window_start, window_end, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
    GROUP BY window_start, window_end
    LATE ROWS TO {late}"""


def test_proctime_lag_replay_matches_hand_worked_panes(spark):
    rows = [(k, v, at(t), n, at(p)) for n, (p, batch) in enumerate(LAG_FILES) for k, v, t in batch]
    spark.createDataFrame(rows, "k string, v int, ts timestamp, batch int, clock timestamp") \
        .createOrReplaceTempView("lag_rows")
    sqlwin.sql(spark, "CREATE STREAM lag_replay FROM TABLE lag_rows ARRIVAL ORDER BY batch, ts MICRO BATCH BY batch "
                      "PROCESSING TIME BY clock WATERMARK FOR ts AS PROCTIME() - INTERVAL 5 SECONDS")
    out = sqlwin.sql(spark, LAG_QUERY.format(s="lag_replay", late="lag_replay_late"))
    assert rows_of(out, PANE_COLUMNS) == [*LAG_PANES, *LAG_END_PANES]
    assert rows_of(spark.table("lag_replay_late"), ["v", "window_start", "watermark", "reason", "micro_batch"]) == \
        LAG_LATE


@pytest.mark.slow
def test_proctime_lag_live_equals_replay_and_closes_windows_on_a_quiet_stream(spark, tmp_path):
    """On the test's clock (``streamtools.start_clocked``): each file is a micro-batch at the clock's time; the
    operator's next wake is when the clock closes the next window (20 s + lag), and a micro-batch then without
    rows (the tick it asks for; here an empty file at that time) fires it."""
    feeder = Feeder(tmp_path / "lag")
    sqlwin.sql(spark, f"CREATE STREAM lag_live (k STRING, v INT, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS PROCTIME() - INTERVAL 5 SECONDS) USING json "
                      f"OPTIONS (path '{feeder.folder}')")
    table, clock = start_clocked(spark, "CREATE STREAMING TABLE lag_out AS "
                                 + LAG_QUERY.format(s="lag_live", late="lag_live_late"), micros(LAG_FILES[0][0]))
    try:
        assert (table.path, table.why) == ("custom", "LATE ROWS TO, PROCTIME() watermark")
        for p, batch in LAG_FILES:
            clock.now = micros(p)
            feeder.write({"k": k, "v": v, "ts": ts(t)} for k, v, t in batch)
            table.process_all_available()
        assert rows_of(spark.table("lag_out"), PANE_COLUMNS) == LAG_PANES
        assert rows_of(spark.table("lag_live_late"), ["v", "window_start", "watermark", "reason", "micro_batch"]) \
            == LAG_LATE
        assert table.operator.next_wake() == micros(25)  # [10, 20) closes once p - 5 s >= 20 s
        clock.now = micros(25)
        feeder.write([])  # the quiet stream's micro-batch at that time
        table.process_all_available()
        assert rows_of(spark.table("lag_out"), PANE_COLUMNS) == [*LAG_PANES, LAG_QUIET_PANE]
        assert table.status().watermark == "2024-01-01 00:00:20"
    finally:
        table.stop()
        catalog.remove_table(table.name)


def micros(seconds: float) -> int:
    return int(at(seconds).replace(tzinfo=dt.timezone.utc).timestamp()) * SECOND


@pytest.mark.slow
def test_proctime_lag_closes_a_window_on_the_wall_clock(spark, tmp_path):
    """Without a test clock: after one file and no more, the operator itself asks Spark for the micro-batch
    at which the clock closes the window (its tick source), as for processing-time triggers. Waits for that
    outcome, bounded."""
    import time

    feeder = Feeder(tmp_path / "lag_wall")
    sqlwin.sql(spark, f"CREATE STREAM lag_wall (k STRING, v INT, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS PROCTIME() - INTERVAL 1 SECOND) USING json "
                      f"OPTIONS (path '{feeder.folder}')")
    sqlwin.sql(spark, """CREATE STREAMING TABLE lag_wall_out AS SELECT window_start, SUM(v) AS s, COUNT(*) AS c
        FROM TUMBLE(TABLE lag_wall, DESCRIPTOR(ts), INTERVAL 1 SECOND) GROUP BY window_start, window_end""")
    table = catalog.find_table("lag_wall_out")
    try:
        soon = (dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(seconds=3)).isoformat(sep=" ")
        feeder.feed([[{"k": "a", "v": 1, "ts": soon}, {"k": "a", "v": 2, "ts": soon}]], table)  # ahead of the clock
        deadline = time.monotonic() + 60
        while spark.table("lag_wall_out").count() == 0 and time.monotonic() < deadline:
            table.process_all_available()
            time.sleep(0.2)
        out = [(r.s, r.c, r.pane_timing, r.is_final) for r in spark.table("lag_wall_out").collect()]
        assert out == [(3, 2, "ON_TIME", True)]
    finally:
        table.stop()
        catalog.remove_table(table.name)


@pytest.mark.parametrize("idle", [True, False])
def test_an_idle_replay_stream_closes_its_window_before_a_row_that_comes_later(spark, idle):
    """GRAMMAR 3 on the PROCESSING TIME BY clock: one row at 10:00 (ts 08:01), the next at 10:10 (ts 08:05),
    WATERMARK FOR ts AS ts, IDLE TIMEOUT 1 minute. Hand-worked: idle from 10:01 (W = 08:01 + 1 min, micro-batch 1),
    W reaches 08:10 at 10:09 (``max(d, e - max_ts + delay)`` = 9 minutes after the last row): [08:00, 08:10)
    closes then with the one row (micro-batch 2), and the row at 10:10 is late (W 08:10, micro-batch 3), as a
    live run's ticks at 10:01 and 10:09 would have it. Without the timeout both rows are in the window."""
    spark.sql("SELECT * FROM VALUES (1, TIMESTAMP'2020-04-15 10:00:00', TIMESTAMP'2020-04-15 08:01:00', 1), "
              "(2, TIMESTAMP'2020-04-15 10:10:00', TIMESTAMP'2020-04-15 08:05:00', 2) AS t(seq, pt, ts, v)") \
        .createOrReplaceTempView("idle_rows")
    timeout = " WITH IDLE TIMEOUT INTERVAL '1' MINUTE" if idle else ""
    sqlwin.sql(spark, "CREATE STREAM idle_s FROM TABLE idle_rows ARRIVAL ORDER BY seq PROCESSING TIME BY pt "
                      f"WATERMARK FOR ts AS ts{timeout}")
    try:
        panes = sqlwin.sql(spark, "SELECT window_start, SUM(v) AS total, COUNT(*) AS n FROM TUMBLE(TABLE idle_s, "
                                  "DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY window_start, window_end "
                                  "LATE ROWS TO idle_late")
        start = dt.datetime(2020, 4, 15, 8)
        late = rows_of(spark.table("idle_late"), ["v", "watermark", "reason", "micro_batch"])
        if idle:
            assert rows_of(panes, ["window_start", "total", "n", "pane_timing", "micro_batch"]) == [
                (start, 1, 1, "ON_TIME", 2)]
            assert late == [(2, start + dt.timedelta(minutes=10), "late", 3)]
        else:
            assert rows_of(panes, ["window_start", "total", "n", "pane_timing", "micro_batch"]) == [
                (start, 3, 2, "ON_TIME", 2)]
            assert late == []
    finally:
        catalog.drop_stream(spark, "idle_s")


# a stream of two sides (each a stage of a staged query): their first rows at 10:00 (ts 08:01 and 08:02), their
# next at 10:10 (08:05, 08:06); WATERMARK FOR ts AS ts, IDLE TIMEOUT 1 minute
STAGED_IDLE = [(1, "10:00", "08:01", 1, "l"), (1, "10:00", "08:02", 10, "r"),
               (2, "10:10", "08:05", 2, "l"), (2, "10:10", "08:06", 20, "r")]
IDLE_JOIN = """SELECT L.ws, L.s, R.s AS rs FROM (SELECT window_start AS ws, window_end AS we, SUM(v) AS s
      FROM TUMBLE(TABLE(SELECT * FROM idle2_s WHERE side = 'l'), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
      GROUP BY window_start, window_end) L
JOIN (SELECT window_start, window_end, SUM(v) AS s
      FROM TUMBLE(TABLE(SELECT * FROM idle2_s WHERE side = 'r'), DESCRIPTOR(ts), INTERVAL '10' MINUTES)
      GROUP BY window_start, window_end) R ON L.ws = R.window_start AND L.we = R.window_end"""
IDLE_CASCADE = """SELECT window_start, SUM(s) AS total, COUNT(*) AS inner_windows FROM TUMBLE(TABLE(
    SELECT window_time AS rowtime, SUM(v) AS s FROM TUMBLE(TABLE idle2_s, DESCRIPTOR(ts), INTERVAL '10' MINUTES)
    GROUP BY window_start, window_end, window_time), DESCRIPTOR(rowtime), INTERVAL '20' MINUTES)
GROUP BY window_start, window_end"""


def test_an_idle_replay_stream_closes_the_windows_of_a_join_and_a_cascade_before_later_rows(spark):
    """Staged replay (a window join, cascaded windows) runs the idle stream's micro-batches without rows as the
    single-stage replay does (above). Hand-worked: idle, the stream's W reaches 08:10 at 10:08 (max(d, e - max_ts +
    delay) = 8 minutes after the last rows, ts 08:02): [08:00, 08:10) closes then on each side with the first rows
    (L 1, R 10; the inner windows 11), the join joins it at once (the tick's micro-batch settles), and the rows at
    10:10 are late for it. The cascade's outer [08:00, 08:20) takes that one inner pane (the end of the input
    fires it). Run live, a tick at 10:08 would do the same; without it both windows took all the rows (3, 30)."""
    day = "2020-04-15"
    values = ", ".join(f"({seq}, TIMESTAMP'{day} {pt}:00', TIMESTAMP'{day} {t}:00', {v}, '{side}')"
                       for seq, pt, t, v, side in STAGED_IDLE)
    spark.sql(f"SELECT * FROM VALUES {values} AS t(seq, pt, ts, v, side)").createOrReplaceTempView("idle2_rows")
    sqlwin.sql(spark, "CREATE STREAM idle2_s FROM TABLE idle2_rows ARRIVAL ORDER BY seq MICRO BATCH BY seq "
                      "PROCESSING TIME BY pt WATERMARK FOR ts AS ts WITH IDLE TIMEOUT INTERVAL '1' MINUTE")
    try:
        start = dt.datetime(2020, 4, 15, 8)
        joined = rows_of(sqlwin.sql(spark, IDLE_JOIN), ["ws", "s", "rs", "pane_timing", "is_final"])
        cascade = rows_of(sqlwin.sql(spark, IDLE_CASCADE),
                          ["window_start", "total", "inner_windows", "pane_timing", "is_final"])
        assert (joined, cascade) == ([(start, 1, 10, "ON_TIME", True)], [(start, 11, 1, "ON_TIME", True)])
    finally:
        catalog.drop_stream(spark, "idle2_s")


# a window join of two streams, one of which (payments) brings no row until 10:20: orders at 10:00 (ts 08:01),
# 10:05 (08:12) and 10:30 (08:25); payments at 10:20 (08:05, 08:15). WATERMARK FOR ts AS ts on both; payments
# WITH IDLE TIMEOUT 1 minute (or not)
ORDERS = [(1, "10:00", "08:01", 1), (2, "10:05", "08:12", 2), (4, "10:30", "08:25", 4)]
PAYMENTS = [(3, "10:20", "08:05", 10), (3, "10:20", "08:15", 20)]
QUIET_JOIN = """SELECT O.ws, O.n AS orders, P.n AS payments
FROM (SELECT window_start AS ws, window_end AS we, SUM(v) AS n
      FROM TUMBLE(TABLE {o}, DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY window_start, window_end) O
LEFT JOIN (SELECT window_start AS ws, window_end AS we, SUM(v) AS n
      FROM TUMBLE(TABLE {p}, DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY window_start, window_end
      LATE ROWS TO {late}) P
ON O.ws = P.ws AND O.we = P.we"""
JOIN_PANE = ["ws", "orders", "payments", "pane_timing", "is_final"]
LATE_ROW = ["v", "window_start", "watermark", "reason"]


def quiet_at(hhmm: str) -> dt.datetime:
    return dt.datetime(2020, 4, 15, int(hhmm[:2]), int(hhmm[3:]))


# Hand-worked, idle: payments is idle from 10:01 (its IDLE TIMEOUT since the query's first micro-batch, 10:00), so
# the join follows orders alone: at 10:05 orders' W 08:12 passes [08:00, 08:10), joined without payments (LEFT:
# NULL), and payments' W is lifted to the join's, 08:12. Its row at 10:20 for [08:00, 08:10) (08:05) is its late
# row (W 08:12); 08:15 is on time. Idle again from 10:21, payments' W follows the clock to 08:20 at 10:25 (GRAMMAR
# 3: max(d, e - max_ts + delay) after its last row) and the join waits for orders' W (08:25 at 10:30) to join
# [08:10, 08:20). The end of the input joins [08:20, 08:30).
QUIET_IDLE = [(quiet_at("08:00"), 1, None, "ON_TIME", True), (quiet_at("08:10"), 2, 20, "ON_TIME", True)]
QUIET_IDLE_END = [(quiet_at("08:20"), 4, None, "ON_TIME", True)]
QUIET_IDLE_LATE = [(10, quiet_at("08:00"), quiet_at("08:12"), "late")]
# without the timeout the join waits for payments' first rows: both on time
QUIET_WAITING = [(quiet_at("08:00"), 1, 10, "ON_TIME", True), (quiet_at("08:10"), 2, 20, "ON_TIME", True),
                 (quiet_at("08:20"), 4, None, "ON_TIME", True)]


def quiet_tables(spark) -> None:
    for name, rows in (("quiet_orders", ORDERS), ("quiet_payments", PAYMENTS)):
        values = ", ".join(f"({seq}, TIMESTAMP'2020-04-15 {pt}:00', TIMESTAMP'2020-04-15 {t}:00', {v})"
                           for seq, pt, t, v in rows)
        spark.sql(f"SELECT * FROM VALUES {values} AS t(seq, pt, ts, v)").createOrReplaceTempView(name)


@pytest.mark.parametrize("idle", [True, False])
def test_a_window_join_goes_on_without_a_side_that_is_idle_before_its_first_row(spark, idle):
    """GRAMMAR 3 (an idle stream does not hold the others back) in a window join: a side whose stream has brought
    no row is idle once its IDLE TIMEOUT passed since the query started, and the join's watermark is then the
    other side's; the idle side's watermark is lifted to the join's, so its rows for windows the join already
    emitted are its late rows (LATE ROWS TO), never a second pane of a window whose other side is gone.
    Replayed on the PROCESSING TIME BY clock, against the hand-worked panes above."""
    quiet_tables(spark)
    timeout = " WITH IDLE TIMEOUT INTERVAL '1' MINUTE" if idle else ""
    replay = "FROM TABLE {t} ARRIVAL ORDER BY seq MICRO BATCH BY seq PROCESSING TIME BY pt WATERMARK FOR ts AS ts"
    sqlwin.sql(spark, "CREATE STREAM quiet_o " + replay.format(t="quiet_orders"))
    sqlwin.sql(spark, "CREATE STREAM quiet_p " + replay.format(t="quiet_payments") + timeout)
    try:
        joined = sqlwin.sql(spark, QUIET_JOIN.format(o="quiet_o", p="quiet_p", late="quiet_late"))
        late = rows_of(spark.table("quiet_late"), LATE_ROW)
        if idle:
            assert (rows_of(joined, JOIN_PANE), late) == ([*QUIET_IDLE, *QUIET_IDLE_END], QUIET_IDLE_LATE)
        else:
            assert (rows_of(joined, JOIN_PANE), late) == (QUIET_WAITING, [])
    finally:
        catalog.drop_stream(spark, "quiet_o")
        catalog.drop_stream(spark, "quiet_p")


@pytest.mark.slow
def test_a_live_window_join_goes_on_without_an_idle_side_as_replay_does(spark, tmp_path):
    """The same two streams live, each row a file at its processing time on the test's clock
    (``streamtools.start_clocked``): the join emits [08:00, 08:10) at 10:05 without payments, payments' row for it
    at 10:20 is its late row, and the micro-batches a quiet payments stream asks for (10:21, when it is idle
    again; 10:25, when its watermark reaches 08:20: empty files at those times) lead to the replay's panes."""
    feeders = {}
    for name in ("quiet_live_o", "quiet_live_p"):
        feeders[name] = Feeder(tmp_path / name)
        timeout = " WITH IDLE TIMEOUT INTERVAL '1' MINUTE" if name.endswith("p") else ""
        sqlwin.sql(spark, f"CREATE STREAM {name} (v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json "
                          f"OPTIONS (path '{feeders[name].folder}'){timeout}")
    sql = QUIET_JOIN.format(o="quiet_live_o", p="quiet_live_p", late="quiet_live_late")
    table, clock = start_clocked(spark, "CREATE STREAMING TABLE quiet_live AS " + sql, quiet_micros("10:00"))

    def arrive(hhmm: str, name: str, rows: list[tuple[str, int]]) -> None:
        clock.now = quiet_micros(hhmm)
        feeders[name].write({"v": v, "ts": f"2020-04-15 {t}:00"} for t, v in rows)
        table.process_all_available()

    try:
        arrive("10:00", "quiet_live_o", [("08:01", 1)])
        arrive("10:05", "quiet_live_o", [("08:12", 2)])
        assert rows_of(spark.table("quiet_live"), JOIN_PANE) == QUIET_IDLE[:1]  # payments idle since 10:01
        arrive("10:20", "quiet_live_p", [("08:05", 10), ("08:15", 20)])
        assert rows_of(spark.table("quiet_live_late"), LATE_ROW) == QUIET_IDLE_LATE
        assert table.operator.next_wake() == quiet_micros("10:21")
        arrive("10:21", "quiet_live_p", [])
        assert table.operator.next_wake() == quiet_micros("10:25")
        arrive("10:25", "quiet_live_p", [])
        assert rows_of(spark.table("quiet_live"), JOIN_PANE) == QUIET_IDLE[:1]  # [08:10, 08:20) waits for orders
        arrive("10:30", "quiet_live_o", [("08:25", 4)])
        assert rows_of(spark.table("quiet_live"), JOIN_PANE) == QUIET_IDLE
        assert rows_of(spark.table("quiet_live_late"), LATE_ROW) == QUIET_IDLE_LATE
    finally:
        table.stop()
        catalog.remove_table(table.name)
        for name in feeders:
            catalog.drop_stream(spark, name)


def quiet_micros(hhmm: str) -> int:
    return int(quiet_at(hhmm).replace(tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
