"""How `make test` spreads the suite over pytest-xdist workers (``-n 2 --dist loadgroup``; tests/conftest.py
hands xdist this scheduler).

PROCESS_LANE's files, whose tests mostly wait on processes of their own (drivers SIGKILLed and restarted,
standalone clusters, Thrift and Connect servers, pip installs, CLI runs), are one unit of work, first in the queue
(conftest.py collects them first): with two workers one of them runs that lane while the other works the session's
SparkSession, file by file; when the lane is done its worker takes the files still waiting. The session's JVM keeps
a core busy while the lane waits, and the two end together on any machine, with no table of durations to keep
up to date. With more workers, each file is a unit of its own (the dbt pair together).

xdist's own ``xdist_group`` marker cannot carry this: xdist 3.8 appends the group to ``item._nodeid``, which
pytest 9.2 no longer reads, so the groups are silently lost and every test is scheduled on its own."""

from __future__ import annotations

from typing import Any

PROCESS_LANE = frozenset({
    "test_exactly_once", "test_connect", "test_install_extras", "test_dbt", "test_staged_sigkill", "test_server",
    "test_streaming_server", "test_diagnostics", "test_server_resume", "test_service", "test_cluster", "test_cli",
    "test_workers",
})
# The session's files that take minutes (streaming tables fed file by file), queued right after the lane: a file
# of minutes started last keeps one worker busy while the other has nothing left (on 2 cores,
# tests/test_transcripts_spark.py ran alone for the last 67 s of the suite in alphabetical order). A coarse set,
# not a table of durations: a file missing from it only ends the suite a little later.
HEAVY_FIRST = frozenset({
    "test_transcripts_spark", "test_streaming_count_windows", "test_streaming_evict", "test_streaming_stages",
    "test_replay_planned", "test_streaming_examples", "test_streaming_equivalence", "test_committed_state",
    "test_sinks", "test_alignment", "test_nexmark", "test_replay_planned_join", "test_streaming_interval_join",
    "test_window_rank",
})
# the modules that share one `sqlwin serve` per worker (tests/servertools.py) and dbt's one build
_DBT_PAIR = frozenset({"test_dbt", "test_install_extras"})


def file_of(nodeid: str) -> str:
    """``tests/test_x.py::test_y[z]`` -> ``test_x``."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def lane_scheduler(config: Any, log: Any) -> Any:
    """xdist's scope scheduling, a scope being PROCESS_LANE (two workers) or a file, in the collection's order
    (xdist imported here: the suite also runs without it, one file after another)."""
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            name = file_of(nodeid)
            if len(self.nodes) <= 2 and name in PROCESS_LANE:
                return "processes"
            return "dbt" if name in _DBT_PAIR else name

        def schedule(self) -> None:
            """As xdist does, but never reordered by the number of tests in a unit: the lane goes first."""
            reorder = self.config.option.loadscopereorder
            self.config.option.loadscopereorder = False
            try:
                super().schedule()
            finally:
                self.config.option.loadscopereorder = reorder

    return LaneScheduling(config, log)
