"""What sqlwin hands Spark Connect's ``foreachBatch`` survives cloudpickle as the server unpickles it
(tests/test_connect.py runs the whole thing on a real server): the version check, the tick file without its
lock and timer thread, the operator's folders made again where it is unpickled, and the start errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark import cloudpickle

from sqlwin import __version__
from sqlwin.streaming import connect
from sqlwin.streaming.sources import TickFile
from sqlwin.streaming.state import StateStore, now_micros

CALLS: list[tuple[str, int]] = []


def record(batch_df: str, batch_id: int) -> None:
    CALLS.append((batch_df, batch_id))


def test_batch_function_round_trip_and_version_check() -> None:
    shipped = cloudpickle.loads(cloudpickle.dumps(connect.ServerBatchFunction(record)))
    shipped("df", 3)
    assert CALLS[-1] == ("df", 3) and shipped.version == __version__
    other = connect.ServerBatchFunction(record)
    other.version = "0.0.1"
    with pytest.raises(RuntimeError, match=f"sqlwin versions differ: {__version__} on the server, 0.0.1 in the client"):
        cloudpickle.loads(cloudpickle.dumps(other))


def test_tick_file_pickles_without_lock_or_timer(tmp_path: Path) -> None:
    ticks = TickFile(str(tmp_path / "ticks"))
    ticks.request(1, wake_at=now_micros() + 3600 * 1_000_000, wake_tick=2)  # a timer thread, an hour ahead
    try:
        data = cloudpickle.dumps(ticks)
    finally:
        ticks.close()
    os.rename(tmp_path / "ticks", tmp_path / "moved")  # the folder is made again where it is unpickled
    copy = cloudpickle.loads(data)
    assert copy._timer is None and os.path.isdir(copy.path)
    copy.request(3)
    assert copy.read() == {"wanted": 3}


def test_state_store_folders_made_where_unpickled(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "table"))
    data = cloudpickle.dumps(store)
    os.rename(tmp_path / "table", tmp_path / "elsewhere")
    copy = cloudpickle.loads(data)
    assert sorted(os.listdir(os.path.join(copy.root))) == ["begin", "rows", "state"]
    assert copy.last_committed() == -1


@pytest.mark.parametrize(("raised", "expected"), [
    ("[STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE] ...\nModuleNotFoundError: No module named 'sqlwin'\n",
     "cannot start streaming table t: the Spark Connect server's Python cannot import sqlwin. Streaming tables run "
     "sqlwin's micro-batch code inside the server (in its foreachBatch worker): install sqlwin for the interpreter "
     "the server starts Python workers with (its PYSPARK_PYTHON)"),
    ("[STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE] ...\nRuntimeError: sqlwin versions differ: 0.2.0 on the "
     "server, 0.1.0 in the client\n  at ...",
     "cannot start streaming table t: sqlwin versions differ: 0.2.0 on the server, 0.1.0 in the client; install "
     "the client's sqlwin version where the Spark Connect server runs its Python workers"),
    ("Python worker failed to connect back.\nCaused by ...",
     "cannot start streaming table t: the Spark Connect server did not start its foreachBatch Python worker in "
     "time (4 attempts; the server is overloaded): Python worker failed to connect back."),
    ("[PATH_NOT_FOUND] Path does not exist: /data/x.\n\nJVM stacktrace: ...",
     "cannot start streaming table t: [PATH_NOT_FOUND] Path does not exist: /data/x."),
])
def test_start_errors(raised: str, expected: str) -> None:
    attempts = connect.START_ATTEMPTS if "connect back" in raised else 1
    assert str(connect.start_error("t", RuntimeError(raised), attempts)) == expected
