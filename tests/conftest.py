"""One SparkSession and one DuckDB connection per test session."""

from __future__ import annotations

import os
import time

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["TZ"] = "UTC"
time.tzset()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """tests/test_dbt.py right after tests/test_install_extras.py, whose dbt extra's build it then checks (one
    `dbt build` of the project per run, not two)."""
    dbt = [item for item in items if item.path.name == "test_dbt.py"]
    rest = [item for item in items if item.path.name != "test_dbt.py"]
    extras = [i for i, item in enumerate(rest) if item.path.name == "test_install_extras.py"]
    if dbt and extras:
        items[:] = rest[:extras[-1] + 1] + dbt + rest[extras[-1] + 1:]


@pytest.fixture(scope="session")
def spark():
    from sqlwin.session import local_session

    session = local_session("sqlwin-tests")
    yield session
    session.stop()


@pytest.fixture()
def duck():
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    yield con
    con.close()
