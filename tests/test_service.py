"""``sqlwin run FILE.sql`` as a service (issue 19, point 1): it lasts while its streaming tables run, shows their
status, stops them on SIGTERM/SIGINT and exits 0, exits 1 with the error of a table that fails, and with
``--available-now`` reads what the sources hold (firing what that completes) and exits.

The CLI runs as a subprocess on its own Spark; signals are sent once its status lines show committed micro-batches
(read from its output, never after a sleep). The sink is checked after each run: hand-worked from GRAMMAR's rules
as in tests/test_streaming.py (same rows), every pane and late row exactly once across a stop and a restart.
"""

from __future__ import annotations

import io
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

import sqlwin
from sqlwin import service
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from sqlwin.streaming.tables import Status
from tests.proctools import SHORT_LIVED_ENV
from tests.streamtools import Feeder, rows_of
from tests.test_streaming import BATCHES, at

ROOT = Path(__file__).resolve().parent.parent

PIPELINE = """-- bids arrive as JSON files in ./in, one file per micro-batch
CREATE STREAM bids (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS)
  USING json OPTIONS (path '${sqlwin.file_dir}/in', maxFilesPerTrigger '1');

CREATE STREAMING TABLE totals AS
SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
FROM TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
GROUP BY window_start, window_end, k
ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO late_bids;
"""


class Cli:
    """``python -m sqlwin run ...`` in its own process group; its output lines read as they come."""

    def __init__(self, folder: Path, *args: str, root: bool = True):
        """``root``: SQLWIN_STREAMING_DIR is ``folder/root`` (else the run's ``--conf sqlwin.streaming.dir``)."""
        # its JVM lives seconds: C1 only (tests/proctools.py, SHORT_LIVED_ENV), less CPU spent compiling
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SQLWIN_NO_PROGRESS": "1", "PYTHONUNBUFFERED": "1",
               "SQLWIN_STREAMING_DIR": str(folder / "root"), "PYTHONPATH": str(ROOT), **SHORT_LIVED_ENV}
        env.pop("SQLWIN_DEBUG", None)
        if not root:
            env.pop("SQLWIN_STREAMING_DIR")
        small = ["--conf", "spark.sql.shuffle.partitions=1"]  # a few rows: one task per stage, quicker
        # status every 0.2 s, not every 1 s: the waits for a status line, and the exit once nothing runs, end sooner
        small += ["--refresh", "0.2"]
        self.proc = subprocess.Popen([sys.executable, "-m", "sqlwin", "run", *small, *args], cwd=folder, env=env,
                                     text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.out: list[str] = []
        self.err: list[str] = []
        self.pumps = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.out, True), daemon=True),
                      threading.Thread(target=self._pump, args=(self.proc.stderr, self.err, False), daemon=True)]
        for pump in self.pumps:
            pump.start()

    def _pump(self, stream, into: list[str], lines: bool) -> None:
        for line in stream:
            into.append(line)
            if lines:
                self.lines.put(line)

    def wait_line(self, pattern: str, timeout: float = 300) -> str:
        """The first output line (from now on) that matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            if re.search(pattern, line):
                return line
        self.kill()
        raise AssertionError(f"no line matching {pattern!r}\nstdout:\n{''.join(self.out)[-3000:]}\n"
                             f"stderr:\n{''.join(self.err)[-3000:]}")

    def wait(self, timeout: float = 300) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running after {timeout} s\nstdout:\n{''.join(self.out)[-3000:]}") from None
        for pump in self.pumps:  # to the pipes' ends
            pump.join(timeout=30)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def text(self) -> tuple[str, str]:
        return "".join(self.out), "".join(self.err)


def read_sink(spark, folder: Path) -> object:
    """A sink's folder as a table; its few micro-batches were not compacted (no manifest names any file)."""
    assert not list(folder.glob("_sqlwin_sink/manifest-*")), "compacted: read it through sqlwin's view"
    return spark.read.parquet(str(folder))


