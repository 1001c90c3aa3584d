"""Streaming tables: a running continuous query, its sink, its checkpoint, and a handle to manage it.

``CREATE STREAMING TABLE out [USING parquet|json|orc|csv|memory|<file format>] [OPTIONS (path ..., checkpoint ...,
trigger ..., compaction ..., compaction_target ..., compaction_batches ..., compaction_retention ..., <an option of
the format>)] AS <query>`` and ``INSERT INTO out <query>`` start one (the format and the compaction options:
``sqlwin.streaming.sinks``, ``sqlwin.streaming.compaction``). Its folder (``checkpoint``
option, else ``<root>/<out>`` with root ``SQLWIN_STREAMING_DIR`` or the session conf
``sqlwin.streaming.dir``, default ``./sqlwin_streaming``) holds Spark's checkpoint, sqlwin's operator
state, and, without a ``path`` option, the sink's files. Starting the same statement again on the same
folder resumes where it stopped, with nothing lost or counted twice.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlwin.core.panes import MAX_TIME, MIN_TIME
from sqlwin.diagnostics import at_name, runtime_failure
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog, connect, progress, storage, tableviews
from sqlwin.streaming.compaction import CompactionPolicy
from sqlwin.streaming.panequery import item_names
from sqlwin.streaming.progress import ProgressTotals
from sqlwin.streaming.shape import StreamingShape, choose_path, key_index, mark_carrier
from sqlwin.streaming.sinks import BatchSink, sink_format
from sqlwin.streaming.stopping import CatalogGate
from sqlwin.streaming.storage import streaming_root

# `sqlwin run --available-now`: every streaming table the session starts reads what is available, then stops
AVAILABLE_NOW_CONF = "sqlwin.streaming.availableNow"
# OPTIONS sqlwin reads; any other is an option of the sink's format, given to Spark's writer and reader
SQLWIN_OPTIONS = ("path", "checkpoint", "trigger", "latest", "compaction", "compaction_target", "compaction_batches",
                  "compaction_retention")


@dataclass
class Status:
    name: str
    status: str  # running | stopped | failed
    path: str  # native | custom
    micro_batches: int
    rows_in: int
    watermark: str | None
    state_rows: int
    open_windows: int
    late_rows_dropped: int
    error: str | None = None
    input_rows_per_second: float | None = None  # of Spark's last micro-batch (tick rows included)
    last_micro_batch: str | None = None  # when Spark's last micro-batch started (UTC)


class StreamingTable:
    """The Python handle of one streaming table (also what ``SHOW STREAMING TABLES`` lists)."""

    def __init__(self, spark: Any, name: str, shape: StreamingShape, fmt: str | None, options: dict[str, str],
                 *, clock: Callable[[], int] | None = None):
        """``clock`` (not SQL): a processing-time clock in epoch microseconds for the custom path, so tests can
        drive processing-time triggers; see ``runner.start_custom``."""
        self.spark = spark
        self.clock = clock
        self.name = name
        self.shape = shape
        self.options = {k.lower(): v for k, v in options.items()}
        wanted = sink_format(spark, fmt, name) if fmt else None  # None: the sink's own, else parquet
        compaction = CompactionPolicy.from_options(self.options, name)
        self.location = table_location(spark, name, self.options)
        self.path, self.why = choose_path(shape)
        spark_options = {k: v for k, v in self.options.items() if k not in SQLWIN_OPTIONS}  # the format's own
        folders = sink_folders(self.location, self.options, shape)
        self.sink = BatchSink(name, folders["path"], wanted, compaction, spark_options)
        self.format = self.sink.format
        late = shape.late_rows_to
        self.late_sink = BatchSink(late, folders["late rows"], wanted, compaction, spark_options) if late else None
        self.database = tableviews.current_database(spark)  # where its views go in the catalog
        self.stop_gate = CatalogGate()  # a stop never interrupts a change of its views (sqlwin.streaming.stopping)
        for sink, role in ((self.sink, "sink"), (self.late_sink, "late_rows")):
            if sink is not None:
                sink.stop_gate = self.stop_gate
                entry = tableviews.Entry(name, role, self.location, sink.path)
                sink.catalog_view = (tableviews.qualified(self.database, sink.name), entry)
        self.available_now = str(spark.conf.get(AVAILABLE_NOW_CONF, "false")).lower() == "true"
        self.query: Any = None
        self.operator: Any = None
        self.committed_state: Any = None  # over Spark Connect: reads the server's committed operator state
        self.restart_query: Callable[[], Any] | None = None  # the custom path's writer, started again
        self._asked_at_start = 0
        self._native = ProgressTotals()  # native path: Spark's progress reports summed (sqlwin.streaming.progress)
        self._stopped_running = False  # stop() ended a running query (see there)
        self._watermark_read: tuple[int | None, int] = (None, MIN_TIME)  # native path: (micro-batch, its watermark)

    # -- life cycle -----------------------------------------------------------------------------
    def start(self) -> StreamingTable:
        existing = catalog.find_table(self.name)
        if existing is not None and existing.is_active:
            raise at_name(self.shape.text, self.name, f"streaming table {self.name} is already running; STOP "
                                                      f"STREAMING TABLE {self.name} first")
        storage.makedirs(self.location)
        from sqlwin.streaming.native import start_native
        from sqlwin.streaming.runner import start_custom

        latest = self.options.get("latest")
        latest_sql = latest_view_sql(self.spark, self.shape, self.name, latest) if latest else None
        # the native path's counters go on from its folder, taken as Spark reports them (not over Spark Connect,
        # whose listeners run on the server: there they count from the start, from recentProgress)
        kept = self.path == "native" and not connect.is_connect(self.spark)
        if kept:
            self._native = ProgressTotals(storage.join(self.location, "progress"))
            self._native.restore(self._last_commit())
        self.query = start_native(self) if self.path == "native" else start_custom(self, clock=self.clock)
        if kept:
            progress.follow(self.spark, self.query, self._native)
        self._asked_at_start = self._ticks_asked()
        if latest_sql:
            self.spark.sql(latest_sql)
        catalog.add_table(self)
        return self

    @property
    def is_active(self) -> bool:
        return self.query is not None and self.query.isActive

    def stop(self) -> None:
        """Stop the query. A custom-path micro-batch it interrupts ends uncommitted and runs again on restart
        (``sqlwin.streaming.stopping``); the sink's views then show every committed micro-batch."""
        if self.query is not None:
            # an error the stop itself causes is no failure: Spark takes an interrupt for a stop only where it is
            # the exception itself (a listing of a viewfs folder over the local file system, cut by the stop,
            # ends the query with Hadoop's "Error while running command to get file permissions")
            self._stopped_running = self._stopped_running or self.query.isActive
            with self.stop_gate.closed():
                self.query.stop()
        if self.operator is not None and self.operator.ticks is not None:
            self.operator.ticks.close()
        if self.operator is not None and self.committed_state is None:  # over Connect: refreshed on the server
            self.operator.show_committed()

    def folders(self) -> dict[str, str]:
        """The folders it writes, by role: its checkpoint folder, its sink's and (LATE ROWS TO) its late rows'."""
        folders = {"checkpoint": self.location, "path": self.sink.path}
        if self.late_sink is not None:
            folders["late rows"] = self.late_sink.path
        return folders

    def outputs(self) -> list[Any]:
        """Its sinks: the panes, and the late rows if it has LATE ROWS TO."""
        return [s for s in (self.sink, self.late_sink) if s is not None]

    def apply_trigger(self, writer: Any) -> Any:
        """The writer with the table's trigger: ``availableNow`` under ``sqlwin run --available-now``, else the
        ``trigger`` option's processing-time interval, else Spark's default (a micro-batch as soon as the last
        one ends)."""
        if self.available_now:
            return writer.trigger(availableNow=True)
        trigger = self.options.get("trigger")
        return writer.trigger(processingTime=trigger) if trigger else writer

    def _ticks_asked(self) -> int:
        ticks = self.operator.ticks if self.operator is not None else None
        return int(getattr(ticks, "asked", 0))

    def catching_up(self) -> bool:
        """Whether an ``available-now`` table still has work: its query runs, or it ended having asked for a
        no-data micro-batch (a window due at the new watermark) that Spark's availableNow, which reads only
        what the sources held when the query started, left unread; then the query starts again to run it.
        Spark's own stateful operators (the native path) get that micro-batch within the run."""
        if self.is_active:
            return True
        if self.query is None or self.query.exception() is not None or self.restart_query is None:
            return False
        if not self.available_now or self._ticks_asked() == self._asked_at_start:
            return False
        self._asked_at_start = self._ticks_asked()
        self.query = self.restart_query()
        return True

    def await_termination(self, timeout: float | None = None) -> bool | None:
        return self.query.awaitTermination(timeout) if timeout is not None else self.query.awaitTermination()

    def process_all_available(self) -> None:
        """Block until every row available now (and every no-data batch it causes) is processed."""
        try:
            self.query.processAllAvailable()
        except Exception as err:
            raise runtime_failure(err, self.shape.text, f"streaming table {self.name} failed: ") from None

    def read(self) -> Any:
        """The sink's rows so far (a batch DataFrame): compacted files and the folders after them, each row once."""
        return self.sink.read(self.spark)

    # -- status -------------------------------------------------------------------------------
    def status(self) -> Status:
        q = self.query
        failed = q is not None and not self._stopped_running and q.exception() is not None
        state = "failed" if failed else "running" if self.is_active else "stopped"
        error = str(runtime_failure(q.exception(), self.shape.text)) if failed else None
        if self.operator is not None:
            if self.committed_state is not None:
                self.committed_state.refresh(self.operator)
            op = self.operator
            c = op.committed_counters  # a micro-batch counts once committed (a stopped or failed one runs again)
            watermark = shown_timestamp(self.spark, op.committed_watermark)
            return Status(self.name, state, self.path, c["micro_batches"], c["rows_in"], watermark,
                          op.state_rows, op.open_windows, c["late_rows_dropped"], error, *self._last_progress())
        totals = self._native
        totals.add_all(q.recentProgress if q is not None else [])  # on Spark Connect, the only reports it sees
        watermark = None
        if totals.watermark_batch is not None:
            if self._watermark_read[0] != totals.watermark_batch:  # its commit file read once, not at every status
                self._watermark_read = (totals.watermark_batch,
                                        self._native_watermark(totals.watermark_batch, totals.watermark_text))
            watermark = shown_timestamp(self.spark, self._watermark_read[1])
        return Status(self.name, state, self.path, totals.micro_batches, totals.rows_in, watermark,
                      totals.state_rows, totals.state_rows, totals.dropped, error, *self._last_progress())

    def _native_watermark(self, batch: int, reported: str | None) -> int:
        """The watermark after Spark's micro-batch ``batch`` (epoch microseconds; MIN_TIME: none yet), as the
        custom path shows its own: the ``nextBatchWatermarkMs`` of the batch's entry in the checkpoint's commit
        log. Spark's progress reports the watermark the batch ran with (``reported``), one micro-batch behind
        (read in its place if the commit log is out of this process's reach, as a Spark Connect server's may be)."""
        try:
            data = storage.read_bytes(self._commits(str(batch)))
            millis = json.loads(data.decode("utf-8").split("\n", 1)[1])["nextBatchWatermarkMs"] if data else None
        except Exception:
            millis = None
        if millis is None:
            if reported is None:
                return MIN_TIME
            moment = dt.datetime.fromisoformat(reported.replace("Z", "+00:00"))  # 2024-01-01T00:00:05.000Z
            millis = (moment - EPOCH) // dt.timedelta(milliseconds=1)
        return MIN_TIME if millis <= 0 else int(millis) * 1000  # Spark's 0: no watermark yet

    def _commits(self, *name: str) -> str:
        return storage.join(self.location, "checkpoint", "commits", *name)

    def _last_commit(self) -> int:
        """Spark's last committed micro-batch of the table's checkpoint (-1: none)."""
        return max((int(n) for n in storage.listdir(self._commits()) if n.isdigit()), default=-1)

    def _last_progress(self) -> tuple[float | None, str | None]:
        """(input rows per second, start time) of Spark's last micro-batch of this query."""
        progress = self.query.lastProgress if self.query is not None else None
        if progress is None:
            return None, None
        rate = progress.get("inputRowsPerSecond")
        started = str(progress.get("timestamp") or "").replace("T", " ").removesuffix("Z") or None
        return (round(float(rate), 1) if rate is not None else None), started


