"""Planned replay of SESSION windows: the panes a stepped replay gives, with the table's rows read by one Spark job.

A streaming SESSION window (``sqlwin.streaming.sessions``) sessionizes each micro-batch's rows in Spark and
merges those micro-batch sessions with the open ones in Python, so a stepped replay runs Spark jobs in every
micro-batch. Where the state is one row of partial aggregates per micro-batch session (``keeps_partials``: the
aggregates split and the trigger never finishes, so no session closes before it expires), every Spark step of
a micro-batch follows from the watermark in force when it arrives, and that depends on the earlier
micro-batches' largest event times alone (no idleness, no processing-time watermark):

- the watermark in force at each table micro-batch comes from the operator's own steps over the
  per-micro-batch summary (``WatermarkRecorder``);
- one Spark job drops each row late by ``SessionAssigner``'s rule at its micro-batch's watermark, and
  sessionizes the others per key *and micro-batch* (the micro-batch number is one more partition column of
  the session: a micro-batch's sessions are its own, as the stepped operator computes them);
- the operator then steps through the micro-batches in Python on those sessions alone: ``SessionAssigner``'s
  own merge, the per-window pane driver;
- every fired pane is computed by one job at the end (``PlannedReplay._panes``: a session holds the
  micro-batch sessions of its key within its bounds, in the micro-batches its pane lists).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlglot import exp

from sqlwin.core.panes import DROP_LATE, MIN_TIME
from sqlwin.diagnostics import unlogged_spark_errors
from sqlwin.streaming import trace
from sqlwin.streaming.panequery import PaneQuery
from sqlwin.streaming.plannedreplay import FiredLog, PlannedReplay, with_label
from sqlwin.streaming.replaycut import BATCH, CLOCK, Cut, drive
from sqlwin.streaming.sessions import SPAN_COLUMNS, SessionAssigner

WATERMARK = "__sqlwin_wm"  # the watermark in force when a row's micro-batch arrives
LATE = "__sqlwin_late"


class PlannedSessionReplay(PlannedReplay):
    """SESSION windows whose state is partial aggregates, replayed from one sessionizing of the table's rows."""

    def plannable(self, cut: Cut) -> bool:
        from pyspark.errors import AnalysisException
        from pyspark.sql import functions as F

        stream = self.shape.stream
        if type(self.assigner) is not SessionAssigner or self.query.decomposition is None:
            return False  # sessions cut by MAX_DURATION, or that may close: their rows move or are dropped later
        if len(self.streams) > 1 or self.shape.query.evict is not None or self.shape.processing_time or \
                stream.idle_timeout is not None or (stream.watermark is not None and stream.watermark.lag is not None):
            return False  # a watermark that moves without rows (idleness, the clock)
        self.cut = cut
        self.sessions = self.assigner
        self.sessions_sql = self._sessions_sql()
        rows = cut.rows.drop(CLOCK)
        if BATCH not in rows.columns:
            rows = rows.withColumn(BATCH, F.lit(0).cast("bigint"))
        rows.createOrReplaceTempView(self.views.batch_of(0))
        try:
            with unlogged_spark_errors():
                columns = self.spark.sql(self.sessions_sql).columns
        except AnalysisException as err:
            if BATCH not in str(err):
                raise
            return False  # a subquery in the TVF combines rows: the micro-batch number cannot pass it
        return f"__k{len(self.shape.keys)}" in columns

    def _sessions_sql(self) -> str:
        """Each micro-batch's own sessions as partial rows (``PaneQuery.session_partials_sql``), the micro-batch
        number ``BATCH`` one more key and one more partition column of the SESSION: its ``__k<n>``."""
        labelled = with_label(self.shape, BATCH, "bigint")
        window = dataclasses.replace(labelled.window, partition_by=(*labelled.window.partition_by, BATCH))
        labelled = dataclasses.replace(labelled, window=window, keys=[*labelled.keys, exp.column(BATCH)])
        return PaneQuery(labelled, self.spark, self.views).session_partials_sql(self.query.decomposition)

    # -- the Spark work -----------------------------------------------------------------------
    def run(self, cut: Cut, has_clock: bool) -> tuple[Any, Any]:
        from pyspark.sql import functions as F

        self.ranks, plan = cut.ranks(cut.summary())
        self.summary = {r[BATCH]: (int(r["n"]), r["max_ts"]) for r in plan}
        in_force = self._watermarks(plan, has_clock)
        self.marks = self.spark.createDataFrame(sorted(in_force.items()), f"{BATCH} bigint, {WATERMARK} bigint")
        rows = cut.numbered_by(cut.rows.drop(CLOCK), self.ranks).join(F.broadcast(self.marks), BATCH) \
            .withColumn(LATE, self._is_late())
        rows.where(~F.col(LATE)).createOrReplaceTempView(self.views.batch_of(0))
        nkeys = len(self.shape.keys)
        sessions = self.spark.sql(self.sessions_sql).withColumn("__key", F.expr(self.query.key_json_sql)) \
            .withColumn(BATCH, F.col(f"__k{nkeys}").cast("bigint")).drop(f"__k{nkeys}") \
            .localCheckpoint(eager=False)  # read twice, small: the spans (whose job keeps it), the panes' state
        spans = sessions.select("__key", "__ws", "__we", F.col("__n").cast("bigint").alias("__n"), BATCH) \
            .toArrow().to_pandas()
        spans["__key"] = spans["__key"].astype(object)
        by_batch = {int(b): g[SPAN_COLUMNS] for b, g in spans.groupby(BATCH, sort=False)}
        by_batch[-1] = spans[SPAN_COLUMNS].iloc[:0]  # (a micro-batch without sessions)
        self.stored = sessions.withColumn("__mb", F.col(BATCH)).withColumn("__present", F.lit(True)) \
            .select(*self.rows_schema.fieldNames())
        self.fired = FiredLog()
        self.drops = []
        self.assigner = PlannedSessions(self, by_batch)
        drive(self, self.spark, plan, has_clock, lambda entry: entry[BATCH])
        return self._panes(), self._session_late_rows(rows)

    def _watermarks(self, plan: list, has_clock: bool) -> dict[int, int]:
        """The watermark in force at each table micro-batch with rows, from the operator's own steps over the
        summary (no window is assigned: nothing fires); its watermark and numbers are then as new."""
        recorder = self.assigner = WatermarkRecorder(self)
        self.fired = FiredLog()
        with trace.unrecorded():
            drive(self, self.spark, plan, has_clock, lambda entry: entry[BATCH])
        self.tracker = self._watermark()
        self.in_force = self.tracker.current
        self.next_batch = 0
        self.last_source_batch = -1
        self.current_processing_time = 0
        self.counters = dict.fromkeys(self.counters, 0)
        assert not len(self.panes)  # nothing was assigned: the pane engine holds no window
        return recorder.marks

    def _is_late(self) -> Any:
        """``SessionAssigner``'s rule, at each row's watermark: its own span ``[ts, ts + gap)`` is past its
        cleanup time (never before a watermark; rows in no session, NULL or non-positive gap, never late)."""
        from pyspark.sql import functions as F

        lateness = self.shape.lateness
        threshold = F.when(F.col(WATERMARK) > F.lit(MIN_TIME + lateness), F.col(WATERMARK) - F.lit(lateness))
        return self.sessions.is_late(self.spark, threshold)

    def _session_late_rows(self, rows: Any) -> Any:
        """LATE ROWS TO: the late rows, each with its own span as the window, in the micro-batch that dropped it
        (for a SESSION over a subquery, its rows for the late stream rows)."""
        from pyspark.sql import functions as F

        if self.late_sink is None:
            return None
        numbers = self.spark.createDataFrame(sorted(self.assigner.numbers.items()), f"{BATCH} bigint, micro_batch int")
        late = rows.where(F.col(LATE))
        ts = F.col(f"`{self.shape.window.time_col}`")
        end = F.unix_micros(ts) + self.sessions.gap(self.spark)
        if self.sessions.reads_a_subquery():  # the micro-batch carried through it, then its watermark
            labelled = PaneQuery(with_label(self.shape, BATCH, "bigint"), self.spark, self.views)
            late, ts, end = self.sessions.input_rows(late, labelled, f"{self.views.batch}_late")
            late = late.join(F.broadcast(self.marks), BATCH)
        late = late.join(F.broadcast(numbers), BATCH)
        return self._as_late_rows(late, [ts.alias("window_start"), F.timestamp_micros(end).alias("window_end")],
                                  F.col(WATERMARK), F.lit(DROP_LATE))


class WatermarkRecorder(SessionAssigner):
    """The assigner of the recording pass: the watermark in force at each table micro-batch with rows."""

    def __init__(self, replay: PlannedSessionReplay):
        super().__init__(replay)
        self.replay = replay
        self.marks: dict[int, int] = {}

    def assign_rows(self, spark: Any, batch: int, watermark: int) -> dict:
        self.marks[self.replay.source_batch] = watermark
        return {}


class PlannedSessions(SessionAssigner):
    """A table micro-batch's own sessions, from the one sessionizing, merged into the open ones as the stepped
    operator merges them; records the operator's number of each micro-batch (its late rows carry it)."""

    def __init__(self, replay: PlannedSessionReplay, spans: dict[int, Any]):
        super().__init__(replay)
        self.replay = replay
        self.spans = spans  # per table micro-batch: its sessions (SPAN_COLUMNS; -1: none)
        self.numbers: dict[int, int] = {}

    def assign_rows(self, spark: Any, batch: int, watermark: int) -> dict:
        replay = self.replay
        self.numbers[replay.source_batch] = batch
        return self.accept(self.spans.get(replay.source_batch, self.spans[-1]), watermark)
