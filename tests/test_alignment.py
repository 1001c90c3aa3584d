"""Watermark alignment (GRAMMAR 3, ``WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT d``; issue 20): a stream of a group
whose watermark is more than the drift ahead of the group's lowest reads no further files until the others catch up.
The decision (pure, ``sqlwin.core.alignment``) against hand-worked cases; a live window over a fast backlog and a
slow stream against a hand-worked admission schedule and result, stopped and restarted midway, equal to the run
without alignment and to the replay of the same rows; the clause's errors at their positions. (``bench.alignment``
runs a window join of two aligned streams, the staged operator's path, and checks it against DuckDB.)"""

from __future__ import annotations

import datetime as dt

import pytest
from streamtools import T0, Feeder, ts

import sqlwin
from sqlwin.core.alignment import StreamMark, paused
from sqlwin.core.panes import MIN_TIME
from sqlwin.errors import SqlwinError
from sqlwin.streaming import alignment, catalog, storage

S = 1_000_000


def test_paused_streams_hand_worked() -> None:
    drift = 10 * S
    # the lowest stream never waits; one more than the drift ahead does, one exactly at the drift does not
    marks = {"a": StreamMark(5 * S), "b": StreamMark(15 * S), "c": StreamMark(16 * S)}
    assert paused(marks, drift) == {"c"}
    # a stream with no watermark yet holds the group at the beginning of time: every stream with one waits
    assert paused({"a": StreamMark(None), "b": StreamMark(MIN_TIME + 1)}, drift) == set()
    assert paused({"a": StreamMark(None), "b": StreamMark(0)}, drift) == {"b"}
    # an idle stream does not hold the group back (and is not held itself while it has no rows to read)
    assert paused({"a": StreamMark(None, idle=True), "b": StreamMark(50 * S)}, drift) == set()
    assert paused({"a": StreamMark(1 * S, idle=True), "b": StreamMark(50 * S), "c": StreamMark(30 * S)},
                  drift) == {"b"}
    assert paused({"a": StreamMark(1 * S, idle=True)}, drift) == set()


def test_file_log_keeps_positions_and_skips_torn_parts(tmp_path) -> None:
    """Offsets are positions in the log: files found later append (oldest first, then by name), hidden and
    underscore names are not data, and a torn part is logged again."""
    log = alignment.FileLog(str(tmp_path / "log"))
    assert log.extend([("b.json", 20), ("a.json", 20), ("_x", 1), (".c.tmp", 1)]) == ["a.json", "b.json"]
    assert log.extend([("a.json", 20), ("b.json", 20), ("z.json", 10)]) == ["a.json", "b.json", "z.json"]
    storage.write_once(str(tmp_path / "log" / "files-2.json"), b'{"names": ["z.js')  # a crash while logging
    log = alignment.FileLog(str(tmp_path / "log"))  # the restarted source's
    assert log.known() == ["a.json", "b.json"]
    assert log.extend([("z.json", 10), ("y.json", 30)]) == ["a.json", "b.json", "z.json", "y.json"]


# both streams in one window (a query over several streams: its watermark is the smaller of theirs)
BOTH = """SELECT window_start AS ws, COUNT_IF(src = 'f') AS fast_rows, COUNT_IF(src = 's') AS slow_rows
FROM TUMBLE(TABLE(SELECT ts, 'f' AS src FROM {fast} UNION ALL SELECT ts, 's' AS src FROM {slow}),
            DESCRIPTOR(ts), INTERVAL 10 SECONDS)
GROUP BY window_start, window_end"""

