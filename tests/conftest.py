"""One SparkSession and one DuckDB connection per test session."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.proctools import StandaloneCluster

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["TZ"] = "UTC"
time.tzset()


class _Lanes:
    """``--dist loadgroup``: the lanes of tests/lanes.py (``make test`` runs ``-n 2``). A plugin registered only
    where xdist is active: pytest refuses a conftest hook of a plugin it has not loaded (``-p no:xdist``)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config: pytest.Config, log):
        if config.getvalue("dist") != "loadgroup":
            return None
        from tests.lanes import lane_scheduler

        return lane_scheduler(config, log)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_Lanes(), "sqlwin-lanes")
    # once a run, before pytest-xdist starts its workers (they inherit it)
    if not hasattr(config, "workerinput") and not config.option.collectonly:
        _share_classes()


def _share_classes() -> None:
    """Every JVM of the run maps one class archive (tests/classdata.py): the session's, through
    tests/proctools.py's JVM options, and those of the processes the tests start, through ``SPARK_SUBMIT_OPTS``
    (which a test that sets its own options extends with ``classdata.options()``)."""
    from tests import classdata  # not tests/proctools.py: its JVM options are read from the environment set here

    if os.environ.get(classdata.ARCHIVE_ENV) == "off":  # to measure what sharing saves
        del os.environ[classdata.ARCHIVE_ENV]
        return
    archive = classdata.build()
    if archive is None:
        return
    os.environ[classdata.ARCHIVE_ENV] = str(archive)
    os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {classdata.options()}".strip()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """tests/lanes.py's PROCESS_LANE first (the unit of work that takes longest starts first), then its
    HEAVY_FIRST files, and tests/test_dbt.py right after tests/test_install_extras.py, whose dbt extra's build it
    then checks (one `dbt build` of the project per run, not two; tests/lanes.py keeps the two files in one
    worker)."""
    from tests.lanes import HEAVY_FIRST, PROCESS_LANE

    # stable: each file's order kept
    items.sort(key=lambda item: (item.path.stem not in PROCESS_LANE, item.path.stem not in HEAVY_FIRST))
    dbt = [item for item in items if item.path.name == "test_dbt.py"]
    rest = [item for item in items if item.path.name != "test_dbt.py"]
    extras = [i for i, item in enumerate(rest) if item.path.name == "test_install_extras.py"]
    if dbt and extras:
        items[:] = rest[:extras[-1] + 1] + dbt + rest[extras[-1] + 1:]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    from sqlwin.session import local_session

    # each pytest-xdist worker has its own session: its own warehouse, so that tables of one name do not clash.
    # Idle streams are polled every 100 ms (sqlwin's sessions' default, README `trigger`), not Spark's 10 ms.
    # The session's JVM options, the collector and the JIT compiler: tests/proctools.py, SESSION_JVM.
    # No whole-stage code generation (tests/proctools.py, SMALL_DATA_CONF, and its measurement).
    from tests.proctools import SESSION_JVM, SESSION_PARTITIONS, SMALL_DATA_CONF

    session = local_session("sqlwin-tests", {"spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
                                             "spark.driver.extraJavaOptions": SESSION_JVM,
                                             **SMALL_DATA_CONF, **SESSION_PARTITIONS})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def _shared_cluster(tmp_path_factory: pytest.TempPathFactory):
    from tests.proctools import SharedCluster

    cluster = SharedCluster(tmp_path_factory.mktemp("standalone"))
    yield cluster
    cluster.stop()


@pytest.fixture()
def standalone(_shared_cluster, request: pytest.FixtureRequest) -> Iterator[StandaloneCluster]:
    """The session's standalone cluster (tests/proctools.py, ``SharedCluster``; ``.master``, its URL): a master
    and two 1-core workers, started once for the cluster tests (tests/test_cluster.py, tests/test_exactly_once.py)
    and stopped after the last of them in this session's order."""
    yield _shared_cluster.get()
    items = request.session.items
    later = items[items.index(request.node) + 1:] if request.node in items else []
    if not any("standalone" in item.fixturenames for item in later):
        _shared_cluster.stop()


@pytest.fixture()
def duck():
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    yield con
    con.close()
