"""Streaming statements fail as the batch query does, before anything starts (GRAMMAR 6 for streaming).

A corpus of wrong streaming statements (tests/fixtures/wrong_streaming_queries.yaml), each run as a replay, as
CREATE STREAMING TABLE and as INSERT INTO over a live stream, must give a SqlwinError with the corpus's message
and position in the text as written, the very message and position the batch query gets, naming only the
user's tables and columns, and leave no streaming table running and no folder behind. A failure that can only
happen while running stops the table with status ``failed`` and one line in the user's terms; a restart after
the cause is fixed resumes exactly once. Generated and mutated streaming statements over known stream schemas
are analysed (never started) and either pass or fail that way, within a time bound.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from tests.streamtools import Feeder, rows_of, ts

CORPUS = yaml.safe_load((Path(__file__).parent / "fixtures" / "wrong_streaming_queries.yaml").read_text())
IDS = [f"{i:02d}-{re.sub(r'[^a-z]+', '_', c['message'].lower()).strip('_')[:28]}" for i, c in enumerate(CORPUS)]
INTERNAL = re.compile(r"(?<![\w`])`?__\w|\b(?:pane_index|is_final|pane_timing)\b")  # generated names
SCHEMA = "k STRING, v INT, price DOUBLE, ts TIMESTAMP"
# names of one length, so that a mistake has the same position over the batch table and either stream
BATCH, REPLAY, LIVE = "bt", "rs", "ls"
T = dt.datetime(2024, 1, 1)


@pytest.fixture(scope="module")
def streams(spark, tmp_path_factory):
    """The batch table, a replay stream over it and a live stream (JSON files), all with ``SCHEMA``; streaming
    tables keep their folders under ``root``."""
    base = tmp_path_factory.mktemp("stream_errors")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLWIN_STREAMING_DIR", str(base / "root"))
        rows = [("a", 1, 1.0, T), ("b", 2, 2.5, T + dt.timedelta(seconds=12)), ("a", 3, 4.0, T)]
        spark.createDataFrame(rows, SCHEMA.lower()).createOrReplaceTempView(BATCH)
        sqlwin.sql(spark, f"CREATE STREAM {REPLAY} FROM TABLE {BATCH} ARRIVAL ORDER BY ts "
                          "WATERMARK FOR ts AS ts - INTERVAL 1 SECOND")
        (base / "in").mkdir()
        sqlwin.sql(spark, f"CREATE STREAM {LIVE} ({SCHEMA}, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) "
                          f"USING json OPTIONS (path '{base / 'in'}')")
        (base / "root" / "ins").mkdir(parents=True)  # a folder a previous run left: INSERT INTO continues it
        yield SimpleNamespace(spark=spark, root=base / "root")
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)


def attempt(spark, text: str) -> SqlwinError | None:
    try:
        sqlwin.sql(spark, text)
    except SqlwinError as err:
        return err
    return None


def assert_user_terms(err: SqlwinError, text: str) -> None:
    """A position inside the statement, and a one-line message that names nothing sqlwin generated."""
    message = err.message
    # a pane column or a double-underscore name the user wrote is theirs (the mutations insert them)
    assert not [m for m in INTERNAL.finditer(message) if m.group().lstrip("`") not in text], message
    assert "SQLSTATE" not in message and not re.search(r"line \d+ pos \d+", message), message
    assert "\n" not in message and "Traceback" not in message, message
    lines = text.split("\n")
    assert err.line is not None and err.col is not None, str(err)
    assert 1 <= err.line <= len(lines) and 1 <= err.col <= len(lines[err.line - 1]) + 1, (str(err), text)


def as_batch(message: str, stream: str) -> str:
    return re.sub(rf"\b{stream}\b", BATCH, message)


def nothing_started(streams, name: str) -> None:
    assert catalog.find_table(name) is None
    assert not any(q.name == f"sqlwin_{name}" for q in streams.spark.streams.active)


# -- the corpus -------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CORPUS, ids=IDS)
def test_wrong_streaming_statement(streams, case) -> None:
    """Replay, CREATE STREAMING TABLE and INSERT INTO: the corpus's message and position, which are the batch
    query's, before anything starts."""
    spark, i = streams.spark, CORPUS.index(case)
    line, col = case["at"]
    replay_text = case["sql"].format(s=REPLAY)
    replayed = attempt(spark, replay_text)
    assert replayed is not None, replay_text
    assert case["message"] in replayed.message and [replayed.line, replayed.col] == [line, col], str(replayed)
    assert_user_terms(replayed, replay_text)
    if case.get("batch", True):
        batch = attempt(spark, case["sql"].format(s=BATCH))
        assert batch is not None
        assert (batch.line, batch.col, batch.message) == (line, col, as_batch(replayed.message, REPLAY))

    query = case["sql"].format(s=LIVE)
    name = f"wrong_{i:02d}"
    for text in (f"CREATE STREAMING TABLE {name} AS\n{query}", f"INSERT INTO ins\n{query}"):
        err = attempt(spark, text)
        assert err is not None, text
        assert (err.line, err.col) == (line + 1, col), str(err)
        assert as_batch(err.message, LIVE) == as_batch(replayed.message, REPLAY)
        assert_user_terms(err, text)
    nothing_started(streams, name)
    nothing_started(streams, "ins")
    assert not (streams.root / name).exists()  # no checkpoint folder
    assert list((streams.root / "ins").iterdir()) == []  # the continued table's folder untouched