# the fast stream's backlog (seconds of its rows per file; the last one a flush far ahead) and the slow stream's
# files, which arrive one at a time; both watermarks are their largest ts (no delay), drift 10 s
FAST = [[1, 5, 12, 19], [21, 28, 33, 39], [41, 55, 59], [120]]
SLOW = [[2, 8, 11, 18], [24, 29], [35, 38], [49], [100]]
# hand-worked: fast files admitted after the backlog is found, then after each slow file. Fast reads F0 and waits
# while slow has no watermark yet; 19 <= 18 + 10 reads F1 (39); 39 <= 29 + 10 (exactly the drift) reads F2 (59);
# 59 > 38 + 10 waits (across the restart); 59 <= 49 + 10 reads F3 (120); then waits for good (120 > 100 + 10,
# slow's micro-batch moved its watermark, not enough)
ADMITTED = [1, 2, 3, 3, 4, 4]
# the windows the query's watermark (the smaller: slow's 100) passes: (window start s, fast rows, slow rows);
# [100, 110) and [120, 130) are still open
RESULT = [(0, 2, 2), (10, 2, 2), (20, 2, 2), (30, 2, 2), (40, 1, 1), (50, 2, 0)]


def _create(spark, name: str, folder, clause: str) -> None:
    sqlwin.sql(spark, f"CREATE STREAM {name} (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json OPTIONS "
                      f"(path '{folder}') {clause}")


def _result(spark, table: str) -> list[tuple]:
    rows = spark.table(table).select("ws", "fast_rows", "slow_rows", "pane_timing").collect()
    return sorted((int((r[0] - T0).total_seconds()), r[1], r[2], r[3]) for r in rows)


