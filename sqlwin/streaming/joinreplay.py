"""Planned replay of a window join: the stepped replay's panes, with the Spark work done once per side and once
for the join instead of in every micro-batch.

A stepped replay of a window join runs every micro-batch through Spark: each side's stage assigns, stores and
fires, writes its panes, and the join reads them back to find the windows to join. But what the join decides
(which windows it joins in which micro-batch, with which pane, over which of each side's outputs) follows from
which windows each side fired when, not from the rows:

- each side is a planned replay of its stage (``PlannedStage``: the table assigned and aggregated once, the
  stage's own operator stepped on the counts), numbered as the sides are read side by side;
- the join (``PlannedJoin``) is the window join's own ``JoinStage``, stepped in the same micro-batches, told
  by each side which windows its micro-batches fired (a side whose every pane writes rows: a window
  aggregation or window TVF that is its own statement, without HAVING), and recording what it would join;
- at the end each side's panes are computed by one Spark job, and each join micro-batch's statement runs over
  the sides' panes it kept then, as the live join reads them.
"""

from __future__ import annotations

from typing import Any

from sqlwin.streaming.partitioned import NotPartitionable
from sqlwin.streaming.plannedreplay import PlannedReplay
from sqlwin.streaming.replaycut import BATCH, CLOCK, Cut, drive_stages, side_by_side
from sqlwin.streaming.shape import top_select
from sqlwin.streaming.sinks import BatchSink, union_of
from sqlwin.streaming.sources import SOURCE_COLUMN
from sqlwin.streaming.staged import StagedOperator
from sqlwin.streaming.stages import Stage, StagedShape, by_micro_batch
from sqlwin.streaming.windowjoin import JoinStage


class PlannedStage(PlannedReplay):
    """A side of a planned window join: planned replay of its stage, which forwards its watermark."""

    forwards_watermark = True
    TRACK_WINDOWS = True
    shift = (0, 0)  # what its windows' bounds move by to be the join's (``Stage.shift``)

    def rows_for_every_pane(self) -> bool:
        """Whether every pane it fires writes output rows (so a micro-batch that fired panes wrote some): its
        statement is the window query itself, without HAVING: an aggregation's pane is one row, a window TVF's
        pane its window's rows (a window exists once a row came, and a join's side accumulates)."""
        carrier = self.shape.carrier
        return carrier is top_select(self.shape.query.node) and carrier.args.get("having") is None

    def fired_windows(self, batch: int) -> list[tuple[int, int]]:
        """The join's windows its micro-batch ``batch`` fired (its own, moved by ``shift``)."""
        start, end = self.shift
        return [(ws + start, we + end) for ws, we in self.fired.windows.get(batch, [])]


BY = "__sqlwin_jbatch"  # the join's micro-batch in the frames that hold all of them