@pytest.mark.slow
def test_run_lasts_until_sigterm_and_resumes_exactly_once_with_available_now(spark, tmp_path: Path) -> None:
    (tmp_path / "pipeline.sql").write_text(PIPELINE)
    feeder = Feeder(tmp_path / "in")
    feeder.write(BATCHES[0])  # W -> 5
    cli = Cli(tmp_path, "pipeline.sql")
    try:
        cli.wait_line(r" totals running micro_batches=1 rows_in=3 ")
        feeder.write(BATCHES[1])  # W -> 10: [0, 10) fires in the no-data micro-batch after it (sqlwin's 2)
        cli.wait_line(r" totals running micro_batches=3 rows_in=4 .*open_windows=3 ")
        os.kill(cli.proc.pid, signal.SIGTERM)  # the Python process only: it stops its tables itself
        assert cli.wait() == 0, cli.text()
    finally:
        cli.kill()
    out, err = cli.text()
    assert "SIGTERM: stopped 1 streaming table;" in out, out
    assert re.search(r"^\S+ totals stopped micro_batches=3 ", out, re.MULTILINE), out
    assert "Traceback" not in out + err and "Exception" not in out + err, err[-3000:]
    columns = ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
    first = [(at(0), "a", 3, 2, 0, "ON_TIME", False, 2), (at(0), "b", 3, 1, 0, "ON_TIME", False, 2)]
    assert rows_of(read_sink(spark, tmp_path / "root" / "totals" / "data"), columns) == first

    for i, rows in enumerate(BATCHES[2:]):  # a late row within the lateness, W -> 28, a row past the lateness
        feeder.write(rows)
        later = time.time() + i + 1  # the file source reads the oldest first: files written in one millisecond
        os.utime(tmp_path / "in" / f"f{feeder.count - 1:05d}.json", (later, later))  # would tie
    cli = Cli(tmp_path, "--available-now", "pipeline.sql")
    try:
        assert cli.wait() == 0, cli.text()
    finally:
        cli.kill()
    out, err = cli.text()
    # one file per micro-batch (maxFilesPerTrigger): f3's micro-batch (W -> 28) runs the no-data one that fires
    # [10, 20) inside it (5), then f4's drops its row (6), as when the files come one at a time: nothing is left
    # for a second query of the run
    assert re.search(r"^\S+ totals stopped micro_batches=7 rows_in=7 .*late_rows_dropped=1 ", out, re.MULTILINE), out
    assert "Traceback" not in out + err, err[-3000:]
    assert rows_of(read_sink(spark, tmp_path / "root" / "totals" / "data"), columns) == [
        *first[:1], (at(0), "a", 8, 3, 1, "LATE", False, 3), *first[1:], (at(10), "a", 4, 1, 0, "ON_TIME", True, 5)]
    late = ["k", "v", "ts", "window_start", "window_end", "watermark", "reason", "micro_batch"]
    assert rows_of(read_sink(spark, tmp_path / "root" / "totals" / "late_rows"), late) == [
        ("a", 7, at(8), at(0), at(10), at(28), "late", 6)]


@pytest.mark.slow
def test_sigterm_while_a_table_starts_stops_what_started_and_exits_0(tmp_path: Path) -> None:
    """SIGTERM sent while the script's table starts (its folder made, its query not started yet): that statement
    ends, the next one does not run, the table stops and the CLI exits 0 (it died with 143 when the signal came
    before the status loop)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "pipeline.sql").write_text(PIPELINE + """