def test_wrong_streaming_statements_through_the_cli(streams) -> None:
    """The CLI prints a streaming statement's error in file coordinates with a caret, as a batch one's."""
    from rich.console import Console

    from sqlwin.cli import Failed, Runner, Source

    case = CORPUS[1]  # a column missing from GROUP BY
    for text in (case["sql"].format(s=REPLAY), f"CREATE STREAMING TABLE wrong_cli AS\n{case['sql'].format(s=LIVE)}"):
        out, err = io.StringIO(), io.StringIO()
        runner = Runner(streams.spark, Console(file=out, width=10_000), Console(file=err, width=10_000),
                        progress=False)
        with pytest.raises(Failed):
            runner.run_source(Source("wrong.sql", "-- header\n" + text + ";\n", "."))
        shown = err.getvalue()
        line, col = case["at"]
        line += 1 + text.startswith("CREATE")
        assert f"error: line {line}, col {col}: [MISSING_AGGREGATION]" in shown, shown
        assert f"--> wrong.sql:{line}:{col}" in shown and "^" in shown, shown
        assert not INTERNAL.search(shown), shown
    nothing_started(streams, "wrong_cli")


def test_window_time_of_a_window_aggregation_replays_as_the_batch_query(streams) -> None:
    """Selecting window_time from a window aggregation is the batch query's (it was refused by the custom path
    while the batch query and the native path accepted it)."""
    query = ("SELECT window_start, window_time, COUNT(*) AS n FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), "
             "INTERVAL 10 SECONDS) GROUP BY window_start, window_end HAVING window_time > window_start")
    replayed = rows_of(sqlwin.sql(streams.spark, query.format(s=REPLAY)), ["window_start", "window_time", "n"])
    assert replayed == rows_of(sqlwin.sql(streams.spark, query.format(s=BATCH)))
    assert len(replayed) == 2


# -- a replay stream's clauses, a replay's late rows, a stream read without a window ------------------------
WINDOW_NEEDED = ("a query over a stream needs a window TVF (TUMBLE, HOP, CUMULATE, SESSION), as in FROM TUMBLE(TABLE "
                 "{s}, DESCRIPTOR(ts), INTERVAL '1' MINUTE) ... GROUP BY window_start, window_end, or an aggregation "
                 "with EMIT WITH TRIGGER (the global window)")
WRONG_REPLAY_STREAMS = [  # over bt (k STRING, v INT, price DOUBLE, ts TIMESTAMP): (statement, (line, col), message)
    (f"CREATE STREAM wr FROM TABLE {BATCH} ARRIVAL ORDER BY tss WATERMARK FOR ts AS ts", (1, 49),
     "ARRIVAL ORDER BY: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name "
     "`tss` cannot be resolved. Did you mean one of the following? [`ts`"),
    (f"CREATE STREAM wr FROM TABLE {BATCH}\n  ARRIVAL ORDER BY ts MICRO BATCH BY v + nosuch\n  WATERMARK FOR ts AS ts",
     (2, 42), "MICRO BATCH BY: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
              "name `nosuch` cannot be resolved."),
    (f"CREATE STREAM wr FROM TABLE {BATCH} ARRIVAL ORDER BY ts MICRO BATCH BY map(k, v) WATERMARK FOR ts AS ts",
     (1, 67), "MICRO BATCH BY: MAP(k, v) is MAP<STRING,INT>, which has no order"),
    (f"CREATE STREAM wr FROM TABLE {BATCH} ARRIVAL ORDER BY ts MICRO BATCH BY MAX(v) WATERMARK FOR ts AS ts",
     (1, 67), "MICRO BATCH BY reads each row on its own: no aggregate, window function or subquery here (MAX(v))"),
    (f"CREATE STREAM wr FROM TABLE {BATCH} ARRIVAL ORDER BY ts\nPROCESSING TIME BY k WATERMARK FOR ts AS ts",
     (2, 20), "PROCESSING TIME BY k: the clock of each micro-batch must be TIMESTAMP or TIMESTAMP_NTZ, but k is "
              "STRING; cast it first"),
    (f"CREATE STREAM wr FROM TABLE {BATCH} ARRIVAL ORDER BY ts\nWATERMARK FOR tss AS tss - INTERVAL 1 SECOND", (2, 15),
     "WATERMARK FOR tss: no such column; did you mean ts? (table bt has k, v, price, ts)"),
    (f"CREATE STREAM wr FROM TABLE {BATCH} ARRIVAL ORDER BY ts WATERMARK FOR k AS k", (1, 66),
     "WATERMARK FOR k: the event-time column must be TIMESTAMP or TIMESTAMP_NTZ, but k is STRING; cast it first"),
    (f"CREATE STREAM wr FROM TABLE (SELECT k, ts FROM {BATCH}) ARRIVAL ORDER BY ts WATERMARK FOR v AS v", (1, 86),
     "WATERMARK FOR v: no such column (the FROM TABLE query has k, ts)"),
]


@pytest.mark.parametrize(("text", "at", "message"), WRONG_REPLAY_STREAMS)
def test_a_replay_streams_clauses_are_checked_when_it_is_created(streams, text, at, message) -> None:
    """ARRIVAL ORDER BY, MICRO BATCH BY, PROCESSING TIME BY and WATERMARK FOR over the table's columns, at CREATE
    STREAM (as a live stream's over the columns it declares): an error at the clause, and no stream is made, so no
    query over it meets the mistake later in sqlwin's own text."""
    err = attempt(streams.spark, text)
    assert err is not None, text
    assert err.message.startswith(message) and (err.line, err.col) == at, str(err)
    assert_user_terms(err, text)
    assert catalog.find_stream(streams.spark, "wr") is None
    assert not streams.spark.catalog.tableExists("wr")


