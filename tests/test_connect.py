"""sqlwin over Spark Connect (``SparkSession.builder.remote(...)``): native plans, arrow-UDTF plans,
errors and the plain-SQL table functions, compared with DuckDB as tests/test_differential.py does;
streaming tables (native and custom path, SESSION windows, a processing-time trigger, STOP and start
again) fed file by file, and replay, compared with hand-worked panes, the batch query and DuckDB
(tests/connect_streaming_client.py); and a server whose Python cannot import sqlwin.

Clients run in subprocesses: a Connect client cannot share a Python process with the classic
session of tests/conftest.py. One server (the wheel's ``SparkConnectServer`` on a free loopback
port) serves the remote checks; ``remote("local[2]")`` (the client starts its own in-process server
on Spark's fixed port 15002, hence the lock) is checked once more on its own. That check and the server
without sqlwin share nothing with the module's server: they run in a background thread meanwhile
(``side_runs``), their tests check what they returned.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import pytest

import sqlwin
from tests.proctools import ROOT, SHORT_LIVED_ENV, base_env, free_port, run_json, spark_home, wait_for_port

pytestmark = pytest.mark.slow

T0 = dt.datetime(2024, 1, 1)  # tests/streamtools.py's epoch of the streaming rows

CLIENT = r'''
import json, sys
sys.path.insert(0, sys.argv[2])  # the repo: the client imports the tests' data and tools
from pyspark.sql import SparkSession
from tests.connect_batch_checks import batch_checks

builder = SparkSession.builder.remote(sys.argv[1])
if sys.argv[1].startswith("local"):  # the client starts the server: its static confs go here
    builder = builder.config("spark.ui.enabled", "false").config("spark.log.structuredLogging.enabled", "false")
spark = builder.getOrCreate()
spark.conf.set("spark.sql.session.timeZone", "UTC")
print("RESULT " + json.dumps(batch_checks(spark, sys.argv[3])))
spark.stop()
'''


def _run_client(url: str, tmp_path: Path, mode: str, **env: str) -> dict[str, Any]:
    return run_json(CLIENT, base_env(**env), tmp_path, timeout=240, args=[url, str(ROOT), mode])


def installed_pyspark_home(tmp: Path) -> str:
    """The wheel's SPARK_HOME minus ``python/`` (links to everything else). Spark puts
    ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path; without it they import the
    installed pyspark, whose bytecode pip compiled, instead of compiling pyspark from the zip at every start.
    Measured here at a load average of 19-23: a foreachBatch worker's imports took 9-19 s from the zip
    (Spark allows it a fixed 10 s to connect back) and 2.4-7.5 s without it."""
    home = tmp / "spark_home"
    home.mkdir()
    for entry in Path(spark_home()).iterdir():
        if entry.name != "python":
            (home / entry.name).symlink_to(entry)
    return str(home)


@contextlib.contextmanager
def connect_server(tmp: Path, python: str, cwd: Path | None = None, **env: str) -> Iterator[str]:
    """A Spark Connect server (the wheel's ``SparkConnectServer``) on a free loopback port whose Python workers
    (UDTFs, and the foreachBatch functions of streaming tables) run ``python``; yields its URL."""
    home = installed_pyspark_home(tmp)
    port = free_port()
    # not niced: Spark gives each new foreachBatch worker (a child of this JVM) a fixed 10 s to start and
    # connect back, which a low-priority process on a loaded machine misses
    cmd = [os.path.join(home, "bin", "spark-submit"),
           "--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]"]
    for key, value in {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": port,
                       "spark.sql.session.timeZone": "UTC", "spark.ui.enabled": "false",
                       "spark.sql.shuffle.partitions": "4", "spark.log.structuredLogging.enabled": "false",
                       "spark.driver.memory": "1g", "spark.log.level": "WARN",
                       # as tests/conftest.py's session: an idle stream polled every 100 ms, not 10, takes less
                       # CPU from the one being fed (processAllAvailable still returns once it is caught up)
                       "spark.sql.streaming.pollingDelay": "100ms"}.items():
        cmd += ["--conf", f"{key}={value}"]
    with (tmp / "server.log").open("wb") as log:
        server = subprocess.Popen([*cmd, "spark-internal"], stdout=log, stderr=subprocess.STDOUT,
                                  env=base_env(SPARK_HOME=home, PYSPARK_PYTHON=python, **env),
                                  cwd=cwd, start_new_session=True)
    try:
        wait_for_port(port, 120, server)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=20)


@pytest.fixture(scope="module", autouse=True)
def side_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future]]:
    """The runs of test_connect_server_without_sqlwin and test_remote_local (those selected), each with its own
    JVM and nothing shared with the module's server, start at the module's start in one background thread, one
    after the other, while the module's server and client work: two flows at a time on 2 cores, not one (the
    client spends much of its time waiting on the server). Their tests check what these runs returned; every
    run ends before the module does."""
    selected = {item.name for item in request.session.items if getattr(item, "module", None) is request.module}
    runs: dict[str, Callable[[Path], Any]] = {"test_connect_server_without_sqlwin": run_without_sqlwin,
                                              "test_remote_local": run_remote_local}
    with ThreadPoolExecutor(1, thread_name_prefix="connect-side-run") as pool:
        yield {name: pool.submit(run, tmp_path_factory.mktemp(name)) for name, run in runs.items() if name in selected}


def side_run(side_runs: dict[str, Future], name: str, run: Callable[[Path], Any], tmp_path: Path) -> Any:
    """What the background run ``name`` returned (run here if it was not started in the background)."""
    return side_runs[name].result() if name in side_runs else run(tmp_path)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for the module, its Python workers on this interpreter (which imports sqlwin). Its JVM lives
    for the module's client only (a minute or two), C1 only (``SHORT_LIVED_ENV``): measured side by side on the
    shared 2-core machine (load average 18), the client's run took 248 s instead of 354, 133 s of CPU instead of
    161."""
    with connect_server(tmp_path_factory.mktemp("connect"), sys.executable, **SHORT_LIVED_ENV) as url:
        yield url


