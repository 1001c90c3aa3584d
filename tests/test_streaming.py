"""Streaming tables on real Spark Structured Streaming, fed file by file (GRAMMAR 3-5).

Expectations are hand-worked from GRAMMAR's rules (late when W >= window_end, dropped when
W >= window_end + lateness, W = max ts - delay of the previous micro-batches, a window fires in the
micro-batch after the one that moved the watermark past its end) or come from the batch query and DuckDB
over the same rows.
"""

from __future__ import annotations

import datetime as dt
import os
import re

import pytest

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from tests.streamtools import Feeder, rows_of, stream_env, ts

pytestmark = pytest.mark.slow

T = dt.datetime(2024, 1, 1)


def at(seconds: float) -> dt.datetime:
    return T + dt.timedelta(seconds=seconds)


@pytest.fixture()
def env(spark, tmp_path, monkeypatch, request):
    """A stream ``s_<test>`` over a fresh folder, with its own streaming root; stops what the test started."""
    with stream_env(spark, tmp_path, monkeypatch, request.node.name) as (name, feeder, _root):
        yield name, feeder


def row(k: str, v: int, seconds: float) -> dict:
    return {"k": k, "v": v, "ts": ts(seconds)}


# micro-batches are numbered when they do something (GRAMMAR 3 as sqlwin reads it): f0 -> 0 (W -> 5; the
# no-data batch after it fires nothing and takes no number), f1 -> 1 (W -> 10), no-data -> 2 fires [0, 10),
# f2 -> 3 (late pane), f3 -> 4 (W -> 28), no-data -> 5 fires [10, 20) and expires both, f4 -> 6 (dropped).
# (A live table runs a no-data micro-batch that the watermark made due inside the Spark micro-batch that moved
# it: the same micro-batch, numbered the same, without a Spark micro-batch of its own.)
BATCHES = [
    [row("a", 1, 1), row("a", 2, 5), row("b", 3, 7)],  # W -> 5
    [row("a", 4, 12)],  # W -> 10: [0, 10) fires in the next (no-data) micro-batch
    [row("a", 5, 3)],  # late for [0, 10) (W = 10 >= 10); within lateness 5
    [row("a", 6, 30)],  # W -> 28 >= 10 + 5 and 20 + 5: both windows expire
    [row("a", 7, 8)],  # past the lateness: dropped, written to the late rows
]
# BATCHES' panes and late rows with ALLOWED LATENESS 5 s (hand-worked as above; columns PANE_COLUMNS, LATE_COLUMNS)
PANE_COLUMNS = ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
BATCHES_PANES = [
    (at(0), "a", 3, 2, 0, "ON_TIME", False, 2),
    (at(0), "a", 8, 3, 1, "LATE", False, 3),
    (at(0), "b", 3, 1, 0, "ON_TIME", False, 2),
    (at(10), "a", 4, 1, 0, "ON_TIME", True, 5),
]
LATE_COLUMNS = ["k", "v", "ts", "window_start", "reason", "micro_batch"]
BATCHES_LATE = [("a", 7, at(8), at(0), "late", 6)]


def start(spark, sql: str):
    sqlwin.sql(spark, sql)
    name = sql.split("TABLE", 1)[1].split()[0]
    return catalog.find_table(name)


def test_lateness_late_panes_and_late_rows(spark, env, monkeypatch):
    """Also: the no-data micro-batches that fire [0, 10) and [10, 20) run inside the Spark micro-batches of f1 and
    f3, whose watermark made them due: no tick is asked for and Spark runs no micro-batch of ticks alone (a crash
    between the two still gets one: the next test)."""
    from sqlwin.streaming import sources
    from sqlwin.streaming.timewindows import TimeWindowAssigner

    only_ticks, scan = sources.only_ticks, TimeWindowAssigner._partials
    answers, scans = [], []  # (query id, answer), operator: of every table still running in the session

    def told(spark, batch_id):
        answers.append((spark.sparkContext.getLocalProperty("sql.streaming.queryId"), only_ticks(spark, batch_id)))
        return answers[-1][1]

    monkeypatch.setattr(sources, "only_ticks", told)
    # either scan of a data micro-batch (in the driver, or counted where Spark reads them) starts here
    monkeypatch.setattr(TimeWindowAssigner, "_partials", lambda self, *a: scans.append(self.op) or scan(self, *a))
    s, feeder = env
    table = start(spark, f"""CREATE STREAMING TABLE late_out AS
        SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
        GROUP BY window_start, window_end, k
        ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO late_rows""")
    assert table.path == "custom"
    feeder.feed(BATCHES, table)
    assert rows_of(spark.table("late_out"), PANE_COLUMNS) == BATCHES_PANES
    late = rows_of(spark.table("late_rows"), ["k", "v", "ts", "window_start", "window_end", "watermark", "reason",
                                              "micro_batch"])
    assert late == [("a", 7, at(8), at(0), at(10), at(28), "late", 6)]
    status = table.status()
    # [30, 40) is still open with its one row; [0, 10) and [10, 20) expired and their rows are gone
    assert (status.rows_in, status.late_rows_dropped, status.open_windows, status.state_rows) == (7, 1, 1, 1)
    mine = [answer for query, answer in answers if query == str(table.query.id)]
    assert (mine.count(False), mine.count(True), scans.count(table.operator)) == (len(BATCHES), 0, len(BATCHES))
    assert table.operator.ticks.asked == 0


