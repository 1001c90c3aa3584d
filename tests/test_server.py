"""`sqlwin serve` end to end: a real server process, real beeline and pyhive clients, no mocks.

One server (started through the CLI, ``python -m sqlwin serve``) is shared by this module,
tests/test_dbt.py and tests/test_install_extras.py (tests/servertools.py); a second one with
authentication is started only for the auth test.
Expected rows are worked out by hand from Apache Flink's Bid example (see bench/server.py).
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from sqlwin.server import OWNER_FILE, SCRATCH_PREFIX, ServerProcess, compile_java, main
from tests.servertools import shared_server

ROOT = Path(__file__).resolve().parents[1]


def _load_bench():
    """bench/server.py (queries, expected rows, the load driver); bench/ is not a package."""
    import sys

    if "sqlwin_bench_server" not in sys.modules:
        spec = importlib.util.spec_from_file_location("sqlwin_bench_server", ROOT / "bench" / "server.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["sqlwin_bench_server"]


bench = _load_bench()

WINDOW_QUERIES = ("tumble", "hop", "session", "rows3")


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest) -> ServerProcess:
    return shared_server(request.config)


@pytest.fixture()
def cursor(server: ServerProcess):
    conn = bench.connect(server.host, server.port)
    cur = conn.cursor()
    cur.execute(bench.BIDS_VIEW)
    yield cur
    conn.close()


def _error_text(err: Exception) -> str:
    """The server's message inside a pyhive error (the thrift response's errorMessage)."""
    arg = err.args[0] if err.args else err
    status = getattr(arg, "status", None)
    return (getattr(status, "errorMessage", None) or getattr(arg, "errorMessage", None) or str(err))


# -- fast checks of the command line (no Spark is started) ----------------------------------------
def test_refuses_non_loopback_without_auth(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--host", "0.0.0.0", "--port", "1"]) == 2
    assert "non-loopback" in capsys.readouterr().err


def test_refuses_settings_that_move_the_endpoint(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["--conf", "spark.hadoop.hive.server2.transport.mode=http"]) == 2
    assert "managed by sqlwin serve" in capsys.readouterr().err
    monkeypatch.setenv("HIVE_SERVER2_THRIFT_BIND_HOST", "0.0.0.0")
    assert main([]) == 2
    assert "HIVE_SERVER2_THRIFT_BIND_HOST" in capsys.readouterr().err


@pytest.mark.slow
def test_java_compiles_once(tmp_path: Path) -> None:
    first = compile_java(tmp_path)
    assert (first / "sqlwin" / "SqlwinParser.class").exists()
    assert compile_java(tmp_path) == first
    assert len(list(tmp_path.iterdir())) == 1


# -- the running server ---------------------------------------------------------------------------
def _process_tree(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grew = {pid}, True
    while grew:
        new = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= new
        grew = bool(new)
    return tree


def _listening(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state owned by one of ``pids``."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A = LISTEN
                continue
            hexaddr, hexport = cols[1].split(":")
            raw = b"".join(bytes.fromhex(hexaddr[i:i + 8])[::-1] for i in range(0, len(hexaddr), 8))
            out.append((str(ipaddress.ip_address(raw)), int(hexport, 16)))
    return out


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


@pytest.mark.slow
def test_listens_on_loopback_only(server: ServerProcess) -> None:
    sockets = _listening(_process_tree(server.proc.pid))
    assert server.port in {port for _, port in sockets}, sockets
    assert [s for s in sockets if not _is_loopback(s[0])] == [], sockets
    # the Hive settings reach the Thrift server (its port and bind host above, its operation logs in the server's
    # scratch folder), and spark-submit, which gets only the spark.* ones (sqlwin.session), warns of none
    log = server.log_path.read_text()
    assert "Ignoring non-Spark config property" not in log, log[:3000]  # nor of sqlwin's own settings:
    cursor = bench.connect(server.host, server.port).cursor()  # each connection's session has them
    cursor.execute("SET sqlwin.streaming.dir")
    assert cursor.fetchall() == [("sqlwin.streaming.dir", server.args[1].split("=", 1)[1])]
    scratch = [f for f in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*")
               if (f / OWNER_FILE).is_file() and (f / OWNER_FILE).read_text().strip() == str(server.proc.pid)]
    assert len(scratch) == 1 and (scratch[0] / "operation_logs").is_dir(), scratch


def _beeline(url: str, script: str, *extra: str) -> subprocess.CompletedProcess[str]:
    import pyspark

    spark_home = str(Path(pyspark.__file__).parent)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
    env = {**os.environ, "SPARK_HOME": spark_home}
    try:
        return subprocess.run(
            [f"{spark_home}/bin/beeline", "-u", url, *extra, "--outputformat=csv2", "--showHeader=false",
             "--silent=true", "--force=true", "-f", f.name],
            capture_output=True, text=True, env=env, timeout=240)
    finally:
        os.unlink(f.name)


def _beeline_rows(stdout: str, tags: tuple[str, ...]) -> dict[str, list[tuple[str, ...]]]:
    """Rows of csv2 output that start with one of ``tags`` (beeline may prefix a line with noise)."""
    rows: dict[str, list[tuple[str, ...]]] = {tag: [] for tag in tags}
    pattern = re.compile("(" + "|".join(tags) + "),.*$")
    for line in stdout.splitlines():
        match = pattern.search(line)
        if match:
            rows[match.group(1)].append(tuple(match.group(0).split(",")))
    return rows


@pytest.mark.slow
def test_beeline_runs_window_queries(server: ServerProcess) -> None:
    script = "\n".join([
        bench.BIDS_VIEW + ";",
        *(bench.QUERIES[name][0] + ";" for name in WINDOW_QUERIES),
        "SELECT * FROM HOP(TABLE bids, DESCRIPTOR(bidtime));",  # 2 arguments: a sqlwin error
        "SELECT 'alive', CAST(COUNT(*) AS STRING) FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), "
        "INTERVAL '1' HOUR);",
    ])
    done = _beeline(server.url, script)
    rows = _beeline_rows(done.stdout, (*WINDOW_QUERIES, "alive"))
    for name in WINDOW_QUERIES:
        assert rows[name] == bench.QUERIES[name][1], (name, done.stdout, done.stderr[-2000:])
    assert "line 1, col 15" in done.stderr and "HOP expects" in done.stderr, done.stderr[-2000:]
    assert rows["alive"] == [("alive", "6")], done.stdout  # the session went on after the error


@pytest.mark.slow
@pytest.mark.parametrize("name", (*WINDOW_QUERIES, "plain_group"))
def test_pyhive_runs_window_queries(cursor, name: str) -> None:
    sql, expected = bench.QUERIES[name]
    assert bench.fetch(cursor, sql) == expected


@pytest.mark.slow
def test_pyhive_gets_typed_values(cursor) -> None:
    import datetime
    from decimal import Decimal

    rows = bench.fetch(cursor, "SELECT window_start, window_end, SUM(price) AS total FROM TABLE(TUMBLE("
                               "TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) "
                               "GROUP BY window_start, window_end ORDER BY window_start")
    start = datetime.datetime(2020, 4, 15, 8, 0)
    assert rows == [(start, start + datetime.timedelta(minutes=10), Decimal("11.00")),
                    (start + datetime.timedelta(minutes=10), start + datetime.timedelta(minutes=20),
                     Decimal("10.00"))]
    assert [d[0] for d in cursor.description] == ["window_start", "window_end", "total"]


@pytest.mark.slow
def test_rewrite_error_reaches_client_and_session_survives(cursor) -> None:
    from pyhive.exc import OperationalError

    with pytest.raises(OperationalError) as info:
        cursor.execute("SELECT *\nFROM HOP(TABLE bids, DESCRIPTOR(bidtime))")
    assert "line 2, col 6" in _error_text(info.value) and "HOP expects" in _error_text(info.value)
    assert bench.fetch(cursor, bench.QUERIES["tumble"][0]) == bench.QUERIES["tumble"][1]


@pytest.mark.slow
def test_udtf_plan_runs_in_each_jdbc_session(cursor) -> None:
    """SESSION with a max duration runs as a Python UDTF registered in the client's own session."""
    rows = bench.fetch(cursor, "SELECT CAST(window_start AS STRING), CAST(window_end AS STRING), COUNT(*) "
                               "FROM SESSION(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, "
                               "INTERVAL '6' MINUTES) GROUP BY window_start, window_end ORDER BY 1")
    # 08:05 08:07 08:09 | 08:11 (= 08:05 + 6 min) 08:13 | 08:17 (= 08:11 + 6 min)
    assert rows == [("2020-04-15 08:05:00", "2020-04-15 08:11:00", 3),
                    ("2020-04-15 08:11:00", "2020-04-15 08:17:00", 2),
                    ("2020-04-15 08:17:00", "2020-04-15 08:22:00", 1)]


