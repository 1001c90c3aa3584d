"""Helpers for tests that run Spark in other processes (Spark Connect, a standalone cluster, workers
with another interpreter): free ports, the pyspark wheel's SPARK_HOME, scripts run as subprocesses."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests import classdata

ROOT = Path(__file__).resolve().parent.parent


def spark_home() -> str:
    """The pyspark package folder: it is a complete SPARK_HOME (bin/, jars/)."""
    import pyspark

    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen[Any] | None = None) -> None:
    """Until something listens on 127.0.0.1:``port`` (fails early if ``proc`` exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on port {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def base_env(**extra: str) -> dict[str, str]:
    """The environment of a child Spark process: loopback, UTC, readable logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_REMOTE"))}
    env.update(SPARK_LOCAL_IP="127.0.0.1", TZ="UTC", PYARROW_IGNORE_TIMEZONE="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def run_process(cmd: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float,
                nice: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` to its end in its own process group, so a timeout also ends the JVM and Python
    workers it started (then fails with the tail of its output)."""
    cmd = ["nice", "-n", "5", *cmd] if nice else list(cmd)
    proc = subprocess.Popen(cmd, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(f"{cmd[:4]} timed out after {timeout} s\nstdout:\n{stdout[-3000:]}\n"
                             f"stderr:\n{stderr[-6000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def run_json(script: str, env: Mapping[str, str], cwd: Path, timeout: float,
             args: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``script`` with this interpreter; it must print one line ``RESULT <json>``, which is returned."""
    path = cwd / "driver.py"
    path.write_text(script)
    done = run_process([sys.executable, str(path), *args], env, cwd, timeout, nice=True)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"no RESULT (exit {done.returncode})\nstdout:\n{done.stdout[-3000:]}\n"
                         f"stderr:\n{done.stderr[-6000:]}")


# -- a standalone cluster from the wheel ----------------------------------------------------------------------
# the custom path's windows in Spark whatever their number (``keyedstate``): the executors step them
# The JVMs of a cluster test (its drivers, the standalone daemons and executors) each live a minute or so: with
# the C1 compiler only they spend far less CPU compiling than C2 does, which on 2 busy cores is most of their cost
# (the SIGKILL test, 3 drivers and a cluster: 232 s -> 127 s). So do the servers and CLIs one test file starts
# (tests/test_connect.py's Connect servers, tests/test_server_resume.py's and tests/test_service.py's processes).
# Each JVM here and the session's also map the run's class archive (tests/classdata.py): half the start-up.
SHORT_LIVED_JVM = f"-XX:TieredStopAtLevel=1 {classdata.options()}".strip()
# The test session's JVM (tests/conftest.py, one per pytest-xdist worker; tests/servertools.py's shared server
# too) runs thousands of small queries for half an hour, each with classes of its own (Spark compiles its
# expressions), so the JIT never settles: with the defaults C2 compiled for 39% of that JVM's CPU (its compiler
# threads, read from /proc on 4 files of the suite: tests/test_streaming.py, test_sinks.py, test_partials.py,
# test_replay_planned.py; 148 of 382 s). C1 alone, with a code cache large enough that its sweeper has nothing to
# evict (512 MB reserved, not 240: the sweeper once took 50 s of a C1-only run), measured on those 4 files run
# alone on 2 cores: 248 s of JVM CPU and 347 core-seconds busy in all, in 267 s; C2 kept only for methods called
# ~100x more often than its defaults ask (the setting before): 272 s, 370 core-seconds, 276 s; the defaults:
# 432-462 core-seconds. The parallel collector, not G1: throughput is what counts here, not pauses (4 files, 177 /
# 170 s and 215 / 200 s of JVM CPU with it, 191 / 184 s and 247 / 235 s with G1). Spark answers the same.
SESSION_JVM = f"-XX:+UseParallelGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m {classdata.options()}".strip()
# Every query of a test reads a few rows: with whole-stage code generation off, Spark compiles no Java class per new
# plan (its operators run one by one, each expression still compiled), which costs less CPU than it saves here.
# Spark gives the same answers either way. Measured on 2 cores, quiet machine, on tests/test_transcripts_spark.py,
# test_streaming.py and test_sinks.py in the test session's JVM: 371 s wall and 493 s of JVM CPU with Spark's
# defaults, 335 s and 443 s with it; interpreting expressions as well (``spark.sql.codegen.factoryMode`` NO_CODEGEN,
# 313 s) was faster still but fails where Spark 4.3 decodes catalog objects (``spark.catalog.listTables``:
# EXPRESSION_DECODING_FAILED), and AQE off was slower (384 s). The test session (tests/conftest.py) and the
# short-lived drivers and servers below take it (as -D through SPARK_SUBMIT_OPTS: Spark reads spark.* properties);
# the processes the CLI, dbt and Thrift server tests start keep Spark's defaults, as users run them.
SMALL_DATA_CONF = {"spark.sql.codegen.wholeStage": "false"}
# The test session's queries read a few rows: one shuffle partition, one task per shuffle stage and one state store
# per stateful operator, where sqlwin's default (4, for a laptop's cores) would start four for nothing. Streaming
# queries in foreachBatch run without AQE (Spark turns it off for a stream's session), so nothing would merge them.
# The processes the suite starts (drivers on the standalone cluster, servers, CLI runs) keep the default, so that
# state in several partitions and shuffles across executors stay tested.
SESSION_PARTITIONS = {"spark.sql.shuffle.partitions": "1"}
_SMALL_DATA_PROPERTIES = " ".join(f"-D{key}={value}" for key, value in SMALL_DATA_CONF.items())
SHORT_LIVED_ENV = {"SPARK_SUBMIT_OPTS": f"{SHORT_LIVED_JVM} {_SMALL_DATA_PROPERTIES}",  # driver (Spark reads spark.*)
                   "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM}  # standalone daemons

CLUSTER_CONF = {"spark.driver.memory": "1g", "spark.executor.memory": "512m", "spark.executor.cores": "1",
                "spark.cores.max": "2", "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.extraJavaOptions": SHORT_LIVED_JVM, "sqlwin.streaming.state": "executors"}


def _spark_class(cls: str, *args: str, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A Spark daemon in its own process group (so its executors and Python workers die with it)."""
    with log.open("wb") as out:
        return subprocess.Popen(["nice", "-n", "5", os.path.join(spark_home(), "bin", "spark-class"), cls, *args],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


class StandaloneCluster:
    """A standalone master and two 1-core workers on 127.0.0.1 (free ports), logs and work folders (``worker1``,
    ``worker2``) in ``folder``. ``start`` returns the master URL at once (a driver waits for its executors);
    ``stop`` tears the daemons down, and with them any executor still running. A driver uses ``CLUSTER_CONF``."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.procs: list[subprocess.Popen[bytes]] = []
        self.master: str | None = None

    def start(self) -> str:
        env = base_env(SPARK_HOME=spark_home(), SPARK_NO_DAEMONIZE="1", SPARK_DAEMON_MEMORY="512m", **SHORT_LIVED_ENV)
        port = free_port()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.procs = [_spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                   str(port), "--webui-port", str(free_port()), log=self.folder / "master.log",
                                   env=env)]
        try:
            wait_for_port(port, 60, self.procs[0])
            for i in (1, 2):
                work = self.folder / f"worker{i}"
                work.mkdir()
                self.procs.append(_spark_class(
                    "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                    "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g", "--work-dir", str(work),
                    log=self.folder / f"worker{i}.log", env=env))
        except BaseException:
            self.stop()
            raise
        self.master = f"spark://127.0.0.1:{port}"
        return self.master

    def alive(self) -> bool:
        return bool(self.procs) and all(proc.poll() is None for proc in self.procs)

    def stop(self) -> None:
        procs, self.procs, self.master = self.procs, [], None
        _stop(procs)


class SharedCluster:
    """The test session's standalone cluster (fixture ``standalone``, tests/conftest.py): started by the first
    test that needs it, stopped once no later test of the session needs it (and at the session's end in any
    case), so its master and workers start once, not once a test. Tests share only these daemons: each driver
    is its own application, whose executors (and their Python workers, work folders) are its own and end with
    it. A cluster with a dead daemon is not reused: a new one starts in a new folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.starts = 0
        self._cluster: StandaloneCluster | None = None

    def get(self) -> StandaloneCluster:
        """The running cluster (its ``master`` URL, its ``folder``), started if need be."""
        if self._cluster is not None and not self._cluster.alive():
            self.stop()
        if self._cluster is None:
            self.starts += 1
            self._cluster = StandaloneCluster(self.folder / f"cluster{self.starts}")
            self._cluster.start()
        return self._cluster

    def stop(self) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.stop()
