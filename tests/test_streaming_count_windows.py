"""Count windows (Storm's forms) and SESSION with a dynamic gap in streaming tables and replay (GRAMMAR 1, 3, 4).

Expectations are hand-worked from the rules of ``sqlwin.streaming.countwindows``: a row is late when its ts is
at or behind the watermark in force W (dropped, NULL window bounds); the others wait until W reaches them,
then are numbered per partition in ts order; a window fires when its last row is numbered, in that micro-batch
(the one after the micro-batch that moved W). Streaming runs are fed file by file; replay gets the same rows
cut into the same micro-batches and must return the same panes, plus what the end of the table fires.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from tests.difftools import normalize
from tests.streamtools import Feeder, rows_of, ts

pytestmark = pytest.mark.slow

T = dt.datetime(2024, 1, 1)


def at(seconds: float) -> dt.datetime:
    return T + dt.timedelta(seconds=seconds)


def ms(seconds: float) -> dt.datetime:
    """A count window's end: its last row's ts + 1 ms."""
    return at(seconds) + dt.timedelta(milliseconds=1)


def row(k: str, v: int, seconds: float) -> dict:
    return {"k": k, "v": v, "ts": ts(seconds)}


# W = max ts - 2 s. sqlwin's micro-batches: f0 -> 0 (W -> 5), no-data 1 numbers a@1, a@5; f1 -> 2 (W -> 10),
# no-data 3 numbers b@7; f2 -> 4 (a@3 late: 3 <= 10, the W in force; a@30 waits; W -> 28), no-data 5 numbers a@12,
# which completes a's window 0 (rows 0-2); f3 -> 6 (b@20 late, W unmoved). In replay the end of the table (7)
# numbers a@30: a's window 1 and b's window 0 never complete, so they are never emitted (the batch rule).
FILES = [
    [row("a", 1, 1), row("a", 2, 5), row("b", 3, 7)],
    [row("a", 4, 12)],
    [row("a", 5, 3), row("a", 6, 30)],
    [row("b", 7, 20)],
]
TVF = "TUMBLE(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), ROWS 3)"
QUERY = ("SELECT window_start, window_end, window_index, k, SUM(v) AS s, COUNT(*) AS c FROM " + TVF +
         " GROUP BY window_start, window_end, window_index, k")
PANES = ["window_start", "window_end", "window_index", "k", "s", "c", "pane_index", "pane_timing", "is_final",
         "micro_batch"]
LATE = ["k", "v", "ts", "window_start", "window_end", "watermark", "reason", "micro_batch"]
LATE_ROWS = [("a", 5, at(3), None, None, at(10), "late", 4), ("b", 7, at(20), None, None, at(28), "late", 6)]
EXPECTED = {
    "default": [(at(1), ms(12), 0, "a", 7, 3, 0, "ON_TIME", True, 5)],
    # early panes while the windows fill (bounded by the rows numbered so far), then the ON_TIME pane
    "early": [(at(1), ms(5), 0, "a", 3, 2, 0, "EARLY", False, 1),
              (at(7), ms(7), 0, "b", 3, 1, 0, "EARLY", False, 3),
              (at(1), ms(12), 0, "a", 7, 3, 1, "EARLY", False, 5),
              (at(1), ms(12), 0, "a", 7, 3, 2, "ON_TIME", True, 5)],
    # AFTER COUNT 1 finishes at its first firing and closes the window: a@12 is then dropped as 'window closed'
    "count": [(at(1), ms(5), 0, "a", 3, 2, 0, "EARLY", True, 1), (at(7), ms(7), 0, "b", 3, 1, 0, "EARLY", True, 3)],
}
# (LATE ROWS TO goes first: after an EARLY sub-trigger, LATE would start a LATE sub-trigger)
EMITS = {"default": "", "early": " EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 1 ROWS",
         "count": " EMIT WITH TRIGGER AFTER COUNT 1"}
CLOSED = [("a", 4, at(12), at(1), ms(12), at(28), "window closed", 5)]


@pytest.fixture()
def env(spark, tmp_path, monkeypatch, request):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    name = f"s_{request.node.name.split('[')[0][5:]}"[:40]
    folder = tmp_path / "in"
    sqlwin.sql(spark, f"CREATE STREAM {name} (k STRING, v INT, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
    yield name, Feeder(folder)
    for table in catalog.all_tables():
        table.stop()
        catalog.remove_table(table.name)


def replay_stream(spark, name: str, files: list[list[dict]]) -> None:
    """``name``: a replay stream over ``files``, one micro-batch a file (arrival in file order)."""
    data = [(r["k"], r["v"], dt.datetime.fromisoformat(r["ts"]), i, j)
            for i, rows in enumerate(files) for j, r in enumerate(rows)]
    spark.createDataFrame(data, "k string, v int, ts timestamp, f int, j int").createOrReplaceTempView(f"{name}_t")
    sqlwin.sql(spark, f"CREATE STREAM {name} FROM TABLE (SELECT k, v, ts, f, j FROM {name}_t) ARRIVAL ORDER BY f, j "
                      "MICRO BATCH BY f WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")


def test_count_windows_stream_and_replay_give_the_same_panes(spark, env):
    s, feeder = env
    tables = {}
    for name, emit in EMITS.items():
        sqlwin.sql(spark, f"CREATE STREAMING TABLE cw_{name} AS {QUERY.format(src=s)} "
                          f"LATE ROWS TO cw_{name}_late{emit}")
        tables[name] = catalog.find_table(f"cw_{name}")
        assert tables[name].path == "custom" and "count windows" in tables[name].why
    feeder.feed(FILES, *tables.values())
    for name, expected in EXPECTED.items():
        assert rows_of(spark.table(f"cw_{name}"), PANES) == sorted(expected), name
        late = sorted(LATE_ROWS + (CLOSED if name == "count" else []))
        assert rows_of(spark.table(f"cw_{name}_late"), LATE) == late, name
    status = tables["default"].status()
    # still in state: b@7 (numbered, window 0 of b filling) and a@30 (waiting for the watermark)
    assert (status.rows_in, status.late_rows_dropped, status.open_windows, status.state_rows) == (7, 2, 1, 2)

    replay_stream(spark, "cw_replay", FILES)
    for name, emit in EMITS.items():
        replayed = sqlwin.sql(spark, f"{QUERY.format(src='cw_replay')} LATE ROWS TO cw_replay_late{emit}")
        # the end of the table (micro-batch 7) numbers a@30 into a window that never completes: nothing more
        assert rows_of(replayed, PANES) == rows_of(spark.table(f"cw_{name}"), PANES), name
        assert rows_of(spark.table("cw_replay_late"), LATE) == rows_of(spark.table(f"cw_{name}_late"), LATE), name


def test_count_window_state_survives_stop_and_restart(spark, env):
    """Stopped with a waiting row (a@12) and a filling window (b's) in state; a file arrives while stopped (it
    moves W: the no-data micro-batch it causes runs after the restart)."""
    s, feeder = env
    sql = f"CREATE STREAMING TABLE cw_resume AS {QUERY.format(src=s)} LATE ROWS TO cw_resume_late{EMITS['early']}"
    sqlwin.sql(spark, sql)
    table = catalog.find_table("cw_resume")
    feeder.feed(FILES[:2], table)
    assert table.status().state_rows == 4  # a@1, a@5 (window 0 of a), b@7 (window 0 of b), a@12 (waiting)
    sqlwin.sql(spark, "STOP STREAMING TABLE cw_resume")
    feeder.write(FILES[2])
    sqlwin.sql(spark, sql)
    table = catalog.find_table("cw_resume")
    table.process_all_available()
    feeder.feed(FILES[3:], table)
    assert rows_of(spark.table("cw_resume"), PANES) == sorted(EXPECTED["early"])
    assert rows_of(spark.table("cw_resume_late"), LATE) == LATE_ROWS
    assert (table.status().micro_batches, table.status().state_rows) == (7, 2)


def test_count_window_crash_inside_a_commit_resumes_exactly_once(spark, env, monkeypatch):
    """The micro-batch that completes a's window 0 (5) dies in sqlwin's commit: its sink, its stored rows and the
    bookkeeping of numbered rows are written, ``state/5.json`` is not (what SIGKILL leaves there). Started again,
    Spark re-runs that micro-batch and the table ends as the uninterrupted run."""
    from sqlwin.streaming.state import StateStore

    s, feeder = env
    sql = f"CREATE STREAMING TABLE cw_crash AS {QUERY.format(src=s)} LATE ROWS TO cw_crash_late{EMITS['early']}"
    commit = StateStore.commit

    def crashing_commit(self, batch, data):
        if batch == 5 and "cw_crash" in self.root:
            raise RuntimeError("crash inside the commit")
        commit(self, batch, data)

    monkeypatch.setattr(StateStore, "commit", crashing_commit)
    sqlwin.sql(spark, sql)
    table = catalog.find_table("cw_crash")
    feeder.feed(FILES[:2], table)
    feeder.write(FILES[2])
    with pytest.raises(SqlwinError, match=r"streaming table cw_crash failed: RuntimeError: crash inside the commit$"):
        table.process_all_available()
    state = Path(table.location) / "sqlwin"
    assert (state / "rows" / "5").is_dir() and not (state / "state" / "5.json").exists()
    assert (Path(table.location) / "data" / "micro_batch=5").is_dir()
    monkeypatch.setattr(StateStore, "commit", commit)
    sqlwin.sql(spark, sql)
    table = catalog.find_table("cw_crash")
    table.process_all_available()
    feeder.feed(FILES[3:], table)
    assert rows_of(spark.table("cw_crash"), PANES) == sorted(EXPECTED["early"])
    assert rows_of(spark.table("cw_crash_late"), LATE) == LATE_ROWS
    assert (table.status().micro_batches, table.status().state_rows) == (7, 2)


def test_every_count_form_streams_its_windows_as_they_complete(spark, env):
    """HOP ROWS m, ROWS n; HOP ROWS m, d; HOP d, ROWS n: the windows the batch query gives the rows that are not
    late, each fired in the micro-batch that numbered its last row (or passed its boundary)."""
    s, feeder = env
    forms = {
        "rr": "HOP(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), ROWS 1, ROWS 2)",  # Storm withWindow(Count 2)
        "rt": "HOP(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), ROWS 2, INTERVAL 10 SECONDS)",
        "tr": "HOP(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 10 SECONDS, ROWS 2)",
    }
    query = ("SELECT window_start, window_end, window_index, k, SUM(v) AS s, COUNT(*) AS c FROM {tvf} "
             "GROUP BY window_start, window_end, window_index, k")
    tables = []
    for name, tvf in forms.items():
        sqlwin.sql(spark, f"CREATE STREAMING TABLE cf_{name} AS {query.format(tvf=tvf.format(src=s))} "
                          f"LATE ROWS TO cf_{name}_late")
        tables.append(catalog.find_table(f"cf_{name}"))
    feeder.feed(FILES, *tables)
    columns = [*PANES[:6], "micro_batch"]
    assert rows_of(spark.table("cf_rr"), columns) == [  # rows a 0-2 numbered in 1 and 5, b 0 in 3
        (at(1), ms(1), 1, "a", 1, 1, 1), (at(1), ms(5), 2, "a", 3, 2, 1), (at(5), ms(12), 3, "a", 6, 2, 5),
        (at(7), ms(7), 1, "b", 3, 1, 3)]
    assert rows_of(spark.table("cf_rt"), columns) == [  # window 1 of a closes at its row 1 (a@5): [5.001 - 10, 5.001)
        (ms(5) - dt.timedelta(seconds=10), ms(5), 1, "a", 3, 2, 1)]
    # boundaries 10 (a@1, a@5; b@7) complete once W >= 10 - 1 us (micro-batch 3); boundary 20 (a@12) at W = 28
    assert rows_of(spark.table("cf_tr"), columns) == [
        (at(1), at(10), 0, "a", 3, 2, 3), (at(5), at(20), 1, "a", 6, 2, 5), (at(7), at(10), 0, "b", 3, 1, 3)]
    for name in forms:
        assert rows_of(spark.table(f"cf_{name}_late"), LATE) == LATE_ROWS, name


MEANINGLESS = [
    ("ALLOWED LATENESS INTERVAL 1 SECOND", "ALLOWED LATENESS must be 0"),
    ("EMIT WITH TRIGGER AFTER WATERMARK LATE EVERY 1 ROWS", "a LATE trigger never fires"),
]


def test_meaningless_count_window_queries_fail_before_start(spark, env):
    s, _ = env
    for clause, message in MEANINGLESS:
        with pytest.raises(SqlwinError, match=message) as err:
            sqlwin.sql(spark, f"CREATE STREAMING TABLE bad AS {QUERY.format(src=s)} {clause}")
        assert err.value.line == 1 and err.value.col > len(QUERY)  # points at the clause
    hop = "FROM HOP(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), {args}) GROUP BY window_start, window_end, k"
    cases = [
        (f"SELECT window_start, window_end, SUM(v) FROM {TVF.format(src=s)} GROUP BY window_start, window_end",
         "exactly the PARTITION BY columns"),
        ("SELECT window_start, window_end, k, SUM(v) " + hop.format(s=s, args="ROWS 2, INTERVAL 5 SECONDS") +
         " EMIT WITH TRIGGER EVERY 2 ROWS", r"HOP\(\.\.\., ROWS m, d\) are known only once complete"),
        ("SELECT window_start, window_end, k, SUM(v) " + hop.format(s=s, args="INTERVAL 5 SECONDS, ROWS 2") +
         " EMIT CHANGES", r"HOP\(\.\.\., d, ROWS n\) are known only once complete"),
        (f"SELECT window_start, window_end, k, SUM(v) FROM {TVF.format(src=s)} WHERE window_end > TIMESTAMP "
         "'2024-01-01' GROUP BY window_start, window_end, k", "filter them in HAVING"),
        (f"SELECT * FROM {TVF.format(src=s)}", "count windows feed an aggregation"),
    ]
    for sql, message in cases:
        with pytest.raises(SqlwinError, match=message):
            sqlwin.sql(spark, f"CREATE STREAMING TABLE bad AS {sql}")
    assert catalog.all_tables() == []


# SESSION with a dynamic gap: 8 s for v > 10, else 5 s; lateness 10 s. f0 -> 0: a [1, 7), b [3, 11); f1 -> 1
# (W -> 10): a@12 opens [12, 20); no-data 2 fires a [1, 7). f2 -> 3: a@7 ([7, 12), not past 12 + 10) touches
# both a sessions: they merge into the new window [1, 20). f3 -> 4 (W -> 28); no-data 5 fires a [1, 20) (not
# final: it expires at 20 + 10 > 28) and b [3, 11) (final: 11 + 10 <= 28). f4 -> 6: a@5's own [5, 10) is past
# 10 + 10: dropped late. In replay the end of the table (7) fires [30, 38).
GAP_FILES = [
    [row("a", 1, 1), row("a", 2, 2), row("b", 100, 3)],
    [row("a", 12, 12)],
    [row("a", 7, 7)],
    [row("a", 30, 30)],
    [row("a", 5, 5)],
]
GAP_QUERY = """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
    FROM SESSION(TABLE {src} PARTITION BY k, DESCRIPTOR(ts),
                 CASE WHEN v > 10 THEN INTERVAL 8 SECONDS ELSE INTERVAL 5 SECONDS END)
    GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {late}"""


def test_dynamic_gap_sessions_merge_across_micro_batches(spark, env):
    s, feeder = env
    sqlwin.sql(spark, f"CREATE STREAMING TABLE dg_out AS {GAP_QUERY.format(src=s, late='dg_late')}")
    table = catalog.find_table("dg_out")
    feeder.feed(GAP_FILES, table)
    columns = ["window_start", "window_end", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
    streamed = rows_of(spark.table("dg_out"), columns)
    assert streamed == [(at(1), at(7), "a", 3, 2, 0, "ON_TIME", False, 2),
                        (at(1), at(20), "a", 22, 4, 0, "ON_TIME", False, 5),
                        (at(3), at(11), "b", 100, 1, 0, "ON_TIME", True, 5)]
    late_columns = ["k", "v", "window_start", "window_end", "watermark", "reason", "micro_batch"]
    late = [("a", 5, at(5), at(10), at(28), "late", 6)]
    assert rows_of(spark.table("dg_late"), late_columns) == late
    replay_stream(spark, "dg_replay", GAP_FILES)
    replayed = rows_of(sqlwin.sql(spark, GAP_QUERY.format(src="dg_replay", late="dg_rl")), columns)
    assert replayed == sorted([*streamed, (at(30), at(38), "a", 30, 1, 0, "ON_TIME", True, 7)])
    assert rows_of(spark.table("dg_rl"), late_columns) == late
    # the windows that did not merge away are the batch query's over the rows that were not late
    windows = [(at(1), at(20), "a", 22, 4), (at(3), at(11), "b", 100, 1), (at(30), at(38), "a", 30, 1)]
    assert sorted(r[:5] for r in replayed if r[:2] != (at(1), at(7))) == windows
    spark.sql("SELECT k, v, ts FROM dg_replay_t WHERE NOT (k = 'a' AND v = 5)").createOrReplaceTempView("dg_kept")
    batch = sqlwin.sql(spark, GAP_QUERY.format(src="dg_kept", late="unused").split("ALLOWED")[0])
    assert normalize(tuple(r) for r in batch.collect()) == normalize(windows)


# -- random arrivals: replay of every count form == the batch query over the rows that were not late -----------
FORMS = ["TUMBLE(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), ROWS 2)",
         "HOP(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), ROWS 2, ROWS 3)",
         "HOP(TABLE {src}, DESCRIPTOR(ts), ROWS 1, INTERVAL 4 SECONDS)",
         "HOP(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 3 SECONDS, ROWS 2)"]
arrivals = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 12), st.sampled_from("ab"), st.integers(0, 3)),
                    min_size=1, max_size=14)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=arrivals, form=st.sampled_from(FORMS), delay=st.integers(0, 4))
def test_count_window_replay_equals_batch_over_rows_not_late(spark, rows, form, delay):
    """Micro-batch f of (f, second, k, v); ties, rows behind the watermark, partitions that never fill."""
    data = [(at(sec), k, v, f, i) for i, (f, sec, k, v) in enumerate(sorted(rows, key=lambda r: r[0]))]
    spark.createDataFrame(data, "ts timestamp, k string, v int, f int, i int").createOrReplaceTempView("hy_t")
    sqlwin.sql(spark, f"CREATE STREAM hy_s FROM TABLE hy_t ARRIVAL ORDER BY f, i MICRO BATCH BY f "
                      f"WATERMARK FOR ts AS ts - INTERVAL {delay} SECONDS")
    partition = "PARTITION BY" in form
    keys = ", k" if partition else ""
    query = (f"SELECT window_start, window_end, window_index{keys}, SUM(v) AS s, COUNT(*) AS c FROM {form} "
             f"GROUP BY window_start, window_end, window_index{keys}")
    panes = sqlwin.sql(spark, query.format(src="hy_s") + " LATE ROWS TO hy_late").collect()
    assert {(p.pane_timing, p.is_final, p.pane_index) for p in panes} <= {("ON_TIME", True, 0)}
    spark.sql("SELECT * FROM hy_t WHERE i NOT IN (SELECT i FROM hy_late)").createOrReplaceTempView("hy_kept")
    # a late row is one at or behind the watermark in force: max ts - delay over the earlier micro-batches
    late, mark = set(), None
    for f in sorted({r[3] for r in data}):
        late |= {r[4] for r in data if r[3] == f and mark is not None and r[0] <= mark}
        top = max(r[0] for r in data if r[3] == f) - dt.timedelta(seconds=delay)
        mark = top if mark is None else max(mark, top)
    assert {r.i for r in spark.table("hy_late").collect()} == late
    expected = normalize(tuple(r) for r in sqlwin.sql(spark, query.format(src="hy_kept")).collect())
    assert normalize(tuple(p)[:-4] for p in panes) == expected


# SESSION with MAX_DURATION (gap 7 s, max 10 s, lateness 10 s, W = max ts - 5 s). f0 -> 0: a@10, 16, 19, 22 form
# one natural session, cut at a@22 (22 >= 10 + 10): a [10, 20) and a [22, 29); b [11, 18). W -> 17. f1 -> 1: a@7
# (its own [7, 14) is not past 17 - 10) starts the natural session earlier, which moves its cut: a [7, 17) holds
# a@7, 10, 16 and a [19, 29) a@19, 22 (a split of [10, 20) and a merge with [22, 29)); W = 17 >= 17 fires
# [7, 17) at once. f2 -> 2 (W -> 35); no-data 3 fires a [19, 29) (expires at 39: not final) and b [11, 18)
# (final). f3 -> 4: a@5's own [5, 12) is past 35 - 10: dropped late. Replay's end of the table (5) fires a [40, 47).
MAX_FILES = [
    [row("a", 1, 10), row("a", 2, 16), row("a", 3, 19), row("a", 4, 22), row("b", 100, 11)],
    [row("a", 5, 7)],
    [row("a", 6, 40)],
    [row("a", 9, 5)],
]
MAX_QUERY = """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
    FROM SESSION(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 7 SECONDS, INTERVAL 10 SECONDS)
    GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {late}"""


@pytest.fixture()
def slow_stream(spark, tmp_path, monkeypatch):
    """A stream whose watermark trails by 5 s."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "in"
    sqlwin.sql(spark, f"CREATE STREAM md_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 5 "
                      f"SECONDS) USING json OPTIONS (path '{folder}')")
    yield "md_s", Feeder(folder)
    for table in catalog.all_tables():
        table.stop()
        catalog.remove_table(table.name)