@pytest.mark.slow
def test_generic_udtfs_callable_from_plain_sql(cursor) -> None:
    """sqlwin.register's table functions are there in a fresh JDBC session too."""
    rows = bench.fetch(cursor, "SELECT CAST(window_start AS STRING), COUNT(*) FROM tumble(TABLE(bids), "
                               "'bidtime', INTERVAL 10 MINUTES) GROUP BY window_start ORDER BY 1")
    assert rows == [("2020-04-15 08:00:00", 3), ("2020-04-15 08:10:00", 3)]


@pytest.mark.slow
def test_connections_are_isolated(server: ServerProcess) -> None:
    from pyhive.exc import OperationalError

    a = bench.connect(server.host, server.port).cursor()
    b = bench.connect(server.host, server.port).cursor()
    a.execute("CREATE OR REPLACE TEMPORARY VIEW only_in_a AS SELECT 1 AS x")
    a.execute("SET spark.sql.shuffle.partitions=1")
    with pytest.raises(OperationalError, match="TABLE_OR_VIEW_NOT_FOUND"):
        b.execute("SELECT * FROM only_in_a")
    assert bench.fetch(b, "SET spark.sql.shuffle.partitions") == [("spark.sql.shuffle.partitions", "4")]
    assert bench.fetch(a, "SET spark.sql.shuffle.partitions") == [("spark.sql.shuffle.partitions", "1")]


