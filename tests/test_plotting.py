"""The picture of a replay's panes when the query selects only some of its window bounds: drawn as far as the
bounds go, or, when it selects none, a SqlwinError positioned at the query in the script (never a KeyError)."""

from __future__ import annotations

import datetime as dt

import pytest

from sqlwin import cli, plotting
from sqlwin.errors import SqlwinError

DATA = """CREATE OR REPLACE TEMPORARY VIEW plot_arrivals AS SELECT * FROM VALUES
  (1, TIMESTAMP'2020-04-15 12:01:00', 5),
  (2, TIMESTAMP'2020-04-15 12:05:00', 8),
  (3, TIMESTAMP'2020-04-15 12:12:00', 3)
  AS t(seq, ts, v);
CREATE STREAM plot_stream FROM TABLE plot_arrivals ARRIVAL ORDER BY seq WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE;
"""
TUMBLE = "FROM TUMBLE(TABLE plot_stream, DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY window_start, window_end"


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2020-04-15 {text}")


@pytest.fixture(autouse=True)
def own_streaming_root(tmp_path, monkeypatch):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "streaming"))


@pytest.mark.slow
def test_panes_are_drawn_from_the_bounds_the_query_selects(spark, tmp_path):
    """[12:00, 12:10) holds 5 + 8 and fires once W = 12:11 passes its end; [12:10, 12:20) holds 3, at the end."""
    text = DATA + (f"SELECT window_start, SUM(v) AS total {TUMBLE};\n"
                   f"SELECT window_time, SUM(v) AS total {TUMBLE}, window_time;\n")
    png = tmp_path / "panes.png"
    only_start, only_time = plotting.plot_panes(spark, text, str(png))
    assert png.stat().st_size > 10_000
    assert sorted((p["window_start"], p["total"]) for p in only_start.panes) == [(at("12:00"), 13), (at("12:10"), 3)]
    assert sorted(plotting.pane_bounds(p) for p in only_start.panes) == [(at("12:00"), None), (at("12:10"), None)]
    # window_time is window_end - 1 ms: the end it gives is the window's own
    assert sorted(plotting.pane_bounds(p) for p in only_time.panes) == [(None, at("12:10")), (None, at("12:20"))]


@pytest.mark.slow
def test_a_query_without_any_window_bound_is_a_positioned_error(spark, tmp_path):
    query = f"SELECT SUM(v) AS total {TUMBLE};\n"
    text = DATA + "-- the panes of this one cannot be placed in event time\n" + query
    line = text.count("\n", 0, text.index(query)) + 1
    with pytest.raises(SqlwinError, match="selects none of window_start, window_end, window_time") as info:
        plotting.plot_panes(spark, text, str(tmp_path / "panes.png"))
    assert info.value.line == line and 1 <= info.value.col < query.index(" FROM")  # in the SELECT list


@pytest.mark.slow
def test_cli_replay_plot_reports_the_missing_bounds_at_the_query(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "start_spark", lambda conf=None: spark)
    query = f"SELECT SUM(v) AS total {TUMBLE};\n"
    script = tmp_path / "no_bounds.sql"
    script.write_text(DATA + query, encoding="utf-8")
    line = (DATA + query).count("\n", 0, len(DATA)) + 1
    png = tmp_path / "panes.png"
    assert cli.main(["replay", str(script), "--plot", str(png), "--no-progress"]) != 0
    err = capsys.readouterr().err
    assert "select window_start and window_end" in err and "Traceback" not in err and "KeyError" not in err
    assert f"{script}:{line}:" in err
    assert not png.exists()


def test_replays_are_recorded_only_in_the_thread_that_records():
    """A recording sees the replays its own thread runs (and nested recordings see them too), only once they
    have returned; another thread's replays, like a live table's micro-batches, are not recorded."""
    import threading

    from sqlwin.streaming import trace

    with trace.replayed("unrecorded", "") as run:
        assert run is None
        trace.step(0, True, 0)  # nothing records: a no-op
    with trace.recording() as outer, trace.recording() as inner:
        with trace.replayed("shape", "SELECT 1") as run:
            trace.step(0, True, 5)
            trace.step(None, False, 5)
            other = threading.Thread(target=trace.step, args=(7, True, 9))
            other.start()
            other.join()
            run.result = "panes"
        with pytest.raises(RuntimeError), trace.replayed("failing", "SELECT 2"):
            raise RuntimeError("the replay failed")
    assert outer == inner == [trace.ReplayRun("shape", "SELECT 1", [trace.Step(0, True, 5),
                                                                    trace.Step(None, False, 5)], "panes")]
