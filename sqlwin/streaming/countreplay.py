"""Planned replay of count windows: the panes a stepped replay gives, from one Spark pass over the table.

A streaming count window (``sqlwin.streaming.countwindows``) numbers a row once the watermark passes it, so a
stepped replay runs Spark jobs in every micro-batch. Where each window fires once, when complete (the default
emission, EMIT FINAL, AFTER WATERMARK without EARLY: the only pane of a count window, since no late row ever
joins one), every decision of that operator follows from the watermark sequence alone:

- the watermark in force at each micro-batch depends only on each micro-batch's largest event time: the
  operator's own ``step`` runs over the per-micro-batch summary (``StepRecorder`` records each step);
- a row is dropped late when its time is at or behind the watermark in force when it arrives; the others are
  numbered in the batch backend's order (a row numbered later has a later time, so numbering all the kept
  rows at once gives the same numbers), in the first micro-batch whose watermark reaches the row's time;
- a window completes, and fires its one pane, in the micro-batch that numbers its last row;
- a micro-batch without rows takes a number when it numbers a row (the last one, at +infinity, also when it
  drops windows still filling), as the operator's does.

So one Spark job numbers every kept row, assigns it its windows and the micro-batch that numbers it (an
expression over the watermark sequence), and aggregates per window; the panes are then computed by one job,
as planned replay does for time windows (``PlannedReplay._panes``).
"""

from __future__ import annotations

from typing import Any

from sqlwin.core.panes import DROP_LATE, MAX_TIME, PaneDriver
from sqlwin.plan.triggers import AfterWatermark, EmitFinal
from sqlwin.streaming.assigner import WindowAssigner
from sqlwin.streaming.countwindows import GROWING, CountWindowAssigner
from sqlwin.streaming.plannedreplay import FiredLog, PlannedReplay
from sqlwin.streaming.replaycut import BATCH, CLOCK, Cut, drive

STEP = "__sqlwin_step"  # the micro-batch (step of the replay) that numbers a row
WATERMARK = "__sqlwin_wm"  # the watermark in force when a row arrives


