"""A stream joined with its own window aggregation by a time range (Nexmark q7 as Nexmark writes it; issue 18),
run continuously as the window join it equals (``sqlwin.streaming.intervaljoin``): live (a file per micro-batch)
and replayed (stepped and planned) against a hand-worked table, and generated replays against DuckDB running the
batch query, each side over the rows it had not dropped as late."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamtools import T0, ts
from test_streaming_stages import _json_streams

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog, joinreplay

pytestmark = pytest.mark.slow

# Nexmark q7's text, the bids' time named ts
Q7 = """SELECT b.auction, b.price, b.ts
FROM {s} b
JOIN (
  SELECT MAX(price) AS maxprice, window_end AS ts
  FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL '10' SECONDS)
  GROUP BY window_start, window_end{clause}
) b1 ON b.price = b1.maxprice
WHERE b.ts BETWEEN b1.ts - INTERVAL '10' SECONDS AND b1.ts"""

# files of bids (auction, price, second); the watermark is the largest ts so far minus 1 s, in force from the next
# file. Window E (ending at E) holds the bids of [E - 10, E), and its range meets the bids of [E - 10, E].
FILES = [
    [(1, 5, 1), (2, 9, 3), (3, 9, 10)],  # W after: 9
    [(4, 2, 12), (5, 7, 20)],  # W after: 19: window 10 fires (max 9): bid 2, and bid 3 at its end (10 s)
    # bid 6 ties window 20's max; bid 7 (9 s) is late for window 10 on both sides (W 19 >= 10): dropped
    [(6, 9, 15), (7, 8, 9), (8, 4, 25)],  # W after: 24: window 20 fires (max 9): bids 3, 6
    # bid 9 at 20 s: its window 30 is open, but the range of window 20 ended at 20 s (W 24): it meets window 30 only
    [(9, 9, 20), (10, 8, 30)],  # W after: 29
]
# (auction, price, second): windows 10 and 20 as the watermark passes them, 30 and 40 at the end of the input
LIVE = [(2, 9, 3), (3, 9, 10), (3, 9, 10), (6, 9, 15)]
AT_END = [(9, 9, 20), (10, 8, 30)]
# the batch query over every bid also joins bid 9 to window 20 (late there in the stream)
BATCH = sorted([*LIVE, *AT_END, (9, 9, 20)])


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def _bids(df) -> list[tuple]:
    return sorted((r["auction"], r["price"], (r["ts"] - T0).total_seconds()) for r in df.collect())


def test_nexmark_q7_text_runs_live_and_replayed(spark, tmp_path, monkeypatch):
    """Live, one file per micro-batch, then replayed in the same micro-batches, stepped and planned: the
    hand-worked rows, the same panes and micro-batches, the late bid in LATE ROWS TO."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    feeders = _json_streams(spark, tmp_path, "ij", ("bids",), "auction INT, price INT, ts TIMESTAMP", 1)
    sql = Q7.format(s="ij_bids", clause=" LATE ROWS TO ij_late")
    sqlwin.sql(spark, "CREATE STREAMING TABLE ij_q7 AS " + sql)
    table = catalog.find_table("ij_q7")
    try:
        assert (table.path, table.why) == ("custom", "a stream joined by a time range")
        for rows in FILES:
            feeders["bids"].write([{"auction": a, "price": p, "ts": ts(s)} for a, p, s in rows])
            table.process_all_available()
        live = spark.table("ij_q7")
        assert _bids(live) == LIVE
        assert {tuple(r) for r in live.select("pane_index", "pane_timing", "is_final").collect()} == \
            {(0, "ON_TIME", True)}
        assert [(r.auction, r.reason) for r in spark.table("ij_late").collect()] == [(7, "late")]
        status = table.status()
        # bid 7 dropped by both sides, bid 9 by the stream's side for window 20
        assert (status.rows_in, status.late_rows_dropped) == (10, 3)
        live_rows = sorted(tuple(r) for r in live.collect())
    finally:
        table.stop()
        catalog.remove_table("ij_q7")

    data = [(a, p, at(s), f) for f, rows in enumerate(FILES) for a, p, s in rows]
    spark.createDataFrame(data, "auction int, price int, ts timestamp, f int").createOrReplaceTempView("ij_rows")
    sqlwin.sql(spark, "CREATE STREAM r_ij FROM TABLE ij_rows ARRIVAL ORDER BY f MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 1 SECONDS")
    original = joinreplay.PlannedStagedReplay.plannable
    ran: list[bool] = []

    def recorded(self) -> bool:
        ran.append(original(self))
        return ran[-1]

    replays = {}
    for planned in (True, False):
        with monkeypatch.context() as m:
            m.setattr(joinreplay.PlannedStagedReplay, "plannable", recorded if planned else lambda self: False)
            late = f"ij_late_{planned}"
            replays[planned] = sorted(tuple(r) for r in sqlwin.sql(spark, Q7.format(
                s="r_ij", clause=f" LATE ROWS TO {late}")).collect())
            assert [(r.auction, r.reason) for r in spark.table(late).collect()] == [(7, "late")]
    assert ran == [True]  # planned, then stepped
    assert replays[True] == replays[False]
    assert set(live_rows) <= set(replays[True])  # the same micro-batches; windows 30 and 40 at the end of input
    assert sorted((a, p, (t - T0).total_seconds()) for a, p, t, *_ in replays[True]) == sorted([*LIVE, *AT_END])
    assert _bids(sqlwin.sql(spark, Q7.format(s="ij_rows", clause=""))) == BATCH