def test_a_replays_late_rows_replace_no_view_of_the_session(streams, monkeypatch) -> None:
    """LATE ROWS TO a temp view of the session (one of the user's, the very table the stream replays) is an error at
    the name, before anything runs; the late rows of an earlier replay are replaced, by the same query or another,
    until the user makes that name a view of their own."""
    from sqlwin.streaming import replay as replay_module

    spark = streams.spark
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW kept AS SELECT 42 AS answer")
    query = ("SELECT window_start, window_end, COUNT(*) AS n\nFROM TUMBLE(TABLE rs, DESCRIPTOR(ts), INTERVAL 10 "
             "SECONDS)\nGROUP BY window_start, window_end LATE ROWS TO {late}{emit}")
    refused = {"kept": "kept is a temporary view of this session",
               BATCH: f"{BATCH} is the table that stream rs replays"}
    with monkeypatch.context() as patch:
        patch.setattr(replay_module, "replay", lambda *args: pytest.fail("the replay ran"))
        for late, what in refused.items():
            err = attempt(spark, query.format(late=late, emit=""))
            assert err is not None
            assert err.message == f"LATE ROWS TO {late}: {what}, which the replay's late rows would replace; choose " \
                                  "another name"
            assert (err.line, err.col) == (3, 48), str(err)
    assert [tuple(r) for r in spark.table("kept").collect()] == [(42,)]
    assert spark.table(BATCH).columns == ["k", "v", "price", "ts"] and spark.table(BATCH).count() == 3
    late_columns = ["k", "v", "price", "ts", "window_start", "window_end", "watermark", "reason", "micro_batch"]
    for emit in ("", "", " EMIT FINAL"):  # the same query again, then another: each replaces the late rows
        assert len(sqlwin.sql(spark, query.format(late="rs_lr", emit=emit)).collect()) == 2
        assert spark.table("rs_lr").columns == late_columns
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW rs_lr AS SELECT 1 AS x")
    err = attempt(spark, query.format(late="rs_lr", emit=""))
    assert err is not None and err.message.startswith("LATE ROWS TO rs_lr: rs_lr is a temporary view of this session")
    assert spark.table("rs_lr").columns == ["x"]
    spark.sql("DROP VIEW rs_lr")
    spark.sql("DROP VIEW kept")


def test_a_stream_read_without_a_window_is_an_error_at_its_name(streams, monkeypatch) -> None:
    """Plain Spark SQL over a stream (no window TVF, no EMIT) is an error at the stream's name, at sqlwin.sql() and
    before Spark runs anything: not a streaming DataFrame that fails once read, nor the replayed table's rows as a
    batch answer. Plain Spark SQL over tables, and a CTE named like a stream, run as before."""
    from sqlwin import diagnostics

    spark = streams.spark
    replay_hint = f"; for the batch answer over all the rows of replay stream {REPLAY}, read the table it replays, " \
                  f"{BATCH}, instead of {REPLAY}"
    live_hint = "; a query over a live stream runs continuously, as CREATE STREAMING TABLE name AS <query>"
    cases = [
        (f"SELECT k, COUNT(*) AS n\nFROM {LIVE}\nGROUP BY k", (2, 6), WINDOW_NEEDED.format(s=LIVE) + live_hint),
        (f"SELECT COUNT(*) FROM {REPLAY}", (1, 22), WINDOW_NEEDED.format(s=REPLAY) + replay_hint),
        (f"SELECT * FROM {BATCH}\nWHERE v IN (SELECT v FROM {REPLAY})", (2, 27),
         WINDOW_NEEDED.format(s=REPLAY) + replay_hint),
        (f"INSERT INTO {BATCH} SELECT * FROM {LIVE}", (1, 30), WINDOW_NEEDED.format(s=LIVE) + live_hint),
    ]
    active = {q.id for q in spark.streams.active}
    with monkeypatch.context() as patch:
        patch.setattr(diagnostics, "run_sql", lambda *args, **kwargs: pytest.fail("Spark ran the statement"))
        for text, at, message in cases:
            err = attempt(spark, text)
            assert err is not None, text
            assert (err.message, (err.line, err.col)) == (message, at), str(err)
            assert_user_terms(err, text)
    assert {q.id for q in spark.streams.active} == active
    assert spark.table(BATCH).count() == 3
    assert [tuple(r) for r in sqlwin.sql(spark, f"SELECT COUNT(*) FROM {BATCH}").collect()] == [(3,)]
    assert [tuple(r) for r in sqlwin.sql(spark, f"WITH {REPLAY} AS (SELECT 1 AS a) SELECT a FROM {REPLAY}")
            .collect()] == [(1,)]



