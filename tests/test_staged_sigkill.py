"""A staged streaming table (a window join: two side stages, then the join) killed with SIGKILL inside the join's
commit, and started again on the same folder, ends with each pane exactly once (issue 18: the staged table's crash
recovery, under a real kill, not only an exception).

The kill lands where a staged micro-batch is most fragile: both side stages have committed the micro-batch (their
state and their panes are on disk), the join has not. The restarted driver's Spark runs that micro-batch again;
the sides recognise it as committed and the join reads their panes back from disk instead of recomputing them.
Each driver is its own process group (its JVM and Python workers die with it), on a local master; the rows are
tests/test_streaming_stages.py's hand-worked files, one per micro-batch, so the input is cut as in its live run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import sqlwin
from tests.proctools import ROOT
from tests.test_exactly_once import Driver, settle
from tests.test_streaming_stages import FILES, JOIN, JOIN_LIVE, at

pytestmark = pytest.mark.slow

DRIVER = r'''
import json, os, signal, sys
sys.path.insert(0, {root!r})
import sqlwin
from sqlwin.session import local_session
from sqlwin.streaming import catalog
from sqlwin.streaming.state import StateStore
from tests.streamtools import Feeder, ts

if os.environ.get("KILL_IN_JOIN_COMMIT") == "1":
    commit = StateStore.commit

    def killing_commit(self, batch, data):
        # the join's first commit that keeps side panes (the side stages committed this micro-batch before it)
        if self.root.endswith("join/sqlwin") and any(data.get("retained", [])):
            os.killpg(os.getpgid(0), signal.SIGKILL)  # this driver, its JVM and its Python workers at once
        commit(self, batch, data)

    StateStore.commit = killing_commit

from sqlwin.streaming.windowjoin import JoinStage

read_back = []  # rows of the side folders this run's join read back (a side stage wrote them in an earlier run)
measure = JoinStage._measure


def measuring(spark, path):
    found = measure(spark, path)
    read_back.append(found[0])
    return found


JoinStage._measure = staticmethod(measuring)

spark = local_session("staged-sigkill")
folder = {folder!r}
sqlwin.sql(spark, "CREATE STREAM sk (k STRING, v INT, ts TIMESTAMP, side STRING, "
                  f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{{folder}}')")
sqlwin.sql(spark, "CREATE STREAMING TABLE sk_join AS " + {join!r})
table = catalog.find_table("sk_join")
assert (table.path, table.why) == ("custom", "window join"), (table.path, table.why)
table.process_all_available()  # after a kill: the micro-batch it interrupted, run again
feed = Feeder(folder)
feed.count = len([n for n in os.listdir(folder) if n.endswith(".json")])  # the files the killed run wrote
for rows in {files!r}[feed.count:]:
    feed.write({{"k": k, "v": v, "ts": ts(s), "side": side}} for k, v, s, side in rows)
    table.process_all_available()
status = table.status()


def rows(sql):
    return [[None if x is None else str(x) for x in r] for r in spark.sql(sql).collect()]


result = {{"join": rows("SELECT lk, rk, s, c, ws, pane_index, pane_timing, is_final, micro_batch FROM sk_join"),
          "late": rows("SELECT k, v, window_start, reason FROM sk_late"),
          "late_rows_dropped": status.late_rows_dropped, "rows_in": status.rows_in, "read_back": read_back}}
table.stop()
print("RESULT " + json.dumps(result), flush=True)
spark.stop()
'''


def driver(work: Path, root: Path, folder: Path, **kill: int) -> Callable[[], Driver]:
    """Starts of the driver script (tests/test_exactly_once.py's ``Driver``: its own process group, C1 only,
    and ``settle`` starts it again if Spark's 10 s worker connect-back timeout failed it on a loaded machine)."""
    text = DRIVER.format(root=str(ROOT), folder=str(folder), files=FILES, join=JOIN.format(s="sk", late="sk_late"))
    return lambda: Driver(work, root, folder, text=text, **kill)


def commits(folder: Path) -> int:
    """The last micro-batch a stage committed (its ``state/<n>.json``)."""
    state = folder / "sqlwin" / "state"
    return max((int(n[:-5]) for n in os.listdir(state) if n[:-5].isdigit()), default=-1) if state.is_dir() else -1


def text(row: tuple) -> list:
    return [None if v is None else str(v) for v in row]


def test_sigkill_inside_the_joins_commit_resumes_exactly_once(spark, tmp_path: Path, monkeypatch) -> None:
    root, folder = tmp_path / "root", tmp_path / "in"
    folder.mkdir()
    first = driver(tmp_path / "run1", root, folder, kill_in_join_commit=1)
    killed = first()

    # meanwhile, in this session: the same files replayed in the same micro-batches (the live run's micro_batch
    # numbers, as tests/test_streaming_stages.py checks for an uninterrupted run)
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "replay_root"))
    data = [(k, v, at(s), side, f)
            for f, rows in enumerate(FILES) for k, v, s, side in rows]
    spark.createDataFrame(data, "k string, v int, ts timestamp, side string, f int").createOrReplaceTempView("sk_rows")
    sqlwin.sql(spark, "CREATE STREAM r_sk FROM TABLE sk_rows ARRIVAL ORDER BY f MICRO BATCH BY f "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    replayed = {tuple(text(r)) for r in sqlwin.sql(spark, JOIN.format(s="r_sk", late="sk_late_replayed")).select(
        "lk", "rk", "s", "c", "ws", "pane_index", "pane_timing", "is_final", "micro_batch").collect()}

    assert settle(killed, first) is None
    table = root / "sk_join"
    sides = [commits(p) for p in sorted((table / "stages").iterdir())]
    # killed inside the join's commit: both sides committed that micro-batch, the join did not
    assert len(sides) == 2 and sides[0] == sides[1] > commits(table / "join")
    written = len(list(folder.glob("*.json")))
    assert 1 <= written < len(FILES)  # files were left for the restart to bring

    second = driver(tmp_path / "run2", root, folder)
    resumed = settle(second(), second)
    assert resumed is not None
    assert any(resumed["read_back"])  # the re-run micro-batch: the join read the sides' committed panes back
    got = [tuple(r) for r in resumed["join"]]
    # every hand-worked pane exactly once (no pane lost with the killed commit, none written twice by its re-run)
    assert sorted((r[:-1] for r in got), key=str) == sorted((tuple(text(r)) for r in JOIN_LIVE), key=str)
    assert set(got) <= replayed  # and in the micro-batch an uninterrupted run gives it
    assert resumed["late"] == [["a", "7", str(at(0)), "late"]]
    assert (resumed["late_rows_dropped"], resumed["rows_in"]) == (2, sum(len(f) for f in FILES))
