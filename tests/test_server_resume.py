"""Server restarts resume (issue 19, point 3): ``sqlwin serve`` killed with SIGKILL between two files, started again
on the same streaming root, resumes each streaming table that was running from its checkpoint, and every pane is
there exactly once.

The rows are those of tests/test_streaming.py (BATCHES) with its hand-worked panes: the custom path (lateness 5 s,
LATE ROWS TO) and the native path (lateness 0). Each file is written once the server has processed the one before
it: for the custom path, whose panes depend on how rows are cut into micro-batches, that is what the test waits
for (the table's rows_in, or the pane the file fires); the native path's answer is the same however its files are
cut. The server is a real ``python -m sqlwin serve`` process (its JVM killed with it), the client pyhive.

A table that failed (a json row its columns cannot hold) stays failed across the restart, as a failed Flink job
stays FAILED: listed with its error, not started again (it would fail again at every start); its statement run
again once the file is replaced resumes it from its checkpoint, every pane once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from sqlwin.server import OWNER_FILE, SCRATCH_PREFIX, ServerProcess
from tests.proctools import SHORT_LIVED_ENV
from tests.streamtools import Feeder, ts
from tests.test_server import _process_tree
from tests.test_streaming import BATCHES, at
from tests.test_streaming_server import bench, poll, shown

pytestmark = pytest.mark.slow

STREAM = ("CREATE STREAM rs (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) "
          "USING json OPTIONS (path '{folder}')")
QUERY = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM TUMBLE(TABLE rs, DESCRIPTOR(ts), "
         "INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k")
FAILING = (f"CREATE STREAMING TABLE failing AS {QUERY.replace('TABLE rs,', 'TABLE rs_bad,')}",
           STREAM.replace("STREAM rs ", "STREAM rs_bad "))
PANES = "SELECT window_start, k, s, c, pane_index, pane_timing, is_final FROM {}"
# tests/test_streaming.py's hand-worked panes (test_lateness_late_panes_and_late_rows, test_native_path_default_...)
ON_TIME_0 = [(at(0), "a", 3, 2, 0, "ON_TIME", False), (at(0), "b", 3, 1, 0, "ON_TIME", False)]
LATE_0 = (at(0), "a", 8, 3, 1, "LATE", False)
ON_TIME_10 = (at(10), "a", 4, 1, 0, "ON_TIME", True)
NATIVE = [(at(0), "a", 3, 2, 0, "ON_TIME", True), (at(0), "b", 3, 1, 0, "ON_TIME", True),
          (at(10), "a", 4, 1, 0, "ON_TIME", True)]


def rows_in(cursor, table: str) -> int:
    return int(next(r[4] for r in bench.fetch(cursor, "SHOW STREAMING TABLES") if r[0] == table))


def poll_rows_in(cursor, table: str, expected: int) -> None:
    """Wait until the table has committed ``expected`` input rows (it runs on its own in the server)."""
    deadline = time.monotonic() + 240
    while (got := rows_in(cursor, table)) != expected:
        assert time.monotonic() < deadline, f"{table}: rows_in {got}, expected {expected}"
        time.sleep(0.3)


def kill_hard(server: ServerProcess) -> None:
    """SIGKILL the server and its JVM at once: no shutdown hook, no query stopped, as a crash."""
    assert server.proc is not None
    for pid in _process_tree(server.proc.pid):
        with contextlib.suppress(ProcessLookupError):  # gone with its parent
            os.kill(pid, signal.SIGKILL)
    server.proc.wait()


def scratch_of(pid: int) -> list[Path]:
    """The scratch folders the server process ``pid`` made (``sqlwin.server.sweep_stale_scratch``)."""
    found = []
    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        with contextlib.suppress(OSError):
            if (folder / OWNER_FILE).read_text().strip() == str(pid):
                found.append(folder)
    return found


def test_killed_server_resumes_every_running_table_exactly_once(tmp_path: Path) -> None:
    root, folder = tmp_path / "root", tmp_path / "in"
    # each server's JVM lives well under a minute: C1 only (tests/proctools.py, SHORT_LIVED_ENV), less CPU compiling
    env = {"SQLWIN_STREAMING_DIR": str(root), **SHORT_LIVED_ENV}
    # as tests/conftest.py's session: of the two tables, the idle one polls its stream every 100 ms, not 10
    args = ["--conf", "spark.sql.streaming.pollingDelay=100ms"]
    feeder, bad = Feeder(folder), Feeder(tmp_path / "bad")
    registry = root / "_sqlwin_registry"
    first = ServerProcess(args=args, env=env, log_path=tmp_path / "first.log").start()
    try:
        cursor = bench.connect(first.host, first.port).cursor()
        cursor.execute(STREAM.format(folder=folder))
        cursor.execute(f"CREATE STREAMING TABLE resumed AS {QUERY} ALLOWED LATENESS INTERVAL 5 SECONDS "
                       "LATE ROWS TO resumed_late")
        # json: its view reads with options (``json.`glob` WITH (...)``), Spark SQL the server's hook passes as is
        cursor.execute(f"CREATE STREAMING TABLE resumed_native USING json AS {QUERY}")
        cursor.execute(f"CREATE STREAMING TABLE stopped_before AS {QUERY}")
        cursor.execute("STOP STREAMING TABLE stopped_before")  # not resumed; its folder stays
        bad.write(BATCHES[0])
        cursor.execute(FAILING[1].format(folder=bad.folder))
        cursor.execute(FAILING[0])  # the native path, over a stream of its own that gets a row it cannot read
        assert (root / "stopped_before" / "checkpoint").is_dir()
        feeder.write(BATCHES[0])  # W -> 5
        poll_rows_in(cursor, "resumed", 3)
        poll_rows_in(cursor, "failing", 3)  # BATCHES[0] committed: the checkpoint the rerun resumes from
        bad.write([{"k": "a", "v": "abc", "ts": ts(12)}])  # "abc" for v INT: the table fails
        feeder.write(BATCHES[1])  # W -> 10: [0, 10) fires
        poll(cursor, PANES.format("resumed"), ON_TIME_0)
        poll(cursor, PANES.format("resumed_native"), NATIVE[:2])
        poll_rows_in(cursor, "resumed_native", sum(map(len, BATCHES[:2])))  # and its counters kept
        deadline = time.monotonic() + 240
        while "failed" not in json.loads((registry / "failing.json").read_text()):  # the failure recorded
            assert time.monotonic() < deadline, bench.fetch(cursor, "SHOW STREAMING TABLES")
            time.sleep(0.3)
        assert shown(cursor)["failing"] == ("failed", "native")
        scratch = scratch_of(first.proc.pid)
        assert len(scratch) == 1  # Hive's scratch and operation logs of the first server
    finally:
        kill_hard(first)

    second = ServerProcess(args=args, env=env, log_path=tmp_path / "second.log").start()
    try:
        assert not scratch[0].exists()  # the killed server's, swept by the next server (its owner is gone)
        log = second.log_path.read_text()
        assert "sqlwin serve: resumed streaming table resumed started (custom path" in log, log[-3000:]
        assert "sqlwin serve: resumed streaming table resumed_native started (native path" in log, log[-3000:]
        # failed, it stays failed: not started again (one line says so and why), listed with its error
        assert "resumed streaming table failing" not in log and "CANNOT_PARSE_JSON_FIELD" in log, log[-3000:]
        assert "sqlwin serve: streaming table failing not resumed: it failed: " in log, log[-3000:]
        cursor = bench.connect(second.host, second.port).cursor()  # a new connection of a new server: by name
        assert shown(cursor) == {"resumed": ("running", "custom"), "resumed_native": ("running", "native"),
                                 "failing": ("failed", "native")}
        # the tables it does not run (stopped, failed) are still tables of its catalog, read by name (no window
        # of theirs had fired: no rows)
        assert bench.fetch(cursor, "SELECT count(*) FROM stopped_before") == [(0,)]
        assert bench.fetch(cursor, "SELECT count(*) FROM failing") == [(0,)]
        error = next(r[9] for r in bench.fetch(cursor, "SHOW STREAMING TABLES") if r[0] == "failing")
        assert "[CANNOT_PARSE_JSON_FIELD]" in error and error.endswith(f"{(bad.folder / 'f00001.json').as_uri()})")
        # its file replaced, its statements run again (it runs beside the others): it resumes from its checkpoint
        fixed = bad.folder.parent / "fixed.json"
        fixed.write_text(json.dumps({"k": "a", "v": 4, "ts": ts(12)}) + "\n")
        os.replace(fixed, bad.folder / "f00001.json")
        bad.write(BATCHES[3])  # W -> 28: [0, 10) and [10, 20) fire
        cursor.execute(FAILING[1].format(folder=bad.folder))
        cursor.execute(FAILING[0])
        assert "failed" not in json.loads((registry / "failing.json").read_text())  # the mark cleared
        assert sorted(bench.fetch(cursor, PANES.format("resumed"))) == ON_TIME_0
        feeder.write(BATCHES[2])  # a@3: late for [0, 10), within the lateness: a LATE pane
        poll(cursor, PANES.format("resumed"), sorted([*ON_TIME_0, LATE_0]))
        feeder.write(BATCHES[3])  # W -> 28: [10, 20) fires; both windows expire
        poll(cursor, PANES.format("resumed"), sorted([*ON_TIME_0, LATE_0, ON_TIME_10]))
        feeder.write(BATCHES[4])  # a@8: past the lateness, dropped to the late rows
        poll(cursor, "SELECT k, v, ts, window_start, reason FROM resumed_late", [("a", 7, at(8), at(0), "late")])
        poll(cursor, PANES.format("resumed_native"), NATIVE)
        poll_rows_in(cursor, "resumed_native", sum(map(len, BATCHES[:5])))  # counted on from the first server's
        poll(cursor, PANES.format("failing"), NATIVE)  # BATCHES[0]'s rows once, not read again
        assert shown(cursor)["failing"] == ("running", "native")
        cursor.execute("DROP STREAMING TABLE failing")

        # every pane once: the lists above are the whole tables, no row repeated across the kill
        assert sorted(bench.fetch(cursor, PANES.format("resumed"))) == sorted([*ON_TIME_0, LATE_0, ON_TIME_10])
        assert bench.fetch(cursor, "SELECT count(*), count(DISTINCT micro_batch) FROM resumed_late") == [(1, 1)]

        # DROP ... PURGE of the table the first server stopped, which this one does not run and no view of its
        # (in-memory) catalog names: the registry's entry knows its folders
        assert json.loads((registry / "stopped_before.json").read_text())["running"] is False
        cursor.execute("DROP STREAMING TABLE stopped_before PURGE")
        assert not (registry / "stopped_before.json").exists() and not (root / "stopped_before").exists()
        # STOP: not resumed by a next server; DROP: forgotten
        cursor.execute("STOP STREAMING TABLE resumed_native")
        assert json.loads((registry / "resumed_native.json").read_text())["running"] is False
        assert json.loads((registry / "resumed.json").read_text())["running"] is True
        cursor.execute("DROP STREAMING TABLE resumed_native PURGE")
        assert not (registry / "resumed_native.json").exists() and not (root / "resumed_native").exists()
        cursor.execute("DROP STREAMING TABLE resumed")  # no PURGE: its folder stays
        assert sorted(p.name for p in registry.iterdir()) == [] and (root / "resumed" / "data").is_dir()
    finally:
        second.stop()
