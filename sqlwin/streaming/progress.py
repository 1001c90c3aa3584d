"""A native-path table's counters, summed over every micro-batch Spark reports.

The native path's micro-batches are Spark's own aggregation, so its counters (micro-batches, input rows, rows
dropped by the watermark, state rows, the watermark) are Spark's progress reports. A query keeps only its last
``spark.sql.streaming.numRecentProgressUpdates`` (100) of them, so totals taken from ``recentProgress`` when
someone asks miss every micro-batch that ran more than 100 micro-batches before. Each report is therefore also
taken as Spark posts it, by a listener of the session's queries (a classic session: Spark Connect's listeners run
on the server, so there ``status`` reads ``recentProgress`` alone). Both feed the same totals, each micro-batch
once.
"""

from __future__ import annotations

import threading
from typing import Any


def _get(obj: Any, name: str) -> Any:
    """A field of a progress report: an attribute of pyspark's progress objects, a key of Spark Connect's."""
    value = getattr(obj, name, None)
    if value is None and hasattr(obj, "get"):
        value = obj.get(name)
    return value


class ProgressTotals:
    """One native-path query's totals (``add`` takes each report once, from whichever caller sees it first)."""

    def __init__(self) -> None:
        self.last_batch = -1
        self.micro_batches = 0
        self.rows_in = 0
        self.dropped = 0
        self.state_rows = 0
        self.watermarked: Any = None  # the last report that carried a watermark
        self._lock = threading.Lock()  # the listener's thread, and SHOW from several JDBC connections at once

    def add(self, progress: Any) -> None:
        durations = _get(progress, "durationMs") or {}
        with self._lock:
            # an idle trigger reports the number of the batch it did not run: only a run batch counts
            if progress.batchId <= self.last_batch or "addBatch" not in durations:
                return
            ops = _get(progress, "stateOperators") or []
            self.last_batch = progress.batchId
            self.micro_batches += 1
            self.rows_in += _get(progress, "numInputRows") or 0
            self.dropped += sum(_get(o, "numRowsDroppedByWatermark") or 0 for o in ops)
            self.state_rows = sum(_get(o, "numRowsTotal") or 0 for o in ops)
            if (_get(progress, "eventTime") or {}).get("watermark") is not None:
                self.watermarked = progress

    def add_all(self, reports: list[Any]) -> None:
        for progress in reports:
            self.add(progress)


def follow(spark: Any, query: Any, totals: ProgressTotals) -> None:
    """Give ``totals`` every progress report of ``query`` as Spark posts it (a classic session only)."""
    listener = getattr(spark, "_sqlwin_progress", None)
    if listener is None:
        listener = _listener()
        spark.streams.addListener(listener)
        spark._sqlwin_progress = listener
    listener.totals[str(query.id)] = totals


def _listener() -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class NativeProgress(StreamingQueryListener):
        """Progress reports of the session's queries, to the totals of those sqlwin follows (by query id)."""

        def __init__(self) -> None:
            self.totals: dict[str, ProgressTotals] = {}

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            totals = self.totals.get(str(event.progress.id))
            if totals is not None:
                totals.add(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            self.totals.pop(str(event.id), None)  # the table keeps its totals

    return NativeProgress()