def test_what_a_streaming_table_cannot_start_from_is_an_error_at_its_name(streams, tmp_path) -> None:
    """A replay stream (its query runs at once: a streaming table over it crashed with an AttributeError), a
    folder that cannot be made (raw FileNotFoundError), a sink format Spark lacks (no position, a SQLSTATE tail):
    each a SqlwinError at the name the statement makes. A first start that fails after its sink's catalog view
    was made (the stream's folder gone, a file in its place) leaves no view and no folder behind."""
    spark = streams.spark
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    window = "SELECT window_start, COUNT(*) AS n FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) " \
             "GROUP BY window_start, window_end"
    err = attempt(spark, f"CREATE STREAMING TABLE ce_rs AS {window.format(s=REPLAY)}")
    assert str(err) == (f"line 1, col 86: {REPLAY} is a replay stream (CREATE STREAM ... FROM TABLE): a query over "
                        "it runs at once and returns every pane the live run would emit; run the query itself (or "
                        "CREATE TABLE ce_rs AS <query> to keep its panes), not as a streaming table")
    err = attempt(spark, f"CREATE STREAMING TABLE ce_none AS\nSELECT k, v FROM {BATCH} WHERE v > 0")
    assert str(err) == ("line 2, col 18: a streaming table's query reads a stream (CREATE STREAM); this one reads "
                        "none: run it as a batch query")  # at the table it reads, not at its first column
    made = f"cannot make the folder {blocker}/out: "
    err = attempt(spark, f"CREATE STREAMING TABLE ce_out OPTIONS (path '{blocker}/out') AS {window.format(s=LIVE)}")
    assert str(err).startswith(f"line 1, col 24: {made}"), str(err)
    err = attempt(spark, f"CREATE STREAM ce_in ({SCHEMA}, WATERMARK FOR ts AS ts) USING json "
                         f"OPTIONS (path '{blocker}/in')")
    assert str(err).startswith(f"line 1, col 15: cannot make the folder {blocker}/in: "), str(err)
    err = attempt(spark, f"CREATE STREAMING TABLE ce_fmt USING nosuch AS {window.format(s=LIVE)}")
    assert str(err).startswith("line 1, col 24: CREATE STREAMING TABLE ce_fmt USING nosuch: Spark has no data "
                               "source nosuch ([DATA_SOURCE_NOT_FOUND] Failed to find the data source: nosuch.")
    assert "SQLSTATE" not in str(err)
    gone = tmp_path / "gone"
    (gone / "in").mkdir(parents=True)
    sqlwin.sql(spark, f"CREATE STREAM ce_gone ({SCHEMA}, WATERMARK FOR ts AS ts) USING json "
                      f"OPTIONS (path '{gone / 'in'}')")
    (gone / "in").rmdir()
    gone.rmdir()
    gone.write_text("a file where the stream's folder was")
    err = attempt(spark, f"CREATE STREAMING TABLE ce_gone_out AS {window.format(s='ce_gone')} "
                         "EMIT WITH TRIGGER AFTER COUNT 1")  # the custom path: its views come before its stream
    assert str(err).startswith(f"line 1, col 24: cannot make the folder {gone}/in: "), str(err)
    assert not spark.catalog.tableExists("ce_gone_out")
    assert not (streams.root / "ce_gone_out").exists()
    assert not [t.name for t in catalog.all_tables() if t.name.startswith("ce_")]
    spark.catalog.dropTempView("ce_gone")
    catalog.drop_stream(spark, "ce_gone")



def test_a_replay_is_kept_by_create_table_insert_into_and_a_temporary_view(streams, tmp_path) -> None:
    """CREATE TABLE ... AS, INSERT INTO and CREATE TEMPORARY VIEW ... AS a replay hold its panes, as the batch
    statements hold their query's rows (CREATE TABLE failed with a parse error in generated SQL, and INSERT INTO
    returned the panes without inserting them); a permanent view over a replay, and CREATE TABLE over a live
    stream, are errors at their names."""
    spark = streams.spark
    before = {r.viewName for r in spark.sql("SHOW VIEWS").collect()}
    query = (f"SELECT k, window_start, COUNT(*) AS n FROM TUMBLE(TABLE {REPLAY}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
             "GROUP BY k, window_start, window_end")
    replayed = sorted(tuple(r) for r in sqlwin.sql(spark, query).collect())
    ten = T + dt.timedelta(seconds=10)
    assert [r[:5] for r in replayed] == [("a", T, 2, 0, "ON_TIME"), ("b", ten, 1, 0, "ON_TIME")]
    sqlwin.sql(spark, f"CREATE TABLE kept_replay USING parquet LOCATION '{tmp_path / 'kept'}' AS {query}")
    sqlwin.sql(spark, f"CREATE TEMPORARY VIEW kept_replay_v AS {query}")
    spark.sql("CREATE TABLE ins_replay (k STRING, window_start TIMESTAMP, n BIGINT, pane_index INT, pane_timing "
              f"STRING, is_final BOOLEAN, micro_batch INT) USING parquet LOCATION '{tmp_path / 'ins'}'")
    try:
        sqlwin.sql(spark, f"INSERT INTO ins_replay {query}")
        for name in ("kept_replay", "kept_replay_v", "ins_replay"):
            assert sorted(tuple(r) for r in spark.table(name).collect()) == replayed, name
        err = attempt(spark, f"CREATE VIEW kept_replay_p AS {query}")
        assert str(err) == ("line 1, col 13: a view over a replay: the replay's panes are computed once, for this "
                            "session; CREATE TEMPORARY VIEW (this session) or CREATE TABLE (kept)")
        err = attempt(spark, f"CREATE TABLE kept_live AS {query.replace(REPLAY, LIVE)}")
        assert str(err).startswith(f"line 1, col 83: this query reads the stream {LIVE}: it runs continuously")
        made = {r.viewName for r in spark.sql("SHOW VIEWS").collect()} - before - {"kept_replay_v"}
        assert len(made) == 1 and made.pop().startswith("__sqlwin_replayed_")  # the rows of the temporary view
    finally:
        for table in ("kept_replay", "ins_replay"):
            spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.catalog.dropTempView("kept_replay_v")


