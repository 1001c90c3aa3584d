"""Planned replay of window joins (``sqlwin.streaming.joinreplay``: each side planned, the join stepped on what
the sides fired, every pane computed at the end) against the stepped replay (every micro-batch through Spark,
as a streaming table runs it): the same panes, late rows and micro-batch numbers, for inner, outer and chained
joins, one stream read twice or streams side by side, LATE panes within a side's lateness, and generated
tables."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_streaming_stages import JOIN

import sqlwin
from sqlwin.streaming import joinreplay

pytestmark = pytest.mark.slow

T = dt.datetime(2024, 1, 1)

# one stream read by both sides (side 'l' / 'r'); L has lateness (LATE panes restate the window's join)
ONE_STREAM = JOIN

# three streams side by side, a LEFT JOIN then an inner one (the third joined on the first's window)
THREE_STREAMS = """SELECT A.k, A.ws, A.s, B.c, C.m
FROM (SELECT k, window_start AS ws, window_end AS we, SUM(v) AS s FROM TUMBLE(TABLE {s}_l, DESCRIPTOR(ts),
      INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end LATE ROWS TO {late}) A
LEFT JOIN (SELECT k, window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE {s}_r, DESCRIPTOR(ts),
      INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) B
ON A.k = B.k AND A.ws = B.window_start AND A.we = B.window_end
JOIN (SELECT k, window_start, window_end, MAX(v) AS m FROM TUMBLE(TABLE {s}_m, DESCRIPTOR(ts),
      INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) C
ON C.k = A.k AND C.window_start = A.ws AND C.window_end = A.we"""

# Nexmark q8's shape: two streams, sides grouped without aggregates, an inner join on the key
NEW_USERS = """SELECT p.k, p.starttime FROM (SELECT k, window_start AS starttime, window_end AS endtime
      FROM TUMBLE(TABLE {s}_l, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY k, window_start, window_end) p
JOIN (SELECT k AS seller, window_start AS starttime, window_end AS endtime
      FROM TUMBLE(TABLE {s}_r, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY k, window_start, window_end) a
ON p.k = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime"""

# a star over both sides, the ON's columns unqualified (each named by one side only)
STAR_UNQUALIFIED = """SELECT * FROM (SELECT k, window_start AS ws, window_end AS we, SUM(v) AS s
      FROM TUMBLE(TABLE {s}_l, DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) L
RIGHT JOIN (SELECT k AS rk, window_start, window_end, COUNT(*) AS c
      FROM TUMBLE(TABLE {s}_r, DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) R
ON k = rk AND ws = window_start AND we = window_end"""

# an aggregation over the join's rows (per join micro-batch and pane, as the stepped join computes it)
GROUPED_OVER_JOIN = """SELECT ws, COUNT(*) AS pairs, SUM(s) AS total FROM (SELECT L.ws, L.s, R.c
FROM (SELECT k, window_start AS ws, window_end AS we, SUM(v) AS s FROM TUMBLE(TABLE(SELECT * FROM {s}
      WHERE side = 'l'), DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end
      ALLOWED LATENESS INTERVAL 6 SECONDS) L
JOIN (SELECT k, window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE(SELECT * FROM {s}
      WHERE side <> 'l'), DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) R
ON L.k = R.k AND L.ws = R.window_start AND L.we = R.window_end) GROUP BY ws"""

# window TVF sides (their panes are their windows' rows), Flink's FULL JOIN example
TVF_SIDES = """SELECT L.v AS lv, R.v AS rv, COALESCE(L.window_start, R.window_start) AS ws
FROM (SELECT * FROM TUMBLE(TABLE(SELECT * FROM {s} WHERE side = 'l'), DESCRIPTOR(ts), INTERVAL 5 SECONDS)) L
FULL JOIN (SELECT * FROM TUMBLE(TABLE(SELECT * FROM {s} WHERE side = 'r'), DESCRIPTOR(ts), INTERVAL 5 SECONDS)) R
ON L.k = R.k AND L.window_start = R.window_start AND L.window_end = R.window_end"""

# a window function over the join: a window's ON_TIME and LATE join panes come in different micro-batches and
# are ranked each in its own (the one query partitions the ranking by the join's micro-batch)
TOPN_OVER_JOIN = "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY ws ORDER BY s DESC, lk) AS rn FROM (" + \
    ONE_STREAM + ")) WHERE rn <= 1"

QUERIES = {"one_stream": ONE_STREAM, "tvf_sides": TVF_SIDES, "topn_over_join": TOPN_OVER_JOIN,
           "three_streams": THREE_STREAMS, "new_users": NEW_USERS, "star_unqualified": STAR_UNQUALIFIED,
           "grouped_over_join": GROUPED_OVER_JOIN}


def at(s: float) -> dt.datetime:
    return T + dt.timedelta(seconds=s)


def rows_of(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()),
                  key=lambda row: tuple((False, str(v)) if v is not None else (True, "") for v in row))


def _streams(spark, name: str, rows: list[tuple], delay: int) -> None:
    """``rows`` (k, v, second, side, micro-batch key): one stream ``name`` of them all, and one per side
    (``name_l``, ``name_r``, ``name_m``: side by side, micro-batch ``k`` the k-th smallest key of all)."""
    data = [(k, v, None if s is None else at(s), side, mb, i) for i, (k, v, s, side, mb) in enumerate(rows)]
    schema = "k string, v int, ts timestamp, side string, mb int, seq int"
    spark.createDataFrame(data, schema).createOrReplaceTempView(f"{name}_rows")
    watermark = f"WATERMARK FOR ts AS ts - INTERVAL {delay} SECONDS"
    sqlwin.sql(spark, f"CREATE STREAM {name} FROM TABLE {name}_rows ARRIVAL ORDER BY seq MICRO BATCH BY mb {watermark}")
    for side in "lrm":
        spark.createDataFrame([r for r in data if r[3] == side], schema).createOrReplaceTempView(f"{name}_{side}_rows")
        sqlwin.sql(spark, f"CREATE STREAM {name}_{side} FROM TABLE {name}_{side}_rows ARRIVAL ORDER BY seq "
                          f"MICRO BATCH BY mb {watermark}")


def _both(spark, monkeypatch, name: str, query: str, planned_only: bool = False) -> tuple:
    """(planned panes, planned late rows, stepped panes, stepped late rows); the planned one checked to run."""
    results = []
    for planned in (True,) if planned_only else (True, False):
        ran: list[bool] = []
        original = joinreplay.PlannedStagedReplay.plannable

        def recorded(self, _original=original, _ran=ran):
            _ran.append(_original(self))
            return _ran[-1]

        with monkeypatch.context() as m:
            m.setattr(joinreplay.PlannedStagedReplay, "plannable", recorded if planned else lambda self: False)
            late = f"{name}_late_{'p' if planned else 's'}"
            panes = rows_of(sqlwin.sql(spark, query.format(s=name, late=late)))
            late_rows = rows_of(spark.table(late)) if "{late}" in query else []
        assert ran == ([True] if planned else [])
        results += [panes, late_rows]
    return tuple(results)


# out of order within and across micro-batches (the micro-batch keys too), ties, rows on window boundaries, a NULL
# time, a NULL key, late rows (dropped, or LATE panes within L's lateness), a side without rows in a micro-batch
ROWS = [("a", 1, 1, "l", 0), ("a", 0, 2, "r", 0), ("b", 0, 3, "r", 0), ("a", 2, 6, "l", 0), ("a", 9, 5, "m", 0),
        ("a", 0, 8, "r", 0), ("b", 5, 12, "l", 2), ("b", 1, 10, "m", 2), ("a", 7, 3, "l", 3), ("a", 3, 8, "l", 3),
        ("a", 1, 25, "l", 3), ("a", 0, 31, "r", 3), (None, 4, 26, "l", 3), ("a", 6, 26, "m", 3), ("b", 0, 16, "r", 5),
        ("a", 2, None, "l", 5), ("b", 3, 15, "m", 1), ("a", 8, 30, "m", 5), ("a", 5, 40, "l", 6)]


# new_users and star_unqualified (a variant of one_stream's and three_streams' joins) are drawn by the generated
# test below; these are the shapes each path of the planned join needs (the suite's time)
@pytest.mark.parametrize("name", ["grouped_over_join", "one_stream", "three_streams", "topn_over_join", "tvf_sides"])
def test_planned_window_join_replay_equals_stepped(spark, monkeypatch, name):
    _streams(spark, f"pj_{name}", ROWS, 2)
    planned, planned_late, stepped, stepped_late = _both(spark, monkeypatch, f"pj_{name}", QUERIES[name])
    assert planned == stepped
    assert planned_late == stepped_late
    assert planned  # every query joins some windows on these rows
    if name == "topn_over_join":
        # where the statement above the join cannot be partitioned by the join's micro-batch (``NotPartitionable``:
        # made so here), each join micro-batch's panes are computed on their own: the same panes
        def refuse(join):
            raise joinreplay.NotPartitionable("as a LIMIT over the join would")

        _streams(spark, f"pj1_{name}", ROWS, 2)
        with monkeypatch.context() as m:
            m.setattr(joinreplay, "by_micro_batch", refuse)
            one_by_one = _both(spark, monkeypatch, f"pj1_{name}", QUERIES[name], planned_only=True)
        assert one_by_one == (stepped, stepped_late)


def test_sides_whose_panes_may_write_no_row_are_stepped(spark, monkeypatch):
    """A side with HAVING may fire a pane that writes no row (the join keeps no output of that micro-batch):
    stepped, not planned."""
    _streams(spark, "pj_having", ROWS, 2)
    ran: list[bool] = []
    original = joinreplay.PlannedStagedReplay.plannable
    monkeypatch.setattr(joinreplay.PlannedStagedReplay, "plannable", lambda self: ran.append(original(self)) or ran[-1])
    having = NEW_USERS.replace("GROUP BY k, window_start, window_end) a",
                               "GROUP BY k, window_start, window_end HAVING COUNT(*) > 1) a")
    panes = rows_of(sqlwin.sql(spark, having.format(s="pj_having")))
    assert ran == [False]
    # by hand from ROWS: side r's only window with two rows kept is a's [0, 10) (2 s, 8 s; b's row at 16 s is
    # late: r's watermark is 29 s then), and side l has a's [0, 10) (1 s, 6 s): one joined row
    everything = rows_of(sqlwin.sql(spark, NEW_USERS.format(s="pj_having")))
    assert ran == [False, True]
    assert set(panes) <= set(everything)
    assert [r[:2] for r in panes] == [("a", at(0))]


# L's lateness is 4 s, the watermark the largest ts minus 2 s: W 0 after micro-batch 0, 5 after 1 ([0,5) joins,
# ON_TIME, not final: L may still bring LATE panes until W 9), 18 after 2, whose a@3 is L's LATE row for [0,5) (W 5
# in force: restated as the join's LATE pane, not final) and whose ts 20 moves W past [5,10)'s end plus the
# lateness (its ON_TIME pane is its last, final); micro-batch 3's r@33 moves W to 31: [20,25) joins (final, 25 <=
# 31 - 4); no side had a row of [25,30) when W passed its end, so the join never joined it, and micro-batch 4's a@28
# is L's LATE row for it (31 < 30 + 4): the join's first pane of that window, LATE and numbered 0 (pane 0 never
# came), not final (30 > 31 - 4); [30,35) joins at the end of the input, W +infinity: final too
FINAL_ROWS = [("a", 1, 1, "l", 0), ("a", 0, 2, "r", 0), ("a", 2, 6, "l", 1), ("a", 0, 7, "r", 1),
              ("a", 3, 3, "l", 2), ("a", 0, 20, "r", 2), ("a", 5, 21, "l", 2), ("a", 0, 33, "r", 3),
              ("a", 4, 28, "l", 4)]
FINAL_PANES = [("a", "a", 1, 1, at(0), 0, "ON_TIME", False), ("a", "a", 2, 1, at(5), 0, "ON_TIME", True),
               ("a", "a", 4, 1, at(0), 1, "LATE", False), ("a", "a", 5, 1, at(20), 0, "ON_TIME", True),
               ("a", None, 4, None, at(25), 0, "LATE", False), (None, "a", None, 1, at(30), 0, "ON_TIME", True)]


def test_a_window_join_pane_is_final_once_its_window_expires(spark, monkeypatch):
    """A window join with ALLOWED LATENESS (Beam: the window expires once the watermark passes its end plus the
    lateness, at the end of the input too): a pane the join emits then is its last, is_final, as a window
    query's own pane is; a window first joined in a side's LATE pane numbers that pane 0; the planned replay (its
    join is the live one's: windowjoin.JoinStage) against the hand-worked panes of FINAL_ROWS."""
    data = [(k, v, at(s), side, mb, i) for i, (k, v, s, side, mb) in enumerate(FINAL_ROWS)]
    spark.createDataFrame(data, "k string, v int, ts timestamp, side string, mb int, seq int") \
        .createOrReplaceTempView("pj_final_rows")
    sqlwin.sql(spark, "CREATE STREAM pj_final FROM TABLE pj_final_rows ARRIVAL ORDER BY seq MICRO BATCH BY mb "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    planned, late = _both(spark, monkeypatch, "pj_final", ONE_STREAM, planned_only=True)
    assert sorted((r[:8] for r in planned), key=str) == sorted(FINAL_PANES, key=str)
    assert late == []


@st.composite
def tables(draw) -> list[tuple]:
    n = draw(st.integers(0, 20))
    return [(draw(st.sampled_from(["a", "b", None])), draw(st.integers(0, 9)),
             draw(st.one_of(st.none(), st.integers(0, 40))), draw(st.sampled_from("lrm")), draw(st.integers(0, 3)))
            for _ in range(n)]


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=tables(), name=st.sampled_from(sorted(QUERIES)), delay=st.integers(0, 5))
def test_planned_window_join_replay_equals_stepped_on_generated_tables(spark, monkeypatch, rows, name, delay):
    _streams(spark, "pj_gen", rows, delay)
    planned, planned_late, stepped, stepped_late = _both(spark, monkeypatch, "pj_gen", QUERIES[name])
    assert planned == stepped
    assert planned_late == stepped_late
