"""Replay (GRAMMAR 3): a streaming query over ``CREATE STREAM s FROM TABLE t ARRIVAL ORDER BY ...``.

The table's rows are cut into micro-batches (``MICRO BATCH BY``; default one row each), in arrival
order, and the *same* micro-batch operator a streaming table runs decides lateness and drives the pane
driver, so replay gives exactly the panes a streaming run gives for the same micro-batches. As in a live
stream, a micro-batch that moves the watermark is followed by a no-data micro-batch (the one in which the
windows it closed fire); when the table ends, a last no-data micro-batch runs with the watermark at
+infinity.

The processing-time clock of a micro-batch is ``PROCESSING TIME BY`` (its largest value in the batch),
else the micro-batch number in seconds after the epoch (no-data batches keep the clock where it is).

Two ways to run it, one semantics (``PlannedReplay`` is the operator with its Spark work done up front):

- **planned** (windows that do not move: TUMBLE, HOP, CUMULATE, the global window): Spark assigns every
  row of the table to its windows once and aggregates it per (key, window, micro-batch) (partial
  aggregates, or the rows where the query needs them); the operator then steps through the micro-batches
  in Python on those counts alone (the watermark a running max, lateness a comparison, the pane driver per
  window), and one Spark job computes every fired pane. A handful of Spark jobs whatever the number of
  micro-batches.
- **stepped** (SESSION windows, whose stored rows move between sessions as they merge; count windows, whose
  rows are numbered only once the watermark passes them): the operator runs each micro-batch's rows through
  Spark, as a streaming table does.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import uuid
from typing import Any

from sqlglot import exp

from sqlwin.core.panes import MAX_TIME, MIN_TIME, Pane
from sqlwin.plan.windows import Column
from sqlwin.streaming.operator import CLOSED, LATE, MicroBatchOperator, WindowKey
from sqlwin.streaming.panequery import PaneQuery
from sqlwin.streaming.shape import StreamingShape
from sqlwin.streaming.sinks import BatchSink

SECOND = 1_000_000
BATCH = "__sqlwin_replay_batch"
CLOCK = "__sqlwin_replay_clock"


def replay(spark: Any, shape: StreamingShape, late_view: str | None = None) -> Any:
    """The panes of the replayed query (a batch DataFrame with ``micro_batch``); LATE ROWS TO becomes a view."""
    stream = shape.stream
    folder = tempfile.mkdtemp(prefix="sqlwin-replay-")  # scratch state: the panes are returned, not kept
    tag = f"replay_{uuid.uuid4().hex[:8]}"
    sink = BatchSink(f"__sqlwin_out_{tag}", os.path.join(folder, "data"))
    late_name = shape.late_rows_to
    late_sink = BatchSink(late_name, os.path.join(folder, "late_rows")) if late_name else None
    try:
        has_clock = getattr(stream, "processing_time_by", None) is not None
        numbered, plan = _numbered(spark, shape)
        planned = PlannedReplay(spark, shape, folder, sink, late_sink, tag)
        if planned.plannable(numbered):
            result, late = planned.run(plan, has_clock)
        else:
            result, late = _stepped(spark, shape, folder, sink, late_sink, tag, numbered, plan, has_clock)
        if late_name is not None:
            late.localCheckpoint().createOrReplaceTempView(late_name)
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _numbered(spark: Any, shape: StreamingShape) -> tuple[Any, list]:
    """The table's rows with their micro-batch (``BATCH``: 0, 1, ... in arrival order), and per micro-batch
    its row count ``n``, largest event time ``max_ts`` and clock (``PROCESSING TIME BY``), from the same
    aggregation that numbers the micro-batches."""
    from pyspark.sql import functions as F

    stream = shape.stream
    rows = spark.table(stream.name)
    clock = getattr(stream, "processing_time_by", None)
    if clock is not None:
        rows = rows.selectExpr("*", f"UNIX_MICROS({clock.sql('spark')}) AS {CLOCK}")
    time_column = stream.watermark.column if stream.watermark else shape.time_column
    max_ts = F.max(F.unix_micros(F.col(f"`{time_column}`"))) if time_column in rows.columns else \
        F.lit(None).cast("bigint")
    stats = [F.count(F.lit(1)).alias("n"), max_ts.alias("max_ts"),
             (F.max(CLOCK) if clock is not None else F.lit(None).cast("bigint")).alias("clock")]
    order = ", ".join(o.sql("spark") for o in stream.arrival_order)
    group = stream.micro_batch_by.sql("spark") if stream.micro_batch_by is not None else None
    if group is None:  # one row per micro-batch: the arrival number itself
        numbered = rows.selectExpr("*", f"ROW_NUMBER() OVER (ORDER BY {order}) - 1 AS {BATCH}").localCheckpoint()
        return numbered, numbered.groupBy(BATCH).agg(*stats).orderBy(BATCH).collect()
    numbered = rows.selectExpr("*", f"{group} AS __sqlwin_group")
    items = [o if isinstance(o, exp.Ordered) else exp.Ordered(this=o) for o in stream.arrival_order]
    if all(not o.args.get("desc") and o.args.get("nulls_first") is not False for o in items):
        # a micro-batch arrives with its first row: order the groups by their least arrival key (a struct
        # orders field by field, NULLs first, as ORDER BY ... ASC does): no sort of the whole table
        first = F.min(F.struct(*[F.expr(o.this.sql("spark")) for o in items]))
    else:
        numbered = numbered.selectExpr("*", f"ROW_NUMBER() OVER (ORDER BY {order}) AS __sqlwin_arrival") \
            .localCheckpoint()
        first = F.min("__sqlwin_arrival")
    firsts = numbered.groupBy("__sqlwin_group").agg(first.alias("__first"), *stats)
    # ties between the first rows of two groups: the group's own value decides, not chance
    ranks = firsts.selectExpr("__sqlwin_group AS __sqlwin_g", "n", "max_ts", "clock",
                              f"ROW_NUMBER() OVER (ORDER BY __first, __sqlwin_group) - 1 AS {BATCH}") \
        .localCheckpoint()
    plan = ranks.select(BATCH, "n", "max_ts", "clock").orderBy(BATCH).collect()
    # NULL-safe: rows whose MICRO BATCH BY value is NULL form a micro-batch too
    joined = numbered.join(F.broadcast(ranks.select("__sqlwin_g", BATCH)),
                           numbered["__sqlwin_group"].eqNullSafe(ranks["__sqlwin_g"]))
    return joined.drop("__sqlwin_group", "__sqlwin_g", "__sqlwin_arrival"), plan


def _clock_of(entry: Any, has_clock: bool, operator: MicroBatchOperator) -> int:
    return entry["clock"] if has_clock else operator.next_batch * SECOND


def _drive(operator: MicroBatchOperator, spark: Any, plan: list, has_clock: bool, data_of: Any) -> None:
    """The micro-batch sequence of a live stream: each batch, a no-data batch after one that moved the
    watermark, and a last no-data batch at +infinity."""
    processing_time = 0
    for entry in plan:
        processing_time = _clock_of(entry, has_clock, operator)
        before = operator.watermark
        operator.step(spark, data_of(entry), processing_time)
        if operator.watermark > before:  # the no-data micro-batch a live stream runs next
            operator.step(spark, None, processing_time if has_clock else operator.next_batch * SECOND)
    final_clock = processing_time if has_clock else operator.next_batch * SECOND
    operator.step(spark, None, final_clock, end_of_input=True)


def _stepped(spark: Any, shape: StreamingShape, folder: str, sink: BatchSink, late_sink: BatchSink | None,
             tag: str, numbered: Any, plan: list, has_clock: bool) -> tuple[Any, Any]:
    """Each micro-batch's rows through Spark, as in a streaming table."""
    from pyspark.sql import functions as F

    operator = MicroBatchOperator(spark, shape, folder, sink, late_sink, tag)
    numbered = numbered.persist()
    try:
        data_columns = [c for c in numbered.columns if c not in (BATCH, CLOCK)]
        _drive(operator, spark, plan, has_clock,
               lambda entry: numbered.where(F.col(BATCH) == entry[BATCH]).select(*data_columns))
        result = sink.read(spark).orderBy("micro_batch").localCheckpoint()  # panes in the order they came
        late = late_sink.read(spark).localCheckpoint() if late_sink is not None else None
    finally:
        numbered.unpersist()
    return result, late