def test_max_duration_sessions_are_cut_again_when_rows_arrive(spark, slow_stream):
    s, feeder = slow_stream
    sqlwin.sql(spark, f"CREATE STREAMING TABLE md_out AS {MAX_QUERY.format(src=s, late='md_late')}")
    table = catalog.find_table("md_out")
    feeder.feed(MAX_FILES, table)
    columns = ["window_start", "window_end", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
    streamed = rows_of(spark.table("md_out"), columns)
    assert streamed == [(at(7), at(17), "a", 8, 3, 0, "ON_TIME", False, 1),
                        (at(11), at(18), "b", 100, 1, 0, "ON_TIME", True, 3),
                        (at(19), at(29), "a", 7, 2, 0, "ON_TIME", False, 3)]
    late_columns = ["k", "v", "window_start", "window_end", "watermark", "reason", "micro_batch"]
    late = [("a", 9, at(5), at(12), at(35), "late", 4)]
    assert rows_of(spark.table("md_late"), late_columns) == late
    # open: a [19, 29) (expires at 39) and a [40, 47). State: the pane rows of micro-batches 0 (5 rows, read by
    # [19, 29)) and 2 (a@40), and the rows kept to cut a's natural sessions again: 0, 1 and 2 (7 rows)
    assert (table.status().open_windows, table.status().state_rows) == (2, 13)

    data = [(r["k"], r["v"], dt.datetime.fromisoformat(r["ts"]), i, j)
            for i, rows in enumerate(MAX_FILES) for j, r in enumerate(rows)]
    spark.createDataFrame(data, "k string, v int, ts timestamp, f int, j int").createOrReplaceTempView("md_t")
    sqlwin.sql(spark, "CREATE STREAM md_replay FROM TABLE md_t ARRIVAL ORDER BY f, j MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS")
    replayed = rows_of(sqlwin.sql(spark, MAX_QUERY.format(src="md_replay", late="md_rl")), columns)
    assert replayed == sorted([*streamed, (at(40), at(47), "a", 6, 1, 0, "ON_TIME", True, 5)])
    assert rows_of(spark.table("md_rl"), late_columns) == late
    # the last pane of each window that was not cut away is the batch query's window over the rows not late
    spark.sql("SELECT k, v, ts FROM md_t WHERE v <> 9").createOrReplaceTempView("md_kept")
    batch = sqlwin.sql(spark, MAX_QUERY.format(src="md_kept", late="unused").split("ALLOWED")[0])
    assert normalize(tuple(r) for r in batch.collect()) == normalize(r[:5] for r in replayed)


sessions_in = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.sampled_from("ab"), st.integers(1, 4)),
                       min_size=1, max_size=16)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=sessions_in, gap=st.integers(1, 6), max_duration=st.integers(2, 12))