@pytest.fixture(scope="module")
def client_results(server_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """tests/connect_streaming_client.py, run once against the module's server: every batch check
    (tests/connect_batch_checks.py, mode "full"), then the streaming checks, over one Connect session."""
    tmp = tmp_path_factory.mktemp("client")
    script = (ROOT / "tests" / "connect_streaming_client.py").read_text()
    return run_json(script, base_env(), tmp, timeout=900, args=[server_url, str(ROOT), str(tmp), "full"])


@pytest.fixture(scope="module")
def remote_results(client_results: dict[str, Any]) -> dict[str, Any]:
    """Every batch check (run before the streaming ones; a failure there fails only the batch tests)."""
    assert "batch_error" not in client_results, client_results.get("batch_error")
    return client_results["batch"]


def _assert_same(results: list[dict[str, Any]]) -> None:
    for r in results:
        assert r["same"], f"plan={r['plan']} differs from DuckDB:\n{r['sql']}\n{r['spark']}\n{r['duckdb']}"


def test_connect_session(remote_results: dict[str, Any]) -> None:
    assert remote_results["session"] == "pyspark.sql.connect.session"


def test_connect_native_and_udtf_plans(remote_results: dict[str, Any]) -> None:
    results = remote_results["results"]
    _assert_same(results)
    assert len(results) == 8 and sum(r["rows"] for r in results) > 40
    tumble = results[0]
    assert tumble["spark"] == ("[(datetime.datetime(2020, 4, 15, 8, 0), datetime.datetime(2020, 4, 15, 8, 10), 11.0), "
                               "(datetime.datetime(2020, 4, 15, 8, 10), datetime.datetime(2020, 4, 15, 8, 20), 10.0)]")


def test_connect_errors_carry_line_and_col(remote_results: dict[str, Any]) -> None:
    arity, column = remote_results["errors"]
    assert arity == ["line 2, col 6: HOP expects (TABLE t, DESCRIPTOR(col), slide, size [, offset]); got 3 arguments",
                     2, 6]
    assert column[1:] == [2, 3] and "'nope' is not a column of the input; it has ts, k, v" in column[0]


def test_connect_plain_sql_table_functions(remote_results: dict[str, Any]) -> None:
    assert remote_results["plain_sql"] == [10, 10]


def run_remote_local(tmp_path: Path) -> dict[str, Any]:
    """The quick batch checks over ``remote("local[2]")``. Its JVM (the client's, serving only these few
    queries) compiles with C1 only (``SHORT_LIVED_ENV``): less CPU for a JVM that lives seconds."""
    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "sqlwin-spark-connect-15002.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # Spark's fixed port: one such test at a time on this machine
        return _run_client("local[2]", tmp_path, "quick", PYSPARK_PYTHON=sys.executable, **SHORT_LIVED_ENV)


def test_remote_local(side_runs: dict[str, Future], tmp_path: Path) -> None:
    """``remote("local[2]")``: the client starts a local Connect server in its own process."""
    out = side_run(side_runs, "test_remote_local", run_remote_local, tmp_path)
    assert out["session"] == "pyspark.sql.connect.session"
    _assert_same(out["results"])
    assert [r["plan"] for r in out["results"]] == ["auto", "auto"]
    assert out["errors"][0][1:] == [2, 6] and out["plain_sql"] == [10, 10]


# -- streaming tables and replay over Spark Connect --------------------------------------------------------------
def iso(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).isoformat(sep=" ")


@pytest.fixture(scope="module")
def streaming(client_results: dict[str, Any]) -> dict[str, Any]:
    """The streaming checks of tests/connect_streaming_client.py."""
    return client_results


def _by_text(rows: list[list]) -> list[list]:
    return sorted(rows, key=lambda r: [str(v) for v in r])


# the rows of tests/test_streaming.py (BATCHES, watermark delay 2 s, TUMBLE 10 s), and what they give there
CUSTOM_PANES = [[iso(0), iso(10), "a", 3, 2, 0, "ON_TIME", False, 2],
                [iso(0), iso(10), "a", 8, 3, 1, "LATE", False, 3],
                [iso(0), iso(10), "b", 3, 1, 0, "ON_TIME", False, 2],
                [iso(10), iso(20), "a", 4, 1, 0, "ON_TIME", True, 5]]
CUSTOM_LATE = [["a", 7, iso(8), iso(0), iso(10), iso(28), "late", 6]]
SESSION_PANES = [[iso(1), iso(7), "a", 3, 2, 0, "ON_TIME", False, 2],
                 [iso(1), iso(17), "a", 22, 4, 0, "ON_TIME", True, 5],
                 [iso(3), iso(8), "b", 100, 1, 0, "ON_TIME", False, 2]]
SESSION_LATE = [["a", 5, iso(5), iso(5), iso(10), iso(28), "late", 6]]


def test_connect_streaming_native_path(streaming: dict[str, Any]) -> None:
    """TUMBLE with the default emission: Spark's append-mode aggregation, its writer pickled to the server.
    One final ON_TIME pane per window, equal to the batch query (Spark over Connect, and DuckDB) over the rows
    the watermark did not drop (worked out by the client on its own)."""
    assert streaming["session"] == "pyspark.sql.connect.session"
    assert streaming["paths"][0] == ["native", "Spark's streaming aggregation in append mode"]
    native = streaming["native"]
    assert native["panes"] == [[iso(0), iso(10), "a", 3, 2, 0, "ON_TIME", True],
                               [iso(0), iso(10), "b", 3, 1, 0, "ON_TIME", True],
                               [iso(10), iso(20), "a", 4, 1, 0, "ON_TIME", True]]
    assert _by_text(native["final"]) == _by_text(native["batch"]["spark"]) == _by_text(native["batch"]["duckdb"])
    name, status, path, _batches, rows_in, *_, dropped, error = streaming["show"]["native_out"]
    assert (name, status, path, rows_in, dropped, error) == ("native_out", "running", "native", 7, 2, None)


def test_connect_streaming_custom_path_with_late_rows(streaming: dict[str, Any]) -> None:
    """ALLOWED LATENESS + LATE ROWS TO: sqlwin's operator runs on the server (pickled into foreachBatch), was
    stopped after two files and started again by the same statement; the panes, late rows, micro-batch numbers
    and status are those of the uninterrupted classic run (tests/test_streaming.py), and each window's last pane
    is the batch query over the rows not written to LATE ROWS TO."""
    assert streaming["paths"][1] == ["custom", "ALLOWED LATENESS > 0, LATE ROWS TO"]
    assert streaming["stopped"] == "stopped"
    custom = streaming["custom"]
    assert custom["panes"] == CUSTOM_PANES and custom["read"] == CUSTOM_PANES
    assert custom["late"] == CUSTOM_LATE
    assert _by_text(custom["final"]) == _by_text(custom["batch"]["spark"]) == _by_text(custom["batch"]["duckdb"])
    assert len(custom["final"]) == 3
    # SHOW STREAMING TABLES reads the state the server committed (through Spark, not the client's disk)
    assert streaming["show"]["custom_out"] == ["custom_out", "running", "custom", 7, 7, iso(28), 1, 1, 1, None]


def test_connect_streaming_session_windows(streaming: dict[str, Any]) -> None:
    """SESSION windows merging across micro-batches on the server; a row past the lateness goes to LATE ROWS TO."""
    assert streaming["paths"][2] == ["custom", "SESSION windows, ALLOWED LATENESS > 0, LATE ROWS TO"]
    assert streaming["sessions"] == {"panes": SESSION_PANES, "late": SESSION_LATE}
    assert streaming["show"]["sess_out"] == ["sess_out", "running", "custom", 7, 7, iso(28), 1, 1, 1, None]


def test_connect_streaming_cascaded_windows(streaming: dict[str, Any]) -> None:
    """Cascaded windows (5 s per key, then 20 s) on the server, over the session rows: the inner windows [0,5) a=3,
    b=100 and [10,15) a=12 (a at 7 s and at 5 s are late: lateness 0) feed [0,20) once the watermark reaches 28 s;
    [30,35) a=30 feeds [20,40), which only the replay's end of input fires. The replay (client-driven) agrees."""
    assert streaming["paths"][3] == ["custom", "cascaded windows"]
    cascade = streaming["cascade"]
    assert [p[:-1] for p in cascade["panes"]] == [[iso(0), iso(20), 115, 3, 0, "ON_TIME", True]]
    assert cascade["late_rows_dropped"] == 2
    assert _by_text(cascade["replay"]) == _by_text([*cascade["panes"],
                                                    [iso(20), iso(40), 30, 1, 0, "ON_TIME", True,
                                                     cascade["replay"][-1][-1]]])


def test_connect_replay_equals_the_streaming_run(streaming: dict[str, Any]) -> None:
    """Replay over Connect (batch jobs driven by the client) of the same rows cut into the same micro-batches:
    the streaming run's panes and late rows, plus what the end of the table fires (GRAMMAR 3)."""
    replay = streaming["replay_custom"]
    assert replay["panes"] == _by_text([*CUSTOM_PANES, [iso(30), iso(40), "a", 6, 1, 0, "ON_TIME", True, 7]])
    assert replay["late"] == CUSTOM_LATE
    sessions = streaming["replay_sessions"]
    assert sessions["panes"] == _by_text([*SESSION_PANES, [iso(30), iso(35), "a", 30, 1, 0, "ON_TIME", True, 7]])
    assert sessions["late"] == SESSION_LATE


def test_connect_processing_time_trigger_fires_on_a_quiet_stream(streaming: dict[str, Any]) -> None:
    assert streaming["processing_time"] == [[iso(0), "a", 9, 0, "EARLY", False]]


NO_SQLWIN_CLIENT = r'''
import json, os, sys
from pyspark.sql import SparkSession
import sqlwin

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
spark.conf.set("spark.sql.session.timeZone", "UTC")
os.environ["SQLWIN_STREAMING_DIR"] = os.path.join(sys.argv[2], "root")
folder = os.path.join(sys.argv[2], "in")
sqlwin.sql(spark, "CREATE STREAM s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json "
                  f"OPTIONS (path '{folder}')")
query = ("SELECT window_start, window_end, COUNT(*) AS c FROM TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL 10 SECONDS) "
         "GROUP BY window_start, window_end")
out = {"errors": []}
for name, clauses in (("n_out", ""), ("c_out", " ALLOWED LATENESS INTERVAL 1 SECOND")):
    try:
        sqlwin.sql(spark, f"CREATE STREAMING TABLE {name} AS {query}{clauses}")
        out["errors"].append(None)
    except sqlwin.SqlwinError as e:
        out["errors"].append(str(e))
out["active"] = [q.name for q in spark.streams.active]
out["shown"] = [r.name for r in sqlwin.sql(spark, "SHOW STREAMING TABLES").collect()]
# what needs no sqlwin on the server: batch plans (UDTFs travel pickled by value) and replay (driven by the client)
spark.sql("CREATE TEMP VIEW t AS SELECT * FROM VALUES (TIMESTAMP'2024-01-01 00:00:01', 'a', 1), "
          "(TIMESTAMP'2024-01-01 00:00:12', 'a', 2), (TIMESTAMP'2024-01-01 00:00:04', 'b', 3) AS t(ts, k, v)")
out["udtf"] = [list(map(str, r)) for r in sqlwin.sql(spark, sys.argv[3]).collect()]
sqlwin.sql(spark, "CREATE STREAM r FROM TABLE t ARRIVAL ORDER BY ts WATERMARK FOR ts AS ts")
out["replay"] = [list(map(str, r)) for r in sqlwin.sql(
    spark, query.replace("TABLE s", "TABLE r")).orderBy("window_start").collect()]
print("RESULT " + json.dumps(out))
spark.stop()
'''


SESSION_MAX = ("SELECT k, window_start, window_end, SUM(v) AS s FROM SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), "
               "INTERVAL '10' SECONDS, INTERVAL '5' SECONDS) GROUP BY k, window_start, window_end "
               "ORDER BY k, window_start")  # max_duration: the arrow UDTF plan


def python_without_sqlwin(tmp: Path) -> str:
    """A real interpreter with this one's packages (pyspark, pandas, pyarrow, numpy, sqlglot, ...) but not
    sqlwin: a bare venv whose ``.pth`` adds a folder of links to every installed package but the project's."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    links = tmp / "packages"
    links.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("sqlwin", "udtfs", "__editable__")):
            (links / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    Path(purelib, "packages.pth").write_text(f"{links}\n")
    return str(python)


def run_without_sqlwin(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """NO_SQLWIN_CLIENT against a server whose Python cannot import sqlwin: (the import probe's stderr, the
    client's RESULT). The server's JVM, which lives for these few queries, compiles with C1 only."""
    python = python_without_sqlwin(tmp_path)
    probe = subprocess.run([python, "-c", "import pyspark.sql.connect.session, pyarrow, sqlglot; import sqlwin"],
                           cwd=tmp_path, env=base_env(PYTHONPATH=""), capture_output=True, text=True, timeout=120)
    server_dir = tmp_path / "server"
    server_dir.mkdir()  # the server's working folder: not the repository, whose sqlwin/ a worker would import
    with connect_server(server_dir, python, cwd=server_dir, PYTHONPATH="", **SHORT_LIVED_ENV) as url:
        out = run_json(NO_SQLWIN_CLIENT, base_env(), tmp_path, timeout=300, args=[url, str(tmp_path), SESSION_MAX])
    return probe.stderr, out


def test_connect_server_without_sqlwin(side_runs: dict[str, Future], tmp_path: Path) -> None:
    """A Connect server whose Python cannot import sqlwin: a streaming table (either path) is refused at start
    with a SqlwinError that says what to install where, and nothing keeps running; batch plans, UDTF plans
    included, and replay still run (they need no sqlwin on the server)."""
    probe, out = side_run(side_runs, "test_connect_server_without_sqlwin", run_without_sqlwin, tmp_path)
    assert "No module named 'sqlwin'" in probe, probe[-2000:]
    for name, error in zip(("n_out", "c_out"), out["errors"], strict=True):
        assert error == (f"line 1, col 24: cannot start streaming table {name}: the Spark Connect server's Python "
                         "cannot import sqlwin. Streaming tables run sqlwin's micro-batch code inside the server (in "
                         "its foreachBatch worker): install sqlwin for the interpreter the server starts Python "
                         "workers with (its PYSPARK_PYTHON)")
    assert out["active"] == [] and out["shown"] == []
    duck = duckdb.connect()
    duck.execute("CREATE TABLE t AS SELECT * FROM (VALUES (TIMESTAMP '2024-01-01 00:00:01', 'a', 1), "
                 "(TIMESTAMP '2024-01-01 00:00:12', 'a', 2), (TIMESTAMP '2024-01-01 00:00:04', 'b', 3)) AS t(ts, k, v)")
    oracle = duck.execute(sqlwin.rewrite(SESSION_MAX, target="duckdb", catalog=duck)).fetchall()
    assert out["udtf"] == [[str(v) for v in r] for r in oracle] and len(oracle) == 3
    # replay, one row per micro-batch: 00:12 (micro-batch 2) moves W past 00:10, so [00:00, 00:10) fires in
    # micro-batch 3 with its 2 rows; the end of the table (4) fires [00:10, 00:20)
    assert out["replay"] == [["2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "0", "ON_TIME", "True", "3"],
                             ["2024-01-01 00:00:10", "2024-01-01 00:00:20", "1", "0", "ON_TIME", "True", "4"]]