def test_fast_stream_waits_for_the_slow_one(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    group = "WITH WATERMARK ALIGNMENT GROUP 'flights' MAX DRIFT INTERVAL '10' SECONDS"
    fast, slow = Feeder(tmp_path / "fast"), Feeder(tmp_path / "slow")
    _create(spark, "al_fast", tmp_path / "fast", group)
    _create(spark, "al_slow", tmp_path / "slow", group)
    for rows in FAST:  # the backlog is there before the table starts
        fast.write([{"ts": ts(s)} for s in rows])

    def start():
        sqlwin.sql(spark, "CREATE STREAMING TABLE al_join AS " + BOTH.format(fast="al_fast", slow="al_slow"))
        return catalog.find_table("al_join")

    table = start()
    state = storage.join(table.location, "alignment")
    admitted, watermarks = [], []

    def observe() -> None:
        table.process_all_available()
        log = alignment.FileLog(storage.join(state, "files", "al_fast")).known()
        assert log == [f"f{i:05d}.json" for i in range(len(FAST))]  # every file found, not every file read
        status = table.status()
        slow_rows = sum(len(f) for f in SLOW[:slow.count])
        admitted.append(next(n for n in range(len(FAST) + 1) if sum(len(f) for f in FAST[:n]) + slow_rows
                             == status.rows_in))
        watermarks.append(alignment.Admission(state).latest()["watermarks"])

    try:
        observe()
        for i, rows in enumerate(SLOW):
            slow.write([{"ts": ts(s)} for s in rows])
            if i == 2:  # stopped with fast files waiting in the folder: the log and the decision carry over
                table.stop()
                catalog.remove_table("al_join")
                table = start()
            observe()
        assert admitted == ADMITTED
        secs = [{k: None if v is None else v // S - int((T0 - dt.datetime(1970, 1, 1)).total_seconds())
                 for k, v in w.items()} for w in watermarks]
        assert secs[0] == {"al_fast": 19, "al_slow": None} and secs[-1] == {"al_fast": 120, "al_slow": 100}
        assert alignment.Admission(state).paused() == {"al_fast"}
        aligned = _result(spark, "al_join")
        assert aligned == [(s, f, n, "ON_TIME") for s, f, n in RESULT]
    finally:
        table.stop()
        catalog.remove_table("al_join")

    # without alignment (every file there from the start): the same answer, and every fast file read at once
    _create(spark, "un_fast", tmp_path / "fast", "")
    _create(spark, "un_slow", tmp_path / "slow", "")
    sqlwin.sql(spark, "CREATE STREAMING TABLE un_join AS " + BOTH.format(fast="un_fast", slow="un_slow"))
    plain = catalog.find_table("un_join")
    try:
        plain.process_all_available()
        assert _result(spark, "un_join") == aligned
    finally:
        plain.stop()
        catalog.remove_table("un_join")

    # the same rows replayed (one replay stream of both tables' rows, one micro-batch): the same windows
    data = [(T0 + dt.timedelta(seconds=s), src) for src, files in (("f", FAST), ("s", SLOW)) for rows in files
            for s in rows]
    spark.createDataFrame(data, "ts timestamp, src string").createOrReplaceTempView("al_rows")
    sqlwin.sql(spark, "CREATE STREAM re_both FROM TABLE al_rows ARRIVAL ORDER BY ts MICRO BATCH BY 0 "
                      "WATERMARK FOR ts AS ts")
    replayed = BOTH.replace("TABLE(SELECT ts, 'f' AS src FROM {fast} UNION ALL SELECT ts, 's' AS src FROM {slow})",
                            "TABLE re_both")
    sqlwin.sql(spark, replayed).createOrReplaceTempView("re_join")
    # and the two windows the end of the input closes, which the live run keeps open
    assert _result(spark, "re_join") == [*aligned, (100, 0, 1, "ON_TIME"), (120, 1, 0, "ON_TIME")]

@pytest.mark.parametrize(("sql", "message", "where"), [
    ("CREATE STREAM e1 (ts TIMESTAMP) USING json OPTIONS (path '{p}') "
     "WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT INTERVAL '1' MINUTE",
     "the stream needs a WATERMARK FOR column", "WITH WATERMARK"),
    ("CREATE STREAM e2 (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json OPTIONS (path '{p}') "
     "WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT INTERVAL '0' SECONDS", "MAX DRIFT must be a positive interval",
     "INTERVAL '0'"),
    ("CREATE STREAM e3 (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json OPTIONS (path '{p}') "
     "WITH WATERMARK ALIGNMENT GROUP g MAX DRIFT INTERVAL '1' MINUTE", "the alignment group's name as a string",
     "g MAX"),
    ("CREATE STREAM e4 (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json OPTIONS (path '{p}') "
     "WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT INTERVAL '1' MINUTE WITH WATERMARK ALIGNMENT GROUP 'h' "
     "MAX DRIFT INTERVAL '1' MINUTE", "each at most once", "WITH WATERMARK ALIGNMENT GROUP 'h'"),
    ("CREATE STREAM e5 (ts TIMESTAMP, v BIGINT, WATERMARK FOR ts AS ts) USING rate "
     "WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT INTERVAL '1' MINUTE", "the stream must read files",
     "WITH WATERMARK"),
    ("CREATE STREAM e6 (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json OPTIONS (path '{p}') "
     "WITH WATERMARK ALIGNMENT GROUP 'shared' MAX DRIFT INTERVAL '5' MINUTES",
     "alignment group 'shared' has MAX DRIFT 60 s (stream e_first)", "INTERVAL '5'"),
])
def test_alignment_errors_at_their_position(spark, tmp_path, sql, message, where) -> None:
    sqlwin.sql(spark, f"CREATE STREAM e_first (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json OPTIONS "
                      f"(path '{tmp_path / 'first'}') WITH WATERMARK ALIGNMENT GROUP 'shared' MAX DRIFT INTERVAL "
                      "'1' MINUTE")
    text = sql.format(p=tmp_path / "in")
    with pytest.raises(SqlwinError) as err:
        sqlwin.sql(spark, text)
    assert message in str(err.value)
    assert (err.value.line, err.value.col) == (1, text.index(where) + 1), str(err.value)
    for name in ("e_first", "e1", "e2", "e3", "e4", "e5", "e6"):
        catalog.drop_stream(spark, name)
        spark.catalog.dropTempView(name)
