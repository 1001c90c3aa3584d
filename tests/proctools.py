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
