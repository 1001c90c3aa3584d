"""Streaming tables over Spark Connect (``SparkSession.builder.remote(...)``).

A Connect client holds no JVM. ``foreachBatch`` pickles its function (cloudpickle) and runs it in a Python
process on the server (the server's ``PYSPARK_PYTHON``, which must be able to import sqlwin), one per
query, handing each micro-batch over bound to a server-side clone of the user's session. So:

- The custom path ships its ``MicroBatchOperator`` whole (in ``ServerBatchFunction``, with the client's
  sqlwin version, checked on the server). The user's session in it pickles as a reference that the server's
  worker resolves to the same server-side session (pyspark's ``SparkSession.__reduce__``), so the sink's views
  are refreshed where the user reads them; the tick file drops its lock and timer thread when pickled.
  Unpickled on the server, the operator reloads its committed state from the server's file system and
  restarts its timers there (the client's copy cannot wake it).
- The operator's state, ticks and sinks are files on the server's file system, written there. The client
  reads what it reports (``SHOW STREAMING TABLES``, ``table.status()``) through Spark (``CommittedState``),
  not from its own disk.
- The native path's writer is a closure over the sink and the session: it pickles as it is.
- Starting a query starts its Python worker on the server, which Spark allows a fixed 10 s: a start that
  missed it is tried again (``start_query``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sqlwin.errors import SqlwinError
from sqlwin.streaming import storage

VERSION_SKEW = "sqlwin versions differ:"


def is_connect(spark: Any) -> bool:
    """A Spark Connect session (the remote client), not a classic one with a JVM in this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


class ServerBatchFunction:
    """What ``foreachBatch`` gets over Connect: the batch function (the custom path's operator, or the native
    path's writer), pickled to the server with the sqlwin version that made it."""

    def __init__(self, function: Callable[[Any, int], None], operator: Any = None):
        from sqlwin.version import __version__

        self.function = function
        self.operator = operator
        self.version = __version__

    def __setstate__(self, state: dict) -> None:
        """Runs in the server's foreachBatch worker when the query starts, before its first micro-batch."""
        from sqlwin.version import __version__

        self.__dict__.update(state)
        if self.version != __version__:
            raise RuntimeError(f"{VERSION_SKEW} {__version__} on the server, {self.version} in the client")
        if self.operator is not None:
            self.operator._restore()  # the committed state on the server's disk (the client may not see it)
            self.operator.wake_after_restart()

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        self.function(batch_df, batch_id)


class CommittedState:
    """The client's view of a custom-path operator that runs on the server: its last committed
    ``state/<n>.json`` read through Spark (the file lives on the server), applied to the client's copy of
    the operator by the operator's own restore, so ``status()`` reports what the server committed."""

    def __init__(self, spark: Any, root: str):
        self.spark = spark
        self.root = root
        self._latest: tuple[int, dict] = (-1, {})

    def refresh(self, operator: Any) -> None:
        if hasattr(operator, "parts"):  # a staged query: each stage and the join committed on its own
            for part in operator.parts():
                CommittedState(self.spark, part.store.root).refresh(part)
            return
        self._latest = self._read()
        store = operator.store
        operator.store = self
        try:
            operator._restore()
        finally:
            operator.store = store

    def _read(self) -> tuple[int, dict]:
        folder = storage.join(self.root, "state")
        try:
            rows = (self.spark.read.option("wholetext", "true").option("pathGlobFilter", "*.json")
                    .option("ignoreMissingFiles", "true").text(folder)
                    .select("value", "_metadata.file_name").collect())
        except Exception:  # no state folder on the server yet: nothing committed
            return -1, {}
        committed = sorted(((int(r["file_name"][:-5]), r["value"]) for r in rows if r["file_name"][:-5].isdigit()),
                           reverse=True)
        for batch, text in committed:  # the newest whole one (a crash may tear the newest: storage.write_json)
            try:
                data = json.loads(text)
            except ValueError:
                continue
            if isinstance(data, dict) and data.pop("end", None) is True:
                return batch, data
        return -1, {}

    # -- the part of StateStore a restore reads (``committer.StateCommitter``: it deletes nothing here) ------
    def last_committed(self) -> int:
        return self._latest[0]

    def load(self, batch: int) -> dict:
        return self._latest[1]

    def load_table(self, batch: int, name: str) -> Any:
        """A table saved with the commit (``StateStore.save_table``), read on the server by Spark."""
        return self.spark.read.parquet(storage.join(self.root, "state", f"{batch}.{name}.parquet")).toArrow()


# Spark gives a new foreachBatch worker a fixed 10 s (not configurable) to start and connect back, and it
# imports pyspark from the uncompiled pyspark.zip (about 1.5 s of CPU): a loaded server misses that now and then.
WORKER_TOO_SLOW = ("Python worker failed to connect back", "waiting for the Python worker to connect back",
                   "STREAMING_PYTHON_RUNNER_INITIALIZATION_TIMEOUT_FAILURE")
START_ATTEMPTS = 4
RETRY_AFTER_S = 15.0  # the late worker of a failed attempt gives up after Spark's 15 s auth timeout


def start_query(writer: Any, name: str) -> Any:
    """``writer.start()`` on the server, again when its foreachBatch worker was too slow to start (no query
    was started then) once the late worker has given up, so that the two do not compete for the CPU; any
    other failure is a ``SqlwinError`` at once."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return writer.start()
        except Exception as err:
            if attempt == START_ATTEMPTS or not any(s in str(err) for s in WORKER_TOO_SLOW):
                raise start_error(name, err, attempt) from None
        time.sleep(RETRY_AFTER_S)
    raise AssertionError("unreachable")


def start_error(name: str, err: Exception, attempts: int = 1) -> SqlwinError:
    """Why a streaming table did not start over Connect, with the fix when the server cannot run sqlwin."""
    text = str(err)
    if "No module named 'sqlwin'" in text or "No module named 'sqlglot'" in text:
        return SqlwinError(f"cannot start streaming table {name}: the Spark Connect server's Python cannot import "
                           "sqlwin. Streaming tables run sqlwin's micro-batch code inside the server (in its "
                           "foreachBatch worker): install sqlwin for the interpreter the server starts Python "
                           "workers with (its PYSPARK_PYTHON)")
    skew = text.find(VERSION_SKEW)
    if skew >= 0:
        return SqlwinError(f"cannot start streaming table {name}: {text[skew:].splitlines()[0]}; install the "
                           "client's sqlwin version where the Spark Connect server runs its Python workers")
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    if any(s in text for s in WORKER_TOO_SLOW):
        return SqlwinError(f"cannot start streaming table {name}: the Spark Connect server did not start its "
                           f"foreachBatch Python worker in time ({attempts} attempts; the server is overloaded): "
                           f"{first}")
    return SqlwinError(f"cannot start streaming table {name}: {first}")
