"""sqlwin over Spark Connect (``SparkSession.builder.remote(...)``): native plans, arrow-UDTF plans,
errors and the plain-SQL table functions, compared with DuckDB as tests/test_differential.py does.

Clients run in subprocesses: a Connect client cannot share a Python process with the classic
session of tests/conftest.py. One server (the wheel's ``SparkConnectServer`` on a free loopback
port) serves the remote checks; ``remote("local[2]")`` (the client starts its own in-process server
on Spark's fixed port 15002, hence the lock) is checked once more on its own.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.proctools import ROOT, base_env, free_port, run_json, spark_home, wait_for_port

pytestmark = pytest.mark.slow

CLIENT = r'''
import json, sys
sys.path.insert(0, sys.argv[2])  # the repo: the client imports the tests' data and tools
from pyspark.sql import SparkSession
import duckdb
import sqlwin
from tests.difftools import EVENTS, load, on_duckdb, on_spark
from tests.test_differential import BID_COLUMNS, BIDS, EDGE

builder = SparkSession.builder.remote(sys.argv[1])
if sys.argv[1].startswith("local"):  # the client starts the server: its static confs go here
    builder = builder.config("spark.ui.enabled", "false").config("spark.log.structuredLogging.enabled", "false")
spark = builder.getOrCreate()
spark.conf.set("spark.sql.session.timeZone", "UTC")
out = {"session": type(spark).__module__}
sqlwin.register(spark)
duck = duckdb.connect()
duck.execute("SET TimeZone = 'UTC'")
load(spark, duck, "bids", BID_COLUMNS, BIDS)
load(spark, duck, "edge", EVENTS, EDGE)
queries = [
    ("SELECT window_start, window_end, SUM(price) FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(bidtime), "
     "INTERVAL '10' MINUTES)) GROUP BY window_start, window_end", ("auto",)),
    ("SELECT * FROM SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '4' MINUTES, "
     "INTERVAL '6' MINUTES)", ("auto",)),  # max_duration: the arrow UDTF
]
if sys.argv[3] == "full":
    queries[0] = (queries[0][0], ("auto", "udtf"))
    queries += [
        ("SELECT * FROM HOP(TABLE edge, DESCRIPTOR(ts), ROWS 1, INTERVAL '5' MINUTES)", ("auto",)),  # arrow UDTF
        ("SELECT * FROM SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES)", ("auto", "udtf")),
        ("SELECT * FROM TUMBLE(TABLE edge PARTITION BY k, DESCRIPTOR(ts), ROWS 2)", ("auto", "udtf")),
    ]
out["results"] = []
for sql, plans in queries:
    oracle = on_duckdb(duck, sql)
    for plan in plans:
        got = on_spark(spark, sql, plan)
        out["results"].append({"sql": sql, "plan": plan, "rows": len(oracle), "same": got == oracle,
                               "spark": repr(got), "duckdb": repr(oracle)})
out["errors"] = []
for sql in ["SELECT *\nFROM HOP(TABLE edge, DESCRIPTOR(ts), INTERVAL '5' MINUTES)",
            "SELECT * FROM TUMBLE(TABLE edge,\n  DESCRIPTOR(nope), INTERVAL '10' MINUTES)"]:
    try:
        sqlwin.sql(spark, sql).collect()
        out["errors"].append(None)
    except sqlwin.SqlwinError as e:
        out["errors"].append([str(e), e.line, e.col])
plain = "SELECT COUNT(*) FROM tumble(TABLE(edge), 'ts', INTERVAL 10 MINUTES)"
out["plain_sql"] = [spark.sql(plain).collect()[0][0],
                    sqlwin.sql(spark, "SELECT COUNT(*) FROM TUMBLE(TABLE edge, DESCRIPTOR(ts), INTERVAL '10' MINUTES)")
                    .collect()[0][0]]
print("RESULT " + json.dumps(out))
spark.stop()
'''


def _run_client(url: str, tmp_path: Path, mode: str, **env: str) -> dict[str, Any]:
    return run_json(CLIENT, base_env(**env), tmp_path, timeout=240, args=[url, str(ROOT), mode])


@pytest.fixture(scope="module")
def remote_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Every check, run by one client against a Spark Connect server on a free port."""
    tmp = tmp_path_factory.mktemp("connect")
    port = free_port()
    cmd = ["nice", "-n", "5", os.path.join(spark_home(), "bin", "spark-submit"),
           "--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]"]
    for key, value in {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": port,
                       "spark.sql.session.timeZone": "UTC", "spark.ui.enabled": "false",
                       "spark.sql.shuffle.partitions": "4", "spark.log.structuredLogging.enabled": "false",
                       "spark.driver.memory": "1g"}.items():
        cmd += ["--conf", f"{key}={value}"]
    env = base_env(SPARK_HOME=spark_home(), PYSPARK_PYTHON=sys.executable)
    with (tmp / "server.log").open("wb") as log:
        server = subprocess.Popen([*cmd, "spark-internal"], stdout=log, stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)
    try:
        wait_for_port(port, 120, server)
        yield _run_client(f"sc://127.0.0.1:{port}", tmp, "full")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=20)


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


def test_remote_local(tmp_path: Path) -> None:
    """``remote("local[2]")``: the client starts a local Connect server in its own process."""
    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "sqlwin-spark-connect-15002.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # Spark's fixed port: one such test at a time on this machine
        out = _run_client("local[2]", tmp_path, "quick", PYSPARK_PYTHON=sys.executable)
    assert out["session"] == "pyspark.sql.connect.session"
    _assert_same(out["results"])
    assert [r["plan"] for r in out["results"]] == ["auto", "auto"]
    assert out["errors"][0][1:] == [2, 6] and out["plain_sql"] == [10, 10]
