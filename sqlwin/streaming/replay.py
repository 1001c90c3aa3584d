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
  window, or the columnar one over every window at once where micro-batches hold many windows), and one
  Spark job computes every fired pane (the statement partitioned by micro-batch where it relates panes:
  ``partitioned``). A handful of Spark jobs whatever the number of micro-batches.
- **stepped** (SESSION windows, whose stored rows move between sessions as they merge; count windows, whose
  rows are numbered only once the watermark passes them): the operator runs each micro-batch's rows through
  Spark, as a streaming table does.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from sqlglot import exp

from sqlwin.core.columnar import KEY, FiredPanes
from sqlwin.core.panes import DROP_CLOSED, DROP_LATE, MAX_TIME, MIN_TIME, FiredPaneList, Pane, WindowKey
from sqlwin.plan.windows import Column
from sqlwin.streaming import committer, storage
from sqlwin.streaming.assigner import WindowAssigner
from sqlwin.streaming.batchinput import watermark_value
from sqlwin.streaming.engines import ColumnarEngine, Fired
from sqlwin.streaming.operator import MicroBatchOperator
from sqlwin.streaming.outputs import FIRED_SCHEMA, fired_table
from sqlwin.streaming.panequery import PaneQuery
from sqlwin.streaming.partitioned import NotPartitionable
from sqlwin.streaming.shape import StreamingShape
from sqlwin.streaming.sinks import BatchSink
from sqlwin.streaming.sources import SOURCE_COLUMN
from sqlwin.streaming.staged import StagedOperator
from sqlwin.streaming.stages import StagedShape
from sqlwin.streaming.timewindows import TimeWindowAssigner

SECOND = 1_000_000
BATCH = "__sqlwin_replay_batch"
CLOCK = "__sqlwin_replay_clock"


def replay(spark: Any, shape: StreamingShape | StagedShape, late_view: str | None = None) -> Any:
    """The panes of the replayed query (a batch DataFrame with ``micro_batch``); LATE ROWS TO becomes a view."""
    folder = storage.scratch_folder(spark, "sqlwin-replay-")  # scratch state: the panes are returned, not kept
    tag = f"replay_{uuid.uuid4().hex[:8]}"
    sink = BatchSink(f"__sqlwin_out_{tag}", storage.join(folder, "data"))
    late_name = shape.late_rows_to
    late_sink = BatchSink(late_name, storage.join(folder, "late_rows")) if late_name else None
    try:
        with committer.volatile():  # scratch state: nothing restores it
            result, late = _run(spark, shape, folder, sink, late_sink, tag)
        if late_name is not None:
            late.localCheckpoint().createOrReplaceTempView(late_name)
        return result
    finally:
        storage.delete(folder)


def _run(spark: Any, shape: StreamingShape | StagedShape, folder: str, sink: BatchSink,
         late_sink: BatchSink | None, tag: str) -> tuple[Any, Any]:
    """(panes, late rows): planned where the windows do not move, else stepped micro-batch by micro-batch."""
    has_clock = getattr(shape.stream, "processing_time_by", None) is not None
    if isinstance(shape, StagedShape):  # several windows: each micro-batch through the stages
        numbered, plan = side_by_side(spark, shape.streams) if len(shape.streams) > 1 else \
            Cut(spark, shape).numbered()
        operator = StagedOperator(spark, shape, folder, sink, late_sink, tag)
        return _stepped(spark, operator, sink, late_sink, numbered, plan, has_clock)
    planned = PlannedReplay(spark, shape, folder, sink, late_sink, tag)
    if planned.plannable(cut := Cut(spark, shape)):
        return planned.run(cut, has_clock)
    numbered, plan = cut.numbered()
    operator = MicroBatchOperator(spark, shape, folder, sink, late_sink, tag)
    return _stepped(spark, operator, sink, late_sink, numbered, plan, has_clock)