class PlannedJoin(JoinStage):
    """The window join stepped on what its sides fired: it records, per micro-batch that joins windows, those
    windows (with their panes) and the side outputs it keeps; ``panes`` computes them at the end."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.emitted: list[tuple[int, list[tuple], list[list[int]]]] = []
        self.kept: Any = None  # (join micro-batch, side, side output) of the views being made, if all at once
        self.sides: list[PlannedStage] = []  # set by the staged replay once its sides are made
        super().__init__(*args, **kwargs)

    def _side_batch(self, spark: Any, side: int, n: int) -> tuple[int, list[tuple[int, int]]]:
        """(panes fired, their windows): some rows where panes fired (the join counts them only as state)."""
        windows = self.sides[side].fired_windows(n)
        return len(windows), sorted(set(windows))

    def _emit(self, spark: Any, windows: list[tuple], batch: int) -> None:
        if windows:
            self.emitted.append((batch, windows, [sorted(kept) for kept in self.retained]))

    def _forget(self, side: int, n: int) -> None:
        return None  # nothing was written

    def _commit(self, batch: int) -> None:
        self.next_batch = batch + 1

    def panes(self, spark: Any, side_panes: list[Any]) -> Any:
        """Every join micro-batch's panes: its statement over the side panes it kept (``side_panes``: each side's,
        with the side's ``micro_batch``), as ``JoinStage._views`` reads them from the sides' outputs, all in one
        query (``stages.by_micro_batch``), or one by one where the statement cannot be partitioned by them."""
        from pyspark.sql import functions as F

        self.side_panes = side_panes
        try:
            statement = by_micro_batch(self.join).sql(dialect="spark")
        except NotPartitionable:  # a set operation over the join: each micro-batch on its own
            statement = None
        if statement is None:
            if not self.emitted:  # no micro-batch joined a window: the statement over none, for its columns
                return self._one(spark, (None, [], [[] for _ in self.retained])).localCheckpoint()
            return union_of(spark, [self._one(spark, emitted).localCheckpoint() for emitted in self.emitted])
        self._views_of(spark, self.emitted)
        result = spark.sql(statement)
        # last, as the sink adds it (a ``*`` above the join passes it on mid-row)
        return result.select(*[F.col(f"`{c}`") for c in result.columns if c != "micro_batch"], "micro_batch") \
            .localCheckpoint()

    def _views_of(self, spark: Any, emitted: list[tuple[int, list[tuple], list[list[int]]]]) -> None:
        """The sides' views of the join micro-batches ``emitted`` (their windows and kept side outputs)."""
        from sqlwin.streaming.windowjoin import PANES_SCHEMA

        self.kept = spark.createDataFrame([(b, i, n) for b, _, kept in emitted for i, ns in enumerate(kept)
                                           for n in ns], f"{BY} int, __side int, __n int")
        windows = spark.createDataFrame([(b, *w) for b, windows, _ in emitted for w in windows],
                                        f"{BY} int, {PANES_SCHEMA}")
        self._views(spark, windows, by=BY)

    def _one(self, spark: Any, emitted: tuple[int | None, list[tuple], list[list[int]]]) -> Any:
        """One join micro-batch's panes: the statement over its views, as the live join's, with its number."""
        from pyspark.sql import functions as F

        from sqlwin.streaming.windowjoin import PANES_SCHEMA

        batch, windows, kept = emitted
        self.kept = None
        self.retained = [dict.fromkeys(k, 0) for k in kept]
        self._views(spark, spark.createDataFrame(windows, PANES_SCHEMA))
        part = spark.sql(self.sql)
        return part.select(*[F.col(f"`{c}`") for c in part.columns], F.lit(batch).cast("int").alias("micro_batch"))

    def _side_rows(self, spark: Any, side: int, kept: list[int]) -> Any:
        """A side's panes of the outputs ``kept`` (one join micro-batch's), or of each join micro-batch's kept
        outputs with its number (``BY``), where ``_views_of`` set them."""
        from pyspark.sql import functions as F

        rows = self.side_panes[side]
        if self.kept is None:
            return rows.where(F.col("micro_batch").isin(kept)).withColumnRenamed("micro_batch", "__jb")
        pairs = self.kept.where(F.col("__side") == side)
        rows = rows.join(F.broadcast(pairs), rows["micro_batch"] == pairs["__n"])
        return rows.drop("__side", "__n").withColumnRenamed("micro_batch", "__jb")


class PlannedStagedReplay(StagedOperator):
    """The staged operator of a window join with planned sides and a planned join (see the module)."""

    JOIN = PlannedJoin

    def __init__(self, spark: Any, shape: StagedShape, location: str, sink: BatchSink, late_sink: BatchSink | None,
                 tag: str):
        super().__init__(spark, shape, location, sink, late_sink, tag)
        self.join.sides = [self.ops[s.stage.index] for s in shape.join.sides]

    def _stage_operator(self, stage: Stage, location: str, out: BatchSink, late_sink: BatchSink | None,
                        tag: str) -> PlannedStage:
        side = PlannedStage(self.spark, stage.shape, location, out, late_sink, tag)
        side.shift = stage.shift
        return side

    def _rows_of(self, data: Any, stage: Stage) -> Any:
        return data  # a micro-batch's number: each side looks its rows up in its own summary

    @staticmethod
    def applies(shape: StagedShape) -> bool:
        """A window join of sides that each read a stream (no cascade feeds one)."""
        return shape.join is not None and all(stage.upstream is None for stage in shape.stages)

    def plannable(self) -> bool:
        """Each side plannable (its windows do not move) and rows for every pane; the cuts made."""
        spark, shape = self.spark, self.shape
        if not all(op.rows_for_every_pane() for op in self.ops):
            return False
        if len(shape.streams) > 1:
            numbered, self.plan = side_by_side(spark, shape.streams)
            cuts = []
            for stage in shape.stages:
                columns = spark.table(shape.streams[stage.stream_index].name).columns
                clock = [CLOCK] if getattr(stage.shape.stream, "processing_time_by", None) is not None else []
                rows = numbered.where(numbered[SOURCE_COLUMN] == stage.stream_index).select(
                    *[f"`{c}`" for c in columns], BATCH, *clock)
                cuts.append(Cut.of_numbered(spark, stage.shape, rows))
        else:
            cut = Cut(spark, shape.stages[0].shape)
            cuts, self.plan = [cut] * len(shape.stages), None
        self.cuts = cuts
        return all(op.plannable(cut) for op, cut in zip(self.ops, cuts, strict=True))

    def run(self, has_clock: bool) -> tuple[Any, Any]:
        plans = [op.prepare(cut) for op, cut in zip(self.ops, self.cuts, strict=True)]
        plan = self.plan if self.plan is not None else plans[0]
        drive_stages(self, self.spark, plan, has_clock, lambda entry: entry[BATCH])
        side_panes = [op.finish()[0] for op in self.ops]
        late = next((op._late_rows() for op in self.ops if op.late_sink is not None), None)
        return self.join.panes(self.spark, side_panes), late
