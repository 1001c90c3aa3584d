"""A stream's rows joined with a table before windows are assigned (enrichment, as Flink joins a stream with a
lookup table): the join sits in the window TVF's input, ``TUMBLE(TABLE (SELECT ... FROM s JOIN dims ...), ...)``.
Live (an inner join, lateness 0; a LEFT JOIN, lateness, LATE ROWS TO; both on the custom path, where the native
one would have Spark apply the join's inferred IS NOT NULL below its watermark), fed a file per micro-batch,
against a hand-worked table (the watermark follows the stream's rows, those the join drops included); replayed
in the same micro-batches; and both against DuckDB running the batch query over the rows the stream kept. A join
in the SELECT that reads the TVF is refused with the form to write instead."""

from __future__ import annotations

import datetime as dt

import pytest
from streamtools import T0, rows_of, stream_env, ts

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from sqlwin.streaming.plannedreplay import PlannedReplay
from sqlwin.streaming.sessionreplay import PlannedSessionReplay
from tests.difftools import normalize, on_duckdb

pytestmark = pytest.mark.slow

DIMS = [("a", "alpha"), ("b", "beta"), ("b", "bravo")]  # b matches twice, z never
QUERY = ("SELECT window_start, window_end, name, SUM(v) AS s, COUNT(*) AS c "
         "FROM TUMBLE(TABLE (SELECT {s}.k, {s}.v, {s}.ts, d.name FROM {s} {join} st_dims d ON {s}.k = d.k), "
         "DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, name")
# (k, v, second) per file; the watermark is the largest ts so far minus 2 s, in force from the next file
FILES = [
    [("a", 1, 1), ("b", 2, 3), ("z", 7, 4)],  # W after: 2
    # z matches no row of the table: the inner join drops it, and it still moves the watermark (the stream's own)
    [("z", 5, 30)],  # W after: 28: window [0, 10) fires (and, lateness 5, expires: 10 <= 28 - 5)
    [("b", 4, 5), ("a", 9, 26)],  # b@5 is late for [0, 10) (its end 10 <= 28 - 5): dropped, once per dims match
    [("a", 1, 60)],  # W after: 58: [20, 30) and (LEFT JOIN) [30, 40) fire
]


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


# (window start, name, s, c); the inner join loses z, the LEFT JOIN keeps it with no name
FIRED = [(at(0), "alpha", 1, 1), (at(0), "beta", 2, 1), (at(0), "bravo", 2, 1), (at(20), "alpha", 9, 1)]
FIRED_LEFT = sorted([*FIRED, (at(0), None, 7, 1), (at(30), None, 5, 1)], key=lambda r: (r[0], r[1] or ""))
LATE = [("b", 4, at(5), "beta", at(0), at(10), at(28), "late", 3), ("b", 4, at(5), "bravo", at(0), at(10), at(28),
                                                                     "late", 3)]
# the custom path's micro-batches: f0 0, f1 1, its no-data micro-batch 2 fires [0, 10), f2 3, f3 4, no-data 5
CUSTOM_BATCHES = {at(0): 2, at(20): 5, at(30): 5}


