"""dbt-core + dbt-spark (method: thrift) build sql_examples/dbt_project against `sqlwin serve`.

The project's models use TUMBLE, HOP, SESSION, a count window and a window Top-N over a seed;
its dbt tests (not_null, unique, accepted_values and a singular test of the exact rows) must
pass. dbt runs as a subprocess of the venv's own `dbt`, writing only under tmp_path.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sqlwin.server import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "sql_examples" / "dbt_project"
pytestmark = pytest.mark.slow


def shared_server(config: pytest.Config) -> ServerProcess:
    """The `sqlwin serve` of tests/test_server.py when it runs too (kept on the pytest config)."""
    server = getattr(config, "_sqlwin_server", None)
    if server is None:
        server = ServerProcess().start()
        config.add_cleanup(server.stop)
        config._sqlwin_server = server
    return server


def _dbt(args: list[str], server: ServerProcess, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SQLWIN_HOST": server.host, "SQLWIN_PORT": str(server.port),
           "SQLWIN_DBT_SCHEMA": "dbt_ci", "DBT_PROFILES_DIR": str(PROJECT), "DO_NOT_TRACK": "1",
           "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    cmd = [str(Path(sys.executable).with_name("dbt")), *args, "--project-dir", str(PROJECT),
           "--profiles-dir", str(PROJECT), "--target-path", str(tmp_path / "target"),
           "--log-path", str(tmp_path / "logs"), "--no-use-colors"]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def test_dbt_build_passes(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    server = shared_server(request.config)
    done = _dbt(["build", "--no-send-anonymous-usage-stats"], server, tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    summary = re.search(r"Done\. PASS=(\d+) WARN=(\d+) ERROR=(\d+) SKIP=(\d+)", done.stdout)
    assert summary, done.stdout[-3000:]
    # 1 seed + 6 models + 13 schema tests + 1 singular test
    assert summary.groups() == ("21", "0", "0", "0"), done.stdout[-3000:]
    assert "PASS expected_window_results" in done.stdout

    # What dbt built is really there, with the rows worked out by hand.
    from pyhive import hive

    cursor = hive.connect(host=server.host, port=server.port, auth="NONE", username="ci").cursor()
    cursor.execute("SELECT CAST(window_start AS STRING), supplier_id, CAST(price AS STRING) "
                   "FROM dbt_ci.top_supplier_per_window ORDER BY 1")
    assert cursor.fetchall() == [("2020-04-15 08:00:00", "supplier1", "6.00"),
                                 ("2020-04-15 08:10:00", "supplier2", "9.00")]
    cursor.execute("SHOW TABLES IN dbt_ci")
    assert {row[1] for row in cursor.fetchall()} == {
        "bids", "tumble_sales", "hop_sales", "supplier_sessions", "supplier_window_sales",
        "top_supplier_per_window", "count_windows"}
    assert not (PROJECT / "target").exists() and not (PROJECT / "logs").exists()
