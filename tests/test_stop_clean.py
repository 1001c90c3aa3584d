"""STOP STREAMING TABLE while a custom-path micro-batch is busy in a Spark job (issue 17, item 6).

The stop cancels the micro-batch's job; the table is then ``stopped`` (not ``failed``), the JVM prints and logs
nothing (before the fix the stream thread died printing ``java.lang.StackOverflowError``, from Spark's regex over
the interrupted batch's error: ``sqlwin.streaming.stopping``), the micro-batch is left uncommitted, and the same
statement started again on the same folder runs it again: every pane and late row exactly once, as in
tests/test_streaming.py's uninterrupted run of the same rows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import sqlwin
from sqlwin.streaming import catalog
from sqlwin.streaming.operator import MicroBatchOperator
from tests.streamtools import Feeder, rows_of
from tests.test_streaming import BATCHES, at

pytestmark = pytest.mark.slow

QUERY = """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE s_stop, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k"""
STATEMENT = f"CREATE STREAMING TABLE stop_c AS {QUERY} ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO stop_cl"
PROBE = "sqlwin-test-probe"


@pytest.fixture()
def stream(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Feeder]:
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "in"
    sqlwin.sql(spark, "CREATE STREAM s_stop (k STRING, v INT, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
    yield Feeder(folder)
    for table in catalog.all_tables():
        table.stop()
        catalog.remove_table(table.name)


class BusyFiring:
    """The first micro-batch that fires panes runs, before its panes, a Spark job that lasts until something
    cancels it (one task sleeping 10 minutes): a stop then lands inside a busy micro-batch, not by timing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.inside = threading.Event()
        emit = MicroBatchOperator._emit

        def busy_emit(operator: MicroBatchOperator, spark, fired, batch: int) -> None:
            if fired and not self.inside.is_set():
                self.inside.set()
                spark.range(1).selectExpr("reflect('java.lang.Thread', 'sleep', 600000L)").collect()
            emit(operator, spark, fired, batch)

        monkeypatch.setattr(MicroBatchOperator, "_emit", busy_emit)

    def wait_busy(self, spark, timeout: float = 120) -> None:
        """Until the micro-batch's job runs (the test's thread runs none)."""
        assert self.inside.wait(timeout), "no micro-batch fired panes"
        deadline = time.monotonic() + timeout
        while not spark.sparkContext.statusTracker().getActiveJobsIds():
            assert time.monotonic() < deadline, "the micro-batch's job did not start"
            time.sleep(0.02)


@contextmanager
def jvm_output(spark) -> Iterator[list[str]]:
    """What the JVM prints on System.out / System.err (where a dying thread's stack trace goes) and logs
    (log4j, at the session's level) meanwhile; the list gets the text at the end."""
    jvm = spark.sparkContext._jvm
    system, log4j = jvm.java.lang.System, jvm.org.apache.logging.log4j
    buffer = jvm.java.io.ByteArrayOutputStream()
    stream = jvm.java.io.PrintStream(buffer, True)
    context = log4j.LogManager.getContext(False)
    root = context.getConfiguration().getRootLogger()
    appender = log4j.core.appender.WriterAppender.createAppender(
        log4j.core.layout.PatternLayout.createDefaultLayout(), None, jvm.java.io.PrintWriter(stream, True),
        "sqlwin-test", False, True)
    appender.start()
    root.addAppender(appender, None, None)
    context.updateLoggers()
    out, err = system.out, system.err
    system.setOut(stream)
    system.setErr(stream)
    text: list[str] = []
    try:
        system.err.println(f"{PROBE} stderr")
        log4j.LogManager.getLogger("sqlwin.test").error(f"{PROBE} log")
        yield text
    finally:
        system.setOut(out)
        system.setErr(err)
        root.removeAppender("sqlwin-test")
        context.updateLoggers()
        appender.stop()
        text.append(buffer.toString())


def checkpoint_batches(root: Path, kind: str) -> set[int]:
    folder = root / "stop_c" / "checkpoint" / kind
    return {int(n) for n in (p.name for p in folder.iterdir()) if n.isdigit()}


def sqlwin_commits(root: Path) -> set[int]:
    return {int(p.stem) for p in (root / "stop_c" / "sqlwin" / "state").glob("*.json") if p.stem.isdigit()}