def _replay_of_files(spark, monkeypatch, stream: str, planner: type) -> list[bool]:
    """A replay stream of FILES' rows in the same micro-batches (a file each); returns where ``planner``'s
    ``plannable`` records its answers."""
    data = [(k, v, at(sec), f, j) for f, rows in enumerate(FILES) for j, (k, v, sec) in enumerate(rows)]
    spark.createDataFrame(data, "k string, v int, ts timestamp, f int, j int").createOrReplaceTempView(f"{stream}_rows")
    sqlwin.sql(spark, f"CREATE STREAM {stream} FROM TABLE {stream}_rows ARRIVAL ORDER BY f, j MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    runs: list[bool] = []
    plannable = planner.plannable
    monkeypatch.setattr(planner, "plannable", lambda self, cut: runs.append(plannable(self, cut)) or runs[-1])
    return runs


def _panes(df) -> list[tuple]:
    return sorted(((r["window_start"], r["name"], r["s"], r["c"]) for r in df.collect()),
                  key=lambda r: (r[0], r[1] or ""))


@pytest.fixture()
def dims(spark):
    spark.createDataFrame(DIMS, "k string, name string").createOrReplaceTempView("st_dims")


def test_a_stream_joined_with_a_table_runs_live_and_replayed(spark, tmp_path, monkeypatch, dims, duck):
    with stream_env(spark, tmp_path, monkeypatch, "test_st_join") as (s, feeder, _):
        sqlwin.sql(spark, f"CREATE STREAMING TABLE st_inner AS {QUERY.format(s=s, join='JOIN')}")
        sqlwin.sql(spark, f"CREATE STREAMING TABLE st_custom AS {QUERY.format(s=s, join='LEFT JOIN')} "
                          "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO st_late")
        inner, custom = catalog.find_table("st_inner"), catalog.find_table("st_custom")
        # Spark would apply the join's inferred IS NOT NULL on k below its watermark (README): custom, both
        assert (inner.path, custom.path) == ("custom", "custom")
        feeder.feed([[{"k": k, "v": v, "ts": ts(sec)} for k, v, sec in rows] for rows in FILES], inner, custom)
        assert _panes(spark.table("st_inner")) == FIRED
        assert _panes(spark.table("st_custom")) == FIRED_LEFT
        assert {(r["window_start"], r["micro_batch"]) for r in spark.table("st_custom").collect()} == \
            set(CUSTOM_BATCHES.items())
        late_columns = ["k", "v", "ts", "name", "window_start", "window_end", "watermark", "reason", "micro_batch"]
        assert rows_of(spark.table("st_late"), late_columns) == LATE
        assert custom.status().late_rows_dropped == 2  # a (row, window) pair per match of the table

    # replayed in the same micro-batches: the live panes, then the end of the input fires [60, 70)
    runs = _replay_of_files(spark, monkeypatch, "st_replay", PlannedReplay)
    replayed = sqlwin.sql(spark, f"{QUERY.format(s='st_replay', join='LEFT JOIN')} ALLOWED LATENESS INTERVAL 5 "
                                 "SECONDS LATE ROWS TO st_replay_late")
    assert runs == [True]  # planned: the micro-batch label carried through the join's SELECT
    assert _panes(replayed) == [*FIRED_LEFT, (at(60), "alpha", 1, 1)]
    assert {(r["window_start"], r["micro_batch"]) for r in replayed.collect()} == {*CUSTOM_BATCHES.items(), (at(60), 6)}
    assert rows_of(spark.table("st_replay_late"), late_columns) == LATE

    # DuckDB, the batch query over the rows the stream kept (every row but b@5), gives the replay's final panes
    kept = [(k, v, at(sec)) for rows in FILES for k, v, sec in rows if (k, sec) != ("b", 5)]
    duck.execute("CREATE TABLE st_kept (k VARCHAR, v INTEGER, ts TIMESTAMP)")
    duck.executemany("INSERT INTO st_kept VALUES (?, ?, ?)", kept)
    duck.execute("CREATE TABLE st_dims (k VARCHAR, name VARCHAR)")
    duck.executemany("INSERT INTO st_dims VALUES (?, ?)", DIMS)
    final = [(r["window_start"], r["window_end"], r["name"], r["s"], r["c"]) for r in replayed.collect()]
    assert normalize(final) == on_duckdb(duck, QUERY.format(s="st_kept", join="LEFT JOIN"))


def test_a_table_joined_in_the_select_that_reads_the_window_names_the_form_that_runs(spark, tmp_path, monkeypatch,
                                                                                     dims):
    with stream_env(spark, tmp_path, monkeypatch, "test_st_refused") as (s, _, _):
        text = (f"CREATE STREAMING TABLE st_no AS SELECT t.window_start, d.name, SUM(t.v) AS s\n"
                f"FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) t JOIN st_dims d ON t.k = d.k\n"
                "GROUP BY t.window_start, t.window_end, d.name")
        with pytest.raises(SqlwinError, match=r"join it in the TVF's input: TUMBLE\(TABLE \(SELECT s\.\*") as info:
            sqlwin.sql(spark, text)
        start = text.splitlines()[1].index("st_dims") + 1
        assert (info.value.line, info.value.col) == (2, start)  # at the table joined
        assert not catalog.all_tables()


SESSIONS = ("SELECT window_start, window_end, name, SUM(v) AS s, COUNT(*) AS c "
            "FROM SESSION(TABLE (SELECT {s}.k, {s}.v, {s}.ts, d.name FROM {s} JOIN st_dims d ON {s}.k = d.k) "
            "PARTITION BY name, DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY window_start, window_end, name "
            "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {late}")
# hand-worked (gap 5 s, lateness 5 s): f0's sessions a@1 [1, 6) and b@3 twice (beta, bravo) [3, 8) fire in f1's
# no-data micro-batch 2 (z@30, which the join drops, moved the watermark to 28); f2's b@5 is late (its own span
# ends at 10 <= 28 - 5), listed once per match, and a@26 opens [26, 31), which fires after f3 (watermark 58)
SESSION_PANES = [(at(1), at(6), "alpha", 1, 1, 2), (at(3), at(8), "beta", 2, 1, 2), (at(3), at(8), "bravo", 2, 1, 2),
                 (at(26), at(31), "alpha", 9, 1, 5)]
SESSION_LATE = [("b", 4, at(5), "beta", at(5), at(10), at(28), "late", 3),
                ("b", 4, at(5), "bravo", at(5), at(10), at(28), "late", 3)]


def test_sessions_of_a_stream_joined_with_a_table_run_live_and_replayed(spark, tmp_path, monkeypatch, dims):
    """The sessions hold the joined rows; a late stream row is listed as the input's rows it gives (it failed
    in Spark before: the late rows were read from the stream's columns, which have no ``name``)."""
    columns = ["window_start", "window_end", "name", "s", "c", "micro_batch"]
    late_columns = ["k", "v", "ts", "name", "window_start", "window_end", "watermark", "reason", "micro_batch"]
    with stream_env(spark, tmp_path, monkeypatch, "test_st_sessions") as (s, feeder, _):
        sqlwin.sql(spark, f"CREATE STREAMING TABLE st_sessions AS {SESSIONS.format(s=s, late='st_sessions_late')}")
        table = catalog.find_table("st_sessions")
        feeder.feed([[{"k": k, "v": v, "ts": ts(sec)} for k, v, sec in rows] for rows in FILES], table)
        assert rows_of(spark.table("st_sessions"), columns) == SESSION_PANES
        assert rows_of(spark.table("st_sessions_late"), late_columns) == SESSION_LATE

    runs = _replay_of_files(spark, monkeypatch, "st_sreplay", PlannedSessionReplay)
    replayed = sqlwin.sql(spark, SESSIONS.format(s="st_sreplay", late="st_sreplay_late"))
    assert runs == [True]  # planned: the micro-batch number carried through the join's SELECT
    # the same panes, and at the end of the input the session a@60 [60, 65)
    assert rows_of(replayed, columns) == [*SESSION_PANES, (at(60), at(65), "alpha", 1, 1, 6)]
    assert rows_of(spark.table("st_sreplay_late"), late_columns) == SESSION_LATE