CREATE STREAMING TABLE never AS
SELECT window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
GROUP BY window_start, window_end;
""")
    cli = Cli(tmp_path, "pipeline.sql")
    try:
        cli.wait_line(r"^stream bids created")
        deadline = time.monotonic() + 120
        while not (tmp_path / "root" / "totals").is_dir():  # the table's start made its folder: it starts now
            assert cli.proc.poll() is None and time.monotonic() < deadline, cli.text()
            time.sleep(0.01)
        os.kill(cli.proc.pid, signal.SIGTERM)
        assert cli.wait() == 0, cli.text()
    finally:
        cli.kill()
    out, err = cli.text()
    assert "streaming table totals started " in out and "never" not in out, out
    assert re.search(r"^\S+ totals stopped micro_batches=0 ", out, re.MULTILINE), out
    assert "SIGTERM: stopped 1 streaming table;" in out, out
    assert "Traceback" not in out + err and "Exception" not in out + err, err[-3000:]
    assert not (tmp_path / "root" / "never").exists()


def job_started(events: Path, group: str) -> bool:
    """Whether Spark's event log in ``events`` (uncompressed, not rolled) holds the start of a job of ``group``."""
    for log in events.glob("*"):
        with log.open(encoding="utf-8", errors="replace") as lines:
            if any('"SparkListenerJobStart"' in x and f'"spark.jobGroup.id":"{group}"' in x for x in lines):
                return True
    return False


@pytest.mark.slow
def test_sigterm_during_a_long_batch_statement_cancels_it_and_exits_143(tmp_path: Path) -> None:
    """SIGTERM while a batch statement's Spark job runs (hours long): its job is cancelled, one line names the
    statement at its line and column, no later statement runs, the table started before it stops as on any SIGTERM
    and the run exits 143 (it waited for the statement to end). The job is seen started in Spark's event log (its
    job start is flushed at once), the statement's job group (sqlwin-run-3: the file's third statement) in it."""
    (tmp_path / "in").mkdir()
    (tmp_path / "pipeline.sql").write_text(PIPELINE + """
-- a batch statement of hours
  SELECT SUM(id * 7 % 13) AS s FROM range(1000000000000);
CREATE STREAMING TABLE never AS
SELECT window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
GROUP BY window_start, window_end;
""")
    events = tmp_path / "events"
    events.mkdir()
    cli = Cli(tmp_path, "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events.as_uri()}",
              "--conf", "spark.eventLog.compress=false", "--conf", "spark.eventLog.rolling.enabled=false",
              "pipeline.sql")
    try:
        deadline = time.monotonic() + 300
        while not job_started(events, "sqlwin-run-3"):
            assert cli.proc.poll() is None and time.monotonic() < deadline, cli.text()
            time.sleep(0.05)
        os.kill(cli.proc.pid, signal.SIGTERM)  # the Python process only
        assert cli.wait(timeout=60) == 143, cli.text()
    finally:
        cli.kill()
    out, err = cli.text()
    lines = [x for x in err.splitlines() if not x.startswith("WARNING: Using incubator modules")]  # the JVM's
    assert lines == ["SIGTERM: cancelled the statement at pipeline.sql:12:3: "
                     "SELECT SUM(id * 7 % 13) AS s FROM range(1000000000000)"], err[-3000:]
    assert re.search(r"^\S+ totals stopped micro_batches=0 ", out, re.MULTILINE), out
    assert "SIGTERM: stopped 1 streaming table;" in out and "never" not in out, out
    assert not (tmp_path / "root" / "never").exists()