def test_stop_during_a_busy_micro_batch_is_clean_and_resumes_exactly_once(spark, stream, monkeypatch, tmp_path,
                                                                          capfd, caplog) -> None:
    busy = BusyFiring(monkeypatch)
    sqlwin.sql(spark, STATEMENT)
    table = catalog.find_table("stop_c")
    assert table.path == "custom"
    stream.feed(BATCHES[:1], table)
    stream.write(BATCHES[1])  # W -> 10: the no-data micro-batch after it fires [0, 10) and is held busy
    busy.wait_busy(spark)
    with jvm_output(spark) as printed:
        started = time.monotonic()
        sqlwin.sql(spark, "STOP STREAMING TABLE stop_c")
        stopped_after = time.monotonic() - started
    status = table.status()
    assert (status.status, status.error) == ("stopped", None)
    assert table.query.exception() is None
    assert stopped_after < 60  # the job was cancelled, not waited for
    assert f"{PROBE} stderr" in printed[0] and f"{PROBE} log" in printed[0]  # the capture works
    jvm = printed[0].replace(f"{PROBE} stderr", "").replace(f"{PROBE} log", "")
    assert "StackOverflowError" not in jvm and "Exception" not in jvm and not jvm.strip(), jvm[:3000]
    out, err = capfd.readouterr()
    assert "StackOverflowError" not in out + err and "Exception" not in out + err, (out + err)[-3000:]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    # the firing micro-batch was interrupted: logged by Spark, committed by neither Spark nor sqlwin
    root = tmp_path / "root"
    interrupted = max(checkpoint_batches(root, "offsets"))
    assert interrupted not in checkpoint_batches(root, "commits")
    assert max(sqlwin_commits(root)) == 1 and rows_of(spark.table("stop_c")) == []  # micro-batch 2 fires [0, 10)

    sqlwin.sql(spark, STATEMENT)  # the same statement on the same folder: the interrupted batch runs again
    table = catalog.find_table("stop_c")
    table.process_all_available()
    assert interrupted in checkpoint_batches(root, "commits")
    stream.feed(BATCHES[2:], table)
    columns = ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
    assert rows_of(spark.table("stop_c"), columns) == [
        (at(0), "a", 3, 2, 0, "ON_TIME", False, 2),
        (at(0), "a", 8, 3, 1, "LATE", False, 3),
        (at(0), "b", 3, 1, 0, "ON_TIME", False, 2),
        (at(10), "a", 4, 1, 0, "ON_TIME", True, 5),
    ]
    late = ["k", "v", "ts", "window_start", "window_end", "watermark", "reason", "micro_batch"]
    assert rows_of(spark.table("stop_cl"), late) == [("a", 7, at(8), at(0), at(10), at(28), "late", 6)]
    status = table.status()
    assert (status.status, status.rows_in, status.late_rows_dropped, status.micro_batches) == ("running", 7, 1, 7)


def test_stop_never_interrupts_a_change_of_the_tables_view(spark, stream, monkeypatch, tmp_path) -> None:
    """A stop that comes while a micro-batch changes the table's catalog view (here the native path's) waits
    for the change: an interrupted catalog change is logged by Spark's ListenerBus with a Java stack trace (it
    reached ``sqlwin run``'s stderr on SIGTERM) and loses a catalog listener. Nothing is lost or doubled."""
    from sqlwin.streaming import tableviews
    from sqlwin.streaming.stopping import QUERY_ID

    statement = f"CREATE STREAMING TABLE stop_n AS {QUERY}"
    define = tableviews.define
    inside, release = threading.Event(), threading.Event()
    armed = threading.Event()

    def held_define(spark_, view, entry, query, first) -> None:
        if armed.is_set() and spark_.sparkContext.getLocalProperty(QUERY_ID) and not inside.is_set():
            inside.set()  # a micro-batch's view change, held until the test lets it go
            assert release.wait(120)
        define(spark_, view, entry, query, first)

    monkeypatch.setattr(tableviews, "define", held_define)
    sqlwin.sql(spark, statement)
    table = catalog.find_table("stop_n")
    assert table.path == "native"
    stream.feed(BATCHES[:1], table)
    armed.set()
    stream.write(BATCHES[1])  # W -> 10: [0, 10) is written and the view changed, held
    assert inside.wait(120), "no micro-batch changed the view"
    stopper = threading.Thread(target=sqlwin.sql, args=(spark, "STOP STREAMING TABLE stop_n"))
    with jvm_output(spark) as printed:
        stopper.start()
        # without the gate the stop marks the query stopped and interrupts the held change at once
        deadline = time.monotonic() + 5
        while table.query.isActive and time.monotonic() < deadline:
            time.sleep(0.05)
        active_while_changing = table.query.isActive
        release.set()
        stopper.join(120)
    assert active_while_changing, "the stop did not wait for the view change in flight"
    assert not stopper.is_alive() and table.status().status == "stopped" and table.query.exception() is None
    jvm = printed[0].replace(f"{PROBE} stderr", "").replace(f"{PROBE} log", "")
    assert "Exception" not in jvm and not jvm.strip(), jvm[:3000]

    monkeypatch.setattr(tableviews, "define", define)
    sqlwin.sql(spark, statement)  # resumes: what the stopped micro-batch did is there once
    table = catalog.find_table("stop_n")
    table.process_all_available()
    stream.feed(BATCHES[2:4], table)  # a late row (dropped: no lateness), then W -> 28: [10, 20) fires
    assert rows_of(spark.table("stop_n"), ["window_start", "k", "s", "c"]) == [
        (at(0), "a", 3, 2), (at(0), "b", 3, 1), (at(10), "a", 4, 1)]