def test_a_crash_before_the_panes_a_micro_batch_made_due_runs_them_in_the_re_run(spark, env, monkeypatch):
    """The Spark micro-batches of f1 and of f3 die after sqlwin committed the file's micro-batch, before the no-data
    one that fires [0, 10) (then [10, 20)): the table fails; started again, Spark runs the file's micro-batch
    again, sqlwin finds its rows committed (no Spark job reads them again) and runs the no-data micro-batch there,
    no tick asked: [0, 10) fires as micro-batch 2. After f3, f4 was written meanwhile: [10, 20) fires in f3's
    re-run (5), before f4's micro-batch drops f4's row (6). The panes and late rows of the uninterrupted run."""
    from sqlwin.streaming import sources
    from sqlwin.streaming.operator import MicroBatchOperator
    from sqlwin.streaming.timewindows import TimeWindowAssigner

    only_ticks, scan, fire_due = sources.only_ticks, TimeWindowAssigner._partials, MicroBatchOperator._fire_due
    answers, scans, crashed = [], [], []

    def told(spark, batch_id):
        answers.append(only_ticks(spark, batch_id))
        return answers[-1]

    def crash_at_2_and_5(self, *args):
        if self.next_batch in (2, 5) and self.next_batch not in crashed:
            crashed.append(self.next_batch)
            raise RuntimeError("the driver died here")
        fire_due(self, *args)

    monkeypatch.setattr(sources, "only_ticks", told)
    monkeypatch.setattr(TimeWindowAssigner, "_partials", lambda self, *a: scans.append(self) or scan(self, *a))
    monkeypatch.setattr(MicroBatchOperator, "_fire_due", crash_at_2_and_5)
    s, feeder = env
    sql = f"""CREATE STREAMING TABLE crash_out AS
        SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
        GROUP BY window_start, window_end, k
        ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO crash_late"""

    def crash_then_start_again(table, waiting: list[dict] | None = None):
        with pytest.raises(SqlwinError, match="the driver died here"):
            table.process_all_available()
        table.stop()
        catalog.remove_table("crash_out")
        if waiting is not None:
            feeder.write(waiting)
        answers.clear()
        table = start(spark, sql)
        table.process_all_available()
        return table

    table = start(spark, sql)
    feeder.feed(BATCHES[:1], table)
    feeder.write(BATCHES[1])
    table = crash_then_start_again(table)
    # f1's Spark micro-batch again (its rows committed: not even read), the no-data one inside it
    assert crashed == [2] and answers == [] and len(scans) == 2 and table.operator.ticks.asked == 0
    assert table.status().micro_batches == 3
    feeder.feed(BATCHES[2:3], table)
    feeder.write(BATCHES[3])
    table = crash_then_start_again(table, waiting=BATCHES[4])
    # f3's again (the no-data one inside it), then f4's alone: Spark's plan of it holds rows, no tick
    assert crashed == [2, 5] and answers == [False] and len(scans) == 5 and table.operator.ticks.asked == 0
    assert rows_of(spark.table("crash_out"), PANE_COLUMNS) == BATCHES_PANES
    assert rows_of(spark.table("crash_late"), LATE_COLUMNS) == BATCHES_LATE
    assert table.status().micro_batches == 7