# -- generated bids: the replay equals DuckDB's batch query, each side over the bids it kept -----------------------
BIDS = st.lists(st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(0, 4)),
                          st.one_of(st.none(), st.integers(0, 45))), min_size=0, max_size=16)


def _watermarks(rows: list[tuple], per_file: int, delay: float) -> list[float | None]:
    """The watermark in force when each bid arrives: the largest time of the files before its own minus
    ``delay`` (None before any)."""
    out, top = [], None
    for f in range(0, len(rows), per_file):
        out += [None if top is None else top - delay] * len(rows[f:f + per_file])
        times = [r[2] for r in rows[f:f + per_file] if r[2] is not None]
        top = max([t for t in (top, *times) if t is not None], default=None)
    return out


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=BIDS, per_file=st.integers(1, 4), lo=st.sampled_from([-10, -15, -5]), hi=st.sampled_from([0, 5, -2]))
def test_generated_replays_equal_the_batch_query_per_side(spark, duck, tmp_path, monkeypatch, rows, per_file, lo,
                                                          hi):
    """Out of order, ties, NULL prices and times, bids on window bounds, several ranges. The watermark (largest
    time minus 0.5 s) never equals a whole second, so: the window aggregation keeps a bid whose window had not
    ended (W < its end); the stream's side lets a bid meet window E where E's range had not ended (W < E + hi)."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    watermarks = _watermarks(rows, per_file, 0.5)
    data = [(a, p, None if s is None else at(s), i // per_file, w) for i, ((a, p, s), w) in
            enumerate(zip(rows, watermarks, strict=True))]
    spark.createDataFrame(data, "auction int, price int, ts timestamp, f int, w double") \
        .createOrReplaceTempView("ij_gen")
    sqlwin.sql(spark, "CREATE STREAM r_ij_gen FROM TABLE ij_gen ARRIVAL ORDER BY f MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL '0.5' SECONDS")
    sql = Q7.format(s="r_ij_gen", clause="").replace(
        "BETWEEN b1.ts - INTERVAL '10' SECONDS AND b1.ts",
        f"BETWEEN b1.ts + INTERVAL '{lo}' SECONDS AND b1.ts + INTERVAL '{hi}' SECONDS")
    replayed = sorted(((r.auction, r.price, r.ts), tuple(r)[3:6]) for r in sqlwin.sql(spark, sql).collect())
    assert {pane for _, pane in replayed} <= {(0, "ON_TIME", True)}

    duck.execute("DROP TABLE IF EXISTS ij_bids")
    duck.execute("CREATE TABLE ij_bids (auction INTEGER, price INTEGER, ts TIMESTAMP, w DOUBLE)")
    if data:
        duck.executemany("INSERT INTO ij_bids VALUES (?, ?, ?, ?)", [(a, p, t, w) for a, p, t, _, w in data])
    seconds = "epoch({}) - epoch(TIMESTAMP '2024-01-01')"  # since T0
    duck.execute("DROP TABLE IF EXISTS ij_kept")
    duck.execute(f"CREATE TABLE ij_kept AS SELECT auction, price, ts FROM ij_bids "
                 f"WHERE w IS NULL OR w < (floor(({seconds.format('ts')}) / 10) + 1) * 10")
    windows = sqlwin.rewrite("SELECT MAX(price) AS maxprice, window_end AS ts FROM TUMBLE(TABLE ij_kept, "
                             "DESCRIPTOR(ts), INTERVAL '10' SECONDS) GROUP BY window_start, window_end",
                             target="duckdb", catalog=duck)
    expected = duck.execute(f"""
        SELECT b.auction, b.price, b.ts FROM ij_bids b JOIN ({windows}) b1 ON b.price = b1.maxprice
        WHERE b.ts BETWEEN b1.ts + INTERVAL '{lo}' SECONDS AND b1.ts + INTERVAL '{hi}' SECONDS
          AND (b.w IS NULL OR b.w < {seconds.format('b1.ts')} + {hi})""").fetchall()
    assert sorted(k for k, _ in replayed) == sorted(tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v
                                                          for v in r) for r in expected)


@pytest.mark.parametrize(("change", "message"), [
    (("JOIN (", "LEFT JOIN ("), "an inner join only"),
    (("BETWEEN b1.ts - INTERVAL '10' SECONDS AND b1.ts", ">= b1.ts - INTERVAL '10' SECONDS"),
     "bounds b.ts on both sides by one bound of the window"),
    (("BETWEEN b1.ts - INTERVAL '10' SECONDS AND b1.ts", "BETWEEN b1.ts AND b1.ts - INTERVAL '1' SECONDS"),
     "the time range of this join is empty"),
    (("TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL '10' SECONDS)",
      "CUMULATE(TABLE {s}, DESCRIPTOR(ts), INTERVAL '5' SECONDS, INTERVAL '10' SECONDS)"), "a TUMBLE or HOP of time"),
    (("FROM {s} b", "FROM ij_err_other b"), "is read outside the window TVF"),
    ((("JOIN (\n  SELECT MAX(price) AS maxprice, window_end AS ts", "JOIN (SELECT * FROM (\n  SELECT MAX(price) AS "
       "maxprice, window_end AS ts"), (") b1 ON", ")) b1 ON")), "passes window_start and window_end on"),
])
def test_joins_by_a_time_range_that_do_not_run(spark, tmp_path, monkeypatch, change, message):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    spark.createDataFrame([(1, 1, at(0))], "auction int, price int, ts timestamp").createOrReplaceTempView("ij_err")
    for name in ("r_ij_err", "ij_err_other"):
        sqlwin.sql(spark, f"CREATE STREAM {name} FROM TABLE ij_err ARRIVAL ORDER BY ts WATERMARK FOR ts AS ts")
    with pytest.raises(SqlwinError) as err:
        sql = Q7
        for pair in change if isinstance(change[0], tuple) else [change]:
            sql = sql.replace(*pair)
        sqlwin.sql(spark, sql.format(s="r_ij_err", clause=""))
    assert message in str(err.value)
    assert str(err.value).startswith("line ")


def test_the_window_query_may_be_a_cte(spark, tmp_path, monkeypatch):
    """The window query in a CTE, the range in the ON with >= and <: the rows of the subquery form, but for the
    bids on a window's end (its range stops short of them now)."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    data = [(a, p, at(s), f) for f, rows in enumerate(FILES) for a, p, s in rows]
    spark.createDataFrame(data, "auction int, price int, ts timestamp, f int").createOrReplaceTempView("ij_cte_rows")
    sqlwin.sql(spark, "CREATE STREAM r_ij_cte FROM TABLE ij_cte_rows ARRIVAL ORDER BY f MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 1 SECONDS")
    sql = """WITH b1 AS (SELECT MAX(price) AS maxprice, window_end AS ts
                       FROM TUMBLE(TABLE r_ij_cte, DESCRIPTOR(ts), INTERVAL '10' SECONDS)
                       GROUP BY window_start, window_end)
             SELECT b.auction, b.price, b.ts FROM r_ij_cte b JOIN b1
             ON b.price = b1.maxprice AND b.ts >= b1.ts - INTERVAL '10' SECONDS AND b1.ts > b.ts"""
    # bid 3 (10 s) meets window 20 only; bid 9 (20 s, late for window 20's range before) meets window 30 still
    assert _bids(sqlwin.sql(spark, sql)) == [(2, 9, 3), (3, 9, 10), (6, 9, 15), (9, 9, 20), (10, 8, 30)]


