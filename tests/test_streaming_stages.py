"""Streaming queries of several windows (issue 18): window joins and cascaded windows, live and replayed,
against hand-worked tables, against each other, and (generated data) against DuckDB running the batch query over
the rows that were not late."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamtools import T0, Feeder, stream_env, ts

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from sqlwin.streaming.state import StateStore
from sqlwin.streaming.windowjoin import JoinStage

S = 1_000_000

# files of (k, v, second, side); the stream's watermark is the largest ts so far minus 2 s
# (the watermark moves after a micro-batch: no window fires and no row is late before W reaches 6, so the rows up to
# then are one file; the LATE and late rows at W 10 share their file with the rows that move W to 29)
FILES = [
    [("a", 1, 1, "l"), ("a", 0, 2, "r"), ("b", 0, 3, "r"), ("a", 2, 6, "l"), ("a", 0, 8, "r")],  # W after: 6
    [("b", 5, 12, "l")],                                     # W after: 10 (windows up to 10 s fire)
    # at W 10: [0,5) is past its lateness (late row), [5,10) takes a LATE row; W after: 29
    [("a", 7, 3, "l"), ("a", 3, 8, "l"), ("a", 1, 25, "l"), ("a", 0, 31, "r")],
    [("b", 0, 16, "r")],                                     # late for R (no lateness): dropped, counted
]

JOIN = """SELECT L.k AS lk, R.k AS rk, L.s, R.c, COALESCE(L.ws, R.window_start) AS ws
FROM (SELECT k, window_start AS ws, window_end AS we, SUM(v) AS s
      FROM TUMBLE(TABLE(SELECT * FROM {s} WHERE side = 'l'), DESCRIPTOR(ts), INTERVAL 5 SECONDS)
      GROUP BY k, window_start, window_end ALLOWED LATENESS INTERVAL 4 SECONDS LATE ROWS TO {late}) L
FULL JOIN (SELECT k, window_start, window_end, COUNT(*) AS c
      FROM TUMBLE(TABLE(SELECT * FROM {s} WHERE side = 'r'), DESCRIPTOR(ts), INTERVAL 5 SECONDS)
      GROUP BY k, window_start, window_end) R
ON L.k = R.k AND L.ws = R.window_start AND L.we = R.window_end"""

CASCADE = """SELECT window_start, window_end, SUM(s) AS total, COUNT(*) AS inner_windows
FROM TUMBLE(TABLE(
    SELECT window_start AS ws, window_time AS rowtime, k, SUM(v) AS s
    FROM TUMBLE(TABLE(SELECT * FROM {s} WHERE side = 'l'), DESCRIPTOR(ts), INTERVAL 5 SECONDS)
    GROUP BY window_start, window_end, window_time, k ALLOWED LATENESS INTERVAL 4 SECONDS),
  DESCRIPTOR(rowtime), INTERVAL 10 SECONDS)
