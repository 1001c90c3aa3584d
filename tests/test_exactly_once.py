"""Exactly once (issue 6, point 5) and restart (GRAMMAR 5): a streaming table killed with SIGKILL, or stopped,
and started again on the same folder ends with exactly the sink and late rows of an uninterrupted run.

The killed runs are deployed as on a cluster (issue 17, points 1 and 4): a standalone master and two workers
from the wheel (separate executor JVMs), with the stream, the checkpoints, sqlwin's state, the sinks and the late
rows on a ``viewfs://`` mount (a Hadoop file system that is not a local path to Python); the uninterrupted
reference runs on a local master over local folders, so the comparison is also local vs cluster.

The SIGKILL tests run each Spark in its own process group (driver, JVM and Python workers die together), over
one folder of small JSON files read one per micro-batch (``maxFilesPerTrigger 1``), so every run cuts the input
into the same micro-batches (the kills land where sqlwin's code runs, not inside Spark's planning: see DRIVER).
Both paths run side by side in each process: the custom path (ALLOWED LATENESS, LATE ROWS TO) and the native
one (TUMBLE, default emission, lateness 0).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import sqlwin
from sqlwin.streaming import catalog
from tests.proctools import CLUSTER_CONF, ROOT, SHORT_LIVED_ENV, StandaloneCluster, base_env
from tests.streamtools import Feeder, rows_of, ts
from tests.test_streaming import BATCHES, at

pytestmark = pytest.mark.slow

FILES = 10
CUSTOM, NATIVE = "c_out", "n_out"
SINK_COLUMNS = "window_start, window_end, k, s, c, pane_index, pane_timing, is_final, micro_batch"
LATE_COLUMNS = "k, v, ts, window_start, window_end, watermark, reason, micro_batch"

DRIVER = """
import json, os, signal, sys
sys.path.insert(0, {root!r})
import sqlwin
from sqlwin.session import local_session
from sqlwin.streaming import catalog

def die():  # the whole process group: this driver, its JVM and the Python workers
    os.killpg(os.getpgid(0), signal.SIGKILL)

# A kill must not land inside Spark's own planning of a micro-batch: killed between the file source's log entry
# for batch N and the offset log's, Spark reads the logged file *and* the next one in batch N on restart (its
# file source adds a new log entry instead of replaying the orphan), so the input is cut differently from an
# uninterrupted run. The kills below happen where sqlwin's code runs, at points fixed in advance.
#
# KILL_INSIDE=N dies inside micro-batch N of both paths at once: offsets logged, the native path's sink folder
# written, nothing committed. KILL_AT=K dies in sqlwin's commit of micro-batch K of the custom path (its sink,
# its late rows and the garbage collection of expired windows' rows done, state/K.json not written), once the
# native path has read every file.
import threading
kill_inside = int(os.environ.get("KILL_INSIDE", "-1"))
kill_at = int(os.environ.get("KILL_AT", "-1"))
tables = []
if kill_inside >= 0:
    from sqlwin.streaming.operator import MicroBatchOperator
    from sqlwin.streaming.sinks import BatchSink
    both_inside = threading.Barrier(2)
    run_batch, write = MicroBatchOperator.run_batch, BatchSink.write
    def custom_batch(self, batch_df, batch_id):
        if batch_id == kill_inside:
            both_inside.wait(300)
            die()
        run_batch(self, batch_df, batch_id)
    def native_write(self, df, batch):
        write(self, df, batch)
        if batch == kill_inside and self.name == {native!r}:
            both_inside.wait(300)
            die()
    MicroBatchOperator.run_batch, BatchSink.write = custom_batch, native_write
if kill_at >= 0:
    from sqlwin.streaming.state import StateStore
    commit = StateStore.commit
    def killing_commit(self, batch, data):
        if batch == kill_at and {custom!r} in self.root:
            tables[1].process_all_available()
            die()
        commit(self, batch, data)
    StateStore.commit = killing_commit

spark = local_session("exactly-once", conf=json.loads(os.environ.get("DRIVER_CONF", "{{}}")))
sqlwin.sql(spark, "CREATE STREAM s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) "
                  "USING json OPTIONS (path '{folder}', maxFilesPerTrigger '1')")
query = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c "
         "FROM TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k")