class Cut:
    """How the table is cut into micro-batches: each row's *label* (the ``MICRO BATCH BY`` value, or the
    arrival number when each row is a micro-batch of its own) and per label the micro-batch statistics
    (row count ``n``, largest event time ``max_ts``, clock). Micro-batches are numbered (``BATCH``: 0, 1, ...)
    in arrival order from the statistics, after the fact, so the planned replay reads the table once."""

    GROUP = "__sqlwin_group"

    def __init__(self, spark: Any, shape: StreamingShape):
        from pyspark.sql import functions as F

        self.spark = spark
        stream = shape.stream
        rows = spark.table(stream.name)
        self.clock = getattr(stream, "processing_time_by", None)
        if self.clock is not None:
            rows = rows.selectExpr("*", f"UNIX_MICROS({self.clock.sql('spark')}) AS {CLOCK}")
        max_ts = F.max(watermark_value(stream, shape.time_column, rows.columns)).cast("bigint")
        self.stats = [F.count(F.lit(1)).alias("n"), max_ts.alias("max_ts"),
                      (F.max(CLOCK) if self.clock is not None else F.lit(None).cast("bigint")).alias("clock")]
        order = ", ".join(o.sql("spark") for o in stream.arrival_order)
        group = stream.micro_batch_by.sql("spark") if stream.micro_batch_by is not None else None
        if group is None:  # one row per micro-batch: the arrival number is the label and the number
            self.label = BATCH
            self.rows = rows.selectExpr("*", f"ROW_NUMBER() OVER (ORDER BY {order}) - 1 AS {BATCH}").localCheckpoint()
            self.first = None
            return
        self.label = self.GROUP
        self.rows = rows.selectExpr("*", f"{group} AS {self.GROUP}")
        items = [o if isinstance(o, exp.Ordered) else exp.Ordered(this=o) for o in stream.arrival_order]
        ascending = [not o.args.get("desc") and o.args.get("nulls_first") is not False for o in items]
        if ascending[0] and items[0].this == stream.micro_batch_by:
            # ARRIVAL ORDER BY b, ... MICRO BATCH BY b: the groups arrive in the order of b itself (ties are
            # impossible: the rest of the order only sorts rows within a group); no MIN of a struct, which
            # Spark aggregates by sorting
            self.first = F.col(self.GROUP)
        elif all(ascending):
            # a micro-batch arrives with its first row: order the groups by their least arrival key (a struct
            # orders field by field, NULLs first, as ORDER BY ... ASC does): no sort of the whole table
            self.first = F.min(F.struct(*[F.expr(o.this.sql("spark")) for o in items]))
        else:
            self.rows = self.rows.selectExpr("*", f"ROW_NUMBER() OVER (ORDER BY {order}) AS __sqlwin_arrival") \
                .localCheckpoint()
            self.first = F.min("__sqlwin_arrival")

    def summary(self) -> Any:
        """Per label: its statistics (and ``__first``, its arrival position, where labels are groups)."""
        first = [self.first.alias("__first")] if self.first is not None else []
        return self.rows.groupBy(self.label).agg(*first, *self.stats)

    def ranks(self, summary: Any) -> tuple[Any, list]:
        """From the per-label statistics: (label -> ``BATCH``, kept; the plan: per micro-batch in order its
        ``BATCH``, ``n``, ``max_ts`` and clock). Ties between the first rows of two groups: the group's own
        value decides, not chance."""
        if self.label == BATCH:
            ranks = summary.select(BATCH, "n", "max_ts", "clock").localCheckpoint()
        else:
            ranks = summary.selectExpr(f"{self.GROUP}", "n", "max_ts", "clock",
                                       f"ROW_NUMBER() OVER (ORDER BY __first, {self.GROUP}) - 1 AS {BATCH}") \
                .localCheckpoint()
        return ranks, _in_batch_order(ranks)

    def numbered_by(self, df: Any, ranks: Any, label: str | None = None) -> Any:
        """``df`` (with the label column) with each row's ``BATCH``; NULL-safe: rows whose ``MICRO BATCH BY``
        value is NULL form a micro-batch too."""
        from pyspark.sql import functions as F

        label = label or self.label
        if label == BATCH:
            return df
        pairs = F.broadcast(ranks.select(F.col(self.GROUP).alias("__sqlwin_g"), BATCH))
        return df.join(pairs, df[label].eqNullSafe(pairs["__sqlwin_g"])).drop("__sqlwin_g")

    def numbered(self) -> tuple[Any, list]:
        """The table's rows with their ``BATCH`` and the plan, for the stepped replay."""
        ranks, plan = self.ranks(self.summary())
        numbered = self.numbered_by(self.rows, ranks)
        return numbered.drop(self.GROUP, "__sqlwin_arrival"), plan


