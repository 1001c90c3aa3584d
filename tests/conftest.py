"""One SparkSession and one DuckDB connection per test session."""

from __future__ import annotations

import os
import time

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["TZ"] = "UTC"
time.tzset()


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