GROUP BY window_start, window_end"""


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


# hand-worked: the join emits a window once both sides' watermarks pass its end; the LATE row of L's [5,10)
# (a, 3 at 8 s) restates that window's join as a LATE pane
JOIN_LIVE = [
    ("a", "a", 1, 1, at(0), 0, "ON_TIME", False),
    (None, "b", None, 1, at(0), 0, "ON_TIME", False),
    ("a", "a", 2, 1, at(5), 0, "ON_TIME", False),
    ("a", "a", 5, 1, at(5), 1, "LATE", False),
    ("b", None, 5, None, at(10), 0, "ON_TIME", True),  # W 29 passed [10,15)'s end plus the lateness: its last pane
]
# at the end of the input (W +infinity) every window's pane is its last (Beam: the window expires)
JOIN_AT_END = [("a", None, 1, None, at(25), 0, "ON_TIME", True), (None, "a", None, 1, at(30), 0, "ON_TIME", True)]
# the inner windows [0,5) a=1, [5,10) a=2+3 (its late row), [10,15) b=5, [25,30) a=1 feed the outer 10 s windows once
# final (the inner watermark minus its 4 s lateness passed their end): each counted once
CASCADE_LIVE = [(at(0), at(10), 6, 2, 0, "ON_TIME", True), (at(10), at(20), 5, 1, 0, "ON_TIME", True)]
CASCADE_AT_END = [(at(20), at(30), 1, 1, 0, "ON_TIME", True)]
PANE = ["pane_index", "pane_timing", "is_final"]


def test_window_join_and_cascade_live_and_replayed(spark, tmp_path, monkeypatch, request):
    """Live, with the join dying inside its first commit that keeps side panes (the sides' stages committed
    that micro-batch: the same statement resumes it, the join reading their panes back), stopped and started
    again midway (the same panes, micro-batch numbers and late rows), then replayed."""
    crash = {"done": False}
    commit = StateStore.commit

    def crashing_commit(self, batch, data):
        if not crash["done"] and self.root.endswith("join/sqlwin") and any(data.get("retained", [])):
            crash["done"] = True
            raise RuntimeError("crash inside the join's commit")
        commit(self, batch, data)

    monkeypatch.setattr(StateStore, "commit", crashing_commit)
    read_back = []  # the sides' folders the resumed join read back (this run did not write them)
    measure = JoinStage._measure
    monkeypatch.setattr(JoinStage, "_measure", staticmethod(lambda spark, path: read_back.append(
        measure(spark, path)) or read_back[-1]))
    with stream_env(spark, tmp_path, monkeypatch, request.node.name):
        name = "s_stages"
        folder = tmp_path / "in2"
        folder.mkdir()
        sqlwin.sql(spark, f"CREATE STREAM {name} (k STRING, v INT, ts TIMESTAMP, side STRING, "
                          f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
        statements = ["CREATE STREAMING TABLE stages_join AS " + JOIN.format(s=name, late="stages_late"),
                      "CREATE STREAMING TABLE stages_cascade AS " + CASCADE.format(s=name)]

        def start() -> tuple:
            for sql in statements:
                sqlwin.sql(spark, sql)
            return catalog.find_table("stages_join"), catalog.find_table("stages_cascade")

        joined, cascade = start()
        assert (joined.path, joined.why, cascade.why) == ("custom", "window join", "cascaded windows")
        feed = Feeder(folder)
        for i, rows in enumerate(FILES):
            feed.write([{"k": k, "v": v, "ts": ts(s), "side": side} for k, v, s, side in rows])
            if i == 2:  # stopped with windows open in every stage and the join: the file waits, then resumes
                sqlwin.sql(spark, "STOP STREAMING TABLE stages_join")
                sqlwin.sql(spark, "STOP STREAMING TABLE stages_cascade")
                kept = _as_before_windows_were_kept(tmp_path / "root" / "stages_join" / "join")
                measured = len(read_back)
                joined, cascade = start()
                assert kept and len(read_back) == measured + kept  # the kept side folders' windows, read once
            try:
                joined.process_all_available()
            except SqlwinError:
                assert crash["done"] and joined.status().status == "failed"
                joined.stop()
                sqlwin.sql(spark, statements[0])
                joined = catalog.find_table("stages_join")
                joined.process_all_available()
            cascade.process_all_available()
        assert crash["done"] and any(rows for rows, _ in read_back)
        live_join, live_cascade = _hand_worked(spark, "stages_join", "stages_cascade", "stages_late")
        status = {s.name: s for s in (joined.status(), cascade.status())}
        assert status["stages_join"].late_rows_dropped == 2  # L's row past its lateness, R's late row
        assert status["stages_join"].rows_in == sum(len(f) for f in FILES)

        # the same rows replayed in the same micro-batches: the same panes, and the rest at the end of input
        _replayed_files(spark, "r_stages")
        replay_join = _rows(sqlwin.sql(spark, JOIN.format(s="r_stages", late="stages_late_replayed")),
                              ["lk", "rk", "s", "c", "ws", *PANE, "micro_batch"])
        replay_cascade = _rows(sqlwin.sql(spark, CASCADE.format(s="r_stages")),
                                 ["window_start", "window_end", "total", "inner_windows", *PANE, "micro_batch"])
        assert replay_join[:len(live_join)] == live_join or set(live_join) <= set(replay_join)
        at_end = sorted((r[:-1] for r in set(replay_join) - set(live_join)), key=_order)
        assert at_end == sorted(JOIN_AT_END, key=_order)
        assert set(live_cascade) <= set(replay_cascade)
        assert sorted((r[:-1] for r in set(replay_cascade) - set(live_cascade)), key=_order) == CASCADE_AT_END
        assert _rows(spark.table("stages_late_replayed"), ["k", "v", "window_start", "reason"]) == \
            [("a", 7, at(0), "late")]


def test_files_already_waiting_give_the_panes_of_files_arriving_one_at_a_time(spark, tmp_path, monkeypatch):
    """All of FILES there before the tables start, read one per micro-batch: the hand-worked join and cascade of
    files dropped one at a time, in replay's micro-batches. The no-data steps f1's rows make due (L's watermark
    10: its [5,10) fires, then the join's) run inside f1's Spark micro-batch, before f2's rows: a tick read
    together with f2 put L's a@8 in [5,10)'s ON_TIME pane instead of a LATE one. Each table also dies inside a
    commit of a no-data step and is started again: the cascade's outer stage in the step whose panes its inner
    stage had committed (it reads them back), the join in a step no part had committed; each resumes its Spark
    micro-batch at that step, with the panes of a run without the crash."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "waiting"
    feeder = Feeder(folder)
    for i, rows in enumerate(FILES):
        feeder.write({"k": k, "v": v, "ts": ts(s), "side": side} for k, v, s, side in rows)
        os.utime(folder / f"f{i:05d}.json", (1_700_000_000 + i, 1_700_000_000 + i))  # the source's order
    crashes: dict[str, tuple] = {}  # table -> (the step its commit died in, the last step each part committed)
    commit = StateStore.commit

    def last_step(part: str) -> tuple:
        store = StateStore(str(tmp_path / "root" / part))
        data = store.load(store.last_committed())
        return data["source_batch"], data.get("source_step", 0)

    def crashing_commit(self, batch, data):
        position = (data.get("source_batch"), data.get("source_step", 0))
        for table, part, at_step in (("waiting_cascade", "stages/1", (1, 1)), ("waiting_join", "join", (0, 2))):
            if table not in crashes and f"{table}/{part}/sqlwin" in self.root and position == at_step:
                parts = ["stages/0", "stages/1", *(["join"] if part == "join" else [])]
                crashes[table] = (position, [last_step(f"{table}/{p}") for p in parts])
                raise RuntimeError(f"crash inside {table}'s commit")
        commit(self, batch, data)

    monkeypatch.setattr(StateStore, "commit", crashing_commit)
    sqlwin.sql(spark, "CREATE STREAM s_waiting (k STRING, v INT, ts TIMESTAMP, side STRING, WATERMARK FOR ts AS "
                      f"ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}', maxFilesPerTrigger '1')")
    statements = {"waiting_join": JOIN.format(s="s_waiting", late="waiting_late"),
                  "waiting_cascade": CASCADE.format(s="s_waiting")}
    try:
        for name, query in statements.items():
            sqlwin.sql(spark, f"CREATE STREAMING TABLE {name} AS {query}")
            try:
                catalog.find_table(name).process_all_available()
            except SqlwinError:
                catalog.find_table(name).stop()
                sqlwin.sql(spark, f"CREATE STREAMING TABLE {name} AS {query}")
                catalog.find_table(name).process_all_available()
            assert catalog.find_table(name).operator.ticks.asked == 0
        # the cascade's inner stage had committed the step its outer stage died in; no part of the join had
        assert crashes == {"waiting_cascade": ((1, 1), [(1, 1), (0, 1)]),
                           "waiting_join": ((0, 2), [(0, 1), (0, 1), (0, 1)])}
        live_join, live_cascade = _hand_worked(spark, "waiting_join", "waiting_cascade", "waiting_late")

        monkeypatch.setattr(StateStore, "commit", commit)  # replayed: the same micro-batch numbers
        _replayed_files(spark, "r_waiting")
        assert set(live_join) <= set(_rows(sqlwin.sql(spark, JOIN.format(s="r_waiting", late="waiting_late_r")),
                                           ["lk", "rk", "s", "c", "ws", *PANE, "micro_batch"]))
        assert set(live_cascade) <= set(_rows(sqlwin.sql(spark, CASCADE.format(s="r_waiting")),
                                              ["window_start", "window_end", "total", "inner_windows", *PANE,
                                               "micro_batch"]))
    finally:
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)
        catalog.drop_stream(spark, "s_waiting")