def test_max_duration_replay_equals_batch(spark, rows, gap, max_duration):
    """Rows in any order over micro-batches, with a watermark so far behind that nothing fires or is late before
    the end of the table: every cut made and undone on the way must end in the batch query's sessions. The
    dynamic gap (v seconds, or the static ``gap`` for v = 4) exercises rows whose spans differ."""
    data = [(at(sec), k, v, f, i) for i, (f, sec, k, v) in enumerate(sorted(rows, key=lambda r: r[0]))]
    spark.createDataFrame(data, "ts timestamp, k string, v int, f int, i int").createOrReplaceTempView("hm_t")
    sqlwin.sql(spark, "CREATE STREAM hm_s FROM TABLE hm_t ARRIVAL ORDER BY f, i MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 1 DAY")
    query = (f"SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM SESSION(TABLE {{src}} PARTITION BY "
             f"k, DESCRIPTOR(ts), CASE WHEN v < 4 THEN v * INTERVAL 1 SECOND ELSE INTERVAL {gap} SECONDS END, "
             f"INTERVAL {max_duration} SECONDS) GROUP BY window_start, window_end, k")
    panes = sqlwin.sql(spark, query.format(src="hm_s")).collect()
    assert {(p.pane_timing, p.is_final, p.pane_index) for p in panes} == {("ON_TIME", True, 0)}
    expected = normalize(tuple(r) for r in sqlwin.sql(spark, query.format(src="hm_t")).collect())
    assert normalize(tuple(p)[:5] for p in panes) == expected