class PlannedReplay(MicroBatchOperator):
    """The micro-batch operator over a table whose rows Spark assigned and aggregated once.

    ``step`` is the operator's own; only where it touches Spark differs: a micro-batch's row count and
    times come from a per-batch summary, its (key, window) groups from the one assignment (classified late
    or ``window closed`` here, by the same rule), and fired panes and dropped groups are collected, to be
    computed by one Spark job at the end. A pane's tokens are table micro-batch numbers (``BATCH``)."""

    FUSED_SCAN = False  # no micro-batch is read here: ``_read`` and ``_assign`` look the summary up

    def plannable(self, numbered: Any) -> bool:
        if self.sessions is not None or self.counts is not None or self.shape.query.evict is not None:
            return False  # windows that move, or whose rows wait for the watermark to be numbered
        numbered.drop(CLOCK).createOrReplaceTempView(self.views.batch_of(0))
        self.assigned = self.spark.sql(self._assign_sql_with_batch())
        return BATCH in self.assigned.columns  # else a subquery in the TVF drops it: step batch by batch

    def _assign_sql_with_batch(self) -> str:
        """The assignment of the operator, with the micro-batch number carried through the window TVF (its
        relation lists the stream's columns: add ``BATCH`` to them)."""
        shape = self.shape
        spec = shape.window
        if spec is None or spec.relation.columns is None:
            return self.query.assign_sql  # ``*`` over the rows: BATCH passes through as it is
        relation = dataclasses.replace(spec.relation, columns=(*spec.relation.columns, Column(BATCH, "int")))
        with_batch = dataclasses.replace(shape, window=dataclasses.replace(spec, relation=relation))
        return PaneQuery(with_batch, self.spark, self.views).assign_sql

    # -- the Spark work, up front -------------------------------------------------------------
    def run(self, plan: list, has_clock: bool) -> tuple[Any, Any]:
        from pyspark.sql import functions as F

        spark = self.spark
        self.summary = {r[BATCH]: (int(r["n"]), r["max_ts"]) for r in plan}
        self.stored = self._stored_groups()
        self.groups: dict[int, list[tuple[WindowKey, int]]] = {}
        for r in self.stored.groupBy("__key", "__ws", "__we", "__mb").agg(F.sum("__n").alias("n")).collect():
            self.groups.setdefault(r["__mb"], []).append(((r["__key"], r["__ws"], r["__we"]), int(r["n"])))
        self.fired: list[tuple[WindowKey, Pane, int]] = []
        self.drops: list[tuple[str, int, int, int, int, str, int]] = []
        _drive(self, spark, plan, has_clock, lambda entry: entry[BATCH])
        return self._panes(), self._late_rows()

    def _stored_groups(self) -> Any:
        """Per (key, window, micro-batch): ``__n`` rows and their partial aggregates, or the rows themselves
        (``__n`` = 1 each), with ``__mb`` = the micro-batch: the state every pane reads."""
        from pyspark.sql import functions as F

        assigned = self.assigned
        if self.query.decomposition is not None:
            assigned.withColumn("__status", F.lit(None).cast("string")).createOrReplaceTempView(self.views.annotated)
            sql = self.query.decomposition.partial_sql(self.views.annotated, self.shape.source_alias,
                                                       len(self.shape.keys), extra=(BATCH,))
            grouped = self.spark.sql(sql).drop("__status").withColumnRenamed(BATCH, "__mb")
        else:
            grouped = assigned.withColumn("__mb", F.col(BATCH)).withColumn("__n", F.lit(1))
        grouped = grouped.withColumn("__mb", F.col("__mb").cast("bigint")).withColumn("__present", F.lit(True))
        return grouped.select(*self.rows_schema.fieldNames(), "__n").localCheckpoint()

    # -- the operator's Spark touch points, replaced ------------------------------------------
    def _read(self, data: Any, processing_time: int) -> tuple[int, list[int | None]]:
        if data is None:
            return 0, [None]
        self.source_batch = data
        count, max_ts = self.summary[data]
        return count, [max_ts]

    def _token(self, batch: int) -> int:
        return self.source_batch

    def _assign(self, spark: Any, batch: int, watermark: int) -> dict[WindowKey, int]:
        threshold = watermark - self.shape.lateness
        accepted: dict[WindowKey, int] = {}
        for window, n in self.groups.get(self.source_batch, []):
            state = self.windows.get(window)
            if threshold >= MIN_TIME and window[2] <= threshold:
                reason = LATE
            elif state is not None and state.closed and not state.expired:
                reason = CLOSED
            else:
                accepted[window] = n
                continue
            self.drops.append((*window, self.source_batch, watermark, reason, batch))
            self.counters["late_rows_dropped"] += n
        return accepted

    def _emit(self, spark: Any, fired: list[tuple[WindowKey, Pane]], batch: int) -> None:
        self.fired.extend((window, pane, batch) for window, pane in fired)

    def _collect_garbage(self) -> list[int]:
        return []

    def _commit(self, batch: int, source_batch: int | None) -> None:
        self.next_batch = batch + 1

    # -- the Spark work, at the end -----------------------------------------------------------
    def _panes(self) -> Any:
        """Every fired pane, by one job (or one per micro-batch where the query around the aggregation
        could mix the panes of different micro-batches: a LIMIT, an outer aggregation, a window function)."""
        spark = self.spark
        schema = ("__key string, __ws bigint, __we bigint, pane_index int, pane_timing string, is_final boolean, "
                  "tokens array<bigint>, micro_batch int")
        records = [(k, s, e, p.index, p.timing.value, p.is_final, sorted(set(p.rows)), mb)
                   for (k, s, e), p, mb in self.fired]
        self.stored.drop("__n").createOrReplaceTempView(self.views.rows)
        extra = ("micro_batch",)
        relation = self.query.relation_sql(self._stored_columns(), self.key_ddl, extra)
        if not _mixes_panes(self.shape):
            spark.createDataFrame(records, schema).createOrReplaceTempView(self.views.fired)
            spark.sql(relation).createOrReplaceTempView(self.views.relation)
            return spark.sql(self.query.pane_sql(extra)).orderBy("micro_batch").localCheckpoint()
        parts = []
        for mb in sorted({r[-1] for r in records}):
            spark.createDataFrame([r for r in records if r[-1] == mb], schema) \
                .createOrReplaceTempView(self.views.fired)
            spark.sql(relation).createOrReplaceTempView(self.views.relation)
            parts.append(spark.sql(self.query.pane_sql(extra)).localCheckpoint())
        if not parts:
            spark.createDataFrame([], schema).createOrReplaceTempView(self.views.fired)
            spark.sql(relation).createOrReplaceTempView(self.views.relation)
            return spark.sql(self.query.pane_sql(extra)).localCheckpoint()
        result = parts[0]
        for part in parts[1:]:
            result = result.unionByName(part)
        return result.orderBy("micro_batch").localCheckpoint()

    def _stored_columns(self) -> list[str]:
        if self.query.decomposition is not None:
            return self.query.decomposition.columns
        return self.row_columns

    def _late_rows(self) -> Any:
        """LATE ROWS TO: the rows of every dropped (key, window, micro-batch), with the watermark then."""
        from pyspark.sql import functions as F

        if self.late_sink is None:
            return None
        schema = f"__key string, __ws bigint, __we bigint, {BATCH} bigint, __wm bigint, reason string, " \
                 "micro_batch int"
        drops = self.spark.createDataFrame(self.drops, schema)
        rows = self.assigned.withColumn(BATCH, F.col(BATCH).cast("bigint")) \
            .join(F.broadcast(drops), ["__key", "__ws", "__we", BATCH])
        bounds = [F.col(c) if self.shape.window else F.lit(None).cast("timestamp").alias(c)
                  for c in ("window_start", "window_end")]
        late = rows.select(*[F.col(f"`{c}`") for c in self.relation_columns], *bounds,
                           F.when((F.col("__wm") > MIN_TIME) & (F.col("__wm") < MAX_TIME), F.timestamp_micros("__wm"))
                           .alias("watermark"), "reason", "micro_batch")
        return late.select(*[F.col(f"`{f.name}`").cast(f.dataType) for f in self.late_sink.schema.fields])


def _mixes_panes(shape: StreamingShape) -> bool:
    """Whether the statement around the window aggregation (or the aggregation itself) relates rows of
    different panes, so that a micro-batch's panes must be computed on their own, as a streaming table does."""
    root = shape.query.node
    if isinstance(root, exp.Insert):
        root = root.expression
    carrier = shape.carrier
    if any(True for _ in root.find_all(exp.Window, exp.Union, exp.Intersect, exp.Except)):
        return True
    for select in root.find_all(exp.Select):
        if select is carrier:
            if select.args.get("distinct") or select.args.get("limit"):
                return True
            continue
        if any(select.args.get(k) for k in ("group", "distinct", "limit", "having", "qualify", "joins")) or \
                any(isinstance(e, exp.AggFunc) for item in select.expressions for e in item.find_all(exp.AggFunc)):
            return True
    return False