def _hand_worked(spark, join: str, cascade: str, late: str) -> tuple[list[tuple], list[tuple]]:
    """The live tables ``join`` and ``cascade`` (over FILES) checked against the hand-worked panes and late rows;
    their rows, each with its micro-batch."""
    live_join = _rows(spark.table(join), ["lk", "rk", "s", "c", "ws", *PANE, "micro_batch"])
    live_cascade = _rows(spark.table(cascade), ["window_start", "window_end", "total", "inner_windows", *PANE,
                                                "micro_batch"])
    assert sorted((r[:-1] for r in live_join), key=_order) == sorted(JOIN_LIVE, key=_order)
    assert sorted((r[:-1] for r in live_cascade), key=_order) == CASCADE_LIVE
    assert _rows(spark.table(late), ["k", "v", "window_start", "reason"]) == [("a", 7, at(0), "late")]
    return live_join, live_cascade


def _replayed_files(spark, name: str) -> None:
    """Replay stream ``name`` of FILES' rows, one micro-batch per file (as the live tables read them)."""
    data = [(k, v, at(s), side, f) for f, rows in enumerate(FILES) for k, v, s, side in rows]
    spark.createDataFrame(data, "k string, v int, ts timestamp, side string, f int") \
        .createOrReplaceTempView(f"{name}_rows")
    sqlwin.sql(spark, f"CREATE STREAM {name} FROM TABLE {name}_rows ARRIVAL ORDER BY f MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")