@pytest.mark.slow
def test_available_now_with_a_table_that_cannot_read_its_file_exits_1_with_one_error(tmp_path: Path) -> None:
    """A table under --available-now reads a stream whose file is not Parquet: it fails, and the run exits 1 with
    the failure at its statement, the only thing on stderr (Spark's file writer logged "Aborting job" with its Java
    stack trace first; and one more for each other table the failure stopped, its write interrupted)."""
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "x.parquet").write_text("not parquet\n")
    (tmp_path / "pipeline.sql").write_text("""-- a stream whose file is broken
CREATE STREAM broken (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS)
  USING parquet OPTIONS (path '${sqlwin.file_dir}/broken');
CREATE STREAMING TABLE broken_counts AS
SELECT window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE broken, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
GROUP BY window_start, window_end;
""")
    # the root as a setting: spark-submit warned "Ignoring non-Spark config property: sqlwin.streaming.dir"
    cli = Cli(tmp_path, "--conf", f"sqlwin.streaming.dir={tmp_path / 'jobs'}", "--available-now", "pipeline.sql",
              root=False)
    try:
        assert cli.wait() == 1, cli.text()
    finally:
        cli.kill()
    out, err = cli.text()
    assert re.search(r"^\S+ broken_counts failed ", out, re.MULTILINE), out
    assert (tmp_path / "jobs" / "broken_counts" / "checkpoint").is_dir() and not (tmp_path / "root").exists()
    file = (tmp_path / "broken" / "x.parquet").as_uri()
    lines = [x for x in err.splitlines() if not x.startswith("WARNING: Using incubator modules")]  # the JVM's
    assert lines == ["error: line 4, col 1: streaming table broken_counts failed: [FAILED_READ_FILE.NO_HINT] "
                     f"Encountered error while reading file {file}: it is not a Parquet file. Expected magic number at "
                     "tail, but found [117, 101, 116, 10]", " --> pipeline.sql:4:1",
                     "4 | CREATE STREAMING TABLE broken_counts AS", "  | ^"], err[-3000:]


