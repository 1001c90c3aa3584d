"""The custom streaming path: one micro-batch of a windowed query, driven by sqlwin, not by Spark.

Per micro-batch ``n`` (Spark's ``foreachBatch``; replay calls ``step`` the same way), with ``W`` the
watermark in force (computed at the end of the previous micro-batch) and ``P`` its processing time:

1. Spark assigns the new rows to windows (the batch backend's own plan) and classifies each (row, window)
   natively: dropped ``late`` when ``W >= window_end + lateness``, dropped ``window closed`` when the
   window's trigger has finished; the rest are stored (``rows/<n>``). Dropped rows go to LATE ROWS TO.
   With partial-aggregate state (``sqlwin.streaming.partials``) one Spark job reads the micro-batch for
   this and for its statistics (row count, largest event time) together (``_scan``), as Spark's own
   streaming aggregation reads it once.
2. Python runs the pane driver (``sqlwin.core.panes``) per (key, window) on the *counts* of new rows,
   plus every window whose event- or processing-time timer is due: this decides which panes fire.
3. Spark computes every fired pane with the user's own query over that pane's stored rows
   (``sqlwin.streaming.panequery``), and the result is written as micro-batch ``n`` of the sink. With
   EVICT, Spark first evicts over each fired pane's contents (``sqlwin.streaming.evictors``).
4. The watermark advances (max ts minus the delay; the idle rule of GRAMMAR 3); if it moved, or a
   processing-time timer is pending, the operator asks for a no-data micro-batch (tick source), just as
   Spark runs one for its own stateful operators. Windows therefore fire in the micro-batch *after* the
   one whose rows moved the watermark past their end.

Rows never cross into Python; a micro-batch is committed by writing ``state/<n>.json`` last, and every
write before it replaces its own folder, so a micro-batch re-run after a crash gives the same result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlwin.core.columnar import ColumnarPanes, ComparisonTrigger, FiredPanes
from sqlwin.core.panes import (
    DROP_CLOSED,
    DROP_LATE,
    FIRED_COLUMNS,
    MAX_TIME,
    MIN_TIME,
    FiredPaneList,
    PaneDriver,
    QueryWatermark,
    WatermarkTracker,
    WindowKey,
    WindowState,
)
from sqlwin.plan.statements import CreateStream
from sqlwin.plan.windows import WindowKind
from sqlwin.streaming import storage, trace
from sqlwin.streaming.context import Views
from sqlwin.streaming.countwindows import CountWindowAssigner
from sqlwin.streaming.evictors import SparkEvictor
from sqlwin.streaming.fusedscan import FusedScan
from sqlwin.streaming.maxsessions import MaxDurationSessions
from sqlwin.streaming.panequery import PaneQuery, key_ddl
from sqlwin.streaming.partials import Decomposition, decompose
from sqlwin.streaming.sessions import SessionAssigner
from sqlwin.streaming.sinks import BatchSink
from sqlwin.streaming.sources import SOURCE_COLUMN, TICK_COLUMN, TickFile
from sqlwin.streaming.state import StateStore, now_micros
from sqlwin.streaming.stopping import NEVER, QueryStop, stopped_mid_batch

Fired = FiredPaneList | FiredPanes  # the panes of a micro-batch: PaneDriver's, or the columnar ones


class MicroBatchOperator:
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
        self.tracker = QueryWatermark([WatermarkTracker(s.watermark.delay if s.watermark else 0, s.idle_timeout)
                                       for s in self.streams])
        self.windows: dict[WindowKey, WindowState] = {}
        self.rows_by_batch: dict[int, int] = {}
        self.counters = {"rows_in": 0, "late_rows_dropped": 0, "panes": 0, "micro_batches": 0}
        self.current_processing_time = 0
        self.query_stop = NEVER  # the live query's stop (``run_batch``): checked between a micro-batch's Spark jobs
        self.next_batch = 0  # sqlwin's micro-batch number (counts the micro-batches that did something)
        self.last_source_batch = -1  # Spark's id of the last batch committed
        self.relation_columns = [c.name for c in shape.window.relation.columns] if shape.window else None
        self.sessions = (MaxDurationSessions if shape.window.max_duration is not None else SessionAssigner)(self) \
            if shape.window is not None and shape.window.kind is WindowKind.SESSION else None
        self.counts = CountWindowAssigner(self) if shape.window is not None and shape.window.is_count_based \
            else None
        self.evictor = SparkEvictor.of(self)  # EVICT: rows evicted in Spark at each firing (evictors.py)
        # assigners that keep state of their own (rows waiting, natural sessions), committed with the operator's
        self.stateful = [a for a in (self.sessions, self.counts) if hasattr(a, "STATE_KEY")]
        self._prepare_schemas()
        self.columnar = self._columnar()
        self._restore()

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
        if self.evictor is not None:  # stored rows carry their place in arrival order
            stored = self.evictor.prepare(stored)
        self.rows_schema = stored.schema
        self.arrow_rows = self.evictor is None and all(_parquet_safe(f.dataType) for f in stored.schema.fields)
        self.relation_sql = self.query.relation_sql(stored_columns, self.key_ddl)
        self.pane_sql = self.query.pane_sql()
        spark = self.spark
        self._register_pane_inputs(spark, FiredPaneList(), None)
        self.sink.set_schema(spark.sql(self.pane_sql).schema)
        self.sink.register(spark)
        if self.late_sink is not None:
            self.late_sink.set_schema(self._late_schema())
            self.late_sink.register(spark)

    COLUMNAR = True

    def _columnar(self) -> ColumnarPanes | None:
        """The columnar pane driver (``sqlwin.core.columnar``) where every decision is a comparison: a fused
        scan (partial aggregates; no sessions, count windows or evictors) and a trigger of its family."""
        if not (self.COLUMNAR and self.fused):
            return None
        trigger = ComparisonTrigger.of(self.driver.emit, global_window=self.shape.window is None)
        return ColumnarPanes(trigger, self.driver.lateness, self.driver.accumulating) if trigger else None

    def _decomposition(self) -> Decomposition | None:
        """Partial aggregates where every aggregate splits; raw rows for EVICT (an evictor chooses among the
        rows), where the query is not a decomposable aggregation, and for SESSION windows that may close or be
        cut (``sessions.keeps_partials``)."""
        shape = self.shape
        if not shape.aggregated or self.evictor is not None:
            return None  # EVICT: an evictor needs the rows themselves (Flink keeps a window's elements)
        if self.sessions is not None and not self.sessions.keeps_partials():
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

    def _late_schema(self) -> Any:
        from pyspark.sql.types import StringType, StructField, StructType, TimestampType

        by_name = {f.name: f for f in self.assigned_schema.fields}
        fields = [by_name[c] for c in self.relation_columns if c in by_name]
        fields += [by_name.get(c, StructField(c, TimestampType())) for c in ("window_start", "window_end")]
        fields += [StructField("watermark", TimestampType()), StructField("reason", StringType())]
        return StructType(fields)

    def _restore(self) -> None:
        last = self.store.last_committed()
        if last < 0:
            return
        data = self.store.load(last)
        self.next_batch = last + 1
        self.last_source_batch = data.get("source_batch", -1)
        self.tracker.restore(data["watermark"])
        self.windows = {(k, s, e): WindowState.from_dict(st) for k, s, e, st in data["windows"]}
        if data.get("columnar") and self.columnar is not None:
            self.columnar.restore(self.store.load_table(last, "windows"))
        elif self.windows:  # state saved by PaneDriver (an earlier version): it goes on with it
            self.columnar = None
        self.rows_by_batch = {int(b): n for b, n in data["rows"].items()}
        self.counters.update(data["counters"])
        if self.evictor is not None:
            self.evictor.restore(data.get("evicted", {}))
        for batch in self.store.row_batches_on_disk():  # written by an attempt that did not commit
            if batch not in self.rows_by_batch:
                self.store.drop_rows(batch)

    # -- the foreachBatch entry point ---------------------------------------------------------
    def run_batch(self, batch_df: Any, batch_id: int) -> None:
        """A micro-batch that its query's stop interrupts, or that finds it stopped, ends uncommitted (run again
        on restart) with an error Spark takes for the stop's interruption: ``sqlwin.streaming.stopping``."""
        if not self.query_stop.bound:
            self.query_stop = QueryStop.of_stream_thread(self.spark)
        try:
            self._run_batch(batch_df, int(batch_id))
        except Exception:
            if not self.query_stop.requested():
                raise
            raise stopped_mid_batch(self.spark, self.sink.name, int(batch_id)) from None

    def _run_batch(self, batch_df: Any, source_batch: int) -> None:
        from pyspark.sql import functions as F

        if source_batch <= self.last_source_batch:
            # committed before a crash: Spark re-runs it, sqlwin already wrote it; but the crash may have come
            # before the commit asked for its no-data micro-batch, so ask again (the same tick: no batch twice)
            self._ask_for_next_batch(source_batch)
            return
        processing_time = self.store.begin(source_batch, self.clock())
        data = batch_df
        if TICK_COLUMN in batch_df.columns:  # tick rows only cause the micro-batch: drop them
            data = batch_df.where(F.col(TICK_COLUMN).isNull()).drop(TICK_COLUMN)
        if self._scanner() is not None:  # one Spark job reads the micro-batch: no copy of it in memory
            self.step(batch_df.sparkSession, data, processing_time, source_batch=source_batch)
            return
        # read once from the source: the statistics, the assignment and the late rows all scan it
        data = data.persist()
        try:
            self.step(batch_df.sparkSession, data, processing_time, source_batch=source_batch)
        finally:
            data.unpersist()

    def step(self, spark: Any, data: Any, processing_time: int, end_of_input: bool = False,
             source_batch: int | None = None) -> Fired:
        """Process one micro-batch (rows ``data``, or None for a no-data batch); returns the panes fired.

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
        accepted: Any = self._accepted()  # new-row counts per window
        scanner = self._scanner() if data is not None else None
        if scanner is not None:  # the watermark in force does not depend on the row count here:
            # without rows only idleness moves it, and then nothing was assigned
            count, max_ts, accepted = scanner(spark, data, batch, self.tracker.current, processing_time)
        else:
            count, max_ts = self._read(data, processing_time)
        if count == 0 and not end_of_input and not self.shape.processing_time:
            self.tracker.advance_idle(processing_time)
        watermark = self.tracker.current
        if self.counts is not None:  # count windows number waiting rows in micro-batches without rows too
            accepted = self.counts.assign(spark, batch, watermark, with_rows=count > 0)
        elif count and scanner is None:
            accepted = self._assign(spark, batch, watermark)
        panes, expired = self._drive(accepted, batch, watermark, processing_time)
        self.query_stop.check()  # the last before the panes' Spark jobs; after them the micro-batch commits
        self._emit(spark, panes, batch)
        self.tracker.after_batch(max_ts, processing_time)
        moved = self.tracker.current > start
        if count or panes or expired or moved or (self.counts is not None and self.counts.changed):
            self.counters["rows_in"] += count
            self.counters["panes"] += len(panes)
            self.counters["micro_batches"] += 1
            dead = self._collect_garbage()
            self._commit(batch, source_batch)
            for gone in dead:  # only once committed: a re-run of this batch after a crash still reads them
                self.store.drop_rows(gone)
        elif source_batch is not None:
            self.last_source_batch = source_batch
        self._ask_for_next_batch(source_batch)
        # a data batch runs with the watermark of the previous batch; a no-data batch with its own (end of
        # input: +infinity; idle streams: advanced by processing time)
        trace.step(batch if self.next_batch > batch else None, data is not None,
                   start if data is not None else self.tracker.current)
        if self.next_batch > batch:  # committed: Spark calls come last, where a stop's interruption costs nothing
            self.show_committed()
        return panes

    def _read(self, data: Any, processing_time: int) -> tuple[int, list[int | None]]:
        """Register each stream's rows of the micro-batch; returns the row count and each stream's max time."""
        if data is None:
            return 0, [None] * len(self.streams)
        return self.batch_statistics(data.agg(*self.register_batch(data, processing_time)).collect()[0])

    def register_batch(self, data: Any, processing_time: int) -> list:
        """Register each stream's rows of the micro-batch as its view; returns the aggregates of the
        micro-batch's statistics (``n`` rows, ``m<i>`` the largest time of stream ``i``)."""
        from pyspark.sql import functions as F

        several = len(self.streams) > 1
        stats = [F.count(F.lit(1)).alias("n")]
        for i, stream in enumerate(self.streams):
            part = data.where(F.col(SOURCE_COLUMN) == i).drop(SOURCE_COLUMN) if several else data
            if isinstance(stream, CreateStream):
                columns = {c.name for c in stream.columns}
                part = part.select(*[c for c in part.columns if c in columns])
                if stream.proctime_column:
                    part = part.withColumn(stream.proctime_column, F.timestamp_micros(F.lit(processing_time)))
            part.createOrReplaceTempView(self.views.batch_of(i))
            time_column = stream.watermark.column if stream.watermark else self.shape.time_column
            column = F.unix_micros(F.col(f"`{time_column}`")) if time_column in data.columns else F.lit(None)
            mine = (F.col(SOURCE_COLUMN) == i) if several else F.lit(True)
            stats.append(F.max(F.when(mine, column)).cast("bigint").alias(f"m{i}"))
        return stats

    def batch_statistics(self, row: Any) -> tuple[int, list[int | None]]:
        if self.shape.processing_time:  # event times do not move a processing-time watermark
            return int(row["n"]), [None] * len(self.streams)
        return int(row["n"]), [row[f"m{i}"] for i in range(len(self.streams))]

    # -- 1. rows ------------------------------------------------------------------------------
    def _assign(self, spark: Any, batch: int, watermark: int) -> dict[WindowKey, int]:
        """Assign, classify and store the micro-batch's rows (row state: partial aggregates go through
        ``_scan``); returns the new-row counts per window."""
        if self.sessions is not None:
            return self.sessions.assign(spark, batch, watermark)
        from pyspark.sql import functions as F

        # read three times: counts, rows, late rows
        annotated = self._annotate(spark, watermark, self._closed_windows()).persist()
        try:
            counts = annotated.groupBy("__key", "__ws", "__we", "__status").count().collect()
            accepted = {(r["__key"], r["__ws"], r["__we"]): r["count"] for r in counts if r["__status"] is None}
            dropped = sum(r["count"] for r in counts if r["__status"] is not None)
            if accepted:
                self.store_rows(annotated.where(F.col("__status").isNull()).drop("__status"), batch,
                                sum(accepted.values()))
            late_rows = annotated.where(F.col("__status").isNotNull()).select(*self._late_columns())
            self.write_late([late_rows] if dropped else [], batch, watermark, dropped)
        finally:
            annotated.unpersist()
        return accepted

    def _late_columns(self) -> list:
        """A dropped (row, window) as LATE ROWS TO lists it (before the watermark): the row's columns, the
        window's bounds (NULL for the global window, which has none) and the reason."""
        from pyspark.sql import functions as F

        bounds = [F.col(c) if self.shape.window else F.lit(None).cast("timestamp").alias(c)
                  for c in ("window_start", "window_end")]
        return [*[F.col(f"`{c}`") for c in self.relation_columns], *bounds, F.col("__status").alias("reason")]

    def _annotate(self, spark: Any, watermark: int, closed: list[WindowKey]) -> Any:
        """The micro-batch's (row, window) pairs, each with ``__status``: NULL (accepted), ``late`` when
        ``window_end <= W - lateness``, or ``window closed`` when the window is one of ``closed`` (its trigger
        finished). The closed windows reach Spark as a parquet file, like the fired panes (``_fired_frame``)."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        assigned = spark.sql(self.query.assign_sql)
        threshold = watermark - self.shape.lateness  # late past the lateness: window_end <= W - lateness
        late = F.col("__we") <= F.lit(threshold) if threshold >= MIN_TIME else F.lit(False)
        if closed:
            keys, starts, ends = zip(*closed, strict=True)
            path = self.store.scratch_file("closed", self.next_batch)
            storage.write_parquet(path, pa.table([pa.array(keys, pa.string()), pa.array(starts, pa.int64()),
                                                  pa.array(ends, pa.int64())], names=["__key", "__ws", "__we"]))
            tombstones = spark.read.schema("__key string, __ws bigint, __we bigint").parquet(path) \
                .withColumn("__closed", F.lit(True))
            assigned = assigned.join(F.broadcast(tombstones), ["__key", "__ws", "__we"], "left")
            is_closed = F.coalesce(F.col("__closed"), F.lit(False))
        else:
            assigned = assigned.withColumn("__closed", F.lit(False))
            is_closed = F.col("__closed")
        status = F.when(late, F.lit(DROP_LATE)).when(is_closed, F.lit(DROP_CLOSED))
        return assigned.withColumn("__status", status).drop("__closed")

    def _closed_windows(self) -> list[WindowKey]:
        """The tombstones: windows whose trigger finished, which drop their late rows as ``window closed``."""
        if self.columnar is not None:
            return self.columnar.closed()
        return [k for k, s in self.windows.items() if s.closed and not s.expired]

    @property
    def fused(self) -> bool:
        """Whether a data micro-batch is read by one Spark job (``_scan``): with partial-aggregate state (never
        for sessions or evictors, which keep rows), except for count windows, whose rows wait to be numbered."""
        return self.FUSED_SCAN and self.query.decomposition is not None and self.counts is None and \
            self.sessions is None

    FUSED_SCAN = True

    def _scanner(self) -> Callable[..., tuple[int, list[int | None], Any]] | None:
        """What reads a data micro-batch in one Spark job, if anything does: ``_scan`` (partial aggregates per
        window), or the session assigner's ``scan`` (partial aggregates per micro-batch session)."""
        if self.fused:
            return self._scan
        if self.FUSED_SCAN and self.sessions is not None and self.sessions.fusable():
            return self.sessions.scan
        return None

    def _scan(self, spark: Any, data: Any, batch: int, watermark: int,
              processing_time: int) -> tuple[int, list[int | None], Any]:
        """Step 1 and the statistics of a data micro-batch in one Spark job over its rows: the row count and
        largest times, and per (key, window, status) the row count and partial aggregates (``__key`` is
        computed per group, not per row, unless closed windows are looked up by it): ``FusedScan``. Dropped
        rows, if any, are read again: most micro-batches have none. Returns (rows, largest time per stream,
        accepted counts per window)."""
        decomposition = self.query.decomposition
        assert decomposition is not None
        stats = self.register_batch(data, processing_time)
        closed = self._closed_windows()
        annotated = self._annotate(spark, watermark, closed)
        per_group = not closed  # no lookup of closed windows by __key
        (annotated.drop("__key") if per_group else annotated).createOrReplaceTempView(self.views.annotated)
        grouped = spark.sql(decomposition.partial_sql(self.views.annotated, self.shape.source_alias,
                                                      len(self.shape.keys),
                                                      key_after=self.query.key_json_sql if per_group else None))
        scan = FusedScan(self, grouped, data.agg(*stats))
        try:
            return self._store_scanned(scan, annotated, batch, watermark)
        finally:
            scan.release()

    def _store_scanned(self, scan: FusedScan, annotated: Any, batch: int,
                       watermark: int) -> tuple[int, list[int | None], Any]:
        """Read the scan's small result: the statistics, the accepted counts (stored as partial rows) and how
        many (row, window) pairs were dropped (written to LATE ROWS TO). The accepted counts are a frame
        (key, start, end, n) for the columnar driver, else a dict per window."""
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        groups = scan.groups
        kept = pc.is_null(groups["__status"])
        dropped = pc.sum(groups.filter(pc.invert(kept))["__n"]).as_py() or 0
        groups = groups.filter(kept)
        accepted = self._accepted(groups["__key"], groups["__ws"], groups["__we"], groups["__n"])
        count, max_ts = self.batch_statistics(scan.summary)
        if not count:
            return 0, max_ts, self._accepted()
        if len(accepted):
            scan.store(groups, F.col("__status").isNull(), batch, len(accepted))
        late_rows = annotated.where(F.col("__status").isNotNull()).select(*self._late_columns())
        self.write_late([late_rows] if dropped else [], batch, watermark, dropped)
        return count, max_ts, accepted

    def _accepted(self, *columns: Any) -> Any:
        """New-row counts per window from (key, start, end, n) Arrow columns (none: no window): a frame for
        the columnar driver, a dict for PaneDriver."""
        import pandas as pd

        names = ["key", "start", "end", "n"]
        if self.columnar is not None:
            if not columns:
                return pd.DataFrame({n: [] for n in names}).astype({"start": "int64", "end": "int64", "n": "int64"})
            return pd.DataFrame({n: c.to_numpy(zero_copy_only=False) for n, c in zip(names, columns, strict=True)})
        if not columns:
            return {}
        keys, starts, ends, counts = (c.to_pylist() for c in columns)
        return dict(zip(zip(keys, starts, ends, strict=True), counts, strict=True))

    def store_partials(self, table: Any, batch: int, count: int) -> None:
        """``store_rows`` for partial rows the driver already holds as Arrow (a fused scan's result): written
        by this process, not by another Spark job over the scan."""
        import numpy as np
        import pyarrow as pa

        n = table.num_rows
        own = {"__mb": pa.array(np.full(n, batch, np.int64)), "__present": pa.array(np.ones(n, np.bool_))}
        names = self.rows_schema.fieldNames()
        self.store.write_rows(batch, pa.table([own[c] if c in own else table[c] for c in names], names=names))
        self.rows_by_batch[batch] = count

    def store_rows(self, rows: Any, batch: int, count: int) -> None:
        """Keep the rows micro-batch ``batch`` added to open windows, for the panes that will read them."""
        from pyspark.sql import functions as F

        rows = rows.withColumn("__mb", F.lit(batch).cast("bigint")).withColumn("__present", F.lit(True))
        if self.evictor is not None:
            rows = self.evictor.annotate(rows)
        rows.select(*self.rows_schema.fieldNames()).write.mode("overwrite").parquet(self.store.rows_path(batch))
        self.rows_by_batch[batch] = count

    def write_late(self, parts: list, batch: int, watermark: int, count: int) -> None:
        """LATE ROWS TO: every dropped (row, window) of the micro-batch, written once (its folder replaced)."""
        from pyspark.sql import functions as F

        self.counters["late_rows_dropped"] += count
        if self.late_sink is None:
            return
        if not parts:
            self.late_sink.clear(batch)
            return
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        columns = [*self.relation_columns, "window_start", "window_end"]
        # at the end of input the watermark is +infinity, which no TIMESTAMP holds: NULL
        mark = F.timestamp_micros(F.lit(watermark)) if MIN_TIME < watermark < MAX_TIME else \
            F.lit(None).cast("timestamp")  # no watermark yet, or the end of input: NULL
        self.late_sink.write(union.select(*[F.col(f"`{c}`") for c in columns], mark.alias("watermark"), "reason"),
                             batch)

    # -- 2. panes -----------------------------------------------------------------------------
    def _drive(self, accepted: Any, batch: int, watermark: int, processing_time: int) -> tuple[Fired, int]:
        """The pane driver over the windows that got rows and those whose timers are due: (panes, expired)."""
        if self.columnar is not None:
            return self.columnar.step(accepted, batch, watermark)
        if self.counts is not None:
            return self.counts.drive(accepted, batch, watermark, processing_time)
        fired = FiredPaneList()
        expired = 0
        due = [w for w, s in self.windows.items() if w not in accepted and self.is_due(s, watermark, processing_time)]
        for window in [*accepted, *due]:
            state = self.windows.get(window) or self.driver.new_window(window[1], window[2])
            count = accepted.get(window, 0)
            outcome = self.driver.process(state, [self._token(batch)] if count else [], watermark, processing_time,
                                          count=count)
            if outcome.pane is not None:
                fired.append(window, outcome.pane)
            if outcome.expired:
                expired += 1
                self.windows.pop(window, None)
            else:
                self.windows[window] = state
        return fired, expired

    def _token(self, batch: int) -> int:
        """What a pane records for the rows a micro-batch added to a window: where they are stored."""
        return batch

    def is_due(self, state: WindowState, watermark: int, processing_time: int) -> bool:
        timers = self.driver.timers(state)
        return ((timers.event_time is not None and watermark >= timers.event_time)
                or (timers.processing_time is not None and processing_time >= timers.processing_time))

    # -- 3. results ---------------------------------------------------------------------------
    def _register_pane_inputs(self, spark: Any, fired: Fired, batches: set[int] | None, batch: int = 0) -> None:
        self._fired_frame(spark, fired, batch).createOrReplaceTempView(self.views.fired)
        paths = [self.store.rows_path(b) for b in sorted(batches or ()) if b in self.rows_by_batch]
        rows = spark.read.schema(self.rows_schema).parquet(*paths) if paths else \
            spark.createDataFrame([], self.rows_schema)
        if self.evictor is not None:  # minus the rows evicted before
            rows = self.evictor.surviving(spark, rows, batches)
        rows.createOrReplaceTempView(self.views.rows)
        spark.sql(self.relation_sql).createOrReplaceTempView(self.views.relation)

    FIRED_SCHEMA = ("__key string, __ws bigint, __we bigint, pane_index int, pane_timing string, is_final boolean, "
                    "tokens array<bigint>")

    def _fired_frame(self, spark: Any, fired: Fired, batch: int) -> Any:
        """The fired panes as Spark reads them, each with the micro-batches (``tokens``) whose rows it reads.
        They go to Spark as a parquet file: as a local DataFrame, tens of thousands of panes cost seconds per
        query (the optimizer evaluates expressions over a LocalRelation row by row on the driver, every time a
        query over it is planned)."""
        path = self.store.scratch_file("fired", batch)
        storage.write_parquet(path, self._fired_table(fired, batch))
        return spark.read.schema(self.FIRED_SCHEMA).parquet(path)

    @staticmethod
    def _fired_table(fired: Fired, batch: int) -> Any:
        """``fired`` as Arrow, in ``FIRED_SCHEMA``'s names."""
        return fired.to_arrow(batch).rename_columns(["__key", "__ws", "__we", *FIRED_COLUMNS[3:]])

    def _emit(self, spark: Any, fired: Fired, batch: int) -> None:
        if not fired:
            self.sink.clear(batch)
            return
        batches = fired.batches(batch)
        self._register_pane_inputs(spark, fired, batches, batch)
        if self.evictor is not None:
            self.evictor.at_firing(spark, fired, batch)
        self.sink.write(spark.sql(self.pane_sql), batch)

    # -- 4. bookkeeping -----------------------------------------------------------------------
    def _collect_garbage(self) -> list[int]:
        """Forget the stored rows no open window refers to any more (state shrinks as windows expire); returns
        their batches, whose files are deleted after the commit (``_restore`` deletes them after a crash)."""
        if self.columnar is not None:
            live = self.columnar.live_batches(set(self.rows_by_batch))
        else:
            live = {b for s in self.windows.values() for b in (*s.emitted, *s.pending)}
        dead = [b for b in self.rows_by_batch if b not in live]
        for batch in dead:
            del self.rows_by_batch[batch]
        if self.evictor is not None:
            self.evictor.collect_garbage(set(self.rows_by_batch))
        return dead

    def _commit(self, batch: int, source_batch: int | None) -> None:
        if source_batch is not None:
            self.last_source_batch = source_batch
        if self.columnar is not None:  # its windows are a table, saved beside the commit and before it
            self.store.save_table(batch, "windows", self.columnar.to_arrow())
        self.store.commit(batch, {
            "columnar": self.columnar is not None,
            "source_batch": self.last_source_batch,
            "watermark": self.tracker.to_dict(),
            "windows": [[k, s, e, st.to_dict()] for (k, s, e), st in self.windows.items()],
            "rows": {str(b): n for b, n in self.rows_by_batch.items()},
            "counters": self.counters,
            **{a.STATE_KEY: a.to_dict() for a in self.stateful},
            **({"evicted": self.evictor.to_dict()} if self.evictor is not None else {}),
        })
        if self.evictor is not None:
            self.evictor.committed()
        self.next_batch = batch + 1

    def show_committed(self) -> None:
        """The sink's views, listed afresh: every committed micro-batch."""
        self.sink.register(self.spark)
        if self.late_sink is not None:
            self.late_sink.register(self.spark)

    def _ask_for_next_batch(self, batch: int | None) -> None:
        """A no-data micro-batch now if a window's timer is due at the new watermark (the batch Spark runs for
        its own state after the watermark moved; when nothing is due that batch would do nothing), and one
        when the earliest processing-time timer or idle deadline comes. Tick numbers are a function of the
        batch number, so a batch re-run after a crash asks for exactly the same batches."""
        if self.ticks is None or batch is None:
            return
        wanted = int(self.ticks.read().get("wanted") or 0)
        watermark, now = self.tracker.current, self.current_processing_time
        if self._any_due(watermark, now) or (self.counts is not None and self.counts.due(watermark)):
            wanted = max(wanted, batch + 1)
        self.ticks.request(wanted, wake_at=self.next_wake(), wake_tick=max(wanted, batch + 1))

    def _any_due(self, watermark: int, processing_time: int) -> bool:
        if self.columnar is not None:
            return self.columnar.any_due(watermark)
        return any(self.is_due(s, watermark, processing_time) for s in self.windows.values())

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
        if self.columnar is not None:  # event-time timers only
            earliest = self.columnar.earliest_timer()
            proc, events = [], [earliest] if earliest is not None else []
        else:
            timers = [self.driver.timers(s) for s in self.windows.values()]
            proc = [t.processing_time for t in timers if t.processing_time is not None and t.processing_time > now]
            events = [t.event_time for t in timers if t.event_time is not None and t.event_time < MAX_TIME]
        events += self.counts.event_timers() if self.counts is not None else []
        if self.shape.processing_time:  # the clock itself moves the watermark: wake when a window ends
            idle = min((e + 1 for e in events if e + 1 > now), default=None)
        else:
            idle = self.tracker.wake_time(min(events), after=now) if events else None
        candidates = [t for t in (min(proc, default=None), idle) if t is not None]
        return min(candidates) if candidates else None

    # -- metrics ------------------------------------------------------------------------------
    @property
    def state_rows(self) -> int:
        return sum(self.rows_by_batch.values()) + sum(a.state_rows for a in self.stateful)

    @property
    def open_windows(self) -> int:
        return len(self.columnar) if self.columnar is not None else len(self.windows)

    @property
    def watermark(self) -> int:
        return self.tracker.current


def _parquet_safe(data_type: Any) -> bool:
    """A Spark type that pyarrow writes to parquet as Spark writes it (so Spark reads it back as that type)."""
    from pyspark.sql import types as T

    return isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
                                  T.BooleanType, T.StringType, T.BinaryType, T.DecimalType, T.DateType,
                                  T.TimestampType, T.TimestampNTZType))