def _as_before_windows_were_kept(join: Path) -> int:
    """The join's commits as sqlwin wrote them before it kept each side folder's windows (``retained_windows``):
    a restart from them reads the kept folders' windows back. Returns how many side folders the last one keeps."""
    commits = sorted((join / "sqlwin" / "state").glob("*.json"), key=lambda p: int(p.stem))
    for path in commits:
        data = json.loads(path.read_text())
        data.pop("retained_windows")
        path.write_text(json.dumps(data))
    return sum(len(side) for side in json.loads(commits[-1].read_text())["retained"])


# two streams, each with its own watermark (its largest ts - 2 s): (stream, rows (k, v, second)) in arrival order
# (a stream's watermark moves after its micro-batch: R's rows at 3 s and 12 s, and L's at 2 s and 14 s, share a file;
# files of the two streams stay apart, as the table may run a micro-batch between two writes, and L's row at 9 s
# comes before R's at 3 s, which the join must wait for)
TWO_STREAMS = [("l", [("a", 1, 1)]), ("r", [("a", 0, 2)]), ("l", [("a", 2, 9)]), ("r", [("a", 0, 3), ("b", 0, 12)]),
               ("l", [("a", 5, 2), ("b", 4, 14)]), ("r", [("b", 1, 20)])]
TWO_JOIN = """SELECT L.k, L.s, R.c, L.ws
FROM (SELECT k, window_start AS ws, window_end AS we, SUM(v) AS s FROM TUMBLE(TABLE s2_l, DESCRIPTOR(ts),
      INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end LATE ROWS TO s2_late) L
LEFT JOIN (SELECT k, window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE s2_r, DESCRIPTOR(ts),
      INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) R
ON L.k = R.k AND L.ws = R.window_start AND L.we = R.window_end"""


