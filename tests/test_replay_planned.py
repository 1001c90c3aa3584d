"""Planned replay (one assignment, the operator stepped on per-window counts, one job for the panes) against
stepped replay (every micro-batch through Spark, exactly as a streaming table runs it): the same panes,
late rows and micro-batch numbers, over out-of-order rows, ties, rows on window boundaries, late and dropped
rows, NULL times and NULL micro-batch keys, several keys, and hypothesis-generated tables.

The two also run different pane drivers where the trigger is a comparison (``sqlwin.core.columnar``): the
stepped replay, like a streaming table, the columnar one where it keeps partial aggregates; the planned replay
the columnar one where its micro-batches hold many windows (``COLUMNAR_GROUPS``; made 0 here, or drawn) and
``PaneDriver`` otherwise, whose panes list the micro-batches they read where the columnar ones read a range.
So these tests check, through Spark, that the drivers give the same panes, late rows and ``window closed``
drops."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlwin
from sqlwin.streaming import catalog, countreplay, sessionreplay, trace
from sqlwin.streaming import plannedreplay as replay_module
from sqlwin.streaming.engines import ColumnarEngine
from sqlwin.streaming.operator import MicroBatchOperator

pytestmark = pytest.mark.slow

T = dt.datetime(2024, 1, 1)

QUERIES = {
    "tumble_lateness": ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c "
                        "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
                        "GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {late}"),
    "hop_early_discarding": ("SELECT window_start, window_end, k, MAX(v) AS m, AVG(v) AS a "
                             "FROM HOP(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS, INTERVAL 10 SECONDS) "
                             "GROUP BY window_start, window_end, k LATE ROWS TO {late} "
                             "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS DISCARDING"),
    "tumble_final": ("SELECT window_start, window_end, k, COUNT(*) AS c, MIN(v) AS m "
                     "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k "
                     "ALLOWED LATENESS INTERVAL 4 SECONDS LATE ROWS TO {late} EMIT FINAL"),
    "hop_closed_at_end": ("SELECT window_start, window_end, k, SUM(v) AS s "
                          "FROM HOP(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS, INTERVAL 10 SECONDS) "
                          "GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 10 SECONDS "
                          "LATE ROWS TO {late} EMIT WITH TRIGGER AFTER WATERMARK"),
    "tumble_early_late": ("SELECT window_start, window_end, k, COUNT(*) AS c, SUM(v) AS s "
                          "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
                          "GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 8 SECONDS "
                          "LATE ROWS TO {late} EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS "
                          "LATE EVERY 2 ROWS"),
    "cumulate_distinct": ("SELECT window_start, window_end, COUNT(DISTINCT k) AS keys "
                          "FROM CUMULATE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS, INTERVAL 20 SECONDS) "
                          "GROUP BY window_start, window_end LATE ROWS TO {late}"),
    "global_every": ("SELECT k, SUM(v) AS s FROM {s} GROUP BY k "
                     "EMIT WITH TRIGGER REPEATEDLY AFTER COUNT 2 UNTIL AFTER COUNT 5 LATE ROWS TO {late}"),
    "topn": ("SELECT * FROM (SELECT window_start, window_end, k, v, ROW_NUMBER() OVER (PARTITION BY window_start, "
             "window_end ORDER BY v DESC, k) AS rn FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)) "
             "WHERE rn <= 2"),
    # a window's panes fire in several micro-batches: each micro-batch's panes are ranked on their own, and the
    # planned replay ranks them all in one query (PARTITION BY micro_batch as well)
    "topn_early_late": ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
                        "ORDER BY c DESC, k) AS rn FROM (SELECT window_start, window_end, k, COUNT(*) AS c "
                        "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, "
                        "window_end, k ALLOWED LATENESS INTERVAL 8 SECONDS LATE ROWS TO {late} "
                        "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS)) WHERE rn <= 1"),
    # the statement relates panes (partitioned by micro_batch in one query, sqlwin.streaming.partitioned): the
    # most-counted keys of each window (Nexmark q5's shape: a CTE read twice, a MAX over it, a join), where a
    # window's EARLY, ON_TIME and LATE panes fire in different micro-batches and must not meet
    "hot_keys": ("WITH agg AS (SELECT window_start, window_end, k, COUNT(*) AS c "
                 "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k "
                 "ALLOWED LATENESS INTERVAL 6 SECONDS LATE ROWS TO {late} "
                 "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS), "
                 "top AS (SELECT window_start, MAX(c) AS m FROM agg GROUP BY window_start) "
                 "SELECT a.window_start, a.window_end, a.k, a.c FROM agg a JOIN top t "
                 "ON a.window_start = t.window_start AND a.c = t.m"),
    # a static table outer-joined to the panes, which sit on its null-supplying side: not partitionable, so
    # each micro-batch's panes are computed on their own
    "dims_left_join": ("SELECT d.k, d.name, a.window_start, a.c FROM pr_dims d LEFT JOIN (SELECT window_start, "
                       "window_end, k, COUNT(*) AS c FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
                       "GROUP BY window_start, window_end, k) a ON d.k = a.k"),
}


def rows_of(df) -> list[tuple]:
    """Sorted rows; NULLs (an empty pane's MAX, a global window's bounds) sort first."""
    return sorted((tuple(r) for r in df.collect()),
                  key=lambda row: tuple((False, v) if v is not None else (True, 0) for v in row))


def _table(spark, rows: list[tuple], name: str) -> None:
    spark.createDataFrame(rows, "k string, v int, ts timestamp, mb int, seq int").createOrReplaceTempView(name)
    spark.createDataFrame([("a", "alpha"), ("c", "gamma")], "k string, name string").createOrReplaceTempView("pr_dims")


def _recording(plannable, runs: list[bool]):
    def recorded(self, numbered) -> bool:
        runs.append(plannable(self, numbered))
        return runs[-1]
    return recorded


COLUMNAR = {"tumble_lateness", "hop_early_discarding", "tumble_final", "hop_closed_at_end", "tumble_early_late",
            "topn_early_late", "hot_keys", "dims_left_join", "global_every"}


def _both(spark, monkeypatch, table: str, query: str, delay: int = 2, columnar: bool = False,
          planned_columnar: bool = True, planner: type = replay_module.PlannedReplay) -> tuple:
    """(planned panes, planned late rows, stepped panes, stepped late rows) for ``query`` over ``table``;
    ``columnar``: whether the stepped replay runs the columnar pane driver (checked); ``planned_columnar``:
    whether the planned replay may (it does where the trigger is a comparison, checked); ``planner``: the
    planned replay that must run (``PlannedCountReplay`` for count windows)."""
    results = []
    drivers: list[bool] = []
    planned_drivers: list[bool] = []
    original, original_run = MicroBatchOperator._pane_engine, replay_module.PlannedReplay.run

    def recorded(self, committed):
        made = original(self, committed)
        drivers.append(isinstance(made, ColumnarEngine))
        return made

    def recorded_run(self, cut, has_clock):
        ran = original_run(self, cut, has_clock)
        planned_drivers.append(isinstance(self.panes, ColumnarEngine))
        return ran

    monkeypatch.setattr(MicroBatchOperator, "_pane_engine", recorded)
    monkeypatch.setattr(replay_module.PlannedReplay, "run", recorded_run)
    monkeypatch.setattr(replay_module.PlannedReplay, "COLUMNAR_GROUPS", 0 if planned_columnar else 10**9)
    for planned in (True, False):
        stream = f"{table}_{'p' if planned else 's'}"
        sqlwin.sql(spark, f"CREATE STREAM {stream} FROM TABLE {table} ARRIVAL ORDER BY seq MICRO BATCH BY mb "
                          f"WATERMARK FOR ts AS ts - INTERVAL {delay} SECONDS")
        runs: list[bool] = []
        with monkeypatch.context() as m:
            if planned:  # and it really is the planned path that runs
                m.setattr(planner, "plannable", _recording(planner.plannable, runs))
            else:
                m.setattr(planner, "plannable", lambda self, numbered: False)
            late = f"{stream}_late"
            panes = rows_of(sqlwin.sql(spark, query.format(s=stream, late=late)))
            late_rows = rows_of(spark.table(late)) if "{late}" in query else []
        assert runs == ([True] if planned else [])
        results += [panes, late_rows]
    assert drivers == [False, False, columnar]  # planned, then stepped (a PlannedReplay is made first)
    if planner is not replay_module.PlannedReplay:
        return tuple(results)
    # every trigger here is a comparison one (AFTER WATERMARK [EARLY/LATE EVERY n ROWS], EMIT FINAL, the
    # default, and the global window's REPEATEDLY AFTER COUNT 2 UNTIL AFTER COUNT 5)
    assert planned_drivers == [planned_columnar]
    return tuple(results)


def at(s: float) -> dt.datetime:
    return T + dt.timedelta(seconds=s)


# micro-batch keys out of arrival order, a NULL micro-batch key (its rows form one micro-batch, arriving
# with its first row), ties in time, rows on window boundaries, a NULL time, late and dropped rows
ROWS = [("a", 1, at(1), 0, 0), ("b", 2, at(10), 0, 1), ("a", 3, at(10), 0, 2), ("a", 4, at(14), 5, 3),
        ("b", 5, at(3), 5, 4), ("a", 6, None, 2, 5), ("a", 7, at(29), 2, 6), ("b", 8, at(9), None, 7),
        ("b", 9, at(20), None, 8), ("a", 10, at(5), 9, 9), ("a", 11, at(40), 9, 10), ("b", 12, at(31), 11, 11)]


# tumble_early_late's trigger and lateness run here under topn_early_late and hot_keys; the generated tables draw it
FIXED = sorted(set(QUERIES) - {"tumble_early_late"})


@pytest.mark.parametrize("name", FIXED)
def test_planned_replay_equals_stepped_replay(spark, monkeypatch, name):
    _table(spark, ROWS, f"pr_{name}")
    planned, planned_late, stepped, stepped_late = _both(spark, monkeypatch, f"pr_{name}", QUERIES[name],
                                                         columnar=name in COLUMNAR)
    assert planned == stepped
    assert planned_late == stepped_late
    assert planned  # every query fires panes on these rows


def test_null_micro_batch_key_rows_are_not_lost(spark):
    """Every row is in a pane or in the late rows: the rows whose MICRO BATCH BY key is NULL included."""
    _table(spark, ROWS, "pr_nulls")
    sqlwin.sql(spark, "CREATE STREAM pr_nulls_s FROM TABLE pr_nulls ARRIVAL ORDER BY seq MICRO BATCH BY mb "
                      "WATERMARK FOR ts AS ts - INTERVAL 100 SECONDS")
    panes = sqlwin.sql(spark, "SELECT k, COUNT(*) AS c FROM pr_nulls_s GROUP BY k "
                              "EMIT WITH TRIGGER AFTER COUNT 100 LATE ROWS TO pr_nulls_late").collect()
    assert {r.k: r.c for r in panes} == {"a": 7, "b": 5}  # the global window's expiry pane holds every row
    assert spark.table("pr_nulls_late").count() == 0


@pytest.mark.parametrize(("order", "first"), [("seq", 1000), ("seq ASC NULLS FIRST", 1000), ("seq, v", 30)])
def test_micro_batches_arrive_in_the_order_of_their_first_rows(spark, order, first):
    """``ARRIVAL ORDER BY`` that does not start with the ``MICRO BATCH BY`` value: a micro-batch arrives with its
    first row, NULL first (as ORDER BY ... ASC). Hand-worked, a pane per micro-batch holding the sum of its rows:
    w (first row NULL), y (NULL), z (1), x (5); w and y tie on ``seq`` alone and then arrive in the order of their
    own value (w first), and by ``seq, v`` y's (NULL, 10) comes before w's (NULL, 1000). One arrival key is
    ordered from aggregates Spark hashes, several from the MIN of a struct."""
    spark.sql("SELECT *, TIMESTAMP '2024-01-01 00:00:00' AS ts FROM VALUES ('x', 5, 1), ('x', 7, 2), "
              "('y', NULL, 10), ('y', 9, 20), ('z', 1, 100), ('z', 3, 200), ('w', NULL, 1000) "
              "AS t(grp, seq, v)").createOrReplaceTempView("pr_arrival")
    sqlwin.sql(spark, f"CREATE STREAM pr_arrival_s FROM TABLE pr_arrival ARRIVAL ORDER BY {order} MICRO BATCH BY grp "
                      "WATERMARK FOR ts AS ts")
    try:
        panes = sqlwin.sql(spark, "SELECT SUM(v) AS s FROM pr_arrival_s "
                                  "EMIT WITH TRIGGER REPEATEDLY AFTER COUNT 1 DISCARDING").collect()
        assert sorted((r.micro_batch, r.s) for r in panes) == [(0, first), (1, 1030 - first), (2, 300), (3, 3)]
    finally:
        catalog.drop_stream(spark, "pr_arrival_s")


@st.composite
def tables(draw) -> list[tuple]:
    """Up to 25 rows in up to 4 micro-batches (keys drawn out of arrival order): each micro-batch costs the
    stepped replay its Spark jobs (and a no-data one when the watermark moves), the planned one nothing; 4
    micro-batches already give the watermark moves, late and dropped rows and panes across micro-batches."""
    n = draw(st.integers(1, 25))
    rows = []
    for seq in range(n):
        seconds = draw(st.one_of(st.none(), st.integers(0, 40)))
        rows.append((draw(st.sampled_from("abc")), draw(st.integers(-5, 20)),
                     None if seconds is None else at(seconds), draw(st.integers(0, 3)), seq))
    return rows


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=tables(), name=st.sampled_from(["tumble_lateness", "hop_early_discarding", "global_every",
                                            "tumble_early_late", "hop_closed_at_end", "topn_early_late",
                                            "hot_keys"]),
       delay=st.integers(0, 6), planned_columnar=st.booleans())
def test_planned_equals_stepped_on_generated_tables(spark, monkeypatch, rows, name, delay, planned_columnar):
    _table(spark, rows, "pr_gen")
    planned, planned_late, stepped, stepped_late = _both(spark, monkeypatch, "pr_gen", QUERIES[name], delay,
                                                         columnar=name in COLUMNAR, planned_columnar=planned_columnar)
    assert planned == stepped
    assert planned_late == stepped_late


# -- SESSION windows (sqlwin.streaming.sessionreplay) ------------------------------------------------------
SESSION_QUERIES = {
    # the default trigger with lateness: late panes as late rows merge sessions; rows late by their own span
    "session_lateness": ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM SESSION(TABLE {s} "
                         "PARTITION BY k, DESCRIPTOR(ts), INTERVAL 4 SECONDS) GROUP BY window_start, window_end, k "
                         "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {late}"),
    # early and late panes of sessions that merge across micro-batches; no PARTITION BY
    "session_early_late": ("SELECT window_start, window_end, COUNT(*) AS c, MAX(v) AS m FROM SESSION(TABLE {s}, "
                           "DESCRIPTOR(ts), INTERVAL 3 SECONDS) GROUP BY window_start, window_end "
                           "ALLOWED LATENESS INTERVAL 8 SECONDS LATE ROWS TO {late} "
                           "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS"),
    # a dynamic gap (rows with a non-positive gap are in no session and never late); the carrier's WHERE; the
    # stream joined with a table in the TVF's input (the micro-batch number carried through the join's SELECT)
    "session_dynamic_gap": ("SELECT window_start, window_end, k, SUM(v) AS s, MIN(v) AS lo, MAX(name) AS name "
                            "FROM SESSION(TABLE (SELECT {s}.k, {s}.v, {s}.ts, d.name FROM {s} LEFT JOIN pr_dims d "
                            "ON {s}.k = d.k) PARTITION BY k, DESCRIPTOR(ts), CASE WHEN v < 4 THEN v * INTERVAL 1 "
                            "SECOND ELSE INTERVAL 3 SECONDS END) WHERE v <> 7 GROUP BY window_start, window_end, k "
                            "ALLOWED LATENESS INTERVAL 2 SECONDS LATE ROWS TO {late} EMIT FINAL"),
}


@pytest.mark.parametrize("name", sorted(SESSION_QUERIES))
def test_planned_sessions_equal_stepped(spark, monkeypatch, name):
    """The same panes, late rows and steps (micro-batch numbers and watermarks: the planned replay's pass for
    the watermarks alone is not one of its steps). The planned replay merges the sessions with ``PaneDriver``,
    the stepped one (as a streaming table does) with the columnar engine (``sqlwin.core.sessionmerge``)."""
    _table(spark, ROWS, f"ps_{name}")
    with trace.recording() as runs:
        planned, planned_late, stepped, stepped_late = _both(spark, monkeypatch, f"ps_{name}",
                                                             SESSION_QUERIES[name], columnar=True,
                                                             planner=sessionreplay.PlannedSessionReplay)
    assert planned == stepped
    assert planned_late == stepped_late
    assert planned and planned_late  # every query fires panes and drops late rows on these rows
    assert len(runs) == 2 and runs[0].steps == runs[1].steps and runs[0].steps


def test_sessions_that_may_close_are_stepped(spark, monkeypatch):
    """A trigger that finishes closes sessions, and a session merged into a closed one drops rows it held: the
    state is rows, replayed micro-batch by micro-batch."""
    assert _stepped(spark, monkeypatch, "ps_closing", sessionreplay.PlannedSessionReplay,
                    "SELECT window_start, k, COUNT(*) AS c FROM SESSION(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), "
                    "INTERVAL 4 SECONDS) GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 10 SECONDS "
                    "EMIT WITH TRIGGER AFTER COUNT 2")


def _stepped(spark, monkeypatch, table: str, planner: type, query: str) -> list:
    """The panes of ``query`` over a replay of ROWS, which must not be planned by ``planner``."""
    _table(spark, ROWS, table)
    sqlwin.sql(spark, f"CREATE STREAM {table}_s FROM TABLE {table} ARRIVAL ORDER BY seq MICRO BATCH BY mb "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    runs: list[bool] = []
    monkeypatch.setattr(planner, "plannable", _recording(planner.plannable, runs))
    panes = sqlwin.sql(spark, query.format(s=f"{table}_s")).collect()
    assert runs == [False]
    return panes


@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=tables(), name=st.sampled_from(sorted(SESSION_QUERIES)), delay=st.integers(0, 6),
       null_key=st.booleans())
def test_planned_sessions_equal_stepped_on_generated_tables(spark, monkeypatch, rows, name, delay, null_key):
    """``null_key``: key c is NULL (a session key too)."""
    rows = [(None if null_key and k == "c" else k, v, ts, mb, seq) for k, v, ts, mb, seq in rows]
    _table(spark, rows, "ps_gen")
    planned, planned_late, stepped, stepped_late = _both(spark, monkeypatch, "ps_gen", SESSION_QUERIES[name], delay,
                                                         columnar=True, planner=sessionreplay.PlannedSessionReplay)
    assert planned == stepped
    assert planned_late == stepped_late


# -- count windows (sqlwin.streaming.countreplay) ---------------------------------------------------------
COUNT_QUERIES = {
    # partial aggregates; rows dropped late (at or behind the watermark when they arrive) to LATE ROWS TO
    "tumble_rows": ("SELECT k, window_index, window_start, window_end, COUNT(*) AS c, SUM(v) AS s "
                    "FROM TUMBLE(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), ROWS 2) "
                    "GROUP BY k, window_index, window_start, window_end LATE ROWS TO {late}"),
    # overlapping windows (slide 1, size 3), the carrier's WHERE (rows numbered, not aggregated), EMIT FINAL
    "hop_rows_where": ("SELECT k, window_start, window_end, MAX(v) AS m, AVG(v) AS a, COUNT(*) AS c "
                       "FROM HOP(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), ROWS 1, ROWS 3) WHERE v <> 3 "
                       "GROUP BY k, window_start, window_end LATE ROWS TO {late} EMIT FINAL"),
    # no PARTITION BY; an aggregate kept as rows (COUNT DISTINCT); a query around the aggregation
    "global_rows_distinct": ("SELECT window_start, n, d FROM (SELECT window_start, window_end, COUNT(*) AS n, "
                             "COUNT(DISTINCT k) AS d FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), ROWS 3) "
                             "GROUP BY window_start, window_end) WHERE n > 0"),
    # two PARTITION BY columns, one of them NULL in some rows (mb); HAVING; the statement's own names
    "two_keys_having": ("SELECT k, mb AS batch_key, window_index AS w, window_end, SUM(v) AS s "
                        "FROM TUMBLE(TABLE {s} PARTITION BY k, mb, DESCRIPTOR(ts), ROWS 2) "
                        "GROUP BY k, mb, window_index, window_start, window_end HAVING SUM(v) > 3 "
                        "LATE ROWS TO {late}"),
    # hopping count windows that skip rows (slide 3, size 2)
    "hop_rows_skip": ("SELECT k, window_index, COUNT(*) AS c, MIN(v) AS lo FROM HOP(TABLE {s} PARTITION BY k, "
                      "DESCRIPTOR(ts), ROWS 3, ROWS 2) GROUP BY k, window_index, window_start, window_end "
                      "LATE ROWS TO {late} EMIT WITH TRIGGER AFTER WATERMARK"),
}


@pytest.mark.parametrize("name", sorted(COUNT_QUERIES))
def test_planned_count_windows_equal_stepped(spark, monkeypatch, name):
    _table(spark, ROWS, f"pc_{name}")
    planned, planned_late, stepped, stepped_late = _both(spark, monkeypatch, f"pc_{name}", COUNT_QUERIES[name],
                                                         planner=countreplay.PlannedCountReplay)
    assert planned == stepped
    assert planned_late == stepped_late
    assert planned  # every query fires panes on these rows


def test_count_windows_with_early_panes_are_stepped(spark, monkeypatch):
    """A growing count window with EARLY panes fires more than once: replayed micro-batch by micro-batch."""
    panes = _stepped(spark, monkeypatch, "pc_early", countreplay.PlannedCountReplay,
                     "SELECT k, window_index, COUNT(*) AS c FROM TUMBLE(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), "
                     "ROWS 3) GROUP BY k, window_index, window_start, window_end "
                     "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 1 ROWS")
    assert {r.pane_timing for r in panes} == {"EARLY", "ON_TIME"}


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=tables(), name=st.sampled_from(sorted(COUNT_QUERIES)), delay=st.integers(0, 6),
       own_batches=st.booleans(), search=st.booleans())
def test_planned_count_windows_equal_stepped_on_generated_tables(spark, monkeypatch, rows, name, delay,
                                                                 own_batches, search):
    """``own_batches``: every row a micro-batch of its own (up to 25, and as many watermarks); ``search``: the
    micro-batch that numbers a row found by the binary search, not the CASE, whatever their number."""
    if own_batches:
        rows = [(k, v, ts, seq, seq) for k, v, ts, _, seq in rows]
    monkeypatch.setattr(countreplay.PlannedCountReplay, "CASE_STEPS", 0 if search else 10**6)
    _table(spark, rows, "pc_gen")
    planned, planned_late, stepped, stepped_late = _both(spark, monkeypatch, "pc_gen", COUNT_QUERIES[name], delay,
                                                         planner=countreplay.PlannedCountReplay)
    assert planned == stepped
    assert planned_late == stepped_late


@pytest.mark.parametrize("case_steps", [0, 100])
def test_the_step_that_numbers_a_row(spark, case_steps):
    """``step_sql`` (CASE or binary search) against a bisection in Python: the first micro-batch without rows
    whose watermark reaches the row's time, else the last one (at +infinity); ties of watermarks: the first."""
    import bisect

    from sqlwin.core.panes import MAX_TIME, MIN_TIME

    steps = [(0, MIN_TIME, 0), (1, 100, None), (2, 100, 1), (3, 100, 2), (4, 250, None), (5, 250, 3),
             (6, 251, None), (7, 251, 4), (8, 400, None), (9, 400, None), (10, 900, 5), (11, MAX_TIME, None)]
    marks = [(1, 100), (4, 250), (6, 251), (8, 400)]
    got = spark.range(-5, 1000).selectExpr("id", f"{countreplay.step_sql('id', steps, case_steps)} AS step") \
        .collect()
    for row in got:
        position = bisect.bisect_left([w for _, w in marks], row.id)
        assert row.step == (marks[position][0] if position < len(marks) else 11), row
    assert len({r.step for r in got}) == 5