def side_by_side(spark: Any, streams: list) -> tuple[Any, list]:
    """The rows of several replay streams (a window join's), in one sequence of micro-batches, for the stepped
    replay: each row with its stream (``SOURCE_COLUMN``) and its ``BATCH``. Micro-batch ``k`` holds every stream's
    rows whose ``MICRO BATCH BY`` value is the ``k``-th smallest of all streams' values (NULL first); without
    MICRO BATCH BY, each stream's ``k``-th row in arrival order. The plan: per micro-batch its ``BATCH`` and
    clock (the largest ``PROCESSING TIME BY`` of its rows)."""
    from functools import reduce

    from pyspark.sql import functions as F

    group = "__sqlwin_group"
    parts = []
    for i, stream in enumerate(streams):
        order = ", ".join(o.sql("spark") for o in stream.arrival_order)
        label = stream.micro_batch_by.sql("spark") if stream.micro_batch_by is not None else \
            f"ROW_NUMBER() OVER (ORDER BY {order}) - 1"
        clock = f"UNIX_MICROS({stream.processing_time_by.sql('spark')})" if stream.processing_time_by is not None \
            else "CAST(NULL AS BIGINT)"
        parts.append(spark.table(stream.name).selectExpr("*", f"{label} AS {group}", f"{clock} AS {CLOCK}",
                                                         f"{i} AS {SOURCE_COLUMN}"))
    rows = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts).localCheckpoint()
    ranks = rows.groupBy(group).agg(F.max(CLOCK).alias("clock")) \
        .selectExpr(f"{group} AS __sqlwin_g", "clock", f"ROW_NUMBER() OVER (ORDER BY {group} ASC NULLS FIRST) - 1 "
                    f"AS {BATCH}").localCheckpoint()
    numbered = rows.join(F.broadcast(ranks.select("__sqlwin_g", BATCH)),
                         rows[group].eqNullSafe(ranks["__sqlwin_g"])).drop(group, "__sqlwin_g")
    return numbered, _in_batch_order(ranks)


def _in_batch_order(ranks: Any) -> list:
    """The plan: one small row per micro-batch, sorted here by its number (an int) rather than by Spark, whose
    global sort costs a sampling job and a shuffle on top of the collect."""
    return sorted(ranks.collect(), key=lambda r: r[BATCH])


def _clock_of(entry: Any, has_clock: bool, operator: MicroBatchOperator | StagedOperator) -> int:
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


def _drive_stages(operator: StagedOperator, spark: Any, plan: list, has_clock: bool, data_of: Any) -> None:
    """The micro-batch sequence of a live stream of several windows: each batch, then the no-data batches it
    asks for while a stage has a timer due or a watermark to hand on (as a live one asks the tick source), and
    at the end the same at +infinity."""
    processing_time = 0

    def settle() -> None:
        for _ in range(4 * len(operator.ops) + 4):  # each stage hands its watermark on in one micro-batch
            if not operator.wants_micro_batch():
                return
            operator.step(spark, None, processing_time if has_clock else operator.next_batch * SECOND)
        raise RuntimeError("sqlwin: the stages of a replay did not settle")  # a bug, never the user's SQL

    for entry in plan:
        processing_time = _clock_of(entry, has_clock, operator)
        operator.step(spark, data_of(entry), processing_time)
        settle()
    operator.step(spark, None, processing_time if has_clock else operator.next_batch * SECOND, end_of_input=True)
    settle()