# -- failures while running -------------------------------------------------------------------------
def _stop_tables(names) -> None:
    """Stop and forget the streaming tables of ``names`` that a test started."""
    for name in names:
        table = catalog.find_table(name)
        if table is not None:
            table.stop()
            catalog.remove_table(name)


def _status_line(table) -> str:
    status = table.status()
    assert status.status == "failed"
    return status.error


@pytest.mark.slow
def test_a_failure_while_running_is_one_line_and_a_fixed_restart_resumes_exactly_once(spark, tmp_path, monkeypatch):
    """A row a cast cannot read (ANSI mode): native and custom paths stop with status ``failed`` and one line (the
    CAST's line and column, Spark's message), in status(), SHOW STREAMING TABLES and process_all_available;
    with the file replaced, starting the same statements again gives every window once."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    feeder = Feeder(tmp_path / "in")
    sqlwin.sql(spark, f"CREATE STREAM rt_cast (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL "
                      f"2 SECONDS) USING json OPTIONS (path '{tmp_path / 'in'}')")
    query = ("SELECT window_start, window_end,\n  SUM(CAST(k AS INT)) AS s, COUNT(*) AS c\n"
             "FROM TUMBLE(TABLE rt_cast, DESCRIPTOR(ts), INTERVAL 10 SECONDS)\nGROUP BY window_start, window_end")
    texts = {"rt_native": f"CREATE STREAMING TABLE rt_native AS\n{query}",
             "rt_custom": f"CREATE STREAMING TABLE rt_custom AS\n{query}\nALLOWED LATENESS INTERVAL 1 SECOND"}
    try:
        tables = {}
        for name, text in texts.items():
            sqlwin.sql(spark, text)
            tables[name] = catalog.find_table(name)
        assert [t.path for t in tables.values()] == ["native", "custom"]
        feeder.feed([[{"k": "1", "v": 1, "ts": ts(1)}, {"k": "2", "v": 1, "ts": ts(5)}]], *tables.values())
        feeder.write([{"k": "x", "v": 1, "ts": ts(12)}, {"k": "3", "v": 1, "ts": ts(13)}])  # 'x' is no INT
        expected = ('line 3, col 7: [CAST_INVALID_INPUT] The value \'x\' of the type "STRING" cannot be cast to '
                    '"INT" because it is malformed.')
        for name, table in tables.items():
            with pytest.raises(SqlwinError) as info:
                table.process_all_available()
            assert str(info.value).startswith(expected.replace(": ", f": streaming table {name} failed: ", 1))
            line = _status_line(table)
            assert line.startswith(expected) and "\n" not in line and not INTERNAL.search(line), line
            assert not re.search(r"Traceback|\tat |Exception:|SQLSTATE|== SQL", line), line
        shown = {r.name: (r.status, r.error) for r in sqlwin.sql(spark, "SHOW STREAMING TABLES").collect()}
        assert {n: shown[n] for n in tables} == {n: ("failed", _status_line(t)) for n, t in tables.items()}

        feeder.count = 1  # the cause fixed: the bad file replaced by a good one, under its name
        feeder.write([{"k": "4", "v": 1, "ts": ts(12)}, {"k": "3", "v": 1, "ts": ts(13)}])
        for name, text in texts.items():  # the same statements again: they resume where they stopped
            sqlwin.sql(spark, text)
            tables[name] = catalog.find_table(name)
            assert tables[name].status().status == "running"
        feeder.feed([[{"k": "5", "v": 1, "ts": ts(40)}]], *tables.values())
        windows = [(T, 3, 2), (T + dt.timedelta(seconds=10), 7, 2)]
        for name in tables:
            assert rows_of(spark.table(name), ["window_start", "s", "c"]) == windows, name
    finally:
        _stop_tables(texts)


@pytest.mark.slow
def test_a_division_by_zero_under_ansi_mode_and_a_restart_with_ansi_off(spark, tmp_path, monkeypatch):
    """Division by zero (ANSI mode) on the custom path with a trigger: failed, one line at the division; a
    restart with ANSI mode off takes the same micro-batch again (NULL for the division) and every pane once."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    feeder = Feeder(tmp_path / "in")
    sqlwin.sql(spark, f"CREATE STREAM rt_div (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL "
                      f"2 SECONDS) USING json OPTIONS (path '{tmp_path / 'in'}')")
    text = ("CREATE STREAMING TABLE rt_div_out AS\nSELECT window_start, k, COUNT(*) AS c,\n"
            "       SUM(100 DIV v) AS q\nFROM TUMBLE(TABLE rt_div, DESCRIPTOR(ts), INTERVAL 10 SECONDS)\n"
            "GROUP BY window_start, window_end, k\nEMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS")
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    try:
        sqlwin.sql(spark, text)
        table = catalog.find_table("rt_div_out")
        assert table.path == "custom"
        feeder.feed([[{"k": "a", "v": 10, "ts": ts(1)}]], table)
        feeder.write([{"k": "a", "v": 0, "ts": ts(2)}, {"k": "a", "v": 50, "ts": ts(3)}])
        failed = r"^line 3, col 12: streaming table rt_div_out failed: \[DIVIDE_BY_ZERO\]"
        with pytest.raises(SqlwinError, match=failed):
            table.process_all_available()
        line = _status_line(table)
        assert line.startswith("line 3, col 12: [DIVIDE_BY_ZERO] Division by zero.") and "\n" not in line, line
        spark.conf.set("spark.sql.ansi.enabled", "false")
        sqlwin.sql(spark, text)
        table = catalog.find_table("rt_div_out")
        feeder.feed([[{"k": "a", "v": 1, "ts": ts(30)}]], table)
        panes = rows_of(spark.table("rt_div_out"), ["k", "c", "q", "pane_timing"])
        # an early pane once the second row came (micro-batch 1, re-run), the on-time pane when the window closed
        assert panes == [("a", 3, 12, "EARLY"), ("a", 3, 12, "ON_TIME")], panes
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
        table = catalog.find_table("rt_div_out")
        if table is not None:
            table.stop()
            catalog.remove_table("rt_div_out")


