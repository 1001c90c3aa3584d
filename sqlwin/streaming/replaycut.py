"""How replay (``sqlwin.streaming.replay``) makes a table a live stream's micro-batches, and drives an operator
through them: ``Cut`` numbers each row's micro-batch (``BATCH``) from ``MICRO BATCH BY`` and ``ARRIVAL ORDER
BY``, ``side_by_side`` does it for several streams, and ``drive`` runs the micro-batch sequence a live stream
runs (a no-data micro-batch after one that moved the watermark, a last one at +infinity)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlwin.streaming.batchinput import watermark_value
from sqlwin.streaming.operator import MicroBatchOperator
from sqlwin.streaming.shape import StreamingShape
from sqlwin.streaming.sinks import BatchSink
from sqlwin.streaming.sources import SOURCE_COLUMN
from sqlwin.streaming.staged import StagedOperator

SECOND = 1_000_000
BATCH = "__sqlwin_replay_batch"
CLOCK = "__sqlwin_replay_clock"


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
        self.stats = self._stats(shape, rows)
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
            keys = [F.expr(o.this.sql("spark")) for o in items]
            if len(keys) == 1:  # the same order from aggregates Spark hashes (the MIN of a struct it sorts for)
                self.first = F.struct((F.count(F.lit(1)) == F.count(keys[0])).alias("no_null"),
                                      F.min(keys[0]).alias("least"))
            else:
                self.first = F.min(F.struct(*keys))
        else:
            self.rows = self.rows.selectExpr("*", f"ROW_NUMBER() OVER (ORDER BY {order}) AS __sqlwin_arrival") \
                .localCheckpoint()
            self.first = F.min("__sqlwin_arrival")

    def _stats(self, shape: StreamingShape, rows: Any) -> list:
        from pyspark.sql import functions as F

        max_ts = F.max(watermark_value(shape.stream, shape.time_column, rows.columns)).cast("bigint")
        return [F.count(F.lit(1)).alias("n"), max_ts.alias("max_ts"),
                (F.max(CLOCK) if self.clock is not None else F.lit(None).cast("bigint")).alias("clock")]

    @classmethod
    def of_numbered(cls, spark: Any, shape: StreamingShape, rows: Any) -> Cut:
        """The cut of rows already numbered (``BATCH``, and ``CLOCK`` where the stream has PROCESSING TIME BY):
        one stream's rows of several replayed side by side (``side_by_side``)."""
        cut = cls.__new__(cls)
        cut.spark = spark
        cut.clock = getattr(shape.stream, "processing_time_by", None)
        cut.stats = cut._stats(shape, rows)
        cut.label, cut.rows, cut.first = BATCH, rows, None
        return cut

    def summary(self) -> Any:
        """Per label: its statistics (and ``__first``, its arrival position, where labels are groups)."""
        first = [self.first.alias("__first")] if self.first is not None else []
        return self.rows.groupBy(self.label).agg(*first, *self.stats)

    def ranks(self, summary: Any) -> tuple[Any, list]:
        """From the per-label statistics: (label -> ``BATCH``, kept; the plan: per micro-batch in order its
        ``BATCH``, ``n``, ``max_ts`` and clock). Ties between the first rows of two groups: the group's own
        value decides, not chance. The ranks are kept by the job that collects the plan."""
        if self.label == BATCH:
            ranks = summary.select(BATCH, "n", "max_ts", "clock").localCheckpoint(eager=False)
        else:
            ranks = summary.selectExpr(f"{self.GROUP}", "n", "max_ts", "clock",
                                       f"ROW_NUMBER() OVER (ORDER BY __first, {self.GROUP}) - 1 AS {BATCH}") \
                .localCheckpoint(eager=False)
        return ranks, in_batch_order(ranks)

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
    return numbered, in_batch_order(ranks)


def in_batch_order(ranks: Any) -> list:
    """The plan: one small row per micro-batch, sorted here by its number (an int) rather than by Spark, whose
    global sort costs a sampling job and a shuffle on top of the collect."""
    return sorted(ranks.collect(), key=lambda r: r[BATCH])


def clock_of(entry: Any, has_clock: bool, operator: MicroBatchOperator | StagedOperator) -> int:
    return entry["clock"] if has_clock else operator.next_batch * SECOND


def drive(operator: MicroBatchOperator, spark: Any, plan: list, has_clock: bool, data_of: Any) -> None:
    """The micro-batch sequence of a live stream: each batch, a no-data batch after one that moved the
    watermark, and a last no-data batch at +infinity."""
    processing_time = 0
    for entry in plan:
        processing_time = clock_of(entry, has_clock, operator)
        idle_steps(operator, spark, processing_time)
        before = operator.watermark
        operator.step(spark, data_of(entry), processing_time)
        if operator.watermark > before:  # the no-data micro-batch a live stream runs next
            operator.step(spark, None, processing_time if has_clock else operator.next_batch * SECOND)
    final_clock = processing_time if has_clock else operator.next_batch * SECOND
    operator.step(spark, None, final_clock, end_of_input=True)


def idle_steps(operator: MicroBatchOperator | StagedOperator, spark: Any, until: int) -> None:
    """The micro-batches without rows a live run's idle stream gets (its tick at the moment its watermark, moving
    with the clock, reaches a window's end: GRAMMAR 3's ``max(d, e - max_ts + delay)`` after the last row), at
    those moments, before a micro-batch of rows at processing time ``until``: the window closes without the rows
    that came after it closed. Bounded: each one fires a window or moves the next moment on. A staged query's
    tick then settles at that moment (a cascade's outer windows, the join), as its live micro-batch does."""
    for _ in range(1024):
        wake = operator.idle_wake()
        if wake is None or wake > until:
            return
        operator.step(spark, None, wake)
        if isinstance(operator, StagedOperator):
            operator.settle(spark, lambda wake=wake: wake)


def drive_stages(operator: StagedOperator, spark: Any, plan: list, has_clock: bool, data_of: Any) -> None:
    """The micro-batch sequence of a live stream of several windows: each batch, then the no-data batches it
    makes due while a stage has a timer due or a watermark to hand on (``StagedOperator.settle``, as live),
    and at the end the same at +infinity."""
    processing_time = 0

    def clock() -> int:
        return processing_time if has_clock else operator.next_batch * SECOND

    for entry in plan:
        processing_time = clock_of(entry, has_clock, operator)
        idle_steps(operator, spark, processing_time)
        operator.step(spark, data_of(entry), processing_time)
        operator.settle(spark, clock)
    operator.step(spark, None, clock(), end_of_input=True)
    operator.settle(spark, clock)


def stepped(spark: Any, operator: MicroBatchOperator | StagedOperator, sink: BatchSink,
             late_sink: BatchSink | None, numbered: Any, plan: list, has_clock: bool) -> tuple[Any, Any]:
    """Each micro-batch's rows through Spark, as in a streaming table."""
    from pyspark.sql import functions as F

    numbered = numbered.persist()
    try:
        data_columns = [c for c in numbered.columns if c not in (BATCH, CLOCK)]
        run = drive_stages if isinstance(operator, StagedOperator) else drive
        run(operator, spark, plan, has_clock,
              lambda entry: numbered.where(F.col(BATCH) == entry[BATCH]).select(*data_columns))
        result = sink.read(spark).orderBy("micro_batch").localCheckpoint()  # panes in the order they came
        late = late_sink.read(spark).localCheckpoint() if late_sink is not None else None
    finally:
        numbered.unpersist()
    return result, late