# ------------------------------------------------------------------ in this process, on the shared session
@pytest.fixture()
def stream(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "in"
    sqlwin.sql(spark, "CREATE STREAM s_svc (k STRING, v INT, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
    yield Feeder(folder)
    for table in catalog.all_tables():
        table.stop()
        catalog.remove_table(table.name)


def consoles() -> tuple[Console, io.StringIO, Console, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Console(file=out, width=1000, no_color=True), out, Console(file=err, width=1000, no_color=True), err


def test_sigint_stops_every_table_and_the_watch_ends_with_0(spark, stream: Feeder) -> None:
    sqlwin.sql(spark, "CREATE STREAMING TABLE svc_counts AS SELECT window_start, window_end, COUNT(*) AS c "
                      "FROM TUMBLE(TABLE s_svc, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end")
    table = catalog.find_table("svc_counts")
    stream.feed(BATCHES[:2], table)
    out_console, out, err_console, err = consoles()

    def interrupt_once_committed() -> None:  # as Ctrl-C would, once the status shows a committed micro-batch
        deadline = time.monotonic() + 120
        while "svc_counts running micro_batches=" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_committed, daemon=True).start()
    before = signal.getsignal(signal.SIGINT)  # pyspark's: it cancels every job and raises KeyboardInterrupt
    with service.stop_signals() as stop:
        code = service.watch(out_console, err_console, {}, stop, refresh=0.2, live=False)
    assert code == 0, err.getvalue()
    assert not table.is_active and table.status().status == "stopped"
    lines = out.getvalue().splitlines()
    assert re.match(r"\d\d:\d\d:\d\d svc_counts running micro_batches=\d+ rows_in=4 ", lines[0]), lines
    assert re.match(r"\d\d:\d\d:\d\d svc_counts stopped ", lines[-2]), lines
    assert lines[-1] == ("SIGINT: stopped 1 streaming table; started again on the same folders, they resume where "
                         "they stopped")
    assert signal.getsignal(signal.SIGINT) is before  # put back


def test_ctrl_c_twice_does_not_wait_for_a_graceful_end() -> None:
    """The first SIGINT asks for a graceful end (the event); a second one, while that is still under way,
    raises KeyboardInterrupt as in most tools; SIGTERM never does (a service manager's stop stays graceful)."""
    with service.stop_signals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.is_set() and stop.names == ["SIGTERM", "SIGTERM", "SIGINT"]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("before", [False, True], ids=["fails_while_watched", "failed_before_the_watch"])
def test_a_failing_table_ends_the_watch_with_1_and_its_error_at_the_statement(spark, stream: Feeder,
                                                                              before: bool) -> None:
    """``before``: the table failed while the script's later statements ran, before the watch began (the watch
    returned 0, saying nothing, when no table was active any more)."""
    text = ("-- v = 0 divides by zero (ANSI) when its window fires\n"
            "CREATE STREAMING TABLE svc_bad AS SELECT window_start, window_end,\n"
            "       SUM(10 / v) AS r FROM TUMBLE(TABLE s_svc, DESCRIPTOR(ts), INTERVAL 10 SECONDS)\n"
            "GROUP BY window_start, window_end ALLOWED LATENESS INTERVAL 1 SECOND")
    sqlwin.sql(spark, text)
    stream.write([{"k": "a", "v": 0, "ts": "2024-01-01 00:00:01"}, {"k": "a", "v": 1, "ts": "2024-01-01 00:00:30"}])
    if before:
        with pytest.raises(SqlwinError, match=r"DIVIDE_BY_ZERO"):
            catalog.find_table("svc_bad").process_all_available()
        assert not catalog.find_table("svc_bad").is_active
    out_console, out, err_console, err = consoles()
    origin = service.Origin("jobs.sql", "SELECT 1;\n" + text, (1, 0))
    with service.stop_signals() as stop:
        code = service.watch(out_console, err_console, {"svc_bad": origin}, stop, refresh=0.2, live=False)
    assert code == 1
    message = err.getvalue()
    assert message.startswith("error: line 4, col 12: streaming table svc_bad failed: [DIVIDE_BY_ZERO]"), message
    assert " --> jobs.sql:4:12\n" in message and "Traceback" not in message and "at org.apache" not in message
    assert re.search(r"svc_bad failed micro_batches=", out.getvalue()), out.getvalue()


def test_the_live_view_is_one_table_redrawn_in_place() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, force_terminal=True, color_system=None)
    running = Status("bid_totals", "running", "custom", 4, 1200, "2024-01-01 00:00:28", 3, 2, 1, None, 35.2,
                     "2024-01-01 10:00:03.120")
    with service.LiveView(console) as view:
        view.show([running])
        view.show([Status(**{**running.__dict__, "micro_batches": 5})])
    text = buffer.getvalue()
    first, second = text.split("\x1b[2K")[0], text.split("\x1b[2K")[-1]  # lines erased: drawn again in place
    row = r"bid_totals +running +{} +1200 +35\.2 +2024-01-01 00:00:28 +2 +3 +1 +10:00:03 "
    assert re.search(row.format(4), first) and re.search(row.format(5), second), buffer.getvalue()


def test_variables_of_the_session_conf_in_options(spark) -> None:
    from sqlwin.streaming.sources import expand_conf

    spark.conf.set("sqlwin.file_dir", "/data/jobs")
    try:
        assert expand_conf(spark, {"path": "${sqlwin.file_dir}/in", "sep": ";", "x": "${no.such.key}/a"}) == {
            "path": "/data/jobs/in", "sep": ";", "x": "${no.such.key}/a"}
    finally:
        spark.conf.unset("sqlwin.file_dir")



def test_available_now_on_the_native_path_fires_what_the_files_complete_and_ends(spark, stream: Feeder) -> None:
    """Spark's own aggregation under availableNow: one run reads the files there are, and its last micro-batch
    (no new data) closes the windows the watermark passed; the watch then ends by itself."""
    from sqlwin.streaming.tables import AVAILABLE_NOW_CONF

    for rows in BATCHES[:2]:  # W -> 10 once both are read
        stream.write(rows)
    spark.conf.set(AVAILABLE_NOW_CONF, "true")
    try:
        sqlwin.sql(spark, "CREATE STREAMING TABLE svc_now AS SELECT window_start, window_end, COUNT(*) AS c "
                          "FROM TUMBLE(TABLE s_svc, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
                          "GROUP BY window_start, window_end")
    finally:
        spark.conf.unset(AVAILABLE_NOW_CONF)
    table = catalog.find_table("svc_now")
    assert table.path == "native"
    out_console, out, err_console, err = consoles()
    with service.stop_signals() as stop:
        code = service.watch(out_console, err_console, {}, stop, refresh=0.2, live=False)
    assert code == 0 and not table.is_active, err.getvalue()
    assert re.search(r"svc_now stopped micro_batches=2 rows_in=4 ", out.getvalue()), out.getvalue()
    assert rows_of(spark.table("svc_now"), ["window_start", "window_end", "c"]) == [(at(0), at(10), 3)]


def test_the_watermark_shows_as_the_session_shows_timestamps_on_both_paths(spark, stream: Feeder) -> None:
    """In a session whose time zone is not UTC, the native and the custom path show the watermark after their
    last committed micro-batch alike: as ``CAST(ts AS STRING)`` shows it there, with its fraction of a second."""
    query = ("SELECT window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE s_svc, DESCRIPTOR(ts), "
             "INTERVAL 10 SECONDS) GROUP BY window_start, window_end")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")  # the rows' ts are read in it too
    try:
        sqlwin.sql(spark, f"CREATE STREAMING TABLE svc_wm_native AS {query}")
        sqlwin.sql(spark, f"CREATE STREAMING TABLE svc_wm_custom AS {query} ALLOWED LATENESS INTERVAL 1 SECOND")
        tables = [catalog.find_table("svc_wm_native"), catalog.find_table("svc_wm_custom")]
        assert [t.path for t in tables] == ["native", "custom"]
        assert [t.status().watermark for t in tables] == [None, None]
        stream.feed([[{"k": "a", "v": 1, "ts": "2024-01-01 00:00:01"},
                      {"k": "a", "v": 2, "ts": "2024-01-01 00:00:07.25"}]], *tables)  # W -> 5.25 s
        assert [t.status().watermark for t in tables] == ["2024-01-01 00:00:05.25"] * 2
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_a_micro_batch_counts_in_the_status_once_it_commits(spark, stream: Feeder) -> None:
    """The second file's micro-batch drops a row past the lateness (counted as it is classified), then fails
    computing the LATE pane its other row fires (10 / SUM(v), SUM(v) = 0): nothing of it committed, so the status
    counts none of it (a restart runs it again)."""
    sqlwin.sql(spark, "CREATE STREAMING TABLE svc_once AS SELECT window_start, window_end, 10 / SUM(v) AS r "
                      "FROM TUMBLE(TABLE s_svc, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end "
                      "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO svc_once_late")
    table = catalog.find_table("svc_once")
    # W -> 12: [0, 10) fires ON_TIME (r = 10) in the no-data micro-batch after the file's (sqlwin's 0 and 1)
    stream.feed([[{"k": "a", "v": 1, "ts": "2024-01-01 00:00:01"}, {"k": "a", "v": 1, "ts": "2024-01-01 00:00:14"}]],
                table)
    status = table.status()
    assert (status.status, status.micro_batches, status.rows_in, status.late_rows_dropped) == ("running", 2, 2, 0)
    # ts 8: late for [0, 10) within the lateness, a LATE pane of 10 / (1 - 1); ts -5: [-10, 0) is past its lateness
    stream.write([{"k": "a", "v": -1, "ts": "2024-01-01 00:00:08"}, {"k": "a", "v": 1, "ts": "2023-12-31 23:59:55"}])
    with pytest.raises(SqlwinError, match=r"DIVIDE_BY_ZERO"):
        table.process_all_available()
    status = table.status()
    assert (status.status, status.micro_batches, status.rows_in, status.late_rows_dropped, status.watermark) == (
        "failed", 2, 2, 0, "2024-01-01 00:00:12")
    assert spark.table("svc_once_late").count() == 0
