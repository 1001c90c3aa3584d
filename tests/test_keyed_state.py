"""Keyed window state in Spark (``sqlwin.streaming.keyedstate``): the windows live in a table Spark steps on
its executors, not in the driver.

- The executors' step (``step_windows``, over Arrow batches cut anywhere) gives, micro-batch by micro-batch,
  the same panes and the same windows as the driver's ``ColumnarPanes`` (itself checked against ``PaneDriver``
  in tests/test_columnar_panes.py), on generated histories.
- A live streaming table keeps its windows under its checkpoint (``windows/<n>``), commits only global numbers,
  and gives the same panes and late rows as the same table with ``sqlwin.streaming.state=driver``; so does one
  whose windows move from the driver to Spark and back (``auto``), stopped and resumed while in Spark.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sqlwin
from sqlwin.core.columnar import STATE, ColumnarPanes, ComparisonTrigger
from sqlwin.plan import triggers as plan
from sqlwin.streaming import catalog, timewindows
from sqlwin.streaming.engines import ColumnarEngine
from sqlwin.streaming.keyedstate import PANE, TALLY, WINDOW, out_schema, step_windows
from tests.streamtools import Feeder, start_clocked, ts

TRIGGERS = [ComparisonTrigger(True), ComparisonTrigger(True, early=2), ComparisonTrigger(True, late=1),
            ComparisonTrigger(True, early=3, late=2), ComparisonTrigger(False, final=True), ComparisonTrigger(False),
            # processing-time early and late firings
            ComparisonTrigger(True, early_after=plan.AfterProcessingTime(3)),
            ComparisonTrigger(True, early=2, late_after=plan.AfterProcessingTime(0, 4, 1)),
            # a count or processing-time trigger alone, repeated or once
            ComparisonTrigger(False, 2),
            ComparisonTrigger(False, early_after=plan.AfterProcessingTime(2), repeats=False),
            ComparisonTrigger(True, 2, early_after=plan.AfterProcessingTime(3), late=1,
                              late_after=plan.AfterProcessingTime(0, 4), late_all=True),
            ComparisonTrigger(False, 3, early_after=plan.AfterProcessingTime(2), early_all=True),
            # UNTIL AFTER COUNT m (its count in the late_count column)
            ComparisonTrigger(False, 2, early_after=plan.AfterProcessingTime(3), until=5),
            # AFTER EACH: the running step in the stage column
            ComparisonTrigger.of(plan.EmitSpec(plan.AfterEach((
                plan.AfterProcessingTime(2), plan.AfterCount(2), plan.Repeatedly(plan.AfterAny((
                    plan.AfterCount(3), plan.AfterProcessingTime(1))))))))]
WINDOWS = [(k, s, s + 10) for k in ("a", "b", "c") for s in (0, 10, 20)]


def _executor_step(state: pd.DataFrame, new: pd.DataFrame, trigger: ComparisonTrigger, lateness: int,
                   accumulating: bool, batch: int, watermark: int, now: int,
                   cut: int) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """What Spark does around ``step_windows``: the full outer join of the windows with the counts, handed over
    in Arrow batches of ``cut`` rows; returns (windows, panes, windows expired)."""
    nullable = state.astype({c: "Int64" if t is np.int64 else "boolean" for c, t in STATE.items()})  # NULL: no state
    joined = nullable.assign(has_state=True).merge(new, on=["key", "start", "end"], how="outer") \
        if len(new) else nullable.assign(has_state=True, n=0)
    joined = joined.sort_values(["key", "start", "end"]).reset_index(drop=True)
    types = {np.int64: pa.int64(), np.bool_: pa.bool_()}
    schema = pa.schema([("key", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
                        *[(c, types[t]) for c, t in STATE.items()], ("has_state", pa.bool_()), ("n", pa.int64())])
    table = pa.Table.from_pandas(joined[schema.names], schema=schema, preserve_index=False)  # NaN: NULL
    out = pa.Table.from_batches(list(step_windows(trigger, lateness, accumulating, batch, watermark, now,
                                                  iter(table.to_batches(max_chunksize=cut)))), out_schema())
    frame = out.to_pandas()
    # the windows' rows apart before pandas: a column NULL in the other kinds' rows would turn float
    windows = out.filter(pc.equal(out["kind"], WINDOW)).select(["key", "start", "end", *STATE]).to_pandas()
    panes = frame[frame["kind"] == PANE]
    return windows.astype(dict(STATE)), panes, int(frame[frame["kind"] == TALLY]["expired"].sum())


@settings(max_examples=60, deadline=None)
@given(trigger=st.sampled_from(TRIGGERS), lateness=st.sampled_from([0, 5, 15]), accumulating=st.booleans(),
       cut=st.integers(1, 5),
       history=st.lists(st.tuples(st.dictionaries(st.sampled_from(WINDOWS), st.integers(1, 4), max_size=5),
                                  st.integers(0, 12), st.integers(0, 4)), min_size=1, max_size=8))
def test_executor_step_equals_the_driver_engine(trigger, lateness, accumulating, cut, history):
    driver = ColumnarPanes(trigger, lateness, accumulating)
    state = pd.DataFrame({"key": pd.Series([], dtype=object), "start": np.array([], np.int64),
                          "end": np.array([], np.int64), **{c: np.array([], t) for c, t in STATE.items()}})
    watermark, now = -1, 0
    for batch, (counts, advance, clock) in enumerate(history):
        watermark += advance  # the watermark never goes back, and sometimes stays
        now += clock  # so does the processing time
        new = pd.DataFrame([(k, s, e, n) for (k, s, e), n in counts.items()],
                           columns=["key", "start", "end", "n"]).astype({"start": "int64", "end": "int64",
                                                                         "n": "int64"})
        fired, expired = driver.step(new, batch, watermark, now)
        state, panes, gone = _executor_step(state, new, trigger, lateness, accumulating, batch, watermark, now, cut)
        assert gone == expired
        expected = sorted(zip(fired.frame["key"], fired.frame["start"], fired.frame["pane_index"],
                              fired.frame["pane_timing"], fired.frame["is_final"], fired.frame["lo"], strict=True))
        got = sorted(zip(panes["key"], panes["start"], panes["pane_index"], panes["pane_timing"],
                         panes["is_final"], panes["pane_lo"], strict=True))
        assert got == expected, f"micro-batch {batch}"
        windows = driver.table.reset_index().sort_values(["key", "start", "end"]).reset_index(drop=True)
        mine = state.sort_values(["key", "start", "end"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(mine[windows.columns], windows, check_dtype=False)


# -- a live streaming table --------------------------------------------------------------------------------
QUERY = """CREATE STREAMING TABLE {name} AS
    SELECT window_start, k, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE {stream}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
    GROUP BY window_start, window_end, k
    EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS
    ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {name}_late"""


def row(k: str, v: int, seconds: float) -> dict:
    return {"k": k, "v": v, "ts": ts(seconds)}


# ties on window bounds, rows out of order, early panes, rows dropped as late and as window closed, NULL keys
BATCHES = [
    [row("a", 1, 0), row("a", 2, 9.999), row("b", 3, 10), row("b", 4, 3), {"k": None, "v": 5, "ts": ts(4)}],
    [row("a", 6, 12), row("b", 7, 19), row("c", 8, 14)],
    [row("a", 9, 25)],  # W -> 23: [0, 10) and [10, 20) fire
    [row("a", 10, 8), row("c", 11, 11)],  # W = 23: [0, 10) is past its lateness (late); [10, 20) is not, but
    # its trigger finished when it fired at its end: a tombstone, so the row is dropped as window closed
    [row("a", 12, 40)],  # W -> 38: everything before [30, 40) expires
    [row("b", 13, 1)],  # past the lateness: late
]
COLUMNS = ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final"]


def _sorted(rows: list) -> list[tuple]:
    return sorted((tuple(r) for r in rows), key=lambda r: [(v is not None, v) for v in r])


def _run(spark, tmp_path, monkeypatch, state: str, restart_after: int | None = None, moves: list | None = None,
         tag: str = ""):
    """The query over BATCHES with its windows' state in ``state``; optionally stopped and started again, and
    the engine's class after each micro-batch recorded in ``moves``."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / f"root_{state}{tag}"))
    spark.conf.set("sqlwin.streaming.state", state)
    folder = tmp_path / f"in_{state}{tag}"
    stream, name = f"keyed_in_{state}{tag}", f"keyed_out_{state}{tag}"
    sqlwin.sql(spark, f"CREATE STREAM {stream} (k STRING, v INT, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
    feeder = Feeder(folder)
    sqlwin.sql(spark, QUERY.format(name=name, stream=stream))
    table = catalog.find_table(name)
    assert table.path == "custom", table.why
    for i, rows in enumerate(BATCHES):
        feeder.feed([rows], table)
        if moves is not None:
            moves.append(type(table.operator.panes).__name__)
        if restart_after == i:
            table.stop()
            catalog.remove_table(name)
            sqlwin.sql(spark, QUERY.format(name=name, stream=stream))
            table = catalog.find_table(name)
    out = _sorted(spark.table(name).select(*COLUMNS).collect())
    late = _sorted(spark.table(f"{name}_late").select("k", "v", "reason").collect())
    status = table.status()
    return out, late, (status.rows_in, status.late_rows_dropped, status.open_windows)


@pytest.mark.slow
def test_a_streaming_table_keeps_its_windows_in_spark(spark, tmp_path, monkeypatch):
    try:
        out, late, counts = _run(spark, tmp_path, monkeypatch, "executors")
        root = tmp_path / "root_executors"
        versions = sorted(root.glob("**/sqlwin/windows/*"))
        assert [p.name for p in versions if p.name.isdigit()], "no window state written by Spark"
        commits = sorted((p for p in root.glob("**/sqlwin/state/*.json")), key=lambda p: int(p.stem))
        for commit in commits:  # the driver commits global numbers only, never a window
            text = commit.read_text()
            assert '"keyed"' in text and '"windows": []' in text
        expected, expected_late, expected_counts = _run(spark, tmp_path, monkeypatch, "driver")
        assert out == expected
        assert late == expected_late
        assert counts == expected_counts
        assert late == [("a", 10, "late"), ("b", 13, "late"), ("c", 11, "window closed")]
        # every count of a window the driver holds: a scan's collected groups, the driver engine's counts
        collected: list[int] = []

        class Recorded(timewindows.FusedScan):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                collected.append(self.groups.num_rows)

        accepted = ColumnarEngine.accepted

        def recorded(*columns):
            collected.extend(len(c) for c in columns[:1])
            return accepted(*columns)

        monkeypatch.setattr(timewindows, "FusedScan", Recorded)
        monkeypatch.setattr(ColumnarEngine, "accepted", staticmethod(recorded))
        # auto: in the driver up to 4 open windows, in Spark beyond, back at 2; stopped and resumed in Spark
        spark.conf.set("sqlwin.streaming.state.driverWindows", "4")
        moves: list[str] = []
        assert _run(spark, tmp_path, monkeypatch, "auto", restart_after=2, moves=moves) == \
            (expected, expected_late, expected_counts)
        assert moves == ["ColumnarEngine", "KeyedPanes", "KeyedPanes", "KeyedPanes", "ColumnarEngine",
                         "ColumnarEngine"]
        assert collected[0] == 4, collected  # the first micro-batch's 4 windows: in the driver
        # the first micro-batch brings rows to 4 windows, more than the driver keeps (3): its counts never
        # reach the driver, and its windows start in Spark
        spark.conf.set("sqlwin.streaming.state.driverWindows", "3")
        collected.clear()
        moves = []
        assert _run(spark, tmp_path, monkeypatch, "auto", moves=moves, tag="_small") == \
            (expected, expected_late, expected_counts)
        assert moves[0] == "KeyedPanes" and "ColumnarEngine" in moves, moves  # and back once at most 1 is open
        assert max(collected, default=0) <= 3, collected
    finally:
        spark.conf.unset("sqlwin.streaming.state")
        spark.conf.unset("sqlwin.streaming.state.driverWindows")
        for t in catalog.all_tables():
            t.stop()
            catalog.remove_table(t.name)


# -- processing-time early and late firings, in every pane engine -------------------------------------------
WINDOWED = """SELECT window_start, k, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE {stream}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
    GROUP BY window_start, window_end, k
    ALLOWED LATENESS INTERVAL 20 SECONDS LATE ROWS TO {stream}_late
    EMIT WITH TRIGGER """
PT_QUERY = WINDOWED + """AFTER WATERMARK EARLY EVERY INTERVAL 5 SECONDS
                      LATE AFTER PROCESSING TIME DELAY INTERVAL 3 SECONDS"""
# (k, v, ts, micro-batch, processing time): Beam's early firings 5 s after a pane's first row, late ones 3 s
# after the first late row, the timers going off in the next micro-batch at or after them (a replay has no
# micro-batch of its own for a timer)
PT_ROWS = [("a", 1, 1, 0, 0), ("b", 2, 3, 0, 0),  # early timers of a[0, 10) and b[0, 10) at 5; W -> 1
           ("a", 3, 4, 1, 2),  # W -> 2
           ("c", 4, 12, 2, 6),  # at 6: a and b fire EARLY; c[10, 20)'s timer at 11; W -> 10 (no-data: ON_TIME)
           ("a", 5, 5, 3, 8),  # a late row of a[0, 10): its late timer at 11
           ("b", 6, 15, 4, 12),  # at 12: a fires LATE, c EARLY; b[10, 20)'s timer at 17; W -> 13
           ("d", None, 99, 5, 13)]  # a NULL value, far ahead: the watermark moves past every window's cleanup
# the clock of PT_ROWS' processing times: far ahead, so that a live table's timer never goes off on its own
# (its micro-batch would come at a moment of the wall clock, not of the test): timers fire as in a replay
PT_CLOCK = dt.datetime(2100, 1, 1)
PT_EXPECTED = [
    (0, "a", 4, 2, 0, "EARLY", False, 2), (0, "b", 2, 1, 0, "EARLY", False, 2),
    (0, "a", 4, 2, 1, "ON_TIME", False, 3), (0, "b", 2, 1, 1, "ON_TIME", False, 3),
    (0, "a", 9, 3, 2, "LATE", False, 5), (10, "c", 4, 1, 0, "EARLY", False, 5),
    # W -> 97 at 13: the no-data micro-batch fires [10, 20) ON_TIME, past its cleanup (40) too: final
    (10, "b", 6, 1, 0, "ON_TIME", True, 7), (10, "c", 4, 1, 1, "ON_TIME", True, 7),
    (90, "d", None, 1, 0, "ON_TIME", True, 8),  # at the end of input
]
# the same rows, a count trigger alone: a window fires at every second row, before its end (EARLY) or after it
# (LATE), and what is left fires when it expires (LATE, final); no ON_TIME pane
EVERY_EXPECTED = [
    (0, "a", 4, 2, 0, "EARLY", False, 1),  # a@1, a@4
    # W -> 97 at 13: every window but d's is past its cleanup (end + 20 s) and fires what it holds
    # (no micro-batch fired anything when W reached 10: the data micro-batches are numbered 0-5)
    (0, "a", 9, 3, 1, "LATE", True, 6), (0, "b", 2, 1, 0, "LATE", True, 6),
    (10, "b", 6, 1, 0, "LATE", True, 6), (10, "c", 4, 1, 0, "LATE", True, 6),
    (90, "d", None, 1, 0, "LATE", True, 7),  # at the end of input
]
# the same rows, Beam's AfterFirst and AfterAll of a count and a delay: early firings at the second row or 5 s
# after the pane's first, whichever comes first; late ones only at the second late row once 3 s have passed
ANY_ALL_QUERY = WINDOWED + """AFTER WATERMARK
    EARLY AFTER ANY (AFTER COUNT 2, AFTER PROCESSING TIME DELAY INTERVAL 5 SECONDS)
    LATE AFTER ALL (AFTER COUNT 2, AFTER PROCESSING TIME DELAY INTERVAL 3 SECONDS)"""
ANY_ALL_EXPECTED = [
    (0, "a", 4, 2, 0, "EARLY", False, 1),  # a@1, a@4: the count (its timer at 5 is reset with it)
    (0, "b", 2, 1, 0, "EARLY", False, 2),  # at 6: b's timer (5)
    (0, "a", 4, 2, 1, "ON_TIME", False, 3), (0, "b", 2, 1, 1, "ON_TIME", False, 3),  # W -> 10
    # a@5 (micro-batch 4) is a's first late row: its late timer at 11 is due at 12, but one row is not two
    (10, "c", 4, 1, 0, "EARLY", False, 5),  # at 12: c's timer (11)
    # W -> 97 at 13: a expires with its late row pending (LATE, final); [10, 20) fires ON_TIME past its cleanup
    (0, "a", 9, 3, 2, "LATE", True, 7), (10, "b", 6, 1, 0, "ON_TIME", True, 7),
    (10, "c", 4, 1, 1, "ON_TIME", True, 7),
    (90, "d", None, 1, 0, "ON_TIME", True, 8),  # at the end of input
]
# the same rows, Beam's Repeatedly.forever(elementCountAtLeast(2)).orFinally(pastEndOfWindow()): early firings at
# every second row, then the end-of-window firing closes the window, so a@5 is dropped (window closed)
UNTIL_EXPECTED = [
    (0, "a", 4, 2, 0, "EARLY", False, 1),
    (0, "a", 4, 2, 1, "ON_TIME", True, 3), (0, "b", 2, 1, 0, "ON_TIME", True, 3),  # W -> 10
    (10, "b", 6, 1, 0, "ON_TIME", True, 7), (10, "c", 4, 1, 0, "ON_TIME", True, 7),  # W -> 97
    (90, "d", None, 1, 0, "ON_TIME", True, 8),  # at the end of input
]
# the same rows in the global window (one per key), a pane every second row: what is left fires at the end of
# input (LATE, final); no window ends, so no micro-batch without rows
GLOBAL_QUERY = """SELECT k, SUM(v) AS s, COUNT(*) AS c FROM {stream} GROUP BY k
    ALLOWED LATENESS INTERVAL 20 SECONDS LATE ROWS TO {stream}_late EMIT WITH TRIGGER EVERY 2 ROWS"""
GLOBAL_EXPECTED = [
    (None, "a", 4, 2, 0, "EARLY", False, 1), (None, "b", 8, 2, 0, "EARLY", False, 4),
    (None, "a", 9, 3, 1, "LATE", True, 6), (None, "c", 4, 1, 0, "LATE", True, 6),
    (None, "d", None, 1, 0, "LATE", True, 6),
]
# the same rows, AFTER EACH of a delay and a count (Beam's AfterEach.inOrder): a window fires once 5 s after its
# first row, then at its next row, and closes; the second step counts only rows after the first fired
EACH_EXPECTED = [
    (0, "a", 4, 2, 0, "EARLY", False, 2), (0, "b", 2, 1, 0, "EARLY", False, 2),  # at 6: the timers set at 0 (5)
    (0, "a", 9, 3, 1, "LATE", True, 3),  # a@5: the count's row; the trigger finished (a tombstone until 30)
    (10, "c", 4, 1, 0, "EARLY", False, 4),  # at 12: c's timer (11); b[10, 20)'s (17) never comes
    # W -> 97: b[10, 20) expires with its row pending (b[0, 10) and c have nothing new since they fired)
    (10, "b", 6, 1, 0, "LATE", True, 6),
    (90, "d", None, 1, 0, "LATE", True, 7),  # at the end of input
]
CASES = {"processing_time": (PT_QUERY, PT_EXPECTED),
         "each": (WINDOWED + "AFTER EACH (AFTER PROCESSING TIME DELAY INTERVAL 5 SECONDS, AFTER COUNT 1)",
                  EACH_EXPECTED), "every_2_rows": (WINDOWED + "EVERY 2 ROWS", EVERY_EXPECTED),
         "any_and_all": (ANY_ALL_QUERY, ANY_ALL_EXPECTED),
         "until_watermark": (WINDOWED + "EVERY 2 ROWS UNTIL AFTER WATERMARK", UNTIL_EXPECTED),
         "global_every_2_rows": (GLOBAL_QUERY, GLOBAL_EXPECTED)}
DROPPED = {"until_watermark": [("a", 5)]}  # the rows each case drops into LATE ROWS TO


def _pane(r: Any, base: dt.datetime) -> tuple:
    """A pane as the hand-worked tables give it: (window start in seconds, or None for the global window, k,
    s, c, pane_index, pane_timing, is_final, micro_batch)."""
    start = (r.window_start - base).seconds if "window_start" in r.asDict() else None
    return start, r.k, r.s, r.c, r.pane_index, r.pane_timing, r.is_final, r.micro_batch


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_processing_time_and_count_firings_are_the_same_in_every_pane_engine(spark, monkeypatch, tmp_path, case):
    """``AFTER WATERMARK EARLY EVERY interval LATE AFTER PROCESSING TIME DELAY d``, ``EVERY n ROWS`` alone,
    AFTER ANY/ALL of a count and a delay, ``... UNTIL AFTER WATERMARK``, AFTER EACH and the global window are in the
    columnar family: replayed on their PROCESSING TIME BY clock, the per-window ``PaneDriver`` (the reference),
    the driver's columnar engine, the columnar engine with its windows in Spark and the planned replay give the
    hand-worked panes above, micro-batch numbers included, and drop the same rows."""
    query, expected = CASES[case]
    from sqlwin.streaming import plannedreplay
    from sqlwin.streaming.keyedstate import KeyedPanes
    from sqlwin.streaming.operator import MicroBatchOperator

    base = dt.datetime(2024, 1, 1)
    spark.createDataFrame(
        [(k, v, base + dt.timedelta(seconds=t), mb, PT_CLOCK + dt.timedelta(seconds=pt), i)
         for i, (k, v, t, mb, pt) in enumerate(PT_ROWS)],
        "k string, v int, ts timestamp, mb int, pt timestamp, seq int").createOrReplaceTempView("pt_rows")
    engines: list[str] = []
    original = MicroBatchOperator._pane_engine

    def recorded(self, committed):
        made = original(self, committed)
        engines.append(type(made).__name__)
        return made

    monkeypatch.setattr(MicroBatchOperator, "_pane_engine", recorded)
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path))
    results = {}
    runs = {"pane driver": ("driver", False, False), "columnar": ("driver", True, False),
            "in Spark": ("executors", True, False), "planned": ("driver", True, True)}
    try:
        for name, (state, columnar, planned) in runs.items():
            spark.conf.set("sqlwin.streaming.state", state)
            stream = f"pt_{case}_{name.replace(' ', '_')}"
            with monkeypatch.context() as m:
                m.setattr(MicroBatchOperator, "COLUMNAR", columnar)
                m.setattr(plannedreplay.PlannedReplay, "COLUMNAR_GROUPS", 0)
                if not planned:
                    m.setattr(plannedreplay.PlannedReplay, "plannable", lambda self, cut: False)
                m.setattr(KeyedPanes, "drive", _counting(KeyedPanes.drive, engines))
                sqlwin.sql(spark, f"CREATE STREAM {stream} FROM TABLE pt_rows ARRIVAL ORDER BY seq MICRO BATCH BY "
                                  "mb PROCESSING TIME BY pt WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
                rows = sqlwin.sql(spark, query.format(stream=stream)).collect()
            results[name] = sorted(_pane(r, base) for r in rows)
            assert sorted((r.k, r.v) for r in spark.table(f"{stream}_late").collect()) == DROPPED.get(case, [])
            catalog.drop_stream(spark, stream)
    finally:
        spark.conf.unset("sqlwin.streaming.state")
    assert engines[:2] == ["WindowStates", "WindowStates"] and "KeyedPanes.drive" in engines, engines
    expected = sorted(expected)
    for name in runs:
        assert results[name] == expected, (name, "\n".join(map(str, results[name])))


@pytest.mark.slow
# a timer that never stops asking for micro-batches feeds forever, and stopping that table waits: end the worker
@pytest.mark.timeout(300, method="thread")
@pytest.mark.parametrize("case", ["processing_time", "any_and_all"])
def test_processing_time_firings_of_a_live_table_with_its_windows_in_spark(spark, monkeypatch, tmp_path, case):
    """The same rows live, a file per micro-batch on the same clock, the windows in Spark: the replay's panes
    (but for what the end of input fires, which a stream does not have), micro-batch numbers included. (AFTER
    ALL's late timer goes off before its second row: once, or every micro-batch would ask for another.)"""
    query, expected = CASES[case]
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    spark.conf.set("sqlwin.streaming.state", "executors")
    feeder = Feeder(tmp_path / "in")
    sqlwin.sql(spark, f"CREATE STREAM pt_live (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 "
                      f"SECONDS) USING json OPTIONS (path '{feeder.folder}')")
    table, clock = start_clocked(spark, f"CREATE STREAMING TABLE pt_live_out AS {query.format(stream='pt_live')}")
    base, epoch = dt.datetime(2024, 1, 1), dt.datetime(1970, 1, 1)
    try:
        assert type(table.operator.panes).__name__ == "KeyedPanes"
        for mb in sorted({r[3] for r in PT_ROWS}):
            rows = [r for r in PT_ROWS if r[3] == mb]
            clock.now = int((PT_CLOCK + dt.timedelta(seconds=rows[0][4]) - epoch).total_seconds()) * 1_000_000
            feeder.feed([[{"k": k, "v": v, "ts": str(base + dt.timedelta(seconds=t))} for k, v, t, _, _ in rows]],
                        table)
        got = sorted(_pane(r, base) for r in spark.table("pt_live_out").collect())
        assert got == sorted(p for p in expected if p[1] != "d")
        assert spark.table("pt_live_late").count() == 0
    finally:
        spark.conf.unset("sqlwin.streaming.state")
        table.stop()
        catalog.remove_table(table.name)
        catalog.drop_stream(spark, "pt_live")


def _counting(drive, seen: list):
    def counted(self, *args, **kwargs):
        seen.append("KeyedPanes.drive")
        return drive(self, *args, **kwargs)
    return counted
