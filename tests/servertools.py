"""One `sqlwin serve` per pytest run, shared by the modules that talk to a server (tests/test_server.py,
tests/test_dbt.py, tests/test_install_extras.py), and dbt run against it (one `dbt build` per pytest run when
both dbt tests run: tests/test_dbt.py checks the build of tests/test_install_extras.py's fresh install)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from sqlwin.server import ServerProcess
from tests.proctools import SESSION_JVM

ROOT = Path(__file__).resolve().parents[1]
DBT_PROJECT = ROOT / "sql_examples" / "dbt_project"
# `dbt build` of DBT_PROJECT: 1 seed + 6 models + 13 schema tests + 1 singular test, all passing
DBT_BUILD_SUMMARY = ("21", "0", "0", "0")


def shared_server(config: pytest.Config) -> ServerProcess:
    """The server of this pytest run, started by whichever module asks first (kept on the pytest config)."""
    server = getattr(config, "_sqlwin_server", None)
    if server is None:  # its streaming tables and registry in a folder of the run, not the working folder
        root = tempfile.mkdtemp(prefix="sqlwin-shared-server-")
        config.add_cleanup(lambda: shutil.rmtree(root, ignore_errors=True))
        # it runs for most of the suite, a stream of small queries like the test session's: the same JIT settings
        # (tests/proctools.py, SESSION_JVM; test_server.py + test_diagnostics.py, run alone: 186 -> 158 core-s)
        # the root as the README's setting, which every JDBC connection's session must see (no environment
        # variable to fall back on): test_server.py's test_listens_on_loopback_only reads it back
        server = ServerProcess(args=["--conf", f"sqlwin.streaming.dir={root}"],
                               env={"SQLWIN_STREAMING_DIR": "", "SPARK_SUBMIT_OPTS": SESSION_JVM}).start()
        config.add_cleanup(server.stop)
        config._sqlwin_server = server
    return server


def run_dbt(dbt: Path, args: list[str], server: ServerProcess, workdir: Path, schema: str,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``dbt args`` on DBT_PROJECT against ``server``, into ``schema``; dbt writes only under ``workdir``."""
    env = {**(os.environ if env is None else env), "SQLWIN_HOST": server.host, "SQLWIN_PORT": str(server.port),
           "SQLWIN_DBT_SCHEMA": schema, "DBT_PROFILES_DIR": str(DBT_PROJECT), "DO_NOT_TRACK": "1",
           "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    cmd = [str(dbt), *args, "--project-dir", str(DBT_PROJECT), "--profiles-dir", str(DBT_PROJECT),
           "--target-path", str(workdir / "target"), "--log-path", str(workdir / "logs"), "--no-use-colors"]
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)


@dataclass
class DbtBuild:
    """A passing ``dbt build`` of DBT_PROJECT on the shared server: into ``schema``, by ``who``."""

    schema: str
    stdout: str
    who: str


def record_dbt_build(config: pytest.Config, build: DbtBuild) -> None:
    """Keep a build for tests/test_dbt.py, which checks what it built instead of building the project again."""
    config._sqlwin_dbt_build = build


def recorded_dbt_build(config: pytest.Config) -> DbtBuild | None:
    return getattr(config, "_sqlwin_dbt_build", None)


def dbt_summary(stdout: str) -> tuple[str, ...] | None:
    """(PASS, WARN, ERROR, SKIP) of dbt's closing line."""
    found = re.search(r"Done\. PASS=(\d+) WARN=(\d+) ERROR=(\d+) SKIP=(\d+)", stdout)
    return found.groups() if found else None