def table_location(spark: Any, name: str, options: dict[str, str]) -> str:
    """The folder of streaming table ``name``: its ``checkpoint`` option, else ``<root>/<name>``."""
    checkpoint = {k.lower(): v for k, v in options.items()}.get("checkpoint")
    return storage.qualify(checkpoint or storage.join(streaming_root(spark), name))


def sink_folders(location: str, options: dict[str, str], shape: Any) -> dict[str, str]:
    """Where a table writes its panes (its ``path`` option, else ``<folder>/data``) and, with LATE ROWS TO, its
    late rows (``<folder>/late_rows``)."""
    path = {k.lower(): v for k, v in options.items()}.get("path")
    folders = {"path": path or storage.join(location, "data")}
    if shape.late_rows_to:
        folders["late rows"] = storage.join(location, "late_rows")
    return folders


def latest_view_sql(spark: Any, shape: StreamingShape, table: str, view: str) -> str:
    """``OPTIONS (latest 'v')``: view ``v`` holds only the latest pane per window and key of an ACCUMULATING
    table, i.e. the current result of each window (an upsert by window and key, read from the exactly-once
    pane log, so it is exactly once across restarts too)."""
    from sqlwin.plan.triggers import AccumulationMode

    if not isinstance(shape, StreamingShape):
        raise SqlwinError(f"OPTIONS (latest '{view}') applies to a query of one window; read the latest pane of "
                          f"each window of {table} with ROW_NUMBER() OVER (... ORDER BY micro_batch DESC)")
    if shape.query.emit.mode is not AccumulationMode.ACCUMULATING:
        raise SqlwinError(f"OPTIONS (latest '{view}'): the latest pane is a window's result only when panes "
                          "ACCUMULATE; this query's panes are DISCARDING")
    window = ["window_start", "window_end"] if shape.window is not None else []
    partition = ", ".join(f"`{n}`" for n in [*window, *_key_columns(spark, shape, view)]) or "1"
    return (f"CREATE OR REPLACE TEMP VIEW `{view}` AS SELECT * EXCEPT (__rn) FROM (SELECT *, ROW_NUMBER() OVER "
            f"(PARTITION BY {partition} ORDER BY micro_batch DESC, pane_index DESC) AS __rn FROM `{table}`) "
            "WHERE __rn = 1")


