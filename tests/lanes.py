"""How `make test` spreads the suite over pytest-xdist workers (``-n 2 --dist loadgroup``; tests/conftest.py
hands xdist this scheduler).

With two workers the suite runs in two lanes: PROCESS_LANE's files, whose tests mostly wait on processes of their
own (drivers SIGKILLed and restarted, standalone clusters, Thrift and Connect servers, pip installs, CLI runs), in
one; the files that work the session's SparkSession in the other (a few of them in the first, to even the lanes).
The session's JVM keeps a core busy while the other lane waits. With more workers, each file is a unit of its own
(the dbt pair together, see conftest.py).

xdist's own ``xdist_group`` marker cannot carry this: xdist 3.8 appends the group to ``item._nodeid``, which
pytest 9.2 no longer reads, so the groups are silently lost and every test is scheduled on its own."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

PROCESS_LANE = frozenset({
    "test_exactly_once", "test_connect", "test_install_extras", "test_dbt", "test_staged_sigkill", "test_server",
    "test_streaming_server", "test_diagnostics", "test_server_resume", "test_service", "test_cluster", "test_cli",
    "test_workers",
    # and session files to even the lanes: measured on 2 cores (slower machine), the lanes above took 1129 s and
    # the rest 1733 s, these three 315 s of it
    "test_committed_state", "test_alignment", "test_streaming_evict",
})
# the modules that share one `sqlwin serve` per worker (tests/servertools.py) and dbt's one build
_DBT_PAIR = frozenset({"test_dbt", "test_install_extras"})


def file_of(nodeid: str) -> str:
    """``tests/test_x.py::test_y[z]`` -> ``test_x``."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


class LaneScheduling(LoadScopeScheduling):
    """xdist's scope scheduling, a scope being a lane (two workers) or a file (more)."""

    def _split_scope(self, nodeid: str) -> str:
        name = file_of(nodeid)
        if len(self.nodes) <= 2:
            return "processes" if name in PROCESS_LANE else "session"
        return "dbt" if name in _DBT_PAIR else name