def _stepped(spark: Any, operator: MicroBatchOperator | StagedOperator, sink: BatchSink,
             late_sink: BatchSink | None, numbered: Any, plan: list, has_clock: bool) -> tuple[Any, Any]:
    """Each micro-batch's rows through Spark, as in a streaming table."""
    from pyspark.sql import functions as F

    numbered = numbered.persist()
    try:
        data_columns = [c for c in numbered.columns if c not in (BATCH, CLOCK)]
        drive = _drive_stages if isinstance(operator, StagedOperator) else _drive
        drive(operator, spark, plan, has_clock,
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
    or ``window closed`` here by ``PlannedAssigner`` or ``PlannedFrames``, by the same rule), and fired panes
    and dropped groups are collected, to be computed by one Spark job at the end. A pane's tokens are table
    micro-batch numbers (``BATCH``). The pane engine is the per-window one, or the columnar one (as a
    streaming table's, for the triggers that are comparisons) where the micro-batches hold many windows each:
    it steps every window with a few array operations per micro-batch, where the per-window driver costs a
    Python call per window, but those operations cover every open window, so for small micro-batches (a row
    each) the per-window driver is the faster."""

    FUSED_SCAN = False  # no micro-batch is read here: ``_read`` and the assigner look the summary up
    KEYED_STATE = False  # the windows are stepped here, in the driver: their panes are computed at the end
    COLUMNAR_GROUPS = 64  # (key, window) groups per micro-batch from which the columnar engine steps them
    source_batch = -1  # the table micro-batch being stepped (none yet: a table without rows has none)

    def plannable(self, cut: Cut) -> bool:
        if not isinstance(self.assigner, TimeWindowAssigner) or self.shape.query.evict is not None:
            return False  # windows that move, or whose rows wait for the watermark to be numbered
        self.cut = cut
        cut.rows.drop(CLOCK).createOrReplaceTempView(self.views.batch_of(0))
        self.assigned = self.spark.sql(self._assign_sql_with_label(cut))
        return cut.label in self.assigned.columns  # else a subquery in the TVF drops it: step batch by batch

    def _assign_sql_with_label(self, cut: Cut) -> str:
        """The assignment of the operator, with each row's micro-batch label carried through the window TVF
        (its relation lists the stream's columns: add the label to them)."""
        shape = self.shape
        spec = shape.window
        if spec is None or spec.relation.columns is None:
            return self.query.assign_sql  # ``*`` over the rows: the label passes through as it is
        label_type = cut.rows.schema[cut.label].dataType.simpleString()
        relation = dataclasses.replace(spec.relation, columns=(*spec.relation.columns, Column(cut.label, label_type)))
        with_label = dataclasses.replace(shape, window=dataclasses.replace(spec, relation=relation))
        return PaneQuery(with_label, self.spark, self.views).assign_sql

    # -- the Spark work, up front -------------------------------------------------------------
    def run(self, cut: Cut, has_clock: bool) -> tuple[Any, Any]:
        import pandas as pd

        spark = self.spark
        self.stored, plan, counts = self._stored_groups(cut)
        self.summary = {r[BATCH]: (int(r["n"]), r["max_ts"]) for r in plan}
        groups = self._counts(cut, counts)
        self.fired = FiredLog()
        self.drops: list[pd.DataFrame] = []
        columnar = ColumnarEngine.of(self.driver, global_window=self.shape.window is None)
        if columnar is not None and len(groups) >= self.COLUMNAR_GROUPS * max(len(plan), 1):
            # many windows per micro-batch: every window stepped at once (as the live operator's engine does)
            self.panes = columnar
            self.assigner = PlannedFrames(self, {b: g.drop(columns=BATCH).reset_index(drop=True)
                                                 for b, g in groups.groupby(BATCH, sort=False)})
        else:
            self.assigner = PlannedAssigner(self, {
                b: list(zip(zip(g["key"].tolist(), g["start"].tolist(), g["end"].tolist(), strict=True),
                            g["n"].tolist(), strict=True))
                for b, g in groups.groupby(BATCH, sort=False)})
        _drive(self, spark, plan, has_clock, lambda entry: entry[BATCH])
        return self._panes(), self._late_rows()

    def _counts(self, cut: Cut, counts: Any) -> Any:
        """The new-row count of every (key, window, micro-batch) group, as a frame (key, start, end, n,
        ``BATCH``), through Arrow."""
        from pyspark.sql import functions as F

        if self.query.decomposition is not None:  # one row per (key, window, label) already
            per_label = counts.select("__key", "__ws", "__we", cut.label, F.col("__n").cast("bigint").alias("n"))
        else:  # a row each
            per_label = counts.groupBy("__key", "__ws", "__we", cut.label).agg(F.count(F.lit(1)).alias("n"))
        numbered = cut.numbered_by(per_label, self.ranks)  # NULL-safe, in Spark: a NULL label is a micro-batch
        frame = numbered.select(F.col("__key").alias("key"), F.col("__ws").alias("start"),
                                F.col("__we").alias("end"), "n", F.col(BATCH).cast("bigint").alias(BATCH)) \
            .toArrow().to_pandas()
        frame["key"] = frame["key"].astype(object)
        return frame

    def _stored_groups(self, cut: Cut) -> tuple[Any, list, Any]:
        """Per (key, window, micro-batch): ``__n`` rows and their partial aggregates, or the rows themselves
        (``__n`` = 1 each), with ``__mb`` = the micro-batch: the state every pane reads; the plan; and the
        same groups by label (``__n`` counts them per key and window).

        With partial aggregates, one Spark job reads the table for both: the aggregates per (key, window,
        label), ``__key`` computed per group, and the statistics per label; the micro-batches are numbered
        on that small result."""
        from pyspark.sql import functions as F

        label = cut.label
        assigned = self.assigned.withColumn("__status", F.lit(None).cast("string"))
        decomposition = self.query.decomposition
        if decomposition is not None:
            assigned.drop("__key").createOrReplaceTempView(self.views.annotated)
            grouped = self.spark.sql(decomposition.partial_sql(
                self.views.annotated, self.shape.source_alias, len(self.shape.keys), extra=(label,),
                key_after=self.query.key_json_sql)).drop("__status")
            scanned = grouped.unionByName(cut.summary().withColumn("__summary", F.lit(True)),
                                          allowMissingColumns=True).localCheckpoint()
            ranks, plan = cut.ranks(scanned.where(F.col("__summary").isNotNull()))
            by_label = scanned.where(F.col("__summary").isNull())
        else:
            ranks, plan = cut.ranks(cut.summary())
            # read by the counts and the panes: the table is read again (a scan), which costs less than a
            # copy of every row in memory (that copy made Nexmark q7's replay 0.5 s slower of 3.5 s)
            by_label = assigned.withColumn("__n", F.lit(1))
        self.ranks = ranks
        grouped = cut.numbered_by(by_label, ranks)
        grouped = grouped.withColumn("__mb", F.col(BATCH).cast("bigint")).withColumn("__present", F.lit(True))
        return grouped.select(*self.rows_schema.fieldNames(), "__n"), plan, by_label

    # -- the operator's Spark touch points, replaced ------------------------------------------
    def _read(self, data: Any, processing_time: int) -> tuple[int, list[int | None]]:
        if data is None:
            return 0, [None]
        self.source_batch = data
        count, max_ts = self.summary[data]
        return count, [max_ts]

    def _token(self, batch: int) -> int:
        return self.source_batch

    def _emit(self, spark: Any, fired: Fired, batch: int) -> None:
        self.fired.add(fired, self.source_batch, batch)

    def _collect_garbage(self) -> None:
        return None

    def _commit(self, batch: int, source_batch: int | None) -> None:
        self.next_batch = batch + 1

    def show_committed(self) -> None:
        return None  # the panes are computed at the end

    # -- the Spark work, at the end -----------------------------------------------------------
    def _panes(self) -> Any:
        """Every fired pane, by one job: the statement partitioned by ``micro_batch`` where it relates rows of
        different panes (``sqlwin.streaming.partitioned``: a micro-batch's panes are computed on their own, as
        in a streaming table), or one job per micro-batch where that cannot be done (a set operation over the
        panes, a static table outer-joined to them).
        The fired panes reach Spark as parquet, as in a streaming table (``outputs``): a file, or a file per
        micro-batch (a filter on one file would do, but Spark 4.3 then fails to union the parts: their
        checkpoints keep the filter's constraint on an attribute the union cannot map)."""
        from pyspark.sql import functions as F

        spark = self.spark
        table, schema = self.fired.table()
        batches = table.column("micro_batch").to_pylist()  # in firing order: a micro-batch's panes are contiguous
        self._readable_rows().createOrReplaceTempView(self.views.rows)
        extra = ("micro_batch",)
        relation = self.query.relation_sql(self._stored_columns(), self.key_ddl, extra, ranges=self.fired.ranges,
                                           inner=True)
        folder = storage.join(self.store.root, "fired")
        try:
            statement = self.query.pane_sql(extra, partition_by="micro_batch")
            partitioned, reads = True, self.query.relation_reads
        except NotPartitionable:
            statement, partitioned, reads = self.query.pane_sql(extra), False, 1

        def panes_of(part: Any, name: str, batch: int | None = None) -> Any:
            path = storage.join(folder, f"{name}.parquet")
            storage.write_parquet(path, part)
            spark.read.schema(schema).parquet(path).createOrReplaceTempView(self.views.fired)
            pane_rows = spark.sql(relation)
            if reads > 1:  # the statement reads the panes more than once (a CTE over them, read twice): once
                pane_rows = pane_rows.localCheckpoint()
            pane_rows.createOrReplaceTempView(self.views.relation)
            panes = spark.sql(statement)
            # last, as a streaming table's sink adds it (a ``*`` around the aggregation passes it up mid-row);
            # one micro-batch's panes: its number, as the sink writes it (a row without a pane has it too)
            number = F.col("micro_batch") if batch is None else F.lit(batch).cast("int").alias("micro_batch")
            return panes.select(*[f"`{c}`" for c in panes.columns if c != "micro_batch"], number)

        if partitioned or not batches:  # (no pane: the query over none, once)
            return panes_of(table, "all").localCheckpoint()
        starts = [i for i, mb in enumerate(batches) if i == 0 or mb != batches[i - 1]]
        parts = [panes_of(table.slice(lo, hi - lo), str(n), batches[lo]).localCheckpoint()
                 for n, (lo, hi) in enumerate(zip(starts, [*starts[1:], len(table)], strict=True))]
        result = parts[0]
        for part in parts[1:]:
            result = result.unionByName(part)
        # Spark 4.3 infers a union's constraints from its children's, and fails ("key not found") on a part's
        # constraint over a column the query selects twice (``v AS x, v``): the parts are data, nothing to infer
        conf = "spark.sql.constraintPropagation.enabled"
        before = spark.conf.get(conf, "true")
        spark.conf.set(conf, "false")
        try:
            return result.localCheckpoint()
        finally:
            spark.conf.set(conf, before)

    def _readable_rows(self) -> Any:
        """The stored groups a pane may read. A pane of the columnar engine reads a range of micro-batches,
        which may hold a group of its window that was dropped (the watermark of a ``PROCTIME() - lag`` stream
        moves as a micro-batch starts): the dropped groups are left out (``PaneDriver``'s panes list the
        micro-batches that added rows)."""
        from pyspark.sql import functions as F

        stored = self.stored.drop("__n")
        if not self.fired.ranges or not self.drops:
            return stored
        dropped = self._drops().select("__key", "__ws", "__we", F.col(BATCH).alias("__mb"))
        return stored.join(F.broadcast(dropped), ["__key", "__ws", "__we", "__mb"], "left_anti")

    def _drops(self) -> Any:
        """Every dropped (key, window, micro-batch) group, with the watermark then, the reason and the micro-batch."""
        import pandas as pd

        schema = f"__key string, __ws bigint, __we bigint, {BATCH} bigint, __wm bigint, reason string, " \
                 "micro_batch int"
        frame = pd.concat(self.drops, ignore_index=True)
        return self.spark.createDataFrame(list(zip(*(frame[c].tolist() for c in frame.columns), strict=True)), schema)

    def _stored_columns(self) -> list[str]:
        if self.query.decomposition is not None:
            return self.query.decomposition.columns
        return self.row_columns

    def _late_rows(self) -> Any:
        """LATE ROWS TO: the rows of every dropped (key, window, micro-batch), with the watermark then."""
        from pyspark.sql import functions as F

        if self.late_sink is None:
            return None
        if not self.drops:  # nothing dropped: no job joins the table with an empty list
            return self.spark.createDataFrame([], self.late_sink.schema)
        drops = self._drops()
        label = self.cut.label
        if label != BATCH:  # the label of each dropped micro-batch, to find its rows
            drops = drops.join(self.ranks.select(F.col(BATCH).cast("bigint").alias(BATCH), label), BATCH)
        keys = ["__key", "__ws", "__we"]
        drops = F.broadcast(drops.withColumnRenamed(label, "__drop_label"))
        on = [self.assigned[k] == drops[k] for k in keys]
        on.append(self.assigned[label].cast(drops.schema["__drop_label"].dataType).eqNullSafe(drops["__drop_label"]))
        rows = self.assigned.join(drops, on).drop(*[drops[k] for k in keys])
        bounds = [F.col(c) if self.shape.window else F.lit(None).cast("timestamp").alias(c)
                  for c in ("window_start", "window_end")]
        late = rows.select(*[F.col(f"`{c}`") for c in self.relation_columns], *bounds,
                           F.when((F.col("__wm") > MIN_TIME) & (F.col("__wm") < MAX_TIME), F.timestamp_micros("__wm"))
                           .alias("watermark"), "reason", "micro_batch")
        return late.select(*[F.col(f"`{f.name}`").cast(f.dataType) for f in self.late_sink.schema.fields])


class PlannedAssigner(WindowAssigner):
    """A planned micro-batch's (key, window) groups, looked up in the one assignment and classified late or
    ``window closed`` by the rule of ``TimeWindowAssigner``, one by one for the per-window pane driver; the
    dropped groups are kept for LATE ROWS TO."""

    def __init__(self, replay: PlannedReplay, groups: dict[int, list[tuple[WindowKey, int]]]):
        super().__init__(replay)
        self.replay = replay
        self.groups = groups  # per table micro-batch: its groups' windows and new-row counts

    def assign_rows(self, spark: Any, batch: int, watermark: int) -> dict[WindowKey, int]:
        import pandas as pd

        replay = self.replay
        threshold = watermark - replay.shape.lateness
        accepted: dict[WindowKey, int] = {}
        dropped = []
        for window, n in self.groups.get(replay.source_batch, []):
            state = replay.windows.get(window)
            if threshold >= MIN_TIME and window[2] <= threshold:
                reason = DROP_LATE
            elif state is not None and state.closed and not state.expired:
                reason = DROP_CLOSED
            else:
                accepted[window] = n
                continue
            dropped.append((*window, replay.source_batch, watermark, reason, batch))
            replay.counters["late_rows_dropped"] += n
        if dropped:
            replay.drops.append(pd.DataFrame(dropped, columns=DROP_COLUMNS))
        return accepted


class PlannedFrames(WindowAssigner):
    """The same for the columnar pane engine: a micro-batch's groups as one frame (key, start, end, n),
    classified by array comparisons."""

    def __init__(self, replay: PlannedReplay, groups: dict[int, Any]):
        super().__init__(replay)
        self.replay = replay
        self.groups = groups

    def assign_rows(self, spark: Any, batch: int, watermark: int) -> Any:
        import numpy as np
        import pandas as pd

        replay = self.replay
        new = self.groups.get(replay.source_batch)
        if new is None:
            return replay.panes.accepted()
        threshold = watermark - replay.shape.lateness
        late = new["end"].to_numpy() <= threshold if threshold >= MIN_TIME else np.zeros(len(new), bool)
        closed = ~late & replay.panes.panes.are_closed(pd.MultiIndex.from_frame(new[KEY]))
        dropped = late | closed
        if not dropped.any():
            return new
        gone = new[dropped]
        replay.drops.append(pd.DataFrame({
            "__key": gone["key"].to_numpy(object), "__ws": gone["start"].to_numpy(), "__we": gone["end"].to_numpy(),
            BATCH: replay.source_batch, "__wm": watermark,
            "reason": np.where(late[dropped], DROP_LATE, DROP_CLOSED).astype(object), "micro_batch": batch},
            columns=DROP_COLUMNS))
        replay.counters["late_rows_dropped"] += int(gone["n"].sum())
        return new[~dropped].reset_index(drop=True)


DROP_COLUMNS = ["__key", "__ws", "__we", BATCH, "__wm", "reason", "micro_batch"]


class FiredLog:
    """Every pane a planned replay fired, with the micro-batch that fired it, to be computed at the end: the
    per-window driver's panes list the table micro-batches they read; the columnar engine's read a range of
    them (``[lo, hi]``, ``hi`` the table micro-batch stepped when it fired)."""

    def __init__(self) -> None:
        self.panes: list[tuple[WindowKey, Pane, int]] = []
        self.frames: list[Any] = []
        self.ranges = False

    def add(self, fired: Fired, token: int, batch: int) -> None:
        if isinstance(fired, FiredPanes):
            self.ranges = True
            if len(fired):
                self.frames.append(fired.frame.assign(hi=token, micro_batch=batch))
        else:
            self.panes.extend((window, pane, batch) for window, pane in fired)

    def table(self) -> tuple[Any, str]:
        """The panes as Arrow, in firing order, and their Spark schema."""
        import numpy as np
        import pandas as pd
        import pyarrow as pa

        if not self.ranges:
            table = fired_table(FiredPaneList([(w, p) for w, p, _ in self.panes]), 0)
            batches = pa.array([mb for _, _, mb in self.panes], pa.int32())
            return table.append_column("micro_batch", batches), FIRED_SCHEMA + ", micro_batch int"
        frame = pd.concat(self.frames, ignore_index=True) if self.frames else \
            FiredPanes.empty().frame.assign(hi=np.array([], np.int64), micro_batch=np.array([], np.int32))
        lo = frame["lo"].to_numpy(np.int64)
        reads = lo >= 0  # a pane without rows (lo -1) reads the empty range [0, -1]
        table = pa.table({
            "__key": pa.array(frame["key"].to_numpy(object), pa.string()),
            "__ws": pa.array(frame["start"].to_numpy(np.int64)), "__we": pa.array(frame["end"].to_numpy(np.int64)),
            "pane_index": pa.array(frame["pane_index"].to_numpy(np.int32)),
            "pane_timing": pa.array(frame["pane_timing"].to_numpy(object), pa.string()),
            "is_final": pa.array(frame["is_final"].to_numpy(bool)),
            "__lo": pa.array(np.where(reads, lo, 0)),
            "__hi": pa.array(np.where(reads, frame["hi"].to_numpy(np.int64), -1)),
            "micro_batch": pa.array(frame["micro_batch"].to_numpy(np.int32))})
        schema = ("__key string, __ws bigint, __we bigint, pane_index int, pane_timing string, is_final boolean, "
                  "__lo bigint, __hi bigint, micro_batch int")
        return table, schema
