"""A native-path table's counters, summed over every micro-batch Spark reports.

The native path's micro-batches are Spark's own aggregation, so its counters (micro-batches, input rows, rows
dropped by the watermark, state rows, the watermark) are Spark's progress reports. A query keeps only its last
``spark.sql.streaming.numRecentProgressUpdates`` (100) of them, so totals taken from ``recentProgress`` when
someone asks miss every micro-batch that ran more than 100 micro-batches before. Each report is therefore also
taken as Spark posts it, by a listener of the session's queries (a classic session: Spark Connect's listeners run
on the server, so there ``status`` reads ``recentProgress`` alone). Both feed the same totals, each micro-batch
once.

The totals after each micro-batch are kept in the table's folder (``progress/<batch id>.json``, write-once, the
last few only), so a table started again goes on from those of its last committed micro-batch, as the custom
path's counters do. Spark reports a micro-batch once it committed it: a driver that dies between the two leaves
that one micro-batch out of the counts.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from sqlwin.streaming import storage

KEEP = 10  # totals files kept: those of the last micro-batches (older ones are removed every KEEP micro-batches)
KEPT = ("last_batch", "micro_batches", "rows_in", "dropped", "state_rows", "watermark_batch", "watermark_text")


def _get(obj: Any, name: str) -> Any:
    """A field of a progress report: an attribute of pyspark's progress objects, a key of Spark Connect's."""
    value = getattr(obj, name, None)
    if value is None and hasattr(obj, "get"):
        value = obj.get(name)
    return value


class ProgressTotals:
    """One native-path query's totals (``add`` takes each report once, from whichever caller sees it first);
    ``folder``: where they are kept after each micro-batch (none: not kept)."""

    def __init__(self, folder: str | None = None) -> None:
        self.folder = folder
        self.last_batch = -1
        self.micro_batches = 0
        self.rows_in = 0
        self.dropped = 0
        self.state_rows = 0
        self.watermark_batch: int | None = None  # the last micro-batch that reported a watermark
        self.watermark_text: str | None = None  # that watermark as Spark reported it
        self._lock = threading.Lock()  # the listener's thread, and SHOW from several JDBC connections at once

    def restore(self, committed: int) -> None:
        """The totals kept after micro-batch ``committed`` (Spark's last committed one), or the newest before
        it; none kept: from 0."""
        if self.folder is None:
            return
        batches = sorted((int(n[:-5]) for n in storage.listdir(self.folder) if n[:-5].isdigit()
                          and n.endswith(".json")), reverse=True)
        for batch in (b for b in batches if b <= committed):
            kept = storage.read_json(storage.join(self.folder, f"{batch}.json"))
            if kept is not None:  # else torn by a crash: the one before
                with self._lock:
                    for name in KEPT:
                        setattr(self, name, kept[name])
                return

    def add(self, progress: Any) -> None:
        durations = _get(progress, "durationMs") or {}
        with self._lock:
            # an idle trigger reports the number of the batch it did not run: only a run batch counts
            batch = _get(progress, "batchId")
            if batch <= self.last_batch or "addBatch" not in durations:
                return
            ops = _get(progress, "stateOperators") or []
            self.last_batch = batch
            self.micro_batches += 1
            self.rows_in += _get(progress, "numInputRows") or 0
            self.dropped += sum(_get(o, "numRowsDroppedByWatermark") or 0 for o in ops)
            self.state_rows = sum(_get(o, "numRowsTotal") or 0 for o in ops)
            watermark = (_get(progress, "eventTime") or {}).get("watermark")
            if watermark is not None:
                self.watermark_batch, self.watermark_text = batch, watermark
            self._keep()

    def add_all(self, reports: list[Any]) -> None:
        for progress in reports:
            self.add(progress)

    def _keep(self) -> None:
        if self.folder is None:
            return
        batch = self.last_batch
        storage.write_json(storage.join(self.folder, f"{batch}.json"), {name: getattr(self, name) for name in KEPT})
        if batch % KEEP == 0:
            for name in storage.listdir(self.folder):
                if name.endswith(".json") and name[:-5].isdigit() and int(name[:-5]) <= batch - KEEP:
                    storage.delete(storage.join(self.folder, name))


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
        """Progress reports of the session's queries, to the totals of those sqlwin follows (by query id).

        Spark calls it for every query of the session (a custom-path table's too) at every micro-batch and idle
        trigger. pyspark's own bridge turns each event into Python objects first, tens of py4j calls and, per
        observed metric, a class looked up by its short name through every jar of the classpath: measured, a
        fifth of the test session JVM's CPU went to it. ``_jlistener`` is the bridge here instead
        (``_ReportBridge``): an event costs no py4j call while sqlwin follows no query, and three (its query's
        id) otherwise; a followed query's report is read once, as its JSON (the fields ``ProgressTotals.add``
        reads, as Spark Connect gives them). The methods below are pyspark's abstract ones; the bridge takes
        the events."""

        def __init__(self) -> None:
            self.totals: dict[str, ProgressTotals] = {}

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

        @property
        def _jlistener(self) -> Any:  # what pyspark's addListener/removeListener register
            from pyspark import SparkContext

            if not hasattr(self, "_bridge"):
                jvm = SparkContext._jvm
                self._bridge = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(
                    _ReportBridge(self.totals))
            return self._bridge

    return NativeProgress()


class _ReportBridge:
    """The py4j proxy of Spark's ``PythonStreamingQueryListener`` behind ``NativeProgress``."""

    def __init__(self, totals: dict[str, ProgressTotals]) -> None:
        self.totals = totals

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        if not self.totals:
            return
        jprogress = jevent.progress()
        totals = self.totals.get(str(jprogress.id().toString()))
        if totals is not None:
            totals.add(json.loads(jprogress.json()))

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        if self.totals:
            self.totals.pop(str(jevent.id().toString()), None)  # the table keeps its totals

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
