"""dbt-core + dbt-spark (method: thrift) build sql_examples/dbt_project against `sqlwin serve`.

The project's models use TUMBLE, HOP, SESSION, a count window and a window Top-N over a seed;
its dbt tests (not_null, unique, accepted_values and a singular test of the exact rows) must
pass. dbt runs as a subprocess, writing only under its work folder. One build per pytest run: when
tests/test_install_extras.py's dbt extra built the project in this run (tests/conftest.py runs this module after
that one), that build (the same dbt-core and dbt-spark, from a fresh `pip install 'sqlwin[dbt]'`) is the one
checked here; otherwise the venv's own `dbt` builds it here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.servertools import (
    DBT_BUILD_SUMMARY,
    DBT_PROJECT,
    DbtBuild,
    dbt_summary,
    recorded_dbt_build,
    run_dbt,
    shared_server,
)

pytestmark = pytest.mark.slow


def test_dbt_build_passes(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    server = shared_server(request.config)
    build = recorded_dbt_build(request.config)
    if build is None:
        dbt = Path(sys.executable).with_name("dbt")
        done = run_dbt(dbt, ["build", "--no-send-anonymous-usage-stats"], server, tmp_path, schema="dbt_ci")
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
        build = DbtBuild("dbt_ci", done.stdout, "this venv's dbt")
    assert dbt_summary(build.stdout) == DBT_BUILD_SUMMARY, build.who + "\n" + build.stdout[-3000:]
    assert "PASS expected_window_results" in build.stdout, build.who

    # What dbt built is really there, with the rows worked out by hand.
    from pyhive import hive

    cursor = hive.connect(host=server.host, port=server.port, auth="NONE", username="ci").cursor()
    cursor.execute("SELECT CAST(window_start AS STRING), supplier_id, CAST(price AS STRING) "
                   f"FROM {build.schema}.top_supplier_per_window ORDER BY 1")
    assert cursor.fetchall() == [("2020-04-15 08:00:00", "supplier1", "6.00"),
                                 ("2020-04-15 08:10:00", "supplier2", "9.00")]
    cursor.execute(f"SHOW TABLES IN {build.schema}")
    assert {row[1] for row in cursor.fetchall()} == {
        "bids", "tumble_sales", "hop_sales", "supplier_sessions", "supplier_window_sales",
        "top_supplier_per_window", "count_windows"}
    assert not (DBT_PROJECT / "target").exists() and not (DBT_PROJECT / "logs").exists()
