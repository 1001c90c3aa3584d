"""The micro-batch of a streaming query of several windows (``stages``): its window stages, each sqlwin's
micro-batch operator, run in order (upstream first), and its window join.

Per micro-batch (Spark's ``foreachBatch``; replay calls ``step`` the same way):

1. A stage that reads a stream runs over that stream's rows of the micro-batch, with its own watermark: it drops
   its own late rows.
2. A stage that reads another's panes (a cascade's outer windows) runs over the panes its upstream wrote in this
   micro-batch (its output folder, read back by Spark), and is handed the upstream's watermark of this micro-batch
   minus the upstream's allowed lateness, in force from its next micro-batch (``ForwardedWatermark``).
3. The window join (``windowjoin``) takes both sides' new panes and the smaller of their watermarks, likewise.

A micro-batch that moves a watermark makes no-data steps due: a stage's timers (its windows fire), a watermark
to hand on (a cascade's outer stage, the join). They run at once, inside the same Spark micro-batch, one after
another while any is due (``settle``; replay runs the same), before the next file's rows can meet a window that
should have fired without them; numbered by sqlwin, they are numbered as replay numbers them. Each part commits
its own state, numbered by its own micro-batches, and remembers the step it last ran: (Spark's batch id, its step
in it). Steps run in order, every part in each, so after a crash every part ran every step before the last one
any part committed: a re-run of the Spark micro-batch starts at that step, skips the parts that committed it and
re-reads, for the others, the panes their upstream wrote in it. A processing-time timer or an idle stream's
deadline still asks the tick source for a micro-batch at its time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sqlwin.core.alignment import StreamMark
from sqlwin.core.panes import MAX_TIME, ForwardedWatermark, combined
from sqlwin.plan.statements import CreateReplayStream, StreamColumn
from sqlwin.streaming import storage
from sqlwin.streaming.operator import MicroBatchOperator
from sqlwin.streaming.sinks import BatchSink
from sqlwin.streaming.sources import SOURCE_COLUMN, TickFile, batch_rows
from sqlwin.streaming.stages import PANES, Stage, StagedShape
from sqlwin.streaming.state import now_micros
from sqlwin.streaming.stopping import NEVER, StoppableBatches
from sqlwin.streaming.windowjoin import JoinStage


class StageOperator(MicroBatchOperator):
    """A window stage of a staged query: it commits the watermark it ran with, which it forwards downstream."""

    forwards_watermark = True


class FedOperator(StageOperator):
    """A window stage whose input is another stage's panes: its watermark is the one forwarded to it."""

    def _watermark(self) -> Any:
        return ForwardedWatermark()