@pytest.mark.slow
def test_a_value_the_declared_column_cannot_hold_fails_the_table_and_names_its_file(spark, tmp_path, monkeypatch):
    """``"v": "abc"`` for ``v INT``: Spark's default (PERMISSIVE) would make it NULL, the row then silently in a
    pane with v NULL. As Flink's json format (``ignore-parse-errors`` false), both paths fail, one line naming
    the file to replace; ``OPTIONS (mode 'PERMISSIVE')`` asks for Spark's NULLs, and gets them."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    rows = [{"k": "a", "v": 1, "ts": ts(1)}, {"k": "a", "v": "abc", "ts": ts(2)}]
    names = []
    try:
        for mode, options in (("failfast", ""), ("permissive", ", mode 'PERMISSIVE'")):
            feeder = Feeder(tmp_path / mode)
            feeder.write(rows)
            sqlwin.sql(spark, f"CREATE STREAM rt_{mode} (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - "
                              f"INTERVAL 2 SECONDS) USING json OPTIONS (path '{tmp_path / mode}'{options})")
            query = (f"SELECT window_start, k, SUM(v) AS s, COUNT(*) AS c FROM TUMBLE(TABLE rt_{mode}, "
                     "DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k")
            for path, clause in (("native", ""), ("custom", " ALLOWED LATENESS INTERVAL 1 SECOND")):
                name = f"rt_{mode}_{path}"
                names.append(name)
                sqlwin.sql(spark, f"CREATE STREAMING TABLE {name} AS {query}{clause}")
                table = catalog.find_table(name)
                assert table.path == path
                if mode == "failfast":
                    with pytest.raises(SqlwinError, match=r"\[CANNOT_PARSE_JSON_FIELD\] Cannot parse the field "
                                                          r"name 'v' and the value abc"):
                        table.process_all_available()
                    line = _status_line(table)
                    assert line.endswith(f"(reading {(tmp_path / mode / 'f00000.json').as_uri()})"), line
                    assert "\n" not in line and not INTERNAL.search(line), line
                else:
                    feeder.feed([[{"k": "a", "v": 5, "ts": ts(30)}]], table)
                    assert rows_of(spark.table(name), ["window_start", "k", "s", "c"]) == [(T, "a", 1, 2)]
    finally:
        _stop_tables(names)


# -- generated and mutated statements ---------------------------------------------------------------
COLUMNS = ["k", "v", "price", "ts", "window_start", "window_end", "window_time", "nope", "kk"]
TVFS = ["TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)",
        "HOP(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS, INTERVAL 10 SECONDS)",
        "CUMULATE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 5 SECONDS, INTERVAL 10 SECONDS)",
        "SESSION(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 10 SECONDS)",
        "TUMBLE(TABLE {s} PARTITION BY k, DESCRIPTOR(ts), ROWS 3)",
        "TUMBLE(TABLE(SELECT * FROM {s} WHERE {c} > 0), DESCRIPTOR(ts), INTERVAL 10 SECONDS)",
        "TUMBLE(TABLE {s}, DESCRIPTOR({c}), INTERVAL 10 SECONDS)"]
EXPRESSIONS = ["SUM({c})", "COUNT(*)", "MAX({c})", "nofunc({c})", "{c} + ts", "SUM(v) / COUNT(*)", "{c}",
               "CAST({c} AS INT)", "ROUND(price, 1, 2)", "SUM(COUNT(v))"]
WHERES = ["", " WHERE {c} > 1", " WHERE {c} = ts", " WHERE k = 'a'"]
GROUPS = [" GROUP BY window_start, window_end", " GROUP BY window_start, window_end, k",
          " GROUP BY window_start, window_end, {c}", ""]
HAVINGS = ["", " HAVING {c} > 1", " HAVING COUNT(*) > 0"]
CLAUSES = ["", " EMIT FINAL", " ALLOWED LATENESS INTERVAL 5 SECONDS",
           " EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS",
           " EMIT WITH TRIGGER REPEATEDLY AFTER COUNT 2 ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {s}_late",
           " EVICT KEEP LAST 2 ROWS", " ORDER BY window_start"]
WRAPS = ["replay", "create", "insert"]


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, str]:
    """(wrap, query with ``{s}``): a window query over a stream, often with a mistake in it."""
    def column() -> str:
        return draw(st.sampled_from(COLUMNS))

    tvf = draw(st.sampled_from(TVFS)).format(s="{s}", c=column())
    items = ", ".join(draw(st.sampled_from(EXPRESSIONS)).format(c=column()) + f" AS e{i}"
                      for i in range(draw(st.integers(1, 2))))
    where, group, having = (draw(st.sampled_from(part)).format(c=column()) for part in (WHERES, GROUPS, HAVINGS))
    clause = draw(st.sampled_from(CLAUSES)).format(s="{s}")
    query = f"SELECT window_start, window_end, {items}\nFROM {tvf}{where}{group}{having if group else ''}{clause}"
    return draw(st.sampled_from(WRAPS)), query


@st.composite
def mutated_queries(draw: st.DrawFn) -> tuple[str, str]:
    wrap, query = draw(queries())
    words = re.findall(r"\{s\}\w*|\w+|'[^']*'|\S|\n", query)
    for _ in range(draw(st.integers(1, 2))):
        i = draw(st.integers(0, len(words) - 1))
        op = draw(st.sampled_from(["rename", "rename", "rename", "drop", "dup", "swap", "insert"]))
        if op == "rename" and re.fullmatch(r"[a-z_]\w*", words[i]):  # a name: another column, or none
            words[i] = draw(st.sampled_from([*COLUMNS, "nofunc", "window_index", "pane_index", "ls_late"]))
        elif op == "drop" and len(words) > 1:
            del words[i]
        elif op == "dup":
            words.insert(i, words[i])
        elif op == "swap":
            j = draw(st.integers(0, len(words) - 1))
            words[i], words[j] = words[j], words[i]
        else:
            words.insert(i, draw(st.sampled_from(["(", ")", ",", "TABLE", "EMIT", "GROUP BY", "EVICT", "'", "--",
                                                  "WINDOW", "window_start", "k", "nope", "AS", "SUM(", "9" * 30])))
    return wrap, " ".join(words).replace(" \n ", "\n")


def _statement(wrap: str, query: str) -> str:
    if wrap == "replay":
        return query.replace("{s}", REPLAY)
    body = query.replace("{s}", LIVE)
    return f"CREATE STREAMING TABLE gen_out AS\n{body}" if wrap == "create" else f"INSERT INTO ins\n{body}"


def _analyse(spark, text: str) -> None:
    """Everything a streaming statement is checked for before it starts (statements.prepare), nothing run."""
    from sqlwin.pipeline import compile_statement
    from sqlwin.plan import statements as plans
    from sqlwin.streaming.statements import prepare

    compiled = compile_statement(text, "spark", catalog=spark, spark=spark)
    if not compiled.sql and isinstance(compiled.plan, (plans.CreateStreamingTable, plans.WindowedQuery)):
        prepare(spark, text, compiled.plan)


def _check(streams, wrap: str, query: str, compare: bool) -> None:
    text = _statement(wrap, query)
    start = time.monotonic()
    try:
        _analyse(streams.spark, text)
    except SqlwinError as err:
        assert_user_terms(err, text)
        if compare and getattr(err, "spark_condition", None) and "EVICT" not in query:
            # Spark refused it: the batch query over a table of the same columns says exactly the same
            batch = attempt(streams.spark, query.replace("{s}", BATCH))
            assert batch is not None, text
            shift = 0 if wrap == "replay" else 1
            assert (batch.line + shift, batch.col) == (err.line, err.col), (str(batch), str(err))
            assert batch.message == as_batch(err.message, REPLAY if wrap == "replay" else LIVE)
    assert time.monotonic() - start < 30, text
    nothing_started(streams, "gen_out")
    assert not (streams.root / "gen_out").exists()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries())
def test_generated_streaming_statements_pass_or_fail_as_the_batch_query(streams, drawn) -> None:
    _check(streams, *drawn, compare=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_queries())
def test_mutated_streaming_statements_pass_or_fail_in_user_terms(streams, drawn) -> None:
    _check(streams, *drawn, compare=False)


def test_delta_suggests_only_the_users_columns(streams) -> None:
    """DELTA's expression is analysed over the stored rows, which carry sqlwin's own columns (``__k0``, ``__mb``):
    Spark's "did you mean" names the user's columns only, and its message is one line, without its position in
    the SQL sqlwin analysed."""
    text = f"SELECT k, COUNT(*) AS c FROM {REPLAY} GROUP BY k EVICT DELTA(vv) < 3 EMIT WITH TRIGGER EVERY 2 ROWS"
    with pytest.raises(SqlwinError) as err:
        sqlwin.sql(streams.spark, text)
    assert str(err.value) == (
        "line 1, col 56: DELTA(vv): [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter "
        "with name `vv` cannot be resolved. Did you mean one of the following? [`v`, `k`, `ts`, `price`].")


VIEW_OVER = ("is a view over the stream {s}: sqlwin reads a stream (its watermark, its arrival order) only where a "
             "query names it; write the view's query in its place, as in TUMBLE(TABLE (SELECT ... FROM {s}), "
             "DESCRIPTOR(...), ...)")


@pytest.mark.parametrize("stream", [REPLAY, LIVE])
def test_a_view_over_a_stream_is_an_error_at_its_name(streams, stream) -> None:
    """A temp view over a stream holds its rows but not its watermark or arrival order: a window over it, a
    streaming table reading it, a plain query of it and a view over it are refused at the view's name (a window
    over a live stream's view was a streaming DataFrame that failed once read; over a replay's, the batch answer
    of its table)."""
    spark = streams.spark
    view, outer = f"v_{stream}", f"vv_{stream}"
    sqlwin.sql(spark, f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM {stream} WHERE v > 0")
    sqlwin.sql(spark, f"CREATE OR REPLACE TEMP VIEW {outer} AS SELECT k, ts FROM {view}")
    window = ("SELECT window_start, COUNT(*) AS c FROM TUMBLE(TABLE {v}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
              "GROUP BY window_start, window_end")
    cases = [(window.format(v=view), 54, view),
             (f"CREATE STREAMING TABLE t_{view} AS {window.format(v=view)}", 87, view),
             (f"SELECT * FROM {view}", 15, view), (window.format(v=outer), 54, outer),
             (f"WITH w AS (SELECT k FROM {outer}) SELECT * FROM w", 26, outer)]
    for text, col, name in cases:
        with pytest.raises(SqlwinError) as err:
            sqlwin.sql(spark, text)
        assert str(err.value) == f"line 1, col {col}: {name} {VIEW_OVER.format(s=stream)}", text
    assert catalog.find_table(f"t_{view}") is None
    sqlwin.sql(spark, f"DROP VIEW {outer}")
    sqlwin.sql(spark, f"CREATE TEMP VIEW {outer} AS SELECT k, ts FROM {BATCH}")  # no stream: a view as any other
    assert sqlwin.sql(spark, window.format(v=outer)).count() == 2


DATAFRAME_VIEW = ("is a view over a streaming DataFrame that sqlwin did not make (spark.readStream ... "
                  "createOrReplaceTempView): sqlwin reads a stream declared with CREATE STREAM, whose WATERMARK says "
                  "when its windows close; declare its source as CREATE STREAM name (columns, WATERMARK FOR ts AS ts "
                  "- INTERVAL ...) USING format OPTIONS (...) and read that stream")


def test_a_view_of_a_streaming_dataframe_is_an_error_at_its_name(streams) -> None:
    """A temp view of a streaming DataFrame made with the DataFrame API (no CREATE STREAM: sqlwin knows no watermark
    for it), or a SQL view over one, read by a window, a streaming table, plain SQL or INSERT INTO: an error at the
    view's name saying to declare it with CREATE STREAM (a window over it was a batch query over a streaming
    DataFrame that failed once read, plain SQL a streaming DataFrame a CLI or JDBC client could not show), before
    Spark runs anything; a SQL view over it is made (Spark's own), and refused where it is read."""
    spark = streams.spark
    spark.readStream.format("rate").load().withColumnRenamed("timestamp", "ts").createOrReplaceTempView("dfv")
    sqlwin.sql(spark, "CREATE OR REPLACE TEMP VIEW dfv_sql AS SELECT ts, value FROM dfv WHERE value > 0")
    window = ("SELECT window_start, COUNT(*) AS c\r\nFROM TUMBLE(TABLE {v}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)\r\n"
              "GROUP BY window_start, window_end")
    cases = [(window.format(v="dfv"), (2, 19), "dfv"),
             (f"CREATE STREAMING TABLE t_dfv AS\n{window.format(v='dfv')}", (3, 19), "dfv"),
             ("SELECT value\n\tFROM dfv WHERE value > 1", (2, 7), "dfv"),
             (f"INSERT INTO {BATCH} SELECT 'x', 1, 1.0, ts FROM dfv", (1, 44), "dfv"),
             (window.format(v="dfv_sql"), (2, 19), "dfv_sql")]
    active = {q.id for q in spark.streams.active}
    try:
        for text, at, name in cases:
            err = attempt(spark, text)
            assert err is not None, text
            assert ((err.line, err.col), err.message) == (at, f"{name} {DATAFRAME_VIEW}"), str(err)
    finally:
        spark.catalog.dropTempView("dfv_sql")
        spark.catalog.dropTempView("dfv")
    assert catalog.find_table("t_dfv") is None and {q.id for q in spark.streams.active} == active
    assert spark.table(BATCH).count() == 3


def test_a_replays_failure_in_its_panes_is_at_the_users_expression(streams) -> None:
    """A row that fails the replay's pane query (a division by zero under ANSI mode) over partial aggregates, which
    Spark reports in sqlwin's text (``CAST(SUM(rs.__p0) AS BIGINT) DIV ...``): the error is at the user's
    expression, as the batch statement's, in a statement with CRLF line ends, tabs and comments before it (it was
    at the statement's start; the batch statement's position is the expectation)."""
    spark = streams.spark
    query = ("-- totals\r\nSELECT\twindow_start, k,\r\n\t/* zero */ SUM(v) DIV (MIN(v) - MIN(v)) AS s\r\n"
             "FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)\r\nGROUP BY window_start, window_end, k")
    replayed = attempt(spark, query.format(s=REPLAY))
    assert replayed is not None and (replayed.line, replayed.col) == (3, 13), str(replayed)
    assert replayed.message.startswith("[DIVIDE_BY_ZERO] Division by zero."), str(replayed)
    try:  # the batch statement's error, one line down (its CREATE TABLE line)
        batch = attempt(spark, f"CREATE TABLE div_bt USING parquet AS\r\n{query.format(s=BATCH)}")
        assert batch is not None and (batch.line, batch.col, batch.message) == (4, 13, replayed.message), str(batch)
    finally:
        spark.sql("DROP TABLE IF EXISTS div_bt")