class PlannedCountReplay(PlannedReplay):
    """Count windows that fire once, when complete, replayed from one numbering of the table's kept rows."""

    CASE_STEPS = 16  # up to this many watermarks a CASE finds a row's step; beyond it, a binary search

    def plannable(self, cut: Cut) -> bool:
        counting = self.assigner
        if not isinstance(counting, CountWindowAssigner) or counting.form not in GROWING:
            return False  # HOP(..., ROWS m, d) and HOP(d, ROWS n): windows known only once complete
        trigger = self.driver.emit.trigger
        once = isinstance(trigger, EmitFinal) or (isinstance(trigger, AfterWatermark) and trigger.early is None)
        stream = self.shape.stream
        if len(self.shape.streams or [stream]) > 1:
            return False
        if not once or self.shape.query.evict is not None or stream.idle_timeout is not None or \
                (stream.watermark is not None and stream.watermark.lag is not None):
            return False  # early panes; or a watermark that moves without rows (idleness, the clock)
        self.pane = self._only_pane(self.driver)
        if self.pane is None:
            return False
        self.cut = cut
        self.counting = counting
        cut.rows.drop(CLOCK).createOrReplaceTempView(self.views.batch_of(0))
        self.arrivals = self.spark.sql(counting.sql.arrivals(as_json=False))
        return cut.label in self.arrivals.columns  # else a subquery in the TVF drops it: step batch by batch

    @staticmethod
    def _only_pane(driver: PaneDriver) -> tuple[int, str, bool] | None:
        """(pane_index, pane_timing, is_final) of the one pane a window fires when complete, from the pane
        driver itself (rows in two micro-batches while it fills, then complete); None if it fires otherwise."""
        state = driver.new_window(0, MAX_TIME)
        for token, watermark in ((0, 10), (1, 20)):
            if driver.process(state, [token], watermark, 0, count=1).pane is not None:
                return None
        state.end = 30
        pane = driver.process(state, [], MAX_TIME, 0).pane
        return (pane.index, pane.timing.value, pane.is_final) if pane is not None else None

    # -- the Spark work -----------------------------------------------------------------------
    def run(self, cut: Cut, has_clock: bool) -> tuple[Any, Any]:
        from pyspark.sql import functions as F

        self.ranks, plan = cut.ranks(cut.summary())
        self.summary = {r[BATCH]: (int(r["n"]), r["max_ts"]) for r in plan}
        self.fired = FiredLog()
        self.drops = []
        recorder = self.assigner = StepRecorder(self)
        drive(self, self.spark, plan, has_clock, lambda entry: entry[BATCH])  # the operator's own steps
        steps = recorder.steps
        in_force = self.spark.createDataFrame([(b, w) for _, w, b in steps if b is not None],
                                              f"{BATCH} bigint, {WATERMARK} bigint")
        rows = cut.numbered_by(self.arrivals, self.ranks).join(F.broadcast(in_force), BATCH)
        late = F.col("__ts") <= F.col(WATERMARK)
        keyed = self._windows_of(rows.where(~late), steps)
        groups = self._groups(keyed)
        windows, numbering = self._per_window(groups)
        complete = windows["complete"].to_numpy()
        with_rows = windows["kept"].to_numpy() > 0
        self.numbers = _numbers(steps, numbering, filling=bool((~complete & with_rows).any()))
        self._fire(windows[complete & with_rows])
        if self.query.decomposition is not None:  # the groups' partial aggregates are the stored state
            stored = groups.where(F.col("__status").isNull())
        else:  # the rows themselves: numbered again (a second pass costs less than caching every row)
            stored = self.counting.stored_form(keyed.where(F.col("__keep") & F.col("__wk").isNotNull()))
        self.stored = stored.withColumn("__mb", F.lit(0).cast("bigint")).withColumn("__present", F.lit(True)) \
            .select(*self.rows_schema.fieldNames())
        return self._panes(), self._late_rows_of(rows.where(late))

    def _windows_of(self, kept: Any, steps: list[tuple[int, int, int | None]]) -> Any:
        """The kept rows numbered (as the operator numbers them), with their windows (a row of none, between
        hopping windows, once with ``__wk`` NULL: it is numbered all the same), the micro-batch that numbers them
        (``STEP``) and the carrier's columns (``CountWindowSql.keyed``)."""
        from pyspark.sql import functions as F

        spark, sql, view = self.spark, self.counting.sql, self.counting.view
        kept.createOrReplaceTempView(f"{view}_kept")
        spark.sql(sql.numbering(f"{view}_kept", None)).createOrReplaceTempView(f"{view}_numbered")
        windowed = spark.sql(sql.growing_assignment(f"{view}_numbered", outer=True)) \
            .withColumn(STEP, F.expr(step_sql("__ts", steps, self.CASE_STEPS)))
        windowed.createOrReplaceTempView(f"{view}_windowed")
        bounds = {name: self.assigned_schema[name].dataType.simpleString()
                  for name in ("window_start", "window_end", "window_time")}
        internal = [c for c in windowed.columns if c.startswith("__")]
        return spark.sql(sql.keyed(f"{view}_windowed", bounds, internal))

    def _groups(self, keyed: Any) -> Any:
        """The numbered rows per (key, window, step, status) (``__status`` NULL for the rows the windows keep;
        rows of no window or outside the carrier's WHERE are numbered all the same): the row count, first and
        last time and number, and, where the query decomposes, the partial aggregates (the panes' state);
        ``__key`` made per group. Checkpointed: it is read twice and is small (groups, not rows)."""
        from pyspark.sql import functions as F

        present = set(keyed.columns)
        fields = [(F.col(f"`{f.name}`") if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
                  for f in self.assigned_schema.fields if f.name != "__key"]
        status = F.when(F.col("__keep") & F.col("__wk").isNotNull(), F.lit(None)).otherwise(F.lit("out"))
        view = f"{self.counting.view}_groups"
        keyed.select(*fields, "__wk", STEP, "__ts", "__rn", status.cast("string").alias("__status")) \
            .createOrReplaceTempView(view)
        nkeys = len(self.shape.keys)
        named = ", ".join([*(f"'__k{i}', __k{i}" for i in range(nkeys)), "'__w', __wk"])
        key = f"TO_JSON(NAMED_STRUCT({named}))"  # the window's name, as ``CountWindowSql.keyed`` makes it
        measures = ("MIN(__ts) AS __lo", "MAX(__ts) AS __hi", "MAX(__rn) AS __last")
        decomposition = self.query.decomposition
        if decomposition is not None:
            sql = decomposition.partial_sql(view, self.shape.source_alias, nkeys, extra=("__wk", STEP),
                                            key_after=key, measures=measures)
        else:
            group = ", ".join(["__ws", "__we", "__status", *[f"__k{i}" for i in range(nkeys)], "__wk", STEP])
            sql = (f"SELECT {key} AS __key, * FROM (SELECT {group}, COUNT(*) AS __n, {', '.join(measures)} "
                   f"FROM {view} GROUP BY {group})")
        return self.spark.sql(sql).localCheckpoint(eager=False)  # kept by its first reader, ``_per_window``

    def _per_window(self, groups: Any) -> tuple[Any, set[int]]:
        """Per window (through Arrow): its kept rows, first and last time, last number, the step that numbers
        its last row and whether it is complete; and the steps that number some row."""
        import numpy as np

        frame = groups.select("__key", "__wk", STEP, "__status", "__n", "__lo", "__hi", "__last").toArrow() \
            .to_pandas()
        numbering = {int(s) for s in frame[STEP].unique()}
        frame = frame[frame["__wk"].notna().to_numpy()]
        frame = frame.assign(kept=np.where(frame["__status"].isna().to_numpy(), frame["__n"].to_numpy(), 0))
        windows = frame.groupby("__key", sort=False).agg(
            __wk=("__wk", "first"), kept=("kept", "sum"), lo=("__lo", "min"), hi=("__hi", "max"),
            last=("__last", "max"), done=(STEP, "max")).reset_index()
        is_complete = self.counting.sql.is_complete
        windows["complete"] = np.array([is_complete(int(k), int(last) + 1) for k, last in
                                        zip(windows["__wk"].tolist(), windows["last"].tolist(), strict=True)], bool)
        return windows, numbering

    def _fire(self, windows: Any) -> None:
        """Each complete window's one pane, in the micro-batch that numbered its last row, reading all its rows
        (stored as table micro-batch 0: the range [0, 0])."""
        import numpy as np
        import pandas as pd

        from sqlwin.streaming.countsql import MS

        index, timing, final = self.pane
        count = len(windows)
        frame = pd.DataFrame({
            "key": windows["__key"].to_numpy(object), "start": windows["lo"].to_numpy(np.int64),
            "end": windows["hi"].to_numpy(np.int64) + MS, "pane_index": np.full(count, index, np.int32),
            "pane_timing": np.full(count, timing, object), "is_final": np.full(count, final, bool),
            "lo": np.zeros(count, np.int64), "hi": np.zeros(count, np.int64),
            "micro_batch": windows["done"].map(self.numbers).to_numpy(np.int32)})
        self.fired.add_frame(frame.sort_values("micro_batch", kind="stable"))

    def _late_rows_of(self, late: Any) -> Any:
        """LATE ROWS TO: the rows at or behind the watermark in force when they arrived (in no window yet)."""
        from pyspark.sql import functions as F

        if self.late_sink is None:
            return None
        numbers = self.spark.createDataFrame([(b, self.numbers[i]) for i, _, b in self.assigner.steps
                                              if b is not None], f"{BATCH} bigint, micro_batch int")
        bounds = [F.lit(None).alias("window_start"), F.lit(None).alias("window_end")]
        return self._as_late_rows(late.join(F.broadcast(numbers), BATCH), bounds, F.col(WATERMARK), F.lit(DROP_LATE))


def step_sql(ts: str, steps: list[tuple[int, int, int | None]], case_steps: int) -> str:
    """The step that numbers a row at time ``ts`` (``steps``: the replay's (step, watermark in force, table
    micro-batch or None)): the first micro-batch without rows whose watermark reaches it (the watermark never
    goes back), else the last one, at +infinity. A CASE over up to ``case_steps`` watermarks; a binary search
    over an array of them where a replay has more micro-batches."""
    marks: list[tuple[int, int]] = []  # (step, watermark): the first step of each watermark
    for index, watermark, source in steps:
        if source is None and watermark < MAX_TIME and (not marks or watermark > marks[-1][1]):
            marks.append((index, watermark))
    last = steps[-1][0]
    if len(marks) <= case_steps:
        cases = " ".join(f"WHEN {ts} <= {w} THEN {i}" for i, w in marks)
        return f"CASE {cases} ELSE {last} END" if cases else str(last)
    bounds = ", ".join(f"CAST({w} AS BIGINT)" for _, w in marks)
    ids = ", ".join(str(i) for i, _ in [*marks, (last, MAX_TIME)])
    rounds = len(marks).bit_length() + 1
    mid = "CAST((a.lo + a.hi) DIV 2 AS INT)"
    # lo ends as the number of watermarks before ts: the position of the first that reaches it
    return (f"AGGREGATE(SEQUENCE(1, {rounds}), NAMED_STRUCT('lo', 0, 'hi', {len(marks)}), (a, r) -> "
            f"IF(a.lo < a.hi, IF(ELEMENT_AT(ARRAY({bounds}), {mid} + 1) < {ts}, "
            f"NAMED_STRUCT('lo', {mid} + 1, 'hi', a.hi), NAMED_STRUCT('lo', a.lo, 'hi', {mid})), a), "
            f"a -> ELEMENT_AT(ARRAY({ids}), a.lo + 1))")


def _numbers(steps: list[tuple[int, int, int | None]], numbering: set[int], filling: bool) -> dict[int, int]:
    """Step -> micro-batch number: a micro-batch with rows takes one; one without, if it numbers a row (the
    last one, at +infinity, also if it drops windows still filling), as the operator numbers them."""
    numbers: dict[int, int] = {}
    last = steps[-1][0] if steps else None
    for index, _, source in steps:
        if source is not None or index in numbering or (index == last and filling):
            numbers[index] = len(numbers)
    return numbers


class StepRecorder(WindowAssigner):
    """The assigner of the recording pass: each step's (number, watermark in force, table micro-batch or None);
    every step commits (``changed``), so each gets its own number, renumbered as the operator would after."""

    changed = True

    def __init__(self, replay: PlannedCountReplay):
        super().__init__(replay)
        self.replay = replay
        self.steps: list[tuple[int, int, int | None]] = []

    def assign(self, spark: Any, batch: int, watermark: int, with_rows: bool) -> dict:
        self.steps.append((batch, watermark, self.replay.source_batch if with_rows else None))
        return {}