class StagedOperator(StoppableBatches):
    """Runs the window stages of a staged query (cascaded windows, a window join) as one streaming table: every
    micro-batch steps each stage in order, a downstream stage reading its upstream's panes of that micro-batch."""

    def __init__(self, spark: Any, shape: StagedShape, location: str, sink: BatchSink, late_sink: BatchSink | None,
                 tag: str, clock: Callable[[], int] = now_micros, ticks: TickFile | None = None):
        self.spark = spark
        self.shape = shape
        self.sink = sink
        self.clock = clock
        self.ticks = ticks
        self.query_stop = NEVER
        self.ops: list[MicroBatchOperator] = []
        self.outputs: list[BatchSink] = []
        for stage in shape.stages:
            last = shape.join is None and stage is shape.final
            out = sink if last else BatchSink(f"__sqlwin_{tag}_stage{stage.index}",
                                              storage.join(location, "stages", str(stage.index), "out"), shown=False)
            if stage.upstream is not None:
                self._derived_view(stage)
            self.ops.append(self._stage_operator(stage, storage.join(location, "stages", str(stage.index)), out,
                                                 late_sink if stage.owns_clause else None, f"{tag}_s{stage.index}"))
            self.outputs.append(out)
        self.join = None
        if shape.join is not None:
            sides = [s.stage for s in shape.join.sides]
            self.join = self.JOIN(spark, shape.join, storage.join(location, "join"), sink,
                                  [self.outputs[s.index] for s in sides], [s.lateness for s in sides])
        self.store = self.ops[0].store
        self.replay_columns = {i: spark.table(s.name).columns for i, s in enumerate(shape.streams)
                               if isinstance(s, CreateReplayStream) and len(shape.streams) > 1}

    JOIN = JoinStage  # the join's class (a planned replay's answers from what the sides fired)

    def _stage_operator(self, stage: Stage, location: str, out: BatchSink, late_sink: BatchSink | None,
                        tag: str) -> MicroBatchOperator:
        kind = FedOperator if stage.upstream is not None else StageOperator
        return kind(self.spark, stage.shape, location, out, late_sink, tag, clock=self.clock)

    def parts(self) -> list[Any]:
        """Each part with committed state of its own (every stage, the join): its ``store`` and ``_restore``."""
        return [*self.ops, *([self.join] if self.join is not None else [])]

    def _restore(self) -> None:
        """Every part from its last commit (where the operator is unpickled on a Spark Connect server)."""
        for part in self.parts():
            part._restore()

    def _derived_view(self, stage: Stage) -> None:
        """The view a stage reads its upstream's panes by (for its schema: the rows come each micro-batch)."""
        from pyspark.sql.types import StructType

        schema = self.outputs[stage.upstream.index].schema
        fields = [f for f in schema.fields if f.name not in (*PANES, "micro_batch")]
        self.spark.createDataFrame([], StructType(fields)).createOrReplaceTempView(stage.derived)
        shape = stage.shape  # its stream's columns are known now: the upstream's panes'
        derived = dataclasses.replace(shape.stream, columns=tuple(StreamColumn(f.name, f.dataType.simpleString())
                                                                  for f in fields))
        shape.streams = [derived if s is shape.stream else s for s in shape.streams]
        shape.stream = derived

    # -- the foreachBatch entry point (run_batch: StoppableBatches) ---------------------------------
    def _run_batch(self, batch_df: Any, source_batch: int) -> None:
        processing_time = self.store.begin(source_batch, self.clock())
        spark = batch_df.sparkSession
        # a re-run after a crash: every part ran every step before the last one any part committed
        resumed = max((p.last_source_step for p in self.parts() if p.last_source_batch == source_batch), default=0)
        if resumed == 0:
            self.step(spark, batch_rows(self.spark, batch_df, source_batch), processing_time,
                      source_batch=source_batch)
        else:  # its rows were stepped (step 0): no Spark job reads them again
            self.step(spark, None, processing_time, source_batch=source_batch, source_step=resumed)
        self.settle(spark, lambda: processing_time, source_batch, first=resumed + 1)
        self._ask_for_next_batch(source_batch)

    def settle(self, spark: Any, clock: Callable[[], int], source_batch: int | None = None,
               first: int = 1) -> None:
        """The no-data steps the last one made due, one after another while a stage has a timer due or a
        watermark to hand on (each stage hands its own on in one step), numbered ``first`` on in Spark's
        micro-batch ``source_batch``; ``clock``: each one's processing time."""
        for step in range(first, first + 4 * len(self.ops) + 4):
            if not self.wants_micro_batch():
                return
            self.step(spark, None, clock(), source_batch=source_batch, source_step=step)
        raise RuntimeError("sqlwin: the stages of a streaming query did not settle")  # a bug, never the user's SQL

    def stream_marks(self) -> dict[str, StreamMark]:
        """Each stream's marks, from the stage that reads it."""
        marks: dict[str, StreamMark] = {}
        for stage, op in zip(self.shape.stages, self.ops, strict=True):
            if stage.upstream is None:
                marks.update(op.stream_marks())
        return marks

    def step(self, spark: Any, data: Any, processing_time: int, end_of_input: bool = False,
             source_batch: int | None = None, source_step: int = 0) -> None:
        """One micro-batch through every stage, then the join: step ``source_step`` of Spark's micro-batch
        ``source_batch``, which a part that committed it before a crash skips."""
        produced: list[int | None] = []
        self._lift_sides()  # after a restart: the join's committed watermark
        for stage, op in zip(self.shape.stages, self.ops, strict=True):
            op.query_stop = self.query_stop
            if stage.upstream is None:
                rows, end = self._rows_of(data, stage), end_of_input
            else:
                op.tracker.forward(self._forwarded(stage.upstream))
                rows, end = self._panes_of(spark, stage.upstream, produced[stage.upstream.index]), False
            before = op.next_batch
            if not _ran(op, source_batch, source_step):
                op.step(spark, rows, processing_time, end_of_input=end, source_batch=source_batch,
                        source_step=source_step)
                produced.append(op.next_batch - 1 if op.next_batch > before else None)
            else:  # it committed this step before a crash: its panes are in its output
                produced.append(op.next_batch - 1 if _position(op) == (source_batch, source_step) else None)
        if self.join is not None:
            sides = [s.stage for s in self.shape.join.sides]
            self.join.forward(combined([(self.ops[s.index].in_force, self.ops[s.index].tracker.all_idle(
                processing_time)) for s in sides]))
            if not _ran(self.join, source_batch, source_step):
                self.join.step(spark, [produced[s.index] for s in sides], source_batch, source_step)
            self._lift_sides()
            self.sink.register(spark)

    def _side_ops(self) -> list[MicroBatchOperator]:
        return [self.ops[s.stage.index] for s in self.shape.join.sides] if self.join is not None else []

    def _lift_sides(self) -> None:
        """No side's watermark below the join's: the join's is the smallest of its sides' that are not idle
        (``combined``; GRAMMAR 3: an idle stream does not hold the others back, and a stream that has brought no
        row yet is idle once its IDLE TIMEOUT passed since the query started), so it may go on without an idle
        side, whose rows for windows the join already emitted are then that side's late rows (dropped into its
        LATE ROWS TO, or LATE panes within its ALLOWED LATENESS), as Flink's window join drops the rows behind
        its watermark. The join's watermark is committed with it: a restarted query lifts its sides again."""
        for op in self._side_ops():
            op.tracker.lift(self.join.current)  # type: ignore[union-attr]  (sides only where a join is)

    def _rows_of(self, data: Any, stage: Stage) -> Any:
        """The rows of the stream ``stage`` reads (each row of a micro-batch of several streams says which)."""
        from pyspark.sql import functions as F

        if data is None or len(self.shape.streams) == 1:
            return data
        rows = data.where(F.col(SOURCE_COLUMN) == stage.stream_index)
        columns = self.replay_columns.get(stage.stream_index)
        if columns is not None:  # replayed side by side: the other tables' columns are NULL here
            return rows.select(*[F.col(f"`{c}`") for c in columns])
        return rows.drop(SOURCE_COLUMN)

    def _panes_of(self, spark: Any, upstream: Stage, batch: int | None) -> Any:
        """The panes ``upstream`` wrote in its micro-batch ``batch`` (None: none), as its downstream reads them."""
        if batch is None:
            return None
        out = self.outputs[upstream.index]
        path = out.batch_path(batch)
        if not storage.exists(path):
            return None
        columns = [f.name for f in out.schema.fields if f.name not in (*PANES, "micro_batch")]
        return spark.read.schema(out.schema).parquet(path).select(*[f"`{c}`" for c in columns])

    def _forwarded(self, upstream: Stage) -> int:
        """The watermark an upstream stage hands on: its own minus its allowed lateness (its windows' panes are
        final only then, and only final panes feed the outer windows)."""
        watermark = self.ops[upstream.index].in_force
        return MAX_TIME if watermark >= MAX_TIME else watermark - upstream.lateness

    def _next_forward(self, upstream: Stage) -> int:
        watermark = self.ops[upstream.index].tracker.current
        return MAX_TIME if watermark >= MAX_TIME else watermark - upstream.lateness

    # -- micro-batches without data ------------------------------------------------------------------
    def wants_micro_batch(self) -> bool:
        """Whether the next micro-batch has something to do: a timer due in a stage, a watermark to hand on."""
        for stage, op in zip(self.shape.stages, self.ops, strict=True):
            if op.wants_micro_batch():
                return True
            if stage.upstream is not None and self._next_forward(stage.upstream) > op.tracker.current:
                return True
        if self.join is not None:
            return self.join.wants_micro_batch(combined([(op.tracker.current, op.tracker.all_idle(
                op.current_processing_time)) for op in self._side_ops()]))
        return False

    def _ask_for_next_batch(self, batch: int | None) -> None:
        """A processing-time timer's micro-batch, or an idle deadline's (the steps due now ran: ``settle``)."""
        if self.ticks is None or batch is None:
            return
        wanted = int(self.ticks.read().get("wanted") or 0)
        if self.wants_micro_batch():
            wanted = max(wanted, batch + 1)
        self.ticks.request(wanted, wake_at=self.next_wake(), wake_tick=max(wanted, batch + 1))

    def next_wake(self) -> int | None:
        wakes = [w for w in (op.next_wake() for op in self.ops) if w is not None]
        wakes += self._sides_idle_from()
        return min(wakes) if wakes else None

    def _sides_idle_from(self) -> list[int]:
        """When a side of the window join becomes idle while the join keeps panes that wait for it: the join goes
        on without that side then (``_lift_sides``), in the micro-batch a live run asks for then, which replay
        runs (``idle_wake``)."""
        if self.join is None or not any(self.join.retained):
            return []
        moments = [(op.tracker.idle_from(), op.current_processing_time) for op in self._side_ops()]
        return [at for at, now in moments if at is not None and at > now]

    def idle_wake(self) -> int | None:
        """The earliest moment a stage's idle stream (WITH IDLE TIMEOUT) reaches one of its window timers
        (``MicroBatchOperator.idle_wake``; None: none): the tick a live run asks for then (``next_wake``), which
        replay runs as a step without rows, then settles, as the live micro-batch of that tick does."""
        wakes = [w for w in (op.idle_wake() for op in self.ops) if w is not None]
        wakes += self._sides_idle_from()
        return min(wakes) if wakes else None

    def wake_after_restart(self) -> None:
        if self.ticks is not None and (self.open_windows or self.wants_micro_batch()):
            wanted = int(self.ticks.read().get("wanted") or 0)
            self.ticks.request(wanted, wake_at=self.next_wake(), wake_tick=wanted + 1)

    def show_committed(self) -> None:
        for op in self.ops:
            op.show_committed()
        if self.join is not None:
            self.sink.register(self.spark)

    # -- metrics --------------------------------------------------------------------------------------
    @property
    def counters(self) -> dict[str, int]:
        return self._counters({id(op): op.counters for op in [*self.ops, self.join] if op is not None})

    def _counters(self, of: dict[int, dict[str, int]]) -> dict[str, int]:
        """The query's counters from each stage's and the join's (``of``: by ``id`` of the part)."""
        readers = {stage.stream_index: op for stage, op in zip(self.shape.stages, self.ops, strict=True)
                   if stage.upstream is None}  # one per stream: two stages may read the same stream
        last = of[id(self.join if self.join is not None else self.ops[-1])]
        return {"rows_in": sum(of[id(op)]["rows_in"] for op in readers.values()),
                "late_rows_dropped": sum(of[id(op)]["late_rows_dropped"] for op in self.ops),
                "panes": last["panes"], "micro_batches": max(of[id(op)]["micro_batches"] for op in self.ops)}

    @property
    def watermark(self) -> int:
        return self.join.current if self.join is not None else self.ops[-1].watermark

    @property
    def committed_counters(self) -> dict[str, int]:
        """The counters as the stages and the join last committed them (what the status shows)."""
        return self._counters({id(op): op.committed_counters for op in [*self.ops, self.join] if op is not None})

    @property
    def committed_watermark(self) -> int:
        return (self.join if self.join is not None else self.ops[-1]).committed_watermark

    @property
    def next_batch(self) -> int:
        return self.ops[0].next_batch

    @property
    def state_rows(self) -> int:
        return sum(op.state_rows for op in self.ops) + (self.join.state_rows if self.join is not None else 0)

    @property
    def open_windows(self) -> int:
        return sum(op.open_windows for op in self.ops) + (self.join.open_windows if self.join is not None else 0)


def _ran(part: Any, source_batch: int | None, source_step: int) -> bool:
    """Whether ``part`` (a stage, the join) ran step ``source_step`` of Spark's micro-batch ``source_batch``
    before a crash (replay's steps have no Spark micro-batch: never)."""
    return source_batch is not None and (source_batch, source_step) <= _position(part)


def _position(part: Any) -> tuple[int, int]:
    """The last step ``part`` ran: (Spark's micro-batch, its step in it)."""
    return part.last_source_batch, part.last_source_step
