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

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sqlwin
from sqlwin.core.columnar import STATE, ColumnarPanes, ComparisonTrigger
from sqlwin.streaming import catalog, timewindows
from sqlwin.streaming.engines import ColumnarEngine
from sqlwin.streaming.keyedstate import PANE, TALLY, WINDOW, out_schema, step_windows
from tests.streamtools import Feeder, ts

TRIGGERS = [ComparisonTrigger(True), ComparisonTrigger(True, early=2), ComparisonTrigger(True, late=1),
            ComparisonTrigger(True, early=3, late=2), ComparisonTrigger(False, final=True), ComparisonTrigger(False)]
WINDOWS = [(k, s, s + 10) for k in ("a", "b", "c") for s in (0, 10, 20)]


def _executor_step(state: pd.DataFrame, new: pd.DataFrame, trigger: ComparisonTrigger, lateness: int,
                   accumulating: bool, batch: int, watermark: int,
                   cut: int) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """What Spark does around ``step_windows``: the full outer join of the windows with the counts, handed over
    in Arrow batches of ``cut`` rows; returns (windows, panes, windows expired)."""
    joined = state.assign(has_state=True).merge(new, on=["key", "start", "end"], how="outer") \
        if len(new) else state.assign(has_state=True, n=0)
    joined = joined.sort_values(["key", "start", "end"]).reset_index(drop=True)
    types = {np.int64: pa.int64(), np.bool_: pa.bool_()}
    schema = pa.schema([("key", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
                        *[(c, types[t]) for c, t in STATE.items()], ("has_state", pa.bool_()), ("n", pa.int64())])
    table = pa.Table.from_pandas(joined[schema.names], schema=schema, preserve_index=False)  # NaN: NULL
    out = pa.Table.from_batches(list(step_windows(trigger, lateness, accumulating, batch, watermark,
                                                  iter(table.to_batches(max_chunksize=cut)))), out_schema())
    frame = out.to_pandas()
    windows = frame[frame["kind"] == WINDOW][["key", "start", "end", *STATE]].reset_index(drop=True)
    panes = frame[frame["kind"] == PANE]
    return windows.astype(dict(STATE)), panes, int(frame[frame["kind"] == TALLY]["expired"].sum())


@settings(max_examples=60, deadline=None)
@given(trigger=st.sampled_from(TRIGGERS), lateness=st.sampled_from([0, 5, 15]), accumulating=st.booleans(),
       cut=st.integers(1, 5),
       history=st.lists(st.tuples(st.dictionaries(st.sampled_from(WINDOWS), st.integers(1, 4), max_size=5),
                                  st.integers(0, 12)), min_size=1, max_size=8))
def test_executor_step_equals_the_driver_engine(trigger, lateness, accumulating, cut, history):
    driver = ColumnarPanes(trigger, lateness, accumulating)
    state = pd.DataFrame({"key": pd.Series([], dtype=object), "start": np.array([], np.int64),
                          "end": np.array([], np.int64), **{c: np.array([], t) for c, t in STATE.items()}})
    watermark = -1
    for batch, (counts, advance) in enumerate(history):
        watermark += advance  # the watermark never goes back, and sometimes stays
        new = pd.DataFrame([(k, s, e, n) for (k, s, e), n in counts.items()],
                           columns=["key", "start", "end", "n"]).astype({"start": "int64", "end": "int64",
                                                                         "n": "int64"})
        fired, expired = driver.step(new, batch, watermark)
        state, panes, gone = _executor_step(state, new, trigger, lateness, accumulating, batch, watermark, cut)
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
