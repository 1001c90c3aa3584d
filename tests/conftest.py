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


SIGKILL_TEST = "test_exactly_once.py::test_sigkill_and_restart_matches_an_uninterrupted_run"
_early = None  # the started EarlyScenario, closed when the session ends


def pytest_collection_finish(session: pytest.Session) -> None:
    """The SIGKILL scenario runs four Spark processes of its own and waits on them for about 100 s: when its test
    is selected it starts now, beside the other tests (``EarlyScenario``), and its test collects the outcome."""
    global _early
    items = [i for i in session.items if i.nodeid.endswith(SIGKILL_TEST)]
    if session.config.option.collectonly or not items:
        return
    import tempfile
    from pathlib import Path

    scenario = items[0].module.EarlyScenario  # the class of the module as pytest imported it
    _early = scenario.current = scenario(Path(tempfile.mkdtemp(prefix="sqlwin-sigkill-")))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _early is not None:
        _early.close()


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
