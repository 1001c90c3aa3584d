"""Windows fixed by a row's time in the operator: TUMBLE, HOP, CUMULATE and the global window.

Spark assigns the micro-batch's rows to their windows (the batch backend's own plan, ``PaneQuery.assign_sql``)
and classifies each (row, window) pair natively: dropped ``late`` when ``W >= window_end + lateness``, dropped
``window closed`` when the pane engine holds the window's tombstone (its trigger finished); the others are
stored, and the dropped ones go to LATE ROWS TO. A window never moves, so the new-row counts per window are
all the pane engine needs: with partial-aggregate state one Spark job reads the micro-batch for them and for
its statistics (``scan``, ``FusedScan``), and the counts reach the engine as a frame, so the columnar engine
can drive these windows where the trigger allows it.
"""

from __future__ import annotations

from typing import Any

from sqlwin.core.panes import DROP_CLOSED, DROP_LATE, MIN_TIME, PaneDriver, WindowKey
from sqlwin.streaming import storage
from sqlwin.streaming.assigner import Scanner, WindowAssigner, records_of
from sqlwin.streaming.batchinput import with_statistics
from sqlwin.streaming.context import PaneEngine
from sqlwin.streaming.engines import ColumnarEngine, WindowStates
from sqlwin.streaming.fusedscan import FusedScan
from sqlwin.streaming.keyedstate import COUNTS_DDL, KeyedCounts, KeyedPanes, Tombstones