def test_files_already_waiting_give_the_panes_of_files_arriving_one_at_a_time(spark, tmp_path, monkeypatch):
    """All five files there before the table starts, read one per micro-batch: the hand-worked panes, late rows
    and micro-batch numbers of files dropped one at a time (and of replay). The no-data micro-batch that fires
    [0, 10) runs before f2's late row arrives, as it does when f2 comes later; a tick read together with f2
    would have fired [0, 10) with a@3 in its ON_TIME pane."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "waiting"
    feeder = Feeder(folder)
    for i, rows in enumerate(BATCHES):
        feeder.write(rows)
        os.utime(folder / f"f{i:05d}.json", (1_700_000_000 + i, 1_700_000_000 + i))  # the source's order
    sqlwin.sql(spark, f"CREATE STREAM s_waiting (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL "
                      f"2 SECONDS) USING json OPTIONS (path '{folder}', maxFilesPerTrigger '1')")
    try:
        table = start(spark, """CREATE STREAMING TABLE waiting_out AS
            SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
            FROM TUMBLE(TABLE s_waiting, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
            GROUP BY window_start, window_end, k
            ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO waiting_out_late""")
        table.process_all_available()
        assert rows_of(spark.table("waiting_out"), PANE_COLUMNS) == BATCHES_PANES
        assert rows_of(spark.table("waiting_out_late"), LATE_COLUMNS) == BATCHES_LATE
        assert table.operator.ticks.asked == 0
    finally:
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)
        catalog.drop_stream(spark, "s_waiting")


def test_native_path_default_emission(spark, env):
    """Also: the status counts every micro-batch, however many ran since it was last asked (Spark keeps only
    the last ``numRecentProgressUpdates`` progress reports on the query: 2 here, 100 by default)."""
    s, feeder = env
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "2")
    table = start(spark, f"""CREATE STREAMING TABLE native_out AS
        SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k""")
    assert table.path == "native"
    try:
        feeder.feed(BATCHES, table)
        assert len(table.query.recentProgress) < len(BATCHES)
    finally:  # the query reads it from the session as it reports (a clone of it would keep it)
        spark.conf.unset("spark.sql.streaming.numRecentProgressUpdates")
    status = table.status()
    assert (status.rows_in, status.late_rows_dropped) == (7, 2) and status.micro_batches >= len(BATCHES)
    out = rows_of(spark.table("native_out"), ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final"])
    # lateness 0: a@3 (W = 10) and a@8 (W = 28) are dropped; one final ON_TIME pane per window
    assert out == [(at(0), "a", 3, 2, 0, "ON_TIME", True), (at(0), "b", 3, 1, 0, "ON_TIME", True),
                   (at(10), "a", 4, 1, 0, "ON_TIME", True)]
    shown = sqlwin.sql(spark, "SHOW STREAMING TABLES").collect()
    assert [(r.name, r.status, r.path) for r in shown] == [("native_out", "running", "native")]
    sqlwin.sql(spark, "STOP STREAMING TABLE native_out")
    assert sqlwin.sql(spark, "SHOW STREAMING TABLES").collect()[0].status == "stopped"


def test_rows_a_where_filters_out_still_move_the_watermark(spark, env):
    """GRAMMAR 3: the watermark is the largest time the stream brought, whatever the query keeps of its rows. Spark
    pushes a filter that does not read the time column below ``withWatermark``, so on the native path the rows a
    WHERE removes would not move it (measured: window [10, 20) never fired); such a query runs on the custom path."""
    s, feeder = env
    table = start(spark, f"""CREATE STREAMING TABLE where_out AS
        SELECT window_start, k, SUM(v) AS s FROM TUMBLE(TABLE (SELECT * FROM {s} WHERE v > 0), DESCRIPTOR(ts),
        INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k""")
    # W -> 10 fires [0, 10); z (v = 0, filtered out) moves W to 98, which fires [10, 20)
    feeder.feed([[row("a", 1, 1), row("b", 2, 12)], [row("z", 0, 100)]], table)
    assert rows_of(spark.table("where_out"), ["window_start", "k", "s"]) == [(at(0), "a", 1), (at(10), "b", 2)]
    assert (table.path, table.why) == ("custom", "a WHERE or JOIN over the stream's rows")


def test_native_sql_reads_every_bound_from_the_window_struct(spark):
    """The native path groups by window()'s struct and reads window_start/end/time from it in the SELECT list,
    HAVING and ORDER BY (not inside aggregates, which read the rows): over a table, its SQL returns the batch
    query's rows (what Spark's streaming aggregation does per micro-batch is the other tests' business)."""
    from sqlwin.pipeline import parse_single
    from sqlwin.planner import plan_statement
    from sqlwin.streaming.native import native_sql
    from sqlwin.streaming.shape import analyse

    def plan(text: str):
        return plan_statement(parse_single(text), None, text=text)

    spark.createDataFrame([("a", 1, at(1)), ("a", 2, at(5)), ("b", 3, at(7)), ("a", 4, at(12)), ("b", 5, at(31))],
                          "k string, v int, ts timestamp").createOrReplaceTempView("native_rows")
    stream = plan("CREATE STREAM native_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts) "
                  "USING json OPTIONS (path '/nowhere')")
    query = ("SELECT w.window_start, window_time + INTERVAL 1 SECOND AS t, k, SUM(v) AS s, MIN(window_start) AS m "
             "FROM HOP(TABLE {src}, DESCRIPTOR(ts), INTERVAL 10 SECONDS, INTERVAL 20 SECONDS) w "
             "GROUP BY window_start, window_end, k HAVING window_end > TIMESTAMP'2024-01-01 00:00:20' "
             "ORDER BY window_time DESC, k")
    native = native_sql(analyse(plan(query.format(src="native_s")), {"native_s": stream}), "native_rows")
    assert "GROUP BY k, w.__w" in native
    rows = [tuple(r) for r in spark.sql(native).collect()]
    batch = [(*r, 0, "ON_TIME", True) for r in sqlwin.sql(spark, query.format(src="native_rows")).collect()]
    # windows [0, 20) [10, 30) [20, 40) [30, 50); HAVING keeps those ending after 00:20, latest first
    assert rows == batch == [
        (at(30), at(50) - dt.timedelta(milliseconds=1) + dt.timedelta(seconds=1), "b", 5, at(30), 0, "ON_TIME", True),
        (at(20), at(40) - dt.timedelta(milliseconds=1) + dt.timedelta(seconds=1), "b", 5, at(20), 0, "ON_TIME", True),
        (at(10), at(30) - dt.timedelta(milliseconds=1) + dt.timedelta(seconds=1), "a", 4, at(10), 0, "ON_TIME", True)]


def test_query_over_a_stream_needs_a_streaming_table(spark, env):
    s, _ = env
    with pytest.raises(SqlwinError, match="CREATE STREAMING TABLE"):
        sqlwin.sql(spark, f"SELECT window_start, COUNT(*) FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 1 MINUTE) "
                          "GROUP BY window_start, window_end")



def tumble(s: str, late: str | None = None) -> str:
    """A TUMBLE query over stream ``s``, on the custom path when it sends its late rows to ``late``."""
    return (f"SELECT window_start, window_end, k, SUM(v) AS s FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), "
            "INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k"
            + (f"\nALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {late}" if late else ""))


def test_a_streaming_table_hides_nothing_with_its_views(spark, env):
    """The sink and LATE ROWS TO are views of the session: a name that would hide a stream, a table of the
    catalog or another running table's output is an error at that name, before anything starts; so is a
    stream that would hide a running table's output."""
    s, _ = env
    sqlwin.sql(spark, f"CREATE STREAMING TABLE names_run AS {tumble(s, 'names_run_late')}")
    spark.sql("CREATE TABLE names_kept (a INT) USING parquet")
    try:
        cases = {
            f"CREATE STREAMING TABLE names_a AS {tumble(s, 'names_a')}":
                (2, 50, "LATE ROWS TO names_a: that is the streaming table's own name"),
            f"CREATE STREAMING TABLE names_b AS {tumble(s, s)}":
                (2, 50, f"LATE ROWS TO {s}: {s} is a stream of this session"),
            f"CREATE STREAMING TABLE {s} AS {tumble(s)}":
                (1, 24, f"CREATE STREAMING TABLE {s}: {s} is a stream of this session"),
            f"CREATE STREAMING TABLE names_c AS {tumble(s, 'names_run_late')}":
                (2, 50, "the running streaming table names_run writes its late rows there"),
            f"CREATE STREAMING TABLE names_d AS {tumble(s, 'names_run')}":
                (2, 50, "the running streaming table names_run writes its panes there"),
            f"CREATE STREAMING TABLE names_kept AS {tumble(s)}":
                (1, 24, "names_kept is a table of the catalog"),
            f"INSERT INTO names_e {tumble(s)}": (1, 13, "INSERT INTO names_e: there is no streaming table names_e"),
            "CREATE STREAM names_run_late (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json OPTIONS "
            "(path '/nowhere')": (1, 15, "CREATE STREAM names_run_late: the running streaming table names_run "
                                         "writes its late rows there"),
        }
        for sql, (line, col, message) in cases.items():
            with pytest.raises(SqlwinError, match=re.escape(message)) as err:
                sqlwin.sql(spark, sql)
            assert (err.value.line, err.value.col) == (line, col), (sql, str(err.value))
        assert {t.name for t in catalog.all_tables()} == {"names_run"}  # none of them started
        # a replay writes its LATE ROWS TO view: the same rules
        spark.createDataFrame([("a", 1, at(1))], "k string, v int, ts timestamp").createOrReplaceTempView("names_t")
        sqlwin.sql(spark, "CREATE STREAM names_r FROM TABLE names_t ARRIVAL ORDER BY ts WATERMARK FOR ts AS ts")
        with pytest.raises(SqlwinError, match="LATE ROWS TO names_r: names_r is a stream of this session") as err:
            sqlwin.sql(spark, tumble("names_r", "names_r"))
        assert (err.value.line, err.value.col) == (2, 50)
        assert rows_of(sqlwin.sql(spark, tumble("names_r", "names_r_late")).select("k", "s")) == [("a", 1)]
    finally:
        spark.sql("DROP TABLE names_kept")



def test_limit_is_refused_and_order_by_keeps_every_pane(spark, env):
    """A streaming query's result is its panes, appended as windows fire, and its statement runs per
    micro-batch: LIMIT / OFFSET would keep n rows of each micro-batch's panes (a replay returned 2 + 2 + 1 rows
    for LIMIT 2 before), so they are errors at the clause's keyword (not at its value: the message is about the
    clause, whatever the number), live and replayed. ORDER BY keeps every row (it
    orders the rows within each micro-batch); Spark cannot sort a streaming aggregation, so it takes the
    custom path."""
    s, _ = env
    spark.createDataFrame([("a", 1, at(1), 0), ("b", 5, at(2), 0), ("a", 2, at(12), 1), ("b", 7, at(13), 1),
                           ("a", 3, at(25), 2)], "k string, v int, ts timestamp, b int").createOrReplaceTempView("ob_t")
    sqlwin.sql(spark, "CREATE STREAM ob_r FROM TABLE ob_t ARRIVAL ORDER BY b MICRO BATCH BY b WATERMARK FOR ts AS ts")
    cases = [  # the keyword's line and column
        (f"CREATE STREAMING TABLE ob_live AS {tumble(s, 'ob_late')} LIMIT 2", "LIMIT", 2, 58),
        (f"{tumble('ob_r')} ORDER BY s DESC LIMIT 2", "LIMIT", 1, 163),
        (f"{tumble('ob_r')} ORDER BY s DESC OFFSET 1", "OFFSET", 1, 163),
        (f"SELECT * FROM ({tumble('ob_r')} LIMIT 1) AS x", "LIMIT", 1, 162),
        (f"{tumble('ob_r')}\n  LIMIT\n    2", "LIMIT", 2, 3),
    ]
    for sql, word, line, col in cases:
        with pytest.raises(SqlwinError, match=f"^line {line}, col {col}: {word} in a streaming query") as err:
            sqlwin.sql(spark, sql)
        assert "ROW_NUMBER() OVER (PARTITION BY window_start, window_end" in str(err.value)
        lines = sql.splitlines()
        assert lines[line - 1][col - 1:].startswith(word), (sql, line, col)
    assert catalog.find_table("ob_live") is None
    ordered = sqlwin.sql(spark, f"{tumble('ob_r')} ORDER BY s DESC")
    # hand-worked: windows [0, 10) a 1, b 5; [10, 20) a 2, b 7; [20, 30) a 3
    assert rows_of(ordered.select("window_start", "k", "s")) == [
        (at(0), "a", 1), (at(0), "b", 5), (at(10), "a", 2), (at(10), "b", 7), (at(20), "a", 3)]
    assert rows_of(ordered) == rows_of(sqlwin.sql(spark, tumble("ob_r")))
    sqlwin.sql(spark, f"CREATE STREAMING TABLE ob_live AS {tumble(s)} ORDER BY s DESC")
    assert catalog.find_table("ob_live").path == "custom" and "ORDER BY" in catalog.find_table("ob_live").why


def test_combining_rows_across_windows_is_refused(spark):
    """Panes are computed as windows fire: above the window TVF, a DISTINCT, an OVER or a GROUP BY that does not
    keep windows apart would combine only the windows firing together (a replay returned 5 rows for a 2-row
    DISTINCT and 3 rows for a 1-row Top-N before). Kept apart by window_start, window_end, they give the batch
    answer; an aggregation around the one that reads the TVF is refused with what to write instead."""
    spark.createDataFrame([("a", 1, at(1), 0), ("b", 5, at(2), 0), ("a", 2, at(12), 1), ("b", 7, at(13), 1),
                           ("a", 3, at(25), 2)], "k string, v int, ts timestamp, b int").createOrReplaceTempView("cw_t")
    sqlwin.sql(spark, "CREATE STREAM cw_r FROM TABLE cw_t ARRIVAL ORDER BY b MICRO BATCH BY b WATERMARK FOR ts AS ts")
    rows = "TUMBLE(TABLE {src}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)"
    refused = [
        (f"SELECT DISTINCT k FROM {rows}", 17, "SELECT DISTINCT over the windowed rows must select window_start"),
        (f"SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (ORDER BY v DESC) AS rn FROM {rows}) x WHERE rn <= 1",
         32, "a window function over the windowed rows must PARTITION BY window_start, window_end"),
        (f"SELECT k, COUNT(*) AS n FROM (SELECT window_start, window_end, k, SUM(v) AS s FROM {rows} "
         "GROUP BY window_start, window_end, k) x GROUP BY k", None,
         "an aggregation over the window aggregation must GROUP BY window_start, window_end"),
        # kept apart, but the panes of an aggregation around another have no pane columns of their own (it
        # failed in Spark, naming a generated column, before)
        (f"SELECT window_start, window_end, MAX(s) AS m FROM (SELECT window_start, window_end, k, SUM(v) AS s "
         f"FROM {rows} GROUP BY window_start, window_end, k) x GROUP BY window_start, window_end", None,
         "an aggregation around the window aggregation does not run in streaming queries"),
        (f"SELECT window_start, window_end, COUNT(*) AS n FROM (SELECT * FROM {rows} WHERE v > 1) x "
         "GROUP BY window_start, window_end", None, "aggregate in the SELECT that reads the window TVF"),
    ]
    for sql, col, message in refused:
        with pytest.raises(SqlwinError, match=re.escape(message)) as err:
            sqlwin.sql(spark, sql.format(src="cw_r"))
        assert err.value.line == 1 and (col is None or err.value.col == col), str(err.value)
    kept_apart = [f"SELECT DISTINCT window_start, window_end, k FROM {rows}",
                  f"SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
                  f"ORDER BY v DESC) AS rn FROM {rows}) x WHERE rn <= 1"]
    # hand-worked: windows [0, 10) a 1, b 5; [10, 20) a 2, b 7; [20, 30) a 3
    expected = [[(at(0), at(10), "a"), (at(0), at(10), "b"), (at(10), at(20), "a"), (at(10), at(20), "b"),
                 (at(20), at(30), "a")],
                [("a", 3), ("b", 5), ("b", 7)]]
    for sql, rows in zip(kept_apart, expected, strict=True):
        batch = rows_of(sqlwin.sql(spark, sql.format(src="cw_t")))
        replayed = sqlwin.sql(spark, sql.format(src="cw_r"))
        assert rows_of(replayed.drop("pane_index", "pane_timing", "is_final", "micro_batch")) == batch == rows, sql


SESSION_BATCHES = [
    [row("a", 1, 1), row("a", 2, 2), row("b", 100, 3)],  # sessions [1, 7) a and [3, 8) b; W -> 1
    [row("a", 12, 12)],  # [12, 17); W -> 10, so [1, 7) and [3, 8) fire in the no-data micro-batch
    [row("a", 7, 7)],  # not late ([7, 12) ends after W = 10): bridges [1, 7) and [12, 17) into a new [1, 17)
    [row("a", 30, 30)],  # W -> 28: [1, 17) fires ON_TIME (pane 0 of the new window) and expires (17 + 10)
    [row("a", 5, 5)],  # its own [5, 10) is past 10 + 10 <= 28: dropped as late before merging
]


def session_sql(source: str, target: str) -> str:
    return f"""CREATE STREAMING TABLE {target} AS
        SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM SESSION(TABLE {source} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 5 SECONDS)
        GROUP BY window_start, window_end, k
        ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {target}_late"""


@pytest.mark.parametrize("state", ["auto", "executors"])
def test_session_windows_merge_and_match_replay(spark, env, tmp_path, state):
    """The sessions' pane state is the columnar engine's table: in the driver with ``auto`` (also past its limit
    of one window: sessions merge where they are), in Spark with ``executors`` (merged on the executors); the
    table stopped and started again after the third micro-batch goes on from its commit, where it was."""
    s, feeder = env
    spark.conf.set("sqlwin.streaming.state", state)
    spark.conf.set("sqlwin.streaming.state.driverWindows", "1")
    engine = {"auto": "SessionColumns", "executors": "KeyedSessions"}[state]
    try:
        table = start(spark, session_sql(s, "sess_out"))
        feeder.feed(SESSION_BATCHES[:3], table)
        assert type(table.operator.panes).__name__ == engine
        table.stop()
        catalog.remove_table("sess_out")
        spark.conf.set("sqlwin.streaming.state", {"auto": "executors", "executors": "driver"}[state])
        table = start(spark, session_sql(s, "sess_out"))  # (a commit resumes with the engine that wrote it)
        feeder.feed(SESSION_BATCHES[3:], table)
        assert type(table.operator.panes).__name__ == engine
    finally:
        spark.conf.unset("sqlwin.streaming.state")
        spark.conf.unset("sqlwin.streaming.state.driverWindows")
    columns = ["window_start", "window_end", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
    streamed = rows_of(spark.table("sess_out"), columns)
    assert streamed == [
        (at(1), at(7), "a", 3, 2, 0, "ON_TIME", False, 2),
        (at(1), at(17), "a", 22, 4, 0, "ON_TIME", True, 5),
        (at(3), at(8), "b", 100, 1, 0, "ON_TIME", False, 2),
    ]
    late_columns = ["k", "v", "window_start", "window_end", "watermark", "reason", "micro_batch"]
    assert rows_of(spark.table("sess_out_late"), late_columns) == [("a", 5, at(5), at(10), at(28), "late", 6)]
    # replay of the same rows cut into the same micro-batches gives the same panes and late rows
    data = [(r["k"], r["v"], at(r["v"] if r["k"] == "a" else 3), i) for i, b in enumerate(SESSION_BATCHES) for r in b]
    spark.createDataFrame(data, "k string, v int, ts timestamp, batch int").createOrReplaceTempView("sess_rows")
    sqlwin.sql(spark, "CREATE STREAM sess_replay FROM TABLE sess_rows ARRIVAL ORDER BY batch, v MICRO BATCH BY batch "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    replayed = sqlwin.sql(spark, session_sql("sess_replay", "x").split(" AS\n", 1)[1].replace("x_late", "sess_rl"))
    # ... plus what the end of the table fires: the watermark goes to +infinity and [30, 35) fires
    assert rows_of(replayed, columns) == sorted([*streamed, (at(30), at(35), "a", 30, 1, 0, "ON_TIME", True, 7)])
    assert rows_of(spark.table("sess_rl"), late_columns) == [("a", 5, at(5), at(10), at(28), "late", 6)]


def two_streams(spark, tmp_path, idle: str) -> dict:
    feeds = {}
    for name in ("two_a", "two_b"):
        feeds[name] = Feeder(tmp_path / name)
        sqlwin.sql(spark, f"CREATE STREAM {name} (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts) "
                          f"USING json OPTIONS (path '{tmp_path / name}'){idle}")
    return feeds


TWO_SQL = """CREATE STREAMING TABLE two_out AS
    SELECT window_start, window_end, SUM(v) AS s FROM TUMBLE(TABLE(SELECT k, v, ts FROM two_a UNION ALL
    SELECT k, v, ts FROM two_b), DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end"""


def test_several_streams_take_the_minimum_watermark(spark, tmp_path, monkeypatch):
    """GRAMMAR 3: the watermark of a query over several streams is the minimum of theirs."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    feeds = two_streams(spark, tmp_path, "")
    table = start(spark, TWO_SQL)
    try:
        assert table.path == "custom" and "several streams" in table.why
        feeds["two_b"].feed([[row("b", 1, 4)]], table)
        feeds["two_a"].feed([[row("a", 10, 3)], [row("a", 20, 31)]], table)
        assert spark.table("two_out").count() == 0  # W = min(31, 4): two_b holds it back
        feeds["two_b"].feed([[row("b", 2, 12)]], table)  # W = min(31, 12): [0, 10) fires
        assert rows_of(spark.table("two_out"), ["window_start", "s", "pane_timing"]) == [(at(0), 11, "ON_TIME")]
    finally:
        table.stop()
        catalog.remove_table("two_out")


def test_quiet_and_idle_streams_still_close_windows(spark, tmp_path, monkeypatch):
    """WITH IDLE TIMEOUT (GRAMMAR 3): two_b never sends a row and, once idle, does not hold two_a back; two_a
    goes quiet after one row and its watermark then follows processing time, so [0, 10) closes with no new
    row (about 1 s + (10 - 3) s after the row). Waits for that outcome, bounded; no fixed sleep decides it."""
    import time

    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    feeds = two_streams(spark, tmp_path, " WITH IDLE TIMEOUT INTERVAL 1 SECOND")
    table = start(spark, TWO_SQL)
    try:
        feeds["two_a"].feed([[row("a", 10, 3)]], table)
        deadline = time.monotonic() + 120
        while spark.table("two_out").count() < 1 and time.monotonic() < deadline:
            table.process_all_available()
            time.sleep(0.2)
        assert rows_of(spark.table("two_out"), ["window_start", "s", "pane_timing"]) == [(at(0), 10, "ON_TIME")]
    finally:
        table.stop()
        catalog.remove_table("two_out")


def test_processing_time_trigger_fires_on_a_quiet_stream(spark, env):
    """GRAMMAR 4 / issue 7: AFTER PROCESSING TIME fires within its delay plus one micro-batch even when no
    new row arrives (the operator asks Spark for a micro-batch when the timer comes). Waits for the pane,
    bounded; the pane's content does not depend on timing."""
    import time

    s, feeder = env
    table = start(spark, f"""CREATE STREAMING TABLE proc_out AS
        SELECT window_start, window_end, k, SUM(v) AS s FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 1 HOUR)
        GROUP BY window_start, window_end, k
        EMIT WITH TRIGGER REPEATEDLY AFTER PROCESSING TIME DELAY INTERVAL 1 SECOND""")
    feeder.feed([[row("a", 4, 1), row("a", 5, 2)]], table)
    deadline = time.monotonic() + 120
    while spark.table("proc_out").count() < 1 and time.monotonic() < deadline:
        table.process_all_available()
        time.sleep(0.2)
    assert rows_of(spark.table("proc_out"), ["window_start", "k", "s", "pane_index", "pane_timing", "is_final"]) == [
        (at(0), "a", 9, 0, "EARLY", False)]


def test_latest_pane_view_of_an_accumulating_table(spark, env):
    """Issue 7: OPTIONS (latest 'v') keeps only the latest pane per window and key (the window's result). Its keys
    here are written as Spark reads them: ``K`` grouped as ``k``, ``upper(k)`` by its ordinal and un-aliased (the
    table's column ``upper(k)``), the window's size HOUR TO SECOND; the latest panes are the batch query's rows."""
    s, feeder = env
    sql = ("SELECT window_start, window_end, K, upper(k), SUM(v) AS s FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), "
           "INTERVAL '0:00:10' HOUR TO SECOND) GROUP BY 1, 2, k, 4")
    table = start(spark, f"CREATE STREAMING TABLE acc_out OPTIONS (latest 'acc_now') AS {sql.format(s=s)} "
                         "EMIT WITH TRIGGER EVERY 1 ROWS ACCUMULATING")
    files = [[("a", 1, 1)], [("a", 2, 2), ("b", 5, 3)], [("a", 3, 12)]]
    feeder.feed([[row(*r) for r in rows] for rows in files], table)
    assert rows_of(spark.table("acc_out"), ["window_start", "k", "s", "pane_index"]) == [
        (at(0), "a", 1, 0), (at(0), "a", 3, 1), (at(0), "b", 5, 0), (at(10), "a", 3, 0)]
    assert rows_of(spark.table("acc_now"), ["window_start", "k", "s", "pane_index"]) == [
        (at(0), "a", 3, 1), (at(0), "b", 5, 0), (at(10), "a", 3, 0)]
    spark.createDataFrame([(k, v, at(sec)) for rows in files for k, v, sec in rows],
                          "k string, v int, ts timestamp").createOrReplaceTempView("acc_rows")
    batch = sqlwin.sql(spark, sql.format(s="acc_rows"))
    assert spark.table("acc_now").columns[:5] == batch.columns == ["window_start", "window_end", "K", "upper(k)", "s"]
    assert rows_of(spark.table("acc_now"), batch.columns) == rows_of(batch)


def test_windows_in_processing_time(spark, tmp_path, monkeypatch):
    """``pt AS PROCTIME()`` (GRAMMAR 1, 3): a window over pt holds the rows that arrived during it and fires
    once the processing clock passes its end, with no new row needed. Waits for that outcome, bounded."""
    import time

    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    feeder = Feeder(tmp_path / "pt_in")
    sqlwin.sql(spark, f"CREATE STREAM pt_s (k STRING, v INT, pt AS PROCTIME()) USING json "
                      f"OPTIONS (path '{tmp_path / 'pt_in'}')")
    table = start(spark, """CREATE STREAMING TABLE pt_out AS
        SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM TUMBLE(TABLE pt_s, DESCRIPTOR(pt), INTERVAL 2 SECONDS) GROUP BY window_start, window_end, k""")
    try:
        assert table.path == "custom"
        before = dt.datetime.utcnow()
        feeder.feed([[{"k": "a", "v": 1}, {"k": "a", "v": 2}, {"k": "b", "v": 5}]], table)
        deadline = time.monotonic() + 120
        while spark.table("pt_out").count() < 2 and time.monotonic() < deadline:
            table.process_all_available()
            time.sleep(0.2)
        out = spark.table("pt_out").orderBy("k").collect()
        assert [(r.k, r.s, r.c, r.pane_timing, r.is_final) for r in out] == [
            ("a", 3, 2, "ON_TIME", True), ("b", 5, 1, "ON_TIME", True)]
        assert out[0].window_start == out[1].window_start >= before - dt.timedelta(seconds=2)
        assert out[0].window_end - out[0].window_start == dt.timedelta(seconds=2)
    finally:
        table.stop()
        catalog.remove_table("pt_out")


def test_native_path_drops_late_rows_when_files_queue_up(spark, tmp_path, monkeypatch):
    """Micro-batches back to back (no no-data batch between them): the row for [0, 10) arriving when the
    watermark in force is 10 is dropped (GRAMMAR 4), as on the custom path; Spark's default for chained
    stateful operators would judge it by the watermark of the batch before."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "queued"
    sqlwin.sql(spark, f"CREATE STREAM queued (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 "
                      f"SECONDS) USING json OPTIONS (path '{folder}', maxFilesPerTrigger '1')")
    feeder = Feeder(folder)
    for i, rows in enumerate(BATCHES[:3]):  # written before the query runs: three micro-batches back to back
        feeder.write(rows)
        stamp = 1_700_000_000 + i  # the file source reads files in modification-time order
        os.utime(folder / f"f{i:05d}.json", (stamp, stamp))
    table = start(spark, """CREATE STREAMING TABLE queued_out AS
        SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM TUMBLE(TABLE queued, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k""")
    try:
        assert table.path == "native"
        table.process_all_available()
        assert rows_of(spark.table("queued_out"), ["window_start", "k", "s", "c"]) == [
            (at(0), "a", 3, 2), (at(0), "b", 3, 1)]
    finally:
        table.stop()
        catalog.remove_table("queued_out")