sqlwin.sql(spark, f"CREATE STREAMING TABLE {custom} AS {{query}} ALLOWED LATENESS INTERVAL 5 SECONDS "
                  "LATE ROWS TO c_late EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 4 ROWS LATE EVERY 1 ROWS")
sqlwin.sql(spark, f"CREATE STREAMING TABLE {native} AS {{query}}")
tables += [catalog.find_table(n) for n in ({custom!r}, {native!r})]
assert [t.path for t in tables] == ["custom", "native"], [t.path for t in tables]
for table in tables:
    table.process_all_available()

def rows(sql):
    return sorted(json.dumps([str(x) for x in r]) for r in spark.sql(sql).collect())

result = {{"custom": rows("SELECT {sink} FROM {custom}"), "native": rows("SELECT {sink} FROM {native}"),
           "late": rows("SELECT {late} FROM c_late")}}
for table in tables:
    table.stop()
print("RESULT " + json.dumps(result), flush=True)
spark.stop()
"""


JUMP = 6  # file JUMP moves event time 30 s ahead: in the next micro-batch windows fire and expire at once
# sqlwin's number of that next micro-batch: one micro-batch a file, each followed by the no-data micro-batch its
# watermark made due (run inside the file's Spark micro-batch), so file JUMP's micro-batch is 9 and FIRES the
# no-data one after it (killed in its commit, Spark's micro-batch of file JUMP is run again: its rows committed,
# it runs that no-data micro-batch, which fires the windows, before the next file is read)
FIRES = 10


def write_input(folder: Path) -> None:
    """Many small files: 3 keys, event time moving ~3 s a file (and 30 s at file JUMP), rows late within and
    past the lateness. Each file gets its own modification time, so the file source takes them in one order."""
    rng = random.Random(6)
    feeder = Feeder(folder)
    for i in range(FILES):
        base = 3.0 * i + (30 if i >= JUMP else 0)
        rows = [{"k": k, "v": rng.randint(1, 9), "ts": ts(base + rng.random() * 3)} for k in "abc"]
        if i % 3 == 2:
            rows.append({"k": rng.choice("abc"), "v": 100 + i, "ts": ts(base - 11)})  # late, within lateness
        if i % 4 == 3:
            rows.append({"k": rng.choice("abc"), "v": 200 + i, "ts": ts(base - 24)})  # past the lateness
        feeder.write(rows)
        os.utime(folder / f"f{i:05d}.json", (1_700_000_000 + i, 1_700_000_000 + i))


# Spark gives a new Python worker a fixed 10 s to connect back; the tick source of the custom path starts one
# when its query starts, and on a loaded machine it can miss that. The run then fails before its first batch.
WORKER_TIMEOUT = "Python worker failed to connect back"


class WorkerTimeout(Exception):
    pass


def settle(driver: Driver, again: Callable[[], Driver], attempts: int = 3) -> dict | None:
    """``driver``'s outcome, starting it ``again`` when Spark's worker timeout failed it: for a run on a
    checkpoint that is one more restart (what exactly-once is about); a reference run starts over afresh."""
    for attempt in range(attempts):
        try:
            return driver.finish(timeout=300)
        except WorkerTimeout:
            if attempt == attempts - 1:
                raise
            driver = again()
    raise AssertionError("unreachable")


class Driver:
    """One run of the driver script in its own process group, over streaming root ``root`` (a URI) and the
    stream's folder ``folder`` (a URI), on ``master`` (default: local) with Spark conf ``conf``."""

    def __init__(self, work: Path, root: Path | str, folder: Path | str, master: str | None = None,
                 conf: dict | None = None, text: str | None = None, **kill: int):
        """``text``: another driver script (default: DRIVER over ``folder``); ``kill``: its environment, upper-cased."""
        work.mkdir(parents=True, exist_ok=True)
        script = work / "driver.py"
        script.write_text(text if text is not None else DRIVER.format(
            root=str(ROOT), folder=folder, custom=CUSTOM, native=NATIVE, sink=SINK_COLUMNS, late=LATE_COLUMNS))
        deployed = {"SQLWIN_MASTER": master} if master else {}
        env = base_env(SQLWIN_STREAMING_DIR=str(root), DRIVER_CONF=json.dumps(conf or {}), **deployed,
                       **SHORT_LIVED_ENV, **{k.upper(): str(v) for k, v in kill.items()})
        self.log = open(work / "log.txt", "w+")  # noqa: SIM115 (closed in finish)
        # no `nice` here: the child inherits pytest's, and a second one starves its Python workers past Spark's
        # fixed 10 s connect-back timeout on a loaded machine
        self.proc = subprocess.Popen([sys.executable, str(script)], cwd=work, env=env,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the process group and wait until every process of it is gone (the JVM included)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.finish(timeout=60)

    def finish(self, timeout: float) -> dict | None:
        """Wait for the driver to end; its RESULT, or None if it was killed."""
        try:
            stdout, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            stdout, _ = self.proc.communicate()
        wait_until(lambda: not _group_alive(self.proc.pid), 30, "the killed process group to end")
        self.log.seek(0)
        err = self.log.read()
        self.log.close()
        for line in stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        if self.proc.returncode == 1 and WORKER_TIMEOUT in err:
            raise WorkerTimeout(err[-3000:])
        assert self.proc.returncode == -signal.SIGKILL, f"exit {self.proc.returncode}\n{stdout[-2000:]}\n{err[-6000:]}"
        return None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc is None or proc.poll() is None, f"the driver ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def spark_commits(root: Path, table: str) -> int:
    folder = root / table / "checkpoint" / "commits"
    return len([n for n in os.listdir(folder) if n.isdigit()]) if folder.is_dir() else 0


def sqlwin_commits(root: Path) -> int:
    folder = root / CUSTOM / "sqlwin" / "state"
    return max((int(n[:-5]) for n in os.listdir(folder) if n.endswith(".json")), default=-1) \
        if folder.is_dir() else -1


MOUNT = "ck"  # viewfs://ck/data is the killed runs' file system


def test_sigkill_and_restart_matches_an_uninterrupted_run(tmp_path: Path, standalone: StandaloneCluster) -> None:
    """Killed twice (inside micro-batch 2 of both paths, the native sink written; inside sqlwin's commit of the
    micro-batch that fires and expires windows at once), then run to the end, on the cluster and viewfs: the
    same rows and micro_batch values as one run on a local master and local folders."""
    backing = tmp_path / "mounted"  # what viewfs://ck/data is mounted over
    folder = backing / "in"
    write_input(folder)
    ref_root = tmp_path / "ref_root"
    reference = Driver(tmp_path / "ref", ref_root, folder)  # in parallel with the killed runs

    def reference_again() -> Driver:
        shutil.rmtree(ref_root)
        return Driver(tmp_path / "ref", ref_root, folder)

    uri = f"viewfs://{MOUNT}/data"
    conf = {**CLUSTER_CONF, f"spark.hadoop.fs.viewfs.mounttable.{MOUNT}.link./data": backing.as_uri()}

    def deployed(run: str, **kill: int) -> Callable[[], Driver]:
        return lambda: Driver(tmp_path / run, f"{uri}/root", f"{uri}/in", standalone.master, conf, **kill)

    root = backing / "root"
    first = deployed("run1", kill_inside=2)
    assert settle(first(), first) is None
    assert spark_commits(root, CUSTOM) == spark_commits(root, NATIVE) == 2
    # killed right after the native sink wrote micro-batch 2: its folder is there if it has rows (the restart
    # replaces it); a micro-batch without rows leaves none (the sink counts what it writes and removes it)
    written = (root / NATIVE / "data" / "micro_batch=2").is_dir()
    second = deployed("run2", kill_at=FIRES)
    assert settle(second(), second) is None
    assert sqlwin_commits(root) == FIRES - 1  # its sink and late rows written, expired rows deleted, not committed
    third = deployed("run3")
    resumed = settle(third(), third)
    expected = settle(reference, reference_again)
    assert resumed is not None and expected is not None
    assert resumed == expected
    assert written == any(json.loads(r)[8] == "2" for r in expected["native"])
    # the input exercises what exactly-once has to get right: EARLY and LATE panes, late rows, many micro-batches
    custom = [json.loads(r) for r in expected["custom"]]
    assert {r[6] for r in custom} == {"EARLY", "ON_TIME", "LATE"} and len(expected["late"]) >= 2
    assert any(r[7] == "True" and r[6] == "ON_TIME" and r[8] == str(FIRES) for r in custom)  # fired, expired
    # panes come out in several micro-batches on both paths (native: Spark's batch ids, where the native path
    # now judges late rows by the watermark in force, so fewer batches emit than before)
    assert len({r[8] for r in custom}) >= 4 and len({json.loads(r)[8] for r in expected["native"]}) >= 3
    # everything the deployed runs wrote is inside the mount: no local folder named after the URI, here or in the
    # cluster's folder (the executors' working folders)
    assert not [p for p in (*tmp_path.rglob("*"), *standalone.folder.rglob("*")) if p.name.startswith("viewfs")]
    assert (root / CUSTOM / "sqlwin" / "state").is_dir() and (root / CUSTOM / "late_rows").is_dir()


# -- STOP STREAMING TABLE, then the same statement again in the same session ---------------------------------
@pytest.fixture()
def stream(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "in"
    sqlwin.sql(spark, "CREATE STREAM s_resume (k STRING, v INT, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
    yield Feeder(folder)
    for table in catalog.all_tables():
        table.stop()
        catalog.remove_table(table.name)


QUERY = """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE s_resume, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k"""


def start(spark, sql: str):
    sqlwin.sql(spark, sql)
    return catalog.find_table(sql.split("TABLE", 1)[1].split()[0])


def test_stop_and_create_again_resumes_custom_path(spark, stream) -> None:
    """The same panes, late rows and micro-batch numbers as tests/test_streaming.py's uninterrupted run."""
    sql = f"CREATE STREAMING TABLE resume_c AS {QUERY} ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO resume_cl"
    table = start(spark, sql)
    stream.feed(BATCHES[:2], table)
    sqlwin.sql(spark, "STOP STREAMING TABLE resume_c")
    assert not table.is_active
    stream.write(BATCHES[2])  # arrives while the table is stopped
    table = start(spark, sql)
    table.process_all_available()
    stream.feed(BATCHES[3:], table)
    columns = ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
    assert rows_of(spark.table("resume_c"), columns) == [
        (at(0), "a", 3, 2, 0, "ON_TIME", False, 2),
        (at(0), "a", 8, 3, 1, "LATE", False, 3),
        (at(0), "b", 3, 1, 0, "ON_TIME", False, 2),
        (at(10), "a", 4, 1, 0, "ON_TIME", True, 5),
    ]
    late = ["k", "v", "ts", "window_start", "window_end", "watermark", "reason", "micro_batch"]
    assert rows_of(spark.table("resume_cl"), late) == [("a", 7, at(8), at(0), at(10), at(28), "late", 6)]
    status = table.status()
    assert (status.rows_in, status.late_rows_dropped, status.micro_batches) == (7, 1, 7)


@pytest.mark.parametrize("again", ["CREATE STREAMING TABLE resume_n AS", "INSERT INTO resume_n",
                                   "INSERT INTO resume_n (another process)"])
def test_stop_and_create_again_resumes_native_path(spark, stream, again) -> None:
    """Started again by the same statement, or by INSERT INTO the stopped table (GRAMMAR 5: into an existing
    sink), here or in a process that only finds the table's folder, the table continues where it stopped, its
    status counters too."""
    sql = f"CREATE STREAMING TABLE resume_n AS {QUERY}"
    table = start(spark, sql)
    assert table.path == "native"
    stream.feed(BATCHES[:2], table)
    table.stop()
    if again.endswith("(another process)"):  # streaming tables are per process: this one knows only the folder
        catalog.remove_table("resume_n")
        again = again.split(" (")[0]
    stream.write(BATCHES[2])
    sqlwin.sql(spark, f"{again} {QUERY}")
    table = catalog.find_table("resume_n")
    table.process_all_available()
    stream.feed(BATCHES[3:], table)
    out = rows_of(spark.table("resume_n"), ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final"])
    assert out == [(at(0), "a", 3, 2, 0, "ON_TIME", True), (at(0), "b", 3, 1, 0, "ON_TIME", True),
                   (at(10), "a", 4, 1, 0, "ON_TIME", True)]
    # the counters go on from the last committed micro-batch's (sqlwin.streaming.progress): f0 and f1 counted
    # once, not read again; a@3 and a@8 dropped, one in each run
    status = table.status()
    assert (status.rows_in, status.late_rows_dropped, status.watermark) == (7, 2, "2024-01-01 00:00:28")
    assert status.micro_batches >= len(BATCHES)
