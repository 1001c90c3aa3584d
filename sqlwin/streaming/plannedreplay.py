"""Planned replay: the micro-batch operator over a table whose rows Spark assigned and aggregated once
(``sqlwin.streaming.replay`` says when it runs; ``sqlwin.streaming.countreplay`` does the same for count
windows)."""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlglot import exp

from sqlwin.core.columnar import KEY, FiredPanes
from sqlwin.core.panes import DROP_CLOSED, DROP_LATE, MAX_TIME, MIN_TIME, FiredPaneList, Pane, WindowKey
from sqlwin.diagnostics import unlogged_spark_errors
from sqlwin.dialect.nodes import TableArg
from sqlwin.plan.windows import Column
from sqlwin.streaming import storage
from sqlwin.streaming.assigner import WindowAssigner
from sqlwin.streaming.engines import ColumnarEngine, Fired
from sqlwin.streaming.operator import MicroBatchOperator
from sqlwin.streaming.outputs import FIRED_SCHEMA, fired_table
from sqlwin.streaming.panequery import PaneQuery
from sqlwin.streaming.partitioned import NotPartitionable
from sqlwin.streaming.replaycut import BATCH, CLOCK, Cut, drive
from sqlwin.streaming.shape import StreamingShape, find_carrier
from sqlwin.streaming.sinks import union_of
from sqlwin.streaming.timewindows import TimeWindowAssigner


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
    TRACK_WINDOWS = False  # whether the fired log keeps each micro-batch's windows (a window join's side does)
    source_batch = -1  # the table micro-batch being stepped (none yet: a table without rows has none)

    def plannable(self, cut: Cut) -> bool:
        from pyspark.errors import AnalysisException

        if not isinstance(self.assigner, TimeWindowAssigner) or self.shape.query.evict is not None:
            return False  # windows that move, or whose rows wait for the watermark to be numbered
        self.cut = cut
        cut.rows.drop(CLOCK).createOrReplaceTempView(self.views.batch_of(0))
        try:
            with unlogged_spark_errors():
                self.assigned = self.spark.sql(self._assign_sql_with_label(cut))
        except AnalysisException as err:
            if cut.label not in str(err):
                raise
            return False  # a subquery in the TVF the label could not be carried through (it combines rows)
        return cut.label in self.assigned.columns  # else a subquery in the TVF drops it: step batch by batch

    def _assign_sql_with_label(self, cut: Cut) -> str:
        """The assignment of the operator, with each row's micro-batch label carried through the window TVF."""
        if self.shape.window is None or self.shape.window.relation.columns is None:
            return self.query.assign_sql  # ``*`` over the rows: the label passes through as it is
        label_type = cut.rows.schema[cut.label].dataType.simpleString()
        return PaneQuery(with_label(self.shape, cut.label, label_type), self.spark, self.views).assign_sql

    # -- the Spark work, up front -------------------------------------------------------------
    def run(self, cut: Cut, has_clock: bool) -> tuple[Any, Any]:
        plan = self.prepare(cut)
        drive(self, self.spark, plan, has_clock, lambda entry: entry[BATCH])
        return self.finish()

    def finish(self) -> tuple[Any, Any]:
        """After the steps: (every fired pane, LATE ROWS TO), each by one Spark job."""
        return self._panes(), self._late_rows()

    def prepare(self, cut: Cut) -> list:
        """The Spark work up front (the stored groups and their counts; the pane engine chosen); returns the
        plan (per micro-batch of the table: its ``BATCH``, statistics and clock)."""
        import pandas as pd

        self.stored, plan, counts = self._stored_groups(cut)
        self.summary = {r[BATCH]: (int(r["n"]), r["max_ts"]) for r in plan}
        groups = self._counts(cut, counts)
        self.fired = FiredLog(windows=self.TRACK_WINDOWS)
        self.drops: list[pd.DataFrame] = []
        columnar = ColumnarEngine.of(self.driver)
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
        return plan

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
            # kept by the job that collects the ranks, which computes all of it (no job of its own)
            scanned = grouped.unionByName(cut.summary().withColumn("__summary", F.lit(True)),
                                          allowMissingColumns=True).localCheckpoint(eager=False)
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
        count, max_ts = self.summary.get(data, (0, None))  # none: a side of a join whose stream has no rows in it
        return count, [max_ts]

    def _token(self, batch: int) -> int:
        return self.source_batch

    def _emit(self, spark: Any, fired: Fired, batch: int) -> None:
        self.fired.add(fired, self.source_batch, batch)

    def _collect_garbage(self) -> None:
        return None

    def _commit(self, batch: int) -> None:
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
        return union_of(spark, [panes_of(table.slice(lo, hi - lo), str(n), batches[lo]).localCheckpoint()
                                for n, (lo, hi) in enumerate(zip(starts, [*starts[1:], len(table)], strict=True))])

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
        return self._as_late_rows(rows, bounds, F.col("__wm"), F.col("reason"))

    def _as_late_rows(self, rows: Any, bounds: list[Any], watermark: Any, reason: Any) -> Any:
        """``rows`` (the relation's columns and ``micro_batch``) as LATE ROWS TO holds them: with the window's
        ``bounds``, the watermark then (micros; NULL before any and at the end of input) and the reason."""
        from pyspark.sql import functions as F

        mark = F.when((watermark > MIN_TIME) & (watermark < MAX_TIME), F.timestamp_micros(watermark))
        late = rows.select(*[F.col(f"`{c}`") for c in self.relation_columns], *bounds, mark.alias("watermark"),
                           reason.alias("reason"), "micro_batch")
        return late.select(*[F.col(f"`{f.name}`").cast(f.dataType) for f in self.late_sink.schema.fields])