def _metadata(conn, name: str, **kwargs) -> tuple[list[str], list[tuple]]:
    """Run one HiveServer2 metadata call (GetTables, ...) and fetch its result set."""
    from pyhive import hive
    from TCLIService import ttypes

    request = getattr(ttypes, f"T{name}Req")(sessionHandle=conn.sessionHandle, **kwargs)
    response = getattr(conn.client, name)(request)
    hive._check_status(response)
    cur = conn.cursor()
    cur._operationHandle, cur._state = response.operationHandle, cur._STATE_RUNNING
    return [d[0] for d in cur.description], [tuple(r) for r in cur.fetchall()]


@pytest.mark.slow
def test_metadata_calls(server: ServerProcess) -> None:
    conn = bench.connect(server.host, server.port)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA IF NOT EXISTS meta_test")
    cur.execute("CREATE TABLE IF NOT EXISTS meta_test.sales (window_start TIMESTAMP, total DECIMAL(20, 2)) "
                "USING parquet")
    assert _metadata(conn, "GetCatalogs") == (["TABLE_CAT"], [])  # as Spark's own Thrift server
    columns, schemas = _metadata(conn, "GetSchemas")
    assert columns == ["TABLE_SCHEM", "TABLE_CATALOG"] and ("meta_test", "") in schemas
    _, tables = _metadata(conn, "GetTables", schemaName="meta_test")
    assert [(t[1], t[2], t[3]) for t in tables] == [("meta_test", "sales", "TABLE")]
    _, cols = _metadata(conn, "GetColumns", schemaName="meta_test", tableName="sales")
    assert [(c[3], c[5]) for c in cols] == [("window_start", "TIMESTAMP"), ("total", "DECIMAL(20,2)")]
    _, functions = _metadata(conn, "GetFunctions", functionName="session_window")
    assert {f[2] for f in functions} == {"session_window"}
    conn.close()


@pytest.mark.slow
def test_cancel_stops_a_running_query(cursor) -> None:
    from TCLIService.ttypes import TOperationState

    cursor.execute(bench.LONG_QUERY, async_=True)
    deadline = time.monotonic() + 60
    while cursor.poll().operationState != TOperationState.RUNNING_STATE:
        assert time.monotonic() < deadline, "the query never started"
        time.sleep(0.2)
    time.sleep(0.5)
    cursor.cancel()
    deadline = time.monotonic() + 30
    while (state := cursor.poll().operationState) == TOperationState.RUNNING_STATE:
        assert time.monotonic() < deadline, "the query was not cancelled"
        time.sleep(0.2)
    assert state == TOperationState.CANCELED_STATE
    assert bench.fetch(cursor, "SELECT 'still', 'here'") == [("still", "here")]


def _cpu_seconds(pids: set[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
def test_load_with_a_client_disconnecting_mid_query(server: ServerProcess) -> None:
    result = bench.run_load(server.host, server.port, clients=4, queries=10, disconnect=True)
    assert result.errors == []
    assert len(result.latencies) == 40
    print(result.summary())
    # The abandoned query was cancelled with its session: the server goes idle.
    tree = _process_tree(server.proc.pid)
    deadline = time.monotonic() + 30
    while True:
        before = _cpu_seconds(tree)
        time.sleep(2)
        busy = _cpu_seconds(tree) - before
        if busy < 1.0 or time.monotonic() > deadline:
            break
    assert busy < 1.0, f"server still busy ({busy:.1f} CPU s in 2 s): the abandoned query is running"


# -- authentication (its own server) --------------------------------------------------------------
@pytest.fixture(scope="module")
def auth_server():
    with ServerProcess(args=["--auth-user", "alice"], env={"SQLWIN_AUTH_PASSWORD": "s3cret-pass"}) as srv:
        yield srv


@pytest.mark.slow
def test_auth_accepts_the_right_password_only(auth_server: ServerProcess) -> None:
    from thrift.transport.TTransport import TTransportException

    host, port = auth_server.host, auth_server.port
    conn = bench.connect(host, port, auth="CUSTOM", username="alice", password="s3cret-pass")
    assert bench.fetch(conn.cursor(), bench.QUERIES["plain_const"][0]) == bench.QUERIES["plain_const"][1]
    conn.close()
    for kwargs in ({"auth": "CUSTOM", "username": "alice", "password": "wrong"},
                   {"auth": "CUSTOM", "username": "mallory", "password": "s3cret-pass"},
                   {"auth": "NONE", "username": "alice"}):
        with pytest.raises(TTransportException, match="Error validating the login"):
            bench.connect(host, port, **kwargs)
    ok = _beeline(auth_server.url, "SELECT 'beeline', 'in';", "-n", "alice", "-p", "s3cret-pass")
    assert _beeline_rows(ok.stdout, ("beeline",))["beeline"] == [("beeline", "in")], ok.stderr[-2000:]
    denied = _beeline(auth_server.url, "SELECT 'beeline', 'in';", "-n", "alice", "-p", "nope")
    assert "Error validating the login" in denied.stderr and "beeline,in" not in denied.stdout