def _key_columns(spark: Any, shape: StreamingShape, view: str) -> list[str]:
    """The table's column of each pane key: the SELECT item that is the key (names compared as Spark does),
    named as the table names it (its alias, or the batch query's name of an un-aliased item: ``upper(k)``)."""
    found: dict[int, int] = {}  # key -> its item
    for position, item in enumerate(shape.carrier.expressions):
        key = key_index(shape, item.unalias())
        if key is not None:
            found.setdefault(key, position)
    missing = [k for k in range(len(shape.keys)) if k not in found]
    if missing:
        raise SqlwinError.at(shape.keys[missing[0]], f"OPTIONS (latest '{view}') needs every GROUP BY key in the "
                                                     "SELECT list")
    items = shape.carrier.expressions
    names: list[str | None] = [None] * len(items)
    if any(not isinstance(items[p], (exp.Alias, exp.Column)) for p in found.values()):  # Spark names it
        mark_carrier(shape)
        names = item_names(spark, shape)
    return [names[p] or items[p].alias_or_name for p in (found[k] for k in sorted(found))]


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_OFFSET = re.compile(r"^(?:GMT|UTC|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?$", re.IGNORECASE)


def shown_timestamp(spark: Any, micros: int) -> str | None:
    """A watermark (epoch microseconds) as the session shows a TIMESTAMP (``CAST(ts AS STRING)``): in its time
    zone (``spark.sql.session.timeZone``), ``yyyy-MM-dd HH:mm:ss`` with the fraction of a second it has
    (``.5``, not ``.500000``); None for none yet (or past the end of input)."""
    if micros <= MIN_TIME or micros >= MAX_TIME:
        return None
    moment = (EPOCH + dt.timedelta(microseconds=micros)).astimezone(session_zone(spark))
    fraction = f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
    return f"{moment:%Y-%m-%d %H:%M:%S}{fraction}"


def session_zone(spark: Any) -> dt.tzinfo:
    """The session's time zone: a region (``America/Los_Angeles``), ``UTC`` or an offset (``+08:00``,
    ``GMT+8``); UTC if Python does not know it."""
    from zoneinfo import ZoneInfo

    try:
        name = str(spark.conf.get("spark.sql.session.timeZone") or "UTC")
    except Exception:
        return dt.timezone.utc
    offset = _OFFSET.match(name.strip())
    if offset is not None:
        sign, hours, minutes, seconds = offset.groups()
        delta = dt.timedelta(hours=int(hours), minutes=int(minutes or 0), seconds=int(seconds or 0))
        return dt.timezone(-delta if sign == "-" else delta)
    try:
        return ZoneInfo(name.strip())
    except Exception:
        return dt.timezone.utc