# Apache Flink 2.3 (PyFlink, streaming mode, parallelism 1) over one CSV file of FILES' bids in their order
# (WATERMARK ts - 1 s), the same SQL with TABLE(TUMBLE(...)), printed (its plan: a regular join of the bids with
# the window aggregation's rows, since window_end is no time attribute; the one small file gives its watermark no
# time to move between rows, so nothing is late there). Bids 3 and 9 lie on a window's end and meet two windows.
FLINK_Q7 = [(2, 9, 3), (3, 9, 10), (3, 9, 10), (6, 9, 15), (9, 9, 20), (9, 9, 20), (10, 8, 30)]


def test_one_micro_batch_gives_flinks_rows(spark, tmp_path, monkeypatch):
    """Every bid in one micro-batch (nothing late): the rows Flink printed, the batch query's."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    data = [(a, p, at(s), i) for i, (a, p, s) in enumerate(r for rows in FILES for r in rows) if a != 7]
    spark.createDataFrame(data, "auction int, price int, ts timestamp, seq int") \
        .createOrReplaceTempView("ij_flink_rows")
    sqlwin.sql(spark, "CREATE STREAM r_ij_flink FROM TABLE ij_flink_rows ARRIVAL ORDER BY seq MICRO BATCH BY 0 "
                      "WATERMARK FOR ts AS ts - INTERVAL 1 SECONDS")
    assert _bids(sqlwin.sql(spark, Q7.format(s="r_ij_flink", clause=""))) == sorted(FLINK_Q7)
    assert _bids(sqlwin.sql(spark, Q7.format(s="ij_flink_rows", clause=""))) == sorted(FLINK_Q7)