def with_label(shape: StreamingShape, label: str, label_type: str) -> StreamingShape:
    """``shape`` with the micro-batch ``label`` column carried through its window TVF: added to the TVF's
    relation (which lists the stream's columns), and to each SELECT of a subquery in the TVF that reads the
    stream and names its columns (a join with a table) where that can be done (``carry_label``)."""
    spec = shape.window
    relation = spec.relation
    if relation.columns is not None:
        relation = dataclasses.replace(relation, columns=(*relation.columns, Column(label, label_type)))
    labelled = dataclasses.replace(shape, window=dataclasses.replace(spec, relation=relation))
    node = shape.query.node.copy()
    data = find_carrier(node).args["from_"].this.find(TableArg)
    if data is not None and isinstance(data.this, exp.Subquery):
        streams = {st.name.lower() for st in shape.streams or [shape.stream]}
        if carry_label(data.this, streams, label):
            labelled = dataclasses.replace(labelled, query=dataclasses.replace(shape.query, node=node))
    return labelled


def carry_label(node: exp.Expr, streams: set[str], label: str) -> bool:
    """Add the micro-batch ``label`` column to every SELECT from a stream up to ``node`` (a subquery in a window
    TVF, e.g. the stream joined with a table) that names its columns; False (nothing to rely on) where a SELECT
    on the way combines rows (GROUP BY, DISTINCT, an aggregate or window function, a set operation) or reads
    no stream or two, since the label must stay the one of the row's own stream row."""
    if isinstance(node, exp.Subquery):
        return carry_label(node.this, streams, label)
    if not isinstance(node, exp.Select) or node.args.get("group") or node.args.get("distinct") or \
            node.find(exp.AggFunc, exp.Window) is not None:
        return False
    from_ = node.args.get("from_")
    sources = ([from_.this] if from_ is not None else []) + [j.this for j in node.args.get("joins") or []]
    reading = [src for src in sources
               if (isinstance(src, exp.Table) and src.name.lower() in streams)
               or (isinstance(src, exp.Subquery) and any(t.name.lower() in streams for t in src.find_all(exp.Table)))]
    if len(reading) != 1:
        return False
    source = reading[0]
    if isinstance(source, exp.Subquery) and (not source.alias or not carry_label(source, streams, label)):
        return False
    qualifier = source.alias_or_name
    passes = any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)
                                              and e.table in ("", qualifier)) for e in node.expressions)
    if not passes:
        node.select(exp.column(label, table=qualifier), copy=False)
    return True


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

    def __init__(self, windows: bool = False) -> None:
        self.panes: list[tuple[WindowKey, Pane, int]] = []
        self.frames: list[Any] = []
        self.ranges = False
        # per micro-batch that fired, the (start, end) of its panes' windows (a planned window join asks)
        self.windows: dict[int, list[tuple[int, int]]] | None = {} if windows else None

    def add(self, fired: Fired, token: int, batch: int) -> None:
        if isinstance(fired, FiredPanes):
            self.ranges = True
            if len(fired):
                self.frames.append(fired.frame.assign(hi=token, micro_batch=batch))
                if self.windows is not None:
                    frame = fired.frame
                    self.windows[batch] = list(zip(frame["start"].tolist(), frame["end"].tolist(), strict=True))
        else:
            self.panes.extend((window, pane, batch) for window, pane in fired)
            if self.windows is not None and len(fired):
                self.windows[batch] = [(window[1], window[2]) for window, _ in fired]

    def add_frame(self, frame: Any) -> None:
        """Panes already as the columnar engine's frame, with ``hi`` and ``micro_batch`` (in firing order)."""
        self.ranges = True
        self.frames.append(frame)

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
