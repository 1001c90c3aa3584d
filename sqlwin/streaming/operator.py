"""The custom streaming path: one micro-batch of a windowed query, driven by sqlwin, not by Spark.

Per micro-batch ``n`` (Spark's ``foreachBatch``; replay calls ``step`` the same way), with ``W`` the
watermark in force (computed at the end of the previous micro-batch) and ``P`` its processing time:

1. The window assigner (``sqlwin.streaming.assigner``, one per kind of window) has Spark assign the new rows
   to windows (the batch backend's own plan) and classify each (row, window) natively: dropped ``late`` when
   ``W >= window_end + lateness``, dropped ``window closed`` when the window's trigger has finished; the rest
   are stored (``rows/<n>``, ``sqlwin.streaming.rowstore``). Dropped rows go to LATE ROWS TO. With
   partial-aggregate state (``sqlwin.streaming.partials``) one Spark job reads the micro-batch for this and
   for its statistics (row count, largest event time) together (the assigner's ``scan``), as Spark's own
   streaming aggregation reads it once.
2. The pane engine (``sqlwin.streaming.engines``: the pane driver of ``sqlwin.core.panes`` per (key,
   window), or the columnar one) runs on the *counts* of new rows, plus every window whose event- or
   processing-time timer is due: this decides which panes fire.
3. Spark computes every fired pane with the user's own query over that pane's stored rows
   (``sqlwin.streaming.panequery``), and the result is written as micro-batch ``n`` of the sink. With
   EVICT, Spark first evicts over each fired pane's contents (``sqlwin.streaming.evictors``).
4. The watermark advances (max ts minus the delay; the idle rule of GRAMMAR 3); if a window's timer is due
   then, the no-data micro-batch that fires it runs at once, inside the same Spark micro-batch (``_fire_due``),
   as Spark runs one for its own stateful operators; a pending processing-time timer or idle deadline asks the
   tick source for a micro-batch at its time. Windows therefore fire in the micro-batch *after* the one whose
   rows moved the watermark past their end.

Rows never cross into Python; a micro-batch is committed by writing ``state/<n>.json`` last (every role's
state: ``sqlwin.streaming.committer``), and every write before it replaces its own folder, so a micro-batch
re-run after a crash gives the same result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlwin.core.alignment import StreamMark
from sqlwin.core.panes import MIN_TIME, PaneDriver, QueryWatermark, WatermarkTracker, WindowKey, WindowState
from sqlwin.plan.windows import WindowKind
from sqlwin.streaming import trace
from sqlwin.streaming.assigner import Scanner, WindowAssigner
from sqlwin.streaming.batchinput import BatchInput
from sqlwin.streaming.committer import Durable, StateCommitter
from sqlwin.streaming.context import PaneEngine, Views
from sqlwin.streaming.countwindows import CountWindowAssigner
from sqlwin.streaming.engines import Fired
from sqlwin.streaming.evictors import SparkEvictor
from sqlwin.streaming.keyedstate import Placement
from sqlwin.streaming.maxsessions import MaxDurationSessions
from sqlwin.streaming.outputs import Outputs
from sqlwin.streaming.panequery import PaneQuery, key_ddl
from sqlwin.streaming.partials import Decomposition, decompose
from sqlwin.streaming.rowstore import StoredRows
from sqlwin.streaming.sessions import SessionAssigner
from sqlwin.streaming.sinks import BatchSink
from sqlwin.streaming.sources import TickFile, batch_rows
from sqlwin.streaming.state import StateStore, now_micros
from sqlwin.streaming.stopping import NEVER, StoppableBatches
from sqlwin.streaming.timewindows import TimeWindowAssigner

STATE_CONF = "sqlwin.streaming.state"  # where the windows' state lives: ``auto`` (default), ``executors``, ``driver``


class MicroBatchOperator(StoppableBatches):
    """Wires the roles (Flink's ``WindowOperator``), each chosen once: the window assigner (by the window's
    kind), which assigns, classifies and stores a micro-batch's rows; the pane engine it chooses; the evictor;
    the stored rows; the input and the outputs; and the committer of all their state. It keeps the watermark,
    the counters and the micro-batch numbers, and asks for the micro-batches timers need."""

    forwards_watermark = False  # a stage of a staged query commits the watermark it ran with (``in_force``)

    def __init__(self, spark: Any, shape: Any, location: str, sink: BatchSink, late_sink: BatchSink | None,
                 tag: str, clock: Callable[[], int] = now_micros, ticks: TickFile | None = None):
        self.spark = spark
        self.shape = shape
        self.sink = sink
        self.late_sink = late_sink
        self.clock = clock
        self.ticks = ticks
        self.store = StateStore(location)
        self.views = Views.for_table(tag)
        self.query = PaneQuery(shape, spark, self.views)
        self.driver = PaneDriver(shape.query.emit, shape.query.lateness, global_window=shape.window is None)
        self.streams = shape.streams or [shape.stream]
        self.tracker = self._watermark()
        self.in_force = self.tracker.current  # the watermark the last micro-batch ran with (a stage forwards it)
        self.counters = {"rows_in": 0, "late_rows_dropped": 0, "panes": 0, "micro_batches": 0}
        # what the status shows: the counters and watermark of the last commit (a micro-batch counts as it runs,
        # and one that does not commit, stopped or failed, runs again: counted once it commits)
        self.committed_counters = dict(self.counters)
        self.committed_watermark = MIN_TIME
        self.current_processing_time = 0
        self.query_stop = NEVER  # the live query's stop (``run_batch``): checked between a micro-batch's Spark jobs
        self.next_batch = 0  # sqlwin's micro-batch number (counts the micro-batches that did something)
        self.last_source_batch = -1  # Spark's id of the last batch committed
        self.last_source_step = 0  # its step (a staged query runs the no-data steps it made due inside it)
        self.relation_columns = [c.name for c in shape.window.relation.columns] if shape.window else None
        self.assigner = self._assigner()
        self.evictor = SparkEvictor.of(self)  # EVICT: rows evicted in Spark at each firing (evictors.py)
        self.rows = StoredRows(self, self.evictor)
        self.input = BatchInput(shape, self.streams, self.views)
        self.outputs = Outputs(self, self.evictor, sink, late_sink)  # the panes and LATE ROWS TO
        self._prepare_schemas()
        self.scan = self.assigner.scanner() if self.FUSED_SCAN else None  # one Spark job reads a data micro-batch
        # where the columnar engine's windows live: the driver, or Spark (``keyedstate``) once they are many
        self.placement = Placement.of(spark, self.store.root) if self.KEYED_STATE else \
            Placement(spark, self.store.root, "driver")
        self.committer = StateCommitter(self._roles)
        self._restore()

    FUSED_SCAN = True
    COLUMNAR = True
    KEYED_STATE = True

    def _watermark(self) -> Any:
        """The query's watermark: its streams' (``ForwardedWatermark`` where another window operator feeds it)."""
        return QueryWatermark([WatermarkTracker(s.watermark.delay if s.watermark else 0, s.idle_timeout,
                                                s.watermark.lag if s.watermark else None) for s in self.streams])

    def _assigner(self) -> WindowAssigner:
        spec = self.shape.window
        if spec is not None and spec.is_count_based:
            return CountWindowAssigner(self)
        if spec is not None and spec.kind is WindowKind.SESSION:
            return (MaxDurationSessions if spec.max_duration is not None else SessionAssigner)(self)
        return TimeWindowAssigner(self)

    def _pane_engine(self, committed: dict | None) -> PaneEngine:
        """The assigner's engine; the columnar one only where a fused scan counts the new rows per window."""
        return self.assigner.pane_engine(self.driver, self.COLUMNAR and self.scan is not None, committed)

    def _scanner(self) -> Scanner | None:
        """What reads a data micro-batch in one Spark job, if anything: the assigner's, chosen at set-up."""
        return self.scan

    def _roles(self) -> list[Durable]:
        """Every role whose state the micro-batch commits, in the order of their keys in ``state/<n>.json``."""
        return [self.panes, self.rows, self.assigner, self.evictor]

    # -- set-up -------------------------------------------------------------------------------
    def _prepare_schemas(self) -> None:
        """Analyse (never run) the queries once, against the stream's view, to fix every schema."""
        from pyspark.sql import functions as F

        for i, stream in enumerate(self.streams):
            self.spark.table(stream.name).createOrReplaceTempView(self.views.batch_of(i))
        assigned = self.spark.sql(self.query.assign_sql)
        self.assigned_schema = assigned.schema
        self.key_ddl = key_ddl(assigned.schema, len(self.shape.keys)) if self.shape.keys else ""
        internal = {"__key", "__ws", "__we", "__ts", *[f"__k{i}" for i in range(len(self.shape.keys))]}
        window_cols = {"window_start", "window_end", "window_time"} if self.shape.window else set()
        self.row_columns = [f.name for f in assigned.schema.fields if f.name not in internal | window_cols]
        if self.relation_columns is None:
            self.relation_columns = list(self.row_columns)
        assigned.withColumn("__status", F.lit(None).cast("string")).createOrReplaceTempView(self.views.annotated)
        self.query.decomposition = self._decomposition()
        if self.query.decomposition is not None:  # state: partial aggregates per key, window and micro-batch
            stored = self.spark.sql(self._partial_sql()).drop("__status", "__n")
            stored_columns = self.query.decomposition.columns
        else:  # state: the rows themselves
            stored, stored_columns = assigned, self.row_columns
        stored = stored.withColumn("__mb", F.lit(0).cast("bigint")).withColumn("__present", F.lit(True))
        stored = self.evictor.prepare(stored)  # EVICT: stored rows carry their place in arrival order
        self.rows_schema = stored.schema
        self.arrow_rows = self.shape.query.evict is None and \
            all(_parquet_safe(f.dataType) for f in stored.schema.fields)
        # no evictor: the rows a pane finds are the rows its window stored
        inner = self.assigner.panes_find_rows() and self.shape.query.evict is None
        self.relation_sql = self.query.relation_sql(stored_columns, self.key_ddl, inner=inner)
        self.pane_sql = self.query.pane_sql()
        self.outputs.prepare(self.spark)

    def _decomposition(self) -> Decomposition | None:
        """Partial aggregates where every aggregate splits; raw rows for EVICT (an evictor chooses among the
        rows), where the query is not a decomposable aggregation, and for SESSION windows that may close or be
        cut (``sessions.keeps_partials``)."""
        shape = self.shape
        if not shape.aggregated or shape.query.evict is not None:
            return None  # EVICT: an evictor needs the rows themselves (Flink keeps a window's elements)
        if not self.assigner.keeps_partials():
            return None
        return decompose(shape.carrier, self.spark, self.views.annotated, shape.source_alias)

    def partials_of(self, spark: Any, rows: Any) -> Any:
        """Accepted rows as the state keeps them: one row of partial aggregates per (key, window), with its
        row count ``__n``."""
        from pyspark.sql import functions as F

        rows.withColumn("__status", F.lit(None).cast("string")).createOrReplaceTempView(self.views.annotated)
        return spark.sql(self._partial_sql()).drop("__status")

    def _partial_sql(self) -> str:
        assert self.query.decomposition is not None
        return self.query.decomposition.partial_sql(self.views.annotated, self.shape.source_alias,
                                                    len(self.shape.keys))

    def _restore(self) -> None:
        """Every role from the last commit (also where the operator is unpickled on a Spark Connect server, and
        for a Connect client's status with the server's commit: ``connect``). The pane engine is chosen again:
        windows committed by PaneDriver go on with it."""
        commit = self.committer.last(self.store)
        self.panes = self._pane_engine(commit.data if commit is not None else None)
        if commit is not None:
            self.next_batch = commit.batch + 1
            self.last_source_batch = commit.data.get("source_batch", -1)
            self.last_source_step = commit.data.get("source_step", 0)
            self.tracker.restore(commit.data["watermark"])
            self.in_force = commit.data.get("in_force", self.tracker.current)
            self.counters.update(commit.data["counters"])
        self.committed_counters, self.committed_watermark = dict(self.counters), self.tracker.current
        self.committer.restore(self.store, commit)

    # -- the foreachBatch entry point (run_batch: StoppableBatches) -----------------------------
    def _run_batch(self, batch_df: Any, source_batch: int) -> None:
        if source_batch <= self.last_source_batch:
            # committed before a crash: Spark re-runs it, sqlwin already stepped its rows (not read again); the
            # crash may have come before the no-data step they made due, which runs now, as it would have
            if source_batch == self.last_source_batch:
                self.current_processing_time = self.store.begin(source_batch, self.clock())
                if self.wants_micro_batch():
                    self._fire_due(batch_df.sparkSession, self.current_processing_time)
            self._ask_for_next_batch(source_batch)
            return
        processing_time = self.store.begin(source_batch, self.clock())
        spark = batch_df.sparkSession
        data = batch_rows(self.spark, batch_df, source_batch)  # None: only ticks, no Spark job reads it
        if data is not None and self.wants_micro_batch():  # left due by a crash, its tick read with these rows
            self._fire_due(spark, processing_time)
        if data is None or self._scanner() is not None:  # one Spark job reads the micro-batch: no copy in memory
            self.step(spark, data, processing_time, source_batch=source_batch)
        else:  # read once from the source: the statistics, the assignment and the late rows all scan it
            data = data.persist()
            try:
                self.step(spark, data, processing_time, source_batch=source_batch)
            finally:
                data.unpersist()
        if self.wants_micro_batch():
            self._fire_due(spark, processing_time)
        self._ask_for_next_batch(source_batch)

    def _fire_due(self, spark: Any, processing_time: int) -> None:
        """The no-data micro-batch a watermark made due (a window's timer), run at once in this Spark micro-batch,
        not in one a tick asks for: right after the rows that moved the watermark, so it fires before any later
        row arrives, however many files wait (a tick read together with the next file fired the windows with
        that file's rows in them: the panes depended on when files came, and differed from replay's). The
        same panes, numbered the same as a replay's (sqlwin numbers its own micro-batches), written a Spark
        micro-batch sooner, and Spark's cost of a micro-batch paid once; it runs at this micro-batch's processing
        time. A crash after the rows' commit leaves Spark's micro-batch uncommitted: its re-run finds the rows
        committed and runs this one then, before any later file is read. (A staged query runs as many as its
        stages need: ``StagedOperator.settle``, resumed at the step a crash interrupted likewise.)"""
        self.step(spark, None, processing_time)

    def stream_marks(self) -> dict[str, StreamMark]:
        return {s.name: StreamMark(None if t.max_ts is None and t.current == MIN_TIME else t.current,
                                   self.tracker.idle(t, self.current_processing_time))
                for s, t in zip(self.streams, self.tracker.trackers, strict=True)}

    def step(self, spark: Any, data: Any, processing_time: int, end_of_input: bool = False,
             source_batch: int | None = None, source_step: int = 0) -> Fired:
        """Process one micro-batch (rows ``data``, or None for a no-data batch); returns the panes fired.
        ``source_batch`` / ``source_step``: Spark's micro-batch it runs in, and which step of it (a stage of a
        staged query runs several), recorded so that a re-run after a crash skips what this one committed.

        It is numbered ``self.next_batch`` if it does something (brings rows, fires or expires a window,
        moves the watermark); a micro-batch that does nothing (Spark's first empty batch, a tick with
        nothing due) changes no state and takes no number, so numbers do not depend on such batches."""
        self.query_stop.check()  # stopped before the micro-batch started: it runs on restart
        batch = self.next_batch
        self.current_processing_time = processing_time
        start = self.tracker.current
        if end_of_input:
            self.tracker.end_of_input()
        elif self.shape.processing_time:
            # windows in processing time: every window that ended before this micro-batch's clock is complete,
            # and the rows of this micro-batch (PROCTIME = its clock) fall in a window that has not ended
            self.tracker.trackers[0].advance_to(processing_time - 1)
            self.tracker.advance_idle(processing_time)
        else:  # PROCTIME() - lag watermarks: the micro-batch's clock sets the watermark in force for it
            self.tracker.at_clock(processing_time)
        scanned = self.scan is not None and data is not None
        if scanned:  # the watermark in force does not depend on the row count here:
            # without rows only idleness moves it, and then nothing was assigned
            count, max_ts, accepted = self.scan(spark, data, batch, self.tracker.current, processing_time)
        else:
            count, max_ts = self._read(data, processing_time)
        if count == 0 and not end_of_input and not self.shape.processing_time:
            self.tracker.advance_idle(processing_time)
        watermark = self.in_force = self.tracker.current
        if not scanned:  # count windows number waiting rows in micro-batches without rows too
            accepted = self.assigner.assign(spark, batch, watermark, with_rows=count > 0)
        if scanned:  # many new windows: they go to Spark before the driver would hold them
            self.panes = self.placement.before_step(self.panes, accepted, batch)
        panes, expired = self.panes.drive(accepted, batch, watermark, processing_time, self._token(batch))
        self.query_stop.check()  # the last before the panes' Spark jobs; after them the micro-batch commits
        self._emit(spark, panes, batch)
        self.tracker.after_batch(max_ts, processing_time)
        moved = self.tracker.current > start
        if source_batch is not None:
            self.last_source_batch, self.last_source_step = source_batch, source_step
        if count or panes or expired or moved or self.assigner.changed or self.panes.changed:
            self.counters["rows_in"] += count
            self.counters["panes"] += len(panes)
            self.counters["micro_batches"] += 1
            self.panes = self.placement.place(self.panes, batch)  # committed where its windows now are
            self._collect_garbage()
            self._commit(batch)
        # a data batch runs with the watermark of the previous batch; a no-data batch with its own (end of
        # input: +infinity; idle streams: advanced by processing time)
        trace.step(batch if self.next_batch > batch else None, data is not None,
                   start if data is not None else self.tracker.current)
        if self.next_batch > batch:  # committed: Spark calls come last, where a stop's interruption costs nothing
            self.show_committed()
        return panes

    def _token(self, batch: int) -> int:
        """What a pane records for the rows a micro-batch added to a window: where they are stored."""
        return batch

    def _read(self, data: Any, processing_time: int) -> tuple[int, list[int | None]]:
        return self.input.read(data, processing_time)

    def write_late(self, parts: list, batch: int, watermark: int, count: int) -> None:
        """LATE ROWS TO: every dropped (row, window) of the micro-batch, written once (its folder replaced)."""
        self.counters["late_rows_dropped"] += count
        self.outputs.late(parts, batch, watermark)

    def _emit(self, spark: Any, fired: Fired, batch: int) -> None:
        self.outputs.panes(spark, fired, batch)

    # -- bookkeeping -----------------------------------------------------------------------------
    def _collect_garbage(self) -> None:
        """Forget the stored rows no open window refers to any more (state shrinks as windows expire): their
        files are deleted once the commit is on disk (after a crash, by the restore)."""
        self.rows.forget(self.panes.live_batches(set(self.rows.by_batch)))
        self.evictor.collect_garbage(set(self.rows.by_batch))

    def _commit(self, batch: int) -> None:
        state = {"source_batch": self.last_source_batch, "watermark": self.tracker.to_dict(), "counters": self.counters}
        if self.last_source_step:  # a no-data step of a staged query (0, the data's step, is not written)
            state["source_step"] = self.last_source_step
        if self.forwards_watermark:
            state["in_force"] = self.in_force
        self.committer.commit(self.store, batch, state)
        self.next_batch = batch + 1
        self.committed_counters, self.committed_watermark = dict(self.counters), self.tracker.current

    def show_committed(self) -> None:
        """The sink's views, listed afresh: every committed micro-batch."""
        self.outputs.register(self.spark)

    def _ask_for_next_batch(self, batch: int | None) -> None:
        """A no-data micro-batch now if a window's timer is due at the new watermark (the batch Spark runs for
        its own state after the watermark moved; when nothing is due that batch would do nothing), and one
        when the earliest processing-time timer or idle deadline comes. Tick numbers are a function of the
        batch number, so a batch re-run after a crash asks for exactly the same batches."""
        if self.ticks is None or batch is None:
            return
        wanted = int(self.ticks.read().get("wanted") or 0)
        if self.wants_micro_batch():
            wanted = max(wanted, batch + 1)
        self.ticks.request(wanted, wake_at=self.next_wake(), wake_tick=max(wanted, batch + 1))

    def wants_micro_batch(self) -> bool:
        """Whether a window's timer is due at the watermark now in force: the next micro-batch fires it."""
        watermark, now = self.tracker.current, self.current_processing_time
        return self.panes.any_due(watermark, now) or self.assigner.due(watermark)

    def wake_after_restart(self) -> None:
        """Timers of restored windows: ask for the micro-batch of the earliest one (the wake-up thread of
        the process that stopped is gone)."""
        if self.ticks is not None and self.open_windows:
            wanted = int(self.ticks.read().get("wanted") or 0)
            self.ticks.request(wanted, wake_at=self.next_wake(), wake_tick=wanted + 1)

    def next_wake(self) -> int | None:
        """The next processing time (after this micro-batch's) at which a micro-batch without rows may fire
        something: the earliest processing-time timer, or the moment idleness moves the watermark."""
        now = self.current_processing_time
        proc, events = self._timers()
        if self.shape.processing_time:  # the clock itself moves the watermark: wake when a window ends
            idle = min((e + 1 for e in events if e + 1 > now), default=None)
        else:
            idle = self.tracker.wake_time(min(events), after=now) if events else None
        candidates = [t for t in (min(proc, default=None), idle) if t is not None]
        return min(candidates) if candidates else None

    def idle_wake(self) -> int | None:
        """The processing time at which an idle stream's watermark (WITH IDLE TIMEOUT) reaches the earliest window
        timer (None: no stream has an idle timeout, or nothing waits): the tick a live run gets then, which a
        replay runs as a micro-batch without rows before the next one with rows, if that one comes later."""
        trackers = getattr(self.tracker, "trackers", [])
        if self.shape.processing_time or not any(t.idle_timeout is not None and t.lag is None for t in trackers):
            return None
        events = self._timers()[1]
        return self.tracker.wake_time(min(events), after=self.current_processing_time) if events else None

    def _timers(self) -> tuple[list[int], list[int]]:
        """The open windows' (processing-time, event-time) timers after this micro-batch, the assigner's too."""
        proc, events = self.panes.timers(self.current_processing_time)
        return proc, [*events, *self.assigner.event_timers()]

    # -- metrics ------------------------------------------------------------------------------
    @property
    def windows(self) -> dict[WindowKey, WindowState]:
        """The open windows' pane state, which the assigners that merge or number windows edit (theirs is the
        per-window engine)."""
        return self.panes.windows

    @property
    def state_rows(self) -> int:
        return self.rows.state_rows + self.assigner.state_rows

    @property
    def open_windows(self) -> int:
        return len(self.panes)

    @property
    def watermark(self) -> int:
        return self.tracker.current


def _parquet_safe(data_type: Any) -> bool:
    """A Spark type that pyarrow writes to parquet as Spark writes it (so Spark reads it back as that type)."""
    from pyspark.sql import types as T

    return isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
                                  T.BooleanType, T.StringType, T.BinaryType, T.DecimalType, T.DateType,
                                  T.TimestampType, T.TimestampNTZType))