def test_window_join_of_two_streams_waits_for_the_slower_watermark(spark, tmp_path, monkeypatch):
    """Live, then replayed side by side. Hand-worked: L's watermark reaches 7 s at its row at 9 s, R's only at its
    row at 12 s (10 s). [0,5) joins a (1) with R's two a rows; L's a at 2 s comes when L's watermark is 7 s: late
    for L (its own watermark, not R's slower one), in s2_late; [5,10) has no R row: LEFT JOIN's NULL; [10,15)
    waits for L's watermark (12 s)."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    feeders = _json_streams(spark, tmp_path, "s2", ("l", "r"), "k STRING, v INT, ts TIMESTAMP", 2)
    sqlwin.sql(spark, "CREATE STREAMING TABLE s2_join AS " + TWO_JOIN)
    table = catalog.find_table("s2_join")
    try:
        for side, rows in TWO_STREAMS:
            feeders[side].write([{"k": k, "v": v, "ts": ts(s)} for k, v, s in rows])
            table.process_all_available()
        assert _rows(spark.table("s2_join"), ["k", "s", "c", "ws", *PANE]) == [
            ("a", 1, 2, at(0), 0, "ON_TIME", True), ("a", 2, None, at(5), 0, "ON_TIME", True)]
        assert _rows(spark.table("s2_late"), ["k", "v", "window_start", "watermark", "reason"]) == \
            [("a", 5, at(0), at(7), "late")]
        status = table.status()
        assert (status.rows_in, status.late_rows_dropped, status.watermark) == (8, 1, "2024-01-01 00:00:12")
        live = _rows(spark.table("s2_join"), ["k", "s", "c", "ws", *PANE, "micro_batch"])
    finally:
        table.stop()
        catalog.remove_table("s2_join")
    # replayed side by side (micro-batch k: every stream's rows of step k): the same panes, then the rest at the
    # end of the input
    for side in ("l", "r"):
        data = [(k, v, at(s), step) for step, (which, rows) in enumerate(TWO_STREAMS) if which == side
                for k, v, s in rows]
        spark.createDataFrame(data, "k string, v int, ts timestamp, step int") \
            .createOrReplaceTempView(f"s2_{side}_rows")
        sqlwin.sql(spark, f"CREATE STREAM s2_{side} FROM TABLE s2_{side}_rows ARRIVAL ORDER BY step "
                          "MICRO BATCH BY step WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    replayed = _rows(sqlwin.sql(spark, TWO_JOIN.replace("s2_late", "s2_late_replayed")),
                     ["k", "s", "c", "ws", *PANE, "micro_batch"])
    assert set(live) <= set(replayed)
    assert [r[:-1] for r in replayed if r not in live] == [("b", 4, 1, at(10), 0, "ON_TIME", True)]
    assert _rows(spark.table("s2_late_replayed"), ["k", "v", "window_start", "watermark", "reason"]) == \
        [("a", 5, at(0), at(7), "late")]


def _json_streams(spark, tmp_path, prefix: str, names: tuple[str, ...], columns: str, delay: int) -> dict:
    """A live JSON stream ``<prefix>_<name>`` per name over its own folder (watermark: ts minus ``delay``
    seconds), and the feeder of each folder."""
    feeders = {}
    for name in names:
        feeders[name] = Feeder(tmp_path / name)
        sqlwin.sql(spark, f"CREATE STREAM {prefix}_{name} ({columns}, WATERMARK FOR ts AS ts - INTERVAL {delay} "
                          f"SECONDS) USING json OPTIONS (path '{tmp_path / name}')")
    return feeders


def _order(row: tuple) -> tuple:
    return tuple((v is None, str(v)) for v in row)


def _rows(df, columns: list[str]) -> list[tuple]:
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=_order)


@pytest.mark.parametrize(("sql", "message"), [
    (CASCADE.replace("ALLOWED LATENESS INTERVAL 4 SECONDS", "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 1 ROWS"),
     "EMIT on the inner aggregation of cascaded windows"),
    (CASCADE.replace("DESCRIPTOR(rowtime)", "DESCRIPTOR(ws)"), "reads the inner window's window_time"),
    (JOIN.replace(" AND L.we = R.window_end", ""), "joins ON L.window_start = R.window_start AND L.window_end"),
    (JOIN.replace("'r'), DESCRIPTOR(ts), INTERVAL 5 SECONDS", "'r'), DESCRIPTOR(ts), INTERVAL 10 SECONDS"),
     "every side of a streaming window join uses the same window"),
    (JOIN.replace("ALLOWED LATENESS INTERVAL 4 SECONDS LATE ROWS TO {late}",
                  "EMIT WITH TRIGGER AFTER WATERMARK LATE EVERY 1 ROWS DISCARDING"),
     "DISCARDING panes in a window join"),
    (JOIN.replace("FROM {s} WHERE side = 'r'", "FROM r_stages_err"), "joins a live stream with a replay stream"),
    (JOIN.replace("FROM {s} WHERE side = 'r'", "FROM r_stages_err").replace("FROM {s}", "FROM r_stages_err2"),
     "replay streams read side by side cut their micro-batches alike"),
])
def test_queries_of_several_windows_that_do_not_run(spark, tmp_path, monkeypatch, request, sql, message):
    with stream_env(spark, tmp_path, monkeypatch, request.node.name) as (name, _, _root):
        spark.createDataFrame([("a", 1, at(0))], "k string, v int, ts timestamp") \
            .createOrReplaceTempView("stages_err_rows")
        sqlwin.sql(spark, "CREATE STREAM r_stages_err FROM TABLE stages_err_rows ARRIVAL ORDER BY ts "
                          "WATERMARK FOR ts AS ts")
        sqlwin.sql(spark, "CREATE STREAM r_stages_err2 FROM TABLE stages_err_rows ARRIVAL ORDER BY ts MICRO BATCH BY v "
                          "WATERMARK FOR ts AS ts")
        sql = sql.replace(" WHERE side = 'l'", "").replace(" WHERE side = 'r'", "")  # the fixture's stream: k, v, ts
        replayed = "r_stages_err2" in sql  # replay streams only: the query itself replays (no streaming table)
        with pytest.raises(SqlwinError) as err:
            sqlwin.sql(spark, ("" if replayed else "CREATE STREAMING TABLE stages_err AS ")
                       + sql.format(s=name, late="stages_err_late"))
        assert message in str(err.value)
        assert str(err.value).startswith("line ")


# -- generated data: replay equals DuckDB's batch query over the rows that were not late --------------------------
ROWS = st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 9), st.integers(0, 40),
                          st.sampled_from(["l", "r"])), min_size=0, max_size=14)


def _kept(rows: list[tuple], per_file: int, size: int, delay: int) -> list[tuple]:
    """GRAMMAR 4 with lateness 0: a row of file f is kept when its window ends after the watermark in force, the
    largest ts of the files before f minus the delay."""
    kept, top = [], None
    for f in range(0, len(rows), per_file):
        watermark = None if top is None else top - delay
        for row in rows[f:f + per_file]:
            end = (row[2] // size + 1) * size
            if watermark is None or end > watermark:
                kept.append(row)
        top = max([top or -10**9, *(r[2] for r in rows[f:f + per_file])])
    return kept


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=ROWS, per_file=st.integers(1, 4))
def test_generated_replays_equal_the_batch_query_over_kept_rows(spark, duck, tmp_path, monkeypatch, rows, per_file):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))  # replay's scratch, not ./sqlwin_streaming
    data = [(k, v, at(s), side, i // per_file) for i, (k, v, s, side) in enumerate(rows)]
    spark.createDataFrame(data, "k string, v int, ts timestamp, side string, f int") \
        .createOrReplaceTempView("stages_gen")
    sqlwin.sql(spark, "CREATE STREAM r_stages_gen FROM TABLE stages_gen ARRIVAL ORDER BY f MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 3 SECONDS")
    join = JOIN.replace(" ALLOWED LATENESS INTERVAL 4 SECONDS LATE ROWS TO {late}", "")
    cascade = CASCADE.replace(" ALLOWED LATENESS INTERVAL 4 SECONDS", "")
    kept = _kept([(k, v, s, side) for k, v, s, side in rows], per_file, 5, 3)
    duck.execute("DROP TABLE IF EXISTS stages_kept")
    duck.execute("CREATE TABLE stages_kept (k VARCHAR, v INTEGER, ts TIMESTAMP, side VARCHAR)")
    if kept:
        duck.executemany("INSERT INTO stages_kept VALUES (?, ?, ?, ?)", [(k, v, at(s), side) for k, v, s, side in kept])
    for sql, columns in ((join, ["lk", "rk", "s", "c", "ws"]), (cascade, ["window_start", "window_end", "total",
                                                                           "inner_windows"])):
        replayed = _rows(sqlwin.sql(spark, sql.format(s="r_stages_gen")), [*columns, *PANE])
        assert {r[len(columns):] for r in replayed} <= {(0, "ON_TIME", True)}
        oracle = duck.execute(sqlwin.rewrite(sql.format(s="stages_kept"), target="duckdb", catalog=duck)).fetchall()
        assert sorted((r[:len(columns)] for r in replayed), key=_order) == sorted(
            (tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in r) for r in oracle),
            key=_order)


# -- three window queries joined (Flink chains binary window joins) -----------------------------------------------
# each stream's rows (k, x, second) in arrival order, in order (Flink's file source: a watermark per record); the
# last row of each moves every watermark past the first windows
THREE = {"a": [("k1", 1, 1), ("k2", 3, 3), ("k1", 2, 12), ("k1", 9, 100)],
         "b": [("k1", 5, 2), ("k2", 6, 4), ("k2", 7, 15), ("k1", 9, 100)],
         "c": [("k1", 8, 5), ("k2", 9, 11), ("k1", 9, 100)]}
THREE_JOIN = """SELECT A.k, A.window_start, A.sx, B.sx AS bx, C.sx AS cx FROM
 (SELECT k, window_start, window_end, SUM(x) AS sx FROM TUMBLE(TABLE j3_a, DESCRIPTOR(ts), INTERVAL '10' SECONDS)
  GROUP BY k, window_start, window_end) A
 JOIN (SELECT k, window_start, window_end, SUM(x) AS sx FROM TUMBLE(TABLE j3_b, DESCRIPTOR(ts), INTERVAL '10' SECONDS)
  GROUP BY k, window_start, window_end) B
 ON A.k = B.k AND A.window_start = B.window_start AND A.window_end = B.window_end
 {kind} JOIN (SELECT k, window_start, window_end, SUM(x) AS sx FROM TUMBLE(TABLE j3_c, DESCRIPTOR(ts),
  INTERVAL '10' SECONDS) GROUP BY k, window_start, window_end) C
 ON {on}.k = C.k AND {on}.window_start = C.window_start AND {on}.window_end = C.window_end"""
# Apache Flink 2.3 (PyFlink, streaming mode, each stream a CSV file of these rows, WATERMARK ts - 1 s), printed:
FLINK_THREE = {
    "": [("k1", at(0), 1, 5, 8), ("k1", at(100), 9, 9, 9)],
    "LEFT": [("k1", at(0), 1, 5, 8), ("k2", at(0), 3, 6, None), ("k1", at(100), 9, 9, 9)],
}


@pytest.mark.parametrize(("kind", "on"), [("", "A"), ("LEFT", "B")])
def test_three_window_queries_joined_live_and_replayed(spark, tmp_path, monkeypatch, kind, on):
    """A chain of window joins (the third query's ON names the first's window, or the second's): live, each
    stream fed a row per file (as Flink's per-record watermarks), and replayed a row per micro-batch per stream
    (side by side): Flink 2.3's answer, once each window's three watermarks passed its end; live and replay give
    the same panes in the same micro-batches."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    sql = THREE_JOIN.format(kind=kind, on=on)
    columns = ["k", "window_start", "sx", "bx", "cx"]
    feeders = _json_streams(spark, tmp_path, "j3", tuple(THREE), "k STRING, x INT, ts TIMESTAMP", 1)
    sqlwin.sql(spark, "CREATE STREAMING TABLE j3_join AS " + sql)
    table = catalog.find_table("j3_join")
    try:
        assert table.why == "window join"
        for step in range(max(len(rows) for rows in THREE.values())):
            for name, rows in THREE.items():
                if step < len(rows):
                    k, x, s = rows[step]
                    feeders[name].write([{"k": k, "x": x, "ts": ts(s)}])
                    table.process_all_available()
        live = _rows(spark.table("j3_join"), [*columns, *PANE, "micro_batch"])
    finally:
        table.stop()
        catalog.remove_table("j3_join")
    # the window at 100 s waits for the end of the input (no later row moves the watermarks past it)
    assert [r[:5] for r in live] == [r for r in FLINK_THREE[kind] if r[1] != at(100)]
    assert {r[5:8] for r in live} == {(0, "ON_TIME", True)}
    for name, rows in THREE.items():
        spark.createDataFrame([(k, x, at(s), i) for i, (k, x, s) in enumerate(rows)],
                              "k string, x int, ts timestamp, i int").createOrReplaceTempView(f"j3_{name}_rows")
        sqlwin.sql(spark, f"CREATE STREAM j3_{name} FROM TABLE j3_{name}_rows ARRIVAL ORDER BY i "
                          "WATERMARK FOR ts AS ts - INTERVAL 1 SECOND")
    replayed = _rows(sqlwin.sql(spark, sql), [*columns, *PANE, "micro_batch"])
    assert sorted((r[:5] for r in replayed), key=_order) == sorted(FLINK_THREE[kind], key=_order)
    assert {r[5:8] for r in replayed} == {(0, "ON_TIME", True)}


THREE_SIDES = """SELECT A.k, A.ws, A.s, B.c, C.m
FROM (SELECT k, window_start AS ws, window_end AS we, SUM(v) AS s FROM TUMBLE(TABLE(SELECT * FROM {s}
      WHERE side = 'l'), DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) A
LEFT JOIN (SELECT k, window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE(SELECT * FROM {s}
      WHERE side = 'r'), DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) B
ON A.k = B.k AND A.ws = B.window_start AND A.we = B.window_end
JOIN (SELECT k, window_start, window_end, MAX(v) AS m FROM TUMBLE(TABLE(SELECT * FROM {s}
      WHERE side = 'm'), DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY k, window_start, window_end) C
ON C.k = A.k AND C.window_start = A.ws AND C.window_end = A.we"""


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 9), st.integers(0, 40),
                               st.sampled_from(["l", "r", "m"])), min_size=0, max_size=16),
       per_file=st.integers(1, 4))
