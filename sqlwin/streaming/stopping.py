"""How a custom-path micro-batch ends when its query is stopped (``STOP STREAMING TABLE``) while it runs.

``query.stop()`` marks the query inactive, cancels its Spark jobs and interrupts Spark's stream thread, the
thread that (py4j's pinned threads) runs the operator's Spark calls, so the call in flight fails, usually with
a ``Py4JJavaError`` over ``java.lang.InterruptedException``. Spark ends the query as *stopped* (no error; the
micro-batch uncommitted, run again on restart) only if foreachBatch then fails with what it takes for an
interruption: for Python, a traceback whose text matches ``py4j.protocol.Py4JJavaError: An error occurred while
calling((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|...)`` (``StreamExecution.isInterruptionException``,
SPARK-39218). Java's regex engine recurses once per character for that group: on Java 17 it overflowed a
thread's default stack between 1 and 2 KB of text (measured), and an interrupted call's error carries the
stream thread's whole Java stack (8 KB and more), so the stream thread died printing
``java.lang.StackOverflowError``.

So: a micro-batch that finds its query stopped, at a check between its Spark jobs (``QueryStop.check``) or
through a failed call, leaves with a short error of exactly that form, which py4j does not log. Returning
normally instead would not do: Spark would commit the micro-batch, which sqlwin did not, and skip it on restart.

One Spark call must not be interrupted at all: a change of the catalog (the sink's view, ``ALTER VIEW``). The
catalog tells its listeners synchronously, and Spark's ``ListenerBus`` catches the interruption there, logs it at
ERROR with the stream thread's Java stack (which reached ``sqlwin run``'s terminal when SIGTERM landed there) and
removes the listener for good. So a stop first closes the table's ``CatalogGate``: it waits for a view change in
flight, and a micro-batch that comes to the gate later leaves as stopped instead of changing the catalog.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlwin.core.alignment import StreamMark

STOP_MARK = "sqlwin_stopped_mid_batch"
PY4J_LOGGERS = ("py4j.clientserver", "py4j.java_gateway")  # where py4j logs a callback's error, with traceback
QUERY_ID = "sql.streaming.queryId"  # the stream thread's local property (StreamExecution.QUERY_ID_KEY)


class MicroBatchStopped(Exception):
    """Raised at a check between Spark jobs; leaves foreachBatch as ``stopped_mid_batch``."""


class QueryStop:
    """Whether Spark is stopping the streaming query whose micro-batch runs: ``query.stop()`` marks it inactive
    before it cancels and interrupts anything. ``NEVER`` (replays, Spark Connect) is never stopped."""

    def __init__(self, query: Any = None):
        self.query = query

    @classmethod
    def of_stream_thread(cls, spark: Any) -> QueryStop:
        """The query of the micro-batch this thread runs (classic Spark: the stream thread's properties)."""
        from sqlwin.streaming import connect

        query_id = None if connect.is_connect(spark) else spark.sparkContext.getLocalProperty(QUERY_ID)
        return cls(spark.streams.get(query_id)) if query_id else NEVER

    @property
    def bound(self) -> bool:
        """Whether it knows a query (a copy pickled to a Spark Connect server never does)."""
        return self.query is not None

    def requested(self) -> bool:
        return self.query is not None and not self.query.isActive

    def check(self) -> None:
        if self.requested():
            raise MicroBatchStopped()


NEVER = QueryStop()


class CatalogGate:
    """Keeps a stop's interrupt away from a micro-batch's change of the catalog: the micro-batch passes the gate
    to change it, and a stop closes the gate (waiting for a change in flight) before it interrupts anything."""

    WAIT_SECONDS = 60.0  # how long a micro-batch at a closed gate waits for its query to be marked stopped

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False

    def __getstate__(self) -> dict:
        return {}  # pickled to a Spark Connect server: a gate of its own there (the client cannot close it)

    def __setstate__(self, state: dict) -> None:
        self.__init__()

    @contextmanager
    def passage(self, spark: Any) -> Iterator[None]:
        """The body runs with the gate open. At a closed gate the micro-batch waits until Spark marks its query
        stopped (the stop closes the gate just before), so what it raises is taken for the stop."""
        with self._lock:
            if not self._closed:
                yield
                return
        stop = QueryStop.of_stream_thread(spark)
        deadline = time.monotonic() + self.WAIT_SECONDS
        while stop.bound and not stop.requested() and time.monotonic() < deadline:
            time.sleep(0.02)
        raise MicroBatchStopped()

    @contextmanager
    def closed(self) -> Iterator[None]:
        """Closed while the body (the query's stop) runs; open again after, for the stopper's own view change."""
        with self._lock:
            self._closed = True
        try:
            yield
        finally:
            self._closed = False


class StoppableBatches:
    """The foreachBatch entry point of an operator (``run_batch``): a micro-batch that its query's stop interrupts,
    or that finds it stopped, ends uncommitted (run again on restart) with an error Spark takes for the stop's
    interruption. The operator gives ``spark``, ``sink``, ``query_stop`` and ``_run_batch``."""

    spark: Any
    sink: Any
    query_stop: QueryStop
    admission: Any = None  # aligned streams (``sqlwin.streaming.alignment.StreamAdmission``), else None

    def run_batch(self, batch_df: Any, batch_id: int) -> None:
        if not self.query_stop.bound:
            self.query_stop = QueryStop.of_stream_thread(self.spark)
        try:
            if self.admission is not None:  # the admitted files' rows in place of their names
                batch_df = self.admission.expand(batch_df)
            self._run_batch(batch_df, int(batch_id))
            if self.admission is not None:  # which streams read on, from the watermarks just committed
                self.admission.publish(self.stream_marks())
        except Exception:
            if not self.query_stop.requested():
                raise
            raise stopped_mid_batch(self.spark, self.sink.name, int(batch_id)) from None

    def _run_batch(self, batch_df: Any, source_batch: int) -> None:
        raise NotImplementedError

    def stream_marks(self) -> dict[str, StreamMark]:
        """Each stream's watermark (None before its first row) and idleness after the last micro-batch."""
        raise NotImplementedError


def stopped_mid_batch(spark: Any, table: str, batch_id: int) -> Exception:
    """The error for foreachBatch to raise (``from None``: no long context) when its query was stopped in
    micro-batch ``batch_id``: a ``Py4JJavaError`` over a ``java.lang.InterruptedException`` without a stack, a few
    hundred characters of traceback text."""
    from py4j.protocol import Py4JJavaError

    context = spark.sparkContext
    cause = context._jvm.java.lang.InterruptedException(f"streaming table {table} stopped in micro-batch {batch_id}")
    cause.setStackTrace(context._gateway.new_array(context._jvm.java.lang.StackTraceElement, 0))
    error = Py4JJavaError("An error occurred while calling foreachBatch.\n", cause)
    setattr(error, STOP_MARK, True)
    _quiet_py4j()
    return error


class _SkipStops(logging.Filter):
    """Drops py4j's ERROR record (with traceback) of a callback that ended because its query was stopped."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not getattr(error, STOP_MARK, False)


_SKIP_STOPS = _SkipStops()


def _quiet_py4j() -> None:
    for name in PY4J_LOGGERS:
        logger = logging.getLogger(name)
        if _SKIP_STOPS not in logger.filters:
            logger.addFilter(_SKIP_STOPS)