class TimeWindowAssigner(WindowAssigner):
    def scanner(self) -> Scanner | None:
        return self.scan if self.op.query.decomposition is not None else self.scan_rows

    def pane_engine(self, driver: PaneDriver, columnar: bool, committed: dict | None) -> PaneEngine:
        """The columnar engine where it may drive these windows (partial aggregates: a fused scan counts the new
        rows per window as Arrow), unless PaneDriver saved the committed ones (an earlier version): they go on
        with it."""
        columnar = columnar and self.op.query.decomposition is not None
        engine = ColumnarEngine.of(driver) if columnar else None
        if engine is not None and (engine.continues(committed) or KeyedPanes.continues(committed)):
            return self.op.placement.initial(engine, committed)  # its windows in the driver or in Spark
        return WindowStates(driver)

    def panes_find_rows(self) -> bool:
        return True  # a pane reads from the first micro-batch that stored rows of its window

    # -- rows stored as they are, or a micro-batch in several Spark jobs ----------------------------
    def assign_rows(self, spark: Any, batch: int, watermark: int) -> dict[WindowKey, int]:
        """Assign, classify and store the micro-batch's rows (partial aggregates go through ``scan``); returns
        the new-row counts per window."""
        return self._store_rows(spark, batch, watermark)[1]

    def scan_rows(self, spark: Any, data: Any, batch: int, watermark: int,
                  processing_time: int) -> tuple[int, list[int | None], dict[WindowKey, int]]:
        """``scan`` where the rows themselves are the state (no partial aggregates): the statistics and the
        counts per (key, window, status) come out of one Spark job (the statistics observed as it reads the rows,
        as the keyed scan does), which also caches the (row, window) pairs; the accepted ones are written from
        that cache and the dropped ones, if any, go to LATE ROWS TO. Two Spark jobs read a data micro-batch
        where ``_read`` and ``assign_rows`` took three."""
        stats = self.op.input.register(data, processing_time)
        statistics, accepted = self._store_rows(spark, batch, watermark, (data, stats))
        count, max_ts = self.op.input.statistics(statistics)
        return count, max_ts, accepted

    def _store_rows(self, spark: Any, batch: int, watermark: int,
                    observed: tuple | None = None) -> tuple[dict[str, Any], dict[WindowKey, int]]:
        """Assign, classify and store the rows of the micro-batch's views; returns (the statistics ``observed``:
        (rows, stats) of ``with_statistics``, taken as the counts' job reads the rows; the new-row counts per
        window)."""
        from pyspark.sql import functions as F

        op = self.op
        annotated = self._annotate(spark, batch, watermark, op.panes.closed()).persist()
        try:
            counts = annotated.groupBy("__key", "__ws", "__we", "__status").count()
            observation = None
            if observed is not None:
                counts, observation = with_statistics(counts, *observed)
            counts = records_of(counts)
            statistics = observation.get if observation is not None else {}
            accepted = {(r["__key"], r["__ws"], r["__we"]): r["count"] for r in counts if r["__status"] is None}
            dropped = sum(r["count"] for r in counts if r["__status"] is not None)
            if accepted:
                rows = annotated.where(F.col("__status").isNull()).drop("__status")
                top = op.shape.top_rows
                if top is None:
                    op.rows.write(rows, batch, sum(accepted.values()))
                else:  # only the rows a pane can output; the triggers counted them all
                    op.rows.write(top.of(rows), batch, None)
            late_rows = annotated.where(F.col("__status").isNotNull()).select(*self._late_columns())
            op.write_late([late_rows] if dropped else [], batch, watermark, dropped)
        finally:
            annotated.unpersist()
        return statistics, accepted

    def _late_columns(self) -> list:
        """A dropped (row, window) as LATE ROWS TO lists it (before the watermark): the row's columns, the
        window's bounds (NULL for the global window, which has none) and the reason."""
        from pyspark.sql import functions as F

        bounds = [F.col(c) if self.op.shape.window else F.lit(None).cast("timestamp").alias(c)
                  for c in ("window_start", "window_end")]
        return [*[F.col(f"`{c}`") for c in self.op.relation_columns], *bounds, F.col("__status").alias("reason")]

    def _annotate(self, spark: Any, batch: int, watermark: int, closed: list[WindowKey] | Tombstones) -> Any:
        """The micro-batch's (row, window) pairs, each with ``__status``: NULL (accepted), ``late`` when
        ``window_end <= W - lateness``, or ``window closed`` when the window is one of ``closed`` (its trigger
        finished). The closed windows reach Spark as a parquet file, like the fired panes."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        op = self.op
        assigned = spark.sql(op.query.assign_sql)
        threshold = watermark - op.shape.lateness  # late past the lateness: window_end <= W - lateness
        late = F.col("__we") <= F.lit(threshold) if threshold >= MIN_TIME else F.lit(False)
        if isinstance(closed, Tombstones):  # the keyed engine's, where Spark holds them
            tombstones = closed.frame(spark).withColumn("__closed", F.lit(True))
            assigned = assigned.join(tombstones, ["__key", "__ws", "__we"], "left")
            is_closed = F.coalesce(F.col("__closed"), F.lit(False))
        elif closed:
            keys, starts, ends = zip(*closed, strict=True)
            table = pa.table([pa.array(keys, pa.string()), pa.array(starts, pa.int64()), pa.array(ends, pa.int64())],
                             names=["__key", "__ws", "__we"])
            schema = "__key string, __ws bigint, __we bigint"
            tombstones = op.store.scratch_frame(spark, "closed", batch, table, schema) \
                .withColumn("__closed", F.lit(True))
            assigned = assigned.join(F.broadcast(tombstones), ["__key", "__ws", "__we"], "left")
            is_closed = F.coalesce(F.col("__closed"), F.lit(False))
        else:
            assigned = assigned.withColumn("__closed", F.lit(False))
            is_closed = F.col("__closed")
        status = F.when(late, F.lit(DROP_LATE)).when(is_closed, F.lit(DROP_CLOSED))
        return assigned.withColumn("__status", status).drop("__closed")

    # -- partial aggregates: the micro-batch in one Spark job ---------------------------------------
    def scan(self, spark: Any, data: Any, batch: int, watermark: int,
             processing_time: int) -> tuple[int, list[int | None], Any]:
        """Assignment and the statistics of a data micro-batch in one Spark job over its rows: the row count and
        largest times, and per (key, window, status) the row count and partial aggregates (``__key`` is
        computed per group, not per row, unless closed windows are looked up by it): ``FusedScan``. Dropped
        rows, if any, are read again: most micro-batches have none. Returns (rows, largest time per stream,
        accepted counts per window)."""
        op = self.op
        assert op.query.decomposition is not None
        if isinstance(op.panes, KeyedPanes):
            return self._scan_keyed(spark, data, batch, watermark, processing_time)
        if op.placement.unsure(op.panes):  # counted where Spark reads them; here only if they stay here
            count, max_ts, counts = self._scan_keyed(spark, data, batch, watermark, processing_time)
            op.placement.seen(counts.windows)
            if op.placement.moves(op.panes, counts.windows):
                return count, max_ts, counts  # the windows go to Spark before the step
            return count, max_ts, self._read_back(spark, counts)
        stats, annotated, grouped = self._partials(spark, data, batch, watermark, processing_time)
        scan = FusedScan(op, grouped, data, stats)
        try:
            return self._store_scanned(scan, annotated, batch, watermark)
        finally:
            scan.release()

    def _partials(self, spark: Any, data: Any, batch: int, watermark: int, processing_time: int) -> tuple:
        """What a data micro-batch's one Spark job reads, for either engine: (its statistics' aggregates over
        ``data``, its (row, window) pairs with ``__status``, the partial aggregates per (key, window, status))."""
        op = self.op
        stats = op.input.register(data, processing_time)
        closed = op.panes.closed()
        annotated = self._annotate(spark, batch, watermark, closed)
        per_group = not closed  # no lookup of closed windows by __key
        (annotated.drop("__key") if per_group else annotated).createOrReplaceTempView(op.views.annotated)
        grouped = spark.sql(op.query.decomposition.partial_sql(
            op.views.annotated, op.shape.source_alias, len(op.shape.keys),
            key_after=op.query.key_json_sql if per_group else None))
        return stats, annotated, grouped

    def _store_scanned(self, scan: FusedScan, annotated: Any, batch: int,
                       watermark: int) -> tuple[int, list[int | None], Any]:
        """Read the scan's small result: the statistics, the accepted counts (stored as partial rows) and how
        many (row, window) pairs were dropped (written to LATE ROWS TO)."""
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        op = self.op
        groups = scan.groups
        kept = pc.is_null(groups["__status"])
        dropped = pc.sum(groups.filter(pc.invert(kept))["__n"]).as_py() or 0
        groups = groups.filter(kept)
        count, max_ts = op.input.statistics(scan.summary)
        if not count:
            return 0, max_ts, op.panes.accepted()
        late_rows = annotated.where(F.col("__status").isNotNull()).select(*self._late_columns())
        if op.placement.moves(op.panes, groups.num_rows):  # the windows go to Spark: no frame of them here
            scan.store(groups, F.col("__status").isNull(), batch, groups.num_rows)
            op.write_late([late_rows] if dropped else [], batch, watermark, dropped)
            return count, max_ts, KeyedCounts(op.store.rows_path(batch), groups.num_rows)
        accepted = op.panes.accepted(groups["__key"], groups["__ws"], groups["__we"], groups["__n"])
        op.placement.seen(len(accepted))
        if len(accepted):
            scan.store(groups, F.col("__status").isNull(), batch, len(accepted))
        op.write_late([late_rows] if dropped else [], batch, watermark, dropped)
        return count, max_ts, accepted

    def _read_back(self, spark: Any, counts: KeyedCounts) -> Any:
        """The driver engine's counts from what the keyed scan wrote (``rows/<n>``: a window per row, its
        ``__n``)."""
        if counts.path is None:
            return self.op.panes.accepted()
        table = spark.read.schema(COUNTS_DDL).parquet(counts.path).toArrow()
        return self.op.panes.accepted(table["__key"], table["__ws"], table["__we"], table["__n"])

    def _scan_keyed(self, spark: Any, data: Any, batch: int, watermark: int,
                    processing_time: int) -> tuple[int, list[int | None], KeyedCounts]:
        """``scan`` for the keyed engine: the same Spark job writes the accepted partial rows (``rows/<n>``,
        each with its row count ``__n``, which the engine's step reads in Spark) and observes the statistics
        and the dropped count; nothing per window comes to the driver."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        op = self.op
        stats, annotated, grouped = self._partials(spark, data, batch, watermark, processing_time)
        frame, statistics = with_statistics(grouped, data, stats)
        kept, dropped = F.col("__status").isNull(), F.col("__status").isNotNull()
        observation = Observation()
        frame = frame.observe(observation, F.count_if(kept).alias("__windows"),
                              F.sum(F.when(kept, F.col("__n"))).alias("__accepted"),
                              F.sum(F.when(dropped, F.col("__n"))).alias("__dropped"))
        own = {"__mb": F.lit(batch).cast("bigint"), "__present": F.lit(True)}
        columns = [own[c].alias(c) if c in own else F.col(f"`{c}`") for c in op.rows_schema.fieldNames()]
        path = op.store.rows_path(batch)
        frame.where(kept).select(*columns, F.col("__n").cast("bigint").alias("__n")).write.mode("overwrite") \
            .parquet(path)
        got = observation.get
        count, max_ts = op.input.statistics(statistics.get)
        windows = int(got["__windows"])
        if windows:
            op.rows.written(batch, int(got["__accepted"]))
        else:
            storage.delete(path)
        dropped_count = int(got["__dropped"] or 0)
        late_rows = annotated.where(F.col("__status").isNotNull()).select(*self._late_columns())
        op.write_late([late_rows] if dropped_count else [], batch, watermark, dropped_count)
        return count, max_ts, KeyedCounts(path if windows else None, windows)