def test_generated_three_way_replays_equal_the_batch_query_over_kept_rows(spark, duck, tmp_path, monkeypatch, rows,
                                                                           per_file):
    """Three window queries of one stream joined (LEFT, then inner): the replay's panes are DuckDB's batch query
    over the rows the watermark kept, all ON_TIME and final (no lateness)."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    data = [(k, v, at(s), side, i // per_file) for i, (k, v, s, side) in enumerate(rows)]
    spark.createDataFrame(data, "k string, v int, ts timestamp, side string, f int") \
        .createOrReplaceTempView("three_gen")
    sqlwin.sql(spark, "CREATE STREAM r_three_gen FROM TABLE three_gen ARRIVAL ORDER BY f MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 3 SECONDS")
    kept = _kept([(k, v, s, side) for k, v, s, side in rows], per_file, 5, 3)
    duck.execute("DROP TABLE IF EXISTS three_kept")
    duck.execute("CREATE TABLE three_kept (k VARCHAR, v INTEGER, ts TIMESTAMP, side VARCHAR)")
    if kept:
        duck.executemany("INSERT INTO three_kept VALUES (?, ?, ?, ?)", [(k, v, at(s), side) for k, v, s, side in kept])
    columns = ["k", "ws", "s", "c", "m"]
    replayed = _rows(sqlwin.sql(spark, THREE_SIDES.format(s="r_three_gen")), [*columns, *PANE])
    assert {r[len(columns):] for r in replayed} <= {(0, "ON_TIME", True)}
    oracle = duck.execute(sqlwin.rewrite(THREE_SIDES.format(s="three_kept"), target="duckdb", catalog=duck)).fetchall()
    assert sorted((r[:len(columns)] for r in replayed), key=_order) == sorted(
        (tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in r) for r in oracle), key=_order)


@pytest.mark.parametrize(("change", "message"), [
    # the third query joined on the second's window_start but not its window_end
    (lambda sql: sql.replace("AND A.window_end = C.window_end", "AND A.window_end = B.window_end"),
     "joins ON L.window_start = R.window_start AND L.window_end"),
    (lambda sql: sql.replace("TUMBLE(TABLE j3_c, DESCRIPTOR(ts),\n  INTERVAL '10' SECONDS)",
                             "TUMBLE(TABLE j3_c, DESCRIPTOR(ts),\n  INTERVAL '20' SECONDS)"),
     "every side of a streaming window join uses the same window"),
])
def test_chained_window_joins_that_do_not_run(spark, tmp_path, monkeypatch, change, message):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    for name in THREE:
        spark.createDataFrame([("k1", 1, at(1), 0)], "k string, x int, ts timestamp, i int") \
            .createOrReplaceTempView(f"j3e_{name}_rows")
        sqlwin.sql(spark, f"CREATE STREAM j3_{name} FROM TABLE j3e_{name}_rows ARRIVAL ORDER BY i "
                          "WATERMARK FOR ts AS ts - INTERVAL 1 SECOND")
    sql = change(THREE_JOIN.format(kind="", on="A"))
    assert sql != THREE_JOIN.format(kind="", on="A")
    with pytest.raises(SqlwinError) as err:
        sqlwin.sql(spark, sql)
    assert message in str(err.value)
    assert str(err.value).startswith("line ")
