"""SESSION windows in the custom streaming path: sessions grow and merge as rows arrive (GRAMMAR 1, 4).

Per micro-batch, with ``W`` the watermark in force:

1. A row whose own span ``[ts, ts + gap)`` is past its cleanup time (``W >= ts + gap + lateness``) is
   dropped as late before merging (Beam), with that span as its window in LATE ROWS TO. ``gap`` is the
   row's own with a dynamic gap (rows whose gap is NULL or not positive are in no session, never late).
2. Spark computes the micro-batch's own sessions from the other rows (the batch backend's SESSION plan),
   and Python receives one line per such session: (key, start, end, rows).
3. Per key, those sessions and the open ones of earlier micro-batches merge when they overlap or touch;
   merging windows merge their pane state (``PaneDriver.merge``, Beam's onMerge; a window with new
   bounds numbers its panes from 0). A session that merges into one whose trigger finished is closed:
   its new rows, and the rows the others held, are dropped as ``window closed``.

Stored rows carry their time (``__ts``), not a window: a session of key k holds exactly the stored rows of
k with ``start <= ts < end`` (sessions of a key never overlap), so merges move no rows.

Where every aggregate splits and the trigger never finishes (so no session closes before it expires, and no
stored row is ever dropped again as ``window closed``), the state is one row of partial aggregates per
micro-batch session instead (``keeps_partials``): sessions only grow and merge, so each micro-batch session
lies whole inside one session, which holds exactly the micro-batch sessions of its key within its bounds.
There, for the triggers of the columnar engine with ACCUMULATING panes (or panes only at expiry), the sessions'
pane state is that engine's table (``sqlwin.core.sessionmerge``: the merges as grouped array operations), not a
``PaneDriver`` state per session: in the driver (``SessionColumns``), or in Spark with ``sqlwin.streaming.state``
``executors`` (``keyedsessions``), where a table's sessions stay (``auto`` keeps them in the driver).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlglot import exp

from sqlwin.core.panes import DROP_CLOSED, DROP_LATE, MIN_TIME, PaneDriver
from sqlwin.core.sessionmerge import merge_sessions, merges_sessions
from sqlwin.plan import triggers as plan
from sqlwin.streaming.assigner import Scanner, WindowAssigner
from sqlwin.streaming.context import OperatorContext, PaneEngine
from sqlwin.streaming.engines import ColumnarEngine, SessionColumns, WindowStates
from sqlwin.streaming.fusedscan import FusedScan
from sqlwin.streaming.keyedsessions import KeyedSessions
from sqlwin.streaming.keyedstate import KeyedCounts

SPAN_COLUMNS = ["__key", "__ws", "__we", "__n"]  # a micro-batch's own sessions: key, bounds, rows


class SessionAssigner(WindowAssigner):
    def __init__(self, operator: OperatorContext):
        super().__init__(operator)
        self._partials_sql: str | None = None  # the micro-batch's sessions as partial rows (``scan``)

    def keeps_partials(self) -> bool:
        """Whether partial aggregates per micro-batch session can be the state: a trigger that never finishes
        (REPEATEDLY, NEVER, EMIT FINAL, AFTER WATERMARK with late firings; the default is one), since a session
        merged into a closed one drops the rows it held, which LATE ROWS TO lists one by one."""
        return never_finishes(self.op.driver.emit.trigger)

    def pane_engine(self, driver: PaneDriver, columnar: bool, committed: dict | None) -> PaneEngine:
        """The columnar engine (in the driver) where its merges hold (``sessionmerge.merges_sessions``) over
        partial-aggregate state, unless PaneDriver saved the committed sessions (an earlier version): they go
        on with it."""
        if columnar and self.op.query.decomposition is not None and self.keeps_partials():
            engine = SessionColumns.of(driver)
            if engine is not None and merges_sessions(engine.panes.trigger, driver.accumulating) and \
                    (engine.continues(committed) or KeyedSessions.continues(committed)):
                return self.op.placement.initial(engine, committed, KeyedSessions)  # in Spark with ``executors``
        return WindowStates(driver)

    def scanner(self) -> Scanner | None:
        """``scan`` with partial-aggregate state over one stream."""
        return self.scan if self.op.query.decomposition is not None and len(self.op.streams) == 1 else None

    def _late(self, spark: Any, watermark: int) -> tuple[Any, Any, Any] | None:
        """Beam's rule before merging: a row is late when its own span is past its cleanup time,
        ``ts + gap + lateness <= W``. Returns (is late, the span's end, the row time), or None before any
        watermark."""
        from pyspark.sql import functions as F

        op = self.op
        if watermark - op.shape.lateness <= MIN_TIME:
            return None
        ts = F.col(f"`{op.shape.window.time_col}`")
        return self.is_late(spark, F.lit(watermark - op.shape.lateness)), F.unix_micros(ts) + self.gap(spark), ts

    def is_late(self, spark: Any, threshold: Any) -> Any:
        """The rule as a column: the row's own span ends at or before ``threshold`` (the watermark minus the
        lateness; NULL: no watermark yet); rows in no session (NULL time, NULL or non-positive gap) never late."""
        from pyspark.sql import functions as F

        ts = F.col(f"`{self.op.shape.window.time_col}`")
        gap = self.gap(spark)
        return F.coalesce(ts.isNotNull() & (gap > 0) & (F.unix_micros(ts) + gap <= threshold), F.lit(False))

    def _arrived(self, spark: Any) -> Any:
        """The micro-batch as it arrived, under a view of its own: Spark Connect resolves a DataFrame's view
        names when it runs, not when it is built, and the batch view is narrowed to the rows in time."""
        op = self.op
        arrived = f"{op.views.batch}_arrived"
        spark.table(op.views.batch).createOrReplaceTempView(arrived)
        return spark.table(arrived)

    def _late_rows(self, rows: Any, late: tuple[Any, Any, Any]) -> Any:
        """The late rows as LATE ROWS TO lists them, with their own span as the window."""
        from pyspark.sql import functions as F

        is_late, end, ts = late
        late_rows = rows.where(is_late)
        if self.reads_a_subquery():
            late_rows, ts, end = self.input_rows(late_rows, self.op.query, f"{self.op.views.batch}_late")
        return late_rows.select(*[F.col(f"`{c}`") for c in self.op.relation_columns], ts.alias("window_start"),
                                F.timestamp_micros(end).alias("window_end"), F.lit(DROP_LATE).alias("reason"))

    def reads_a_subquery(self) -> bool:
        """Whether the SESSION's input is a subquery over the stream (a join with a table, a filter), not the
        stream itself."""
        return not isinstance(self.op.shape.window.relation.node, exp.Table)

    def input_rows(self, rows: Any, query: Any, view: str) -> tuple[Any, Any, Any]:
        """The rows of the SESSION's input for some stream ``rows`` (a late row matched by two table rows: two
        rows; one the input filters out: none), and their time and span end, which are the input's."""
        from pyspark.sql import functions as F

        spark = rows.sparkSession
        rows.createOrReplaceTempView(view)
        relation = spark.sql(query.input_sql(view))
        ts = F.col(f"`{self.op.shape.window.time_col}`")
        return relation, ts, F.unix_micros(ts) + self.gap(spark)

    def scan(self, spark: Any, data: Any, batch: int, watermark: int,
             processing_time: int) -> tuple[int, list[int | None], dict]:
        """A data micro-batch in one Spark job, as ``TimeWindowAssigner.scan``: its statistics and late-row count,
        and the partial aggregates of its own sessions (computed from the rows in time); the sessions then merge
        in Python and their partial rows are stored. Late rows are read again only when there are some."""
        from pyspark.sql import functions as F

        op = self.op
        stats = op.input.register(data, processing_time)
        late = self._late(spark, watermark)
        arrived = self._arrived(spark)
        if late is not None:
            stats.append(F.count(F.when(late[0], 1)).alias("__late"))
            arrived.where(~late[0]).createOrReplaceTempView(op.views.batch)
        if self._partials_sql is None:
            self._partials_sql = op.query.session_partials_sql(op.query.decomposition)
        scan = FusedScan(op, spark.sql(self._partials_sql), arrived, stats)
        try:
            count, max_ts = op.input.statistics(scan.summary)
            if not count:
                return 0, max_ts, {}
            groups = scan.groups
            if groups.num_rows:
                scan.store(groups, F.lit(True), batch, groups.num_rows)
            if isinstance(op.panes, KeyedSessions):  # the executors merge them with the stored partial rows
                accepted = KeyedCounts(op.store.rows_path(batch) if groups.num_rows else None, groups.num_rows)
            else:
                accepted = self.accept(groups.select(SPAN_COLUMNS).to_pandas(), watermark)
            late_count = int(scan.summary.get("__late") or 0)
            op.write_late([self._late_rows(arrived, late)] if late is not None and late_count else [], batch,
                          watermark, late_count)
            return count, max_ts, accepted
        finally:
            scan.release()

    def accept(self, spans: Any, watermark: int) -> Any:
        """The micro-batch's own sessions (a frame of ``SPAN_COLUMNS``) merged into the open ones: the new-row
        counts per (merged) session, as the pane engine takes them. With partial-aggregate state
        (``keeps_partials``) no session closes."""
        panes = self.op.panes
        if isinstance(panes, ColumnarEngine):
            frame = spans.set_axis(["key", "start", "end", "n"], axis=1).astype({"key": object})
            return merge_sessions(panes.panes, frame, watermark)
        rows = list(zip(*(spans[c].tolist() for c in SPAN_COLUMNS), strict=True))
        accepted, closed, lost = self._merge(rows, watermark, self.op.current_processing_time)
        assert not closed and not lost  # a trigger that never finishes closes no session (keeps_partials)
        return accepted

    def assign_rows(self, spark: Any, batch: int, watermark: int) -> dict:
        """Row state (or a trigger that may finish): sessions of the micro-batch, merged; rows of sessions
        that joined a closed one, and the rows such sessions held, dropped as ``window closed``."""

        op = self.op
        rows = spark.table(op.views.batch)
        late_parts = []
        late_count = 0
        late = self._late(spark, watermark)
        if late is not None:
            late_count = rows.where(late[0]).count()
            if late_count:
                rows = self._arrived(spark)
                late_parts.append(self._late_rows(rows, late))
                rows.where(~late[0]).createOrReplaceTempView(op.views.batch)
        assigned = spark.sql(op.query.assign_sql).persist()
        try:
            spans = assigned.groupBy("__key", "__ws", "__we").count().collect()
            accepted, closed, lost = self._merge(spans, watermark, op.current_processing_time)
            kept = assigned
            if closed:
                dropped, kept = self._split_closed(spark, assigned, closed)
                late_parts.append(dropped)
            closed_count = sum(n for *_, n in closed.values())
            if lost:
                earlier = self._stored_rows_of(spark, lost).persist()
                closed_count += earlier.count()
                late_parts.append(earlier)
            kept_count = sum(accepted.values())
            if kept_count and op.query.decomposition is None:
                op.rows.write(kept, batch, kept_count)
            elif kept_count:  # one row of partial aggregates per micro-batch session
                op.rows.write(op.partials_of(spark, kept), batch, len(spans) - len(closed))
            op.write_late(late_parts, batch, watermark, late_count + closed_count)
        finally:
            assigned.unpersist()
        return accepted

    def gap(self, spark: Any) -> Any:
        """Each row's gap in microseconds: the static gap, or the dynamic gap expression (GRAMMAR 1) over the
        row, as the batch backend measures it (rows whose gap is NULL or not positive are in no session)."""
        from pyspark.sql import functions as F

        spec = self.op.shape.window
        if isinstance(spec.gap, int):
            return F.lit(spec.gap)
        gap = self.op.query.compiler.gap_us(spec, exp.column(spec.time_col, "__r"))
        return F.expr(gap.transform(_unqualify).sql(dialect="spark"))

    def _merge(self, spans: list, watermark: int, processing_time: int) -> tuple[dict, dict, list]:
        """Merge the micro-batch's sessions ``(key, start, end, rows)`` into the open ones. Returns the new-row
        counts per (merged) window; the micro-batch sessions that joined a closed window, ``(key, start, end) ->
        (closed start, closed end, rows)``; and the rows earlier windows held when they merged into a closed
        one, ``(key, start, end, tokens, closed start, closed end)``."""
        op = self.op
        by_key: dict[str, list] = defaultdict(list)
        for key, start, end, count in spans:
            by_key[key].append((start, end, count))
        open_by_key: dict[str, list] = defaultdict(list)
        for key, start, end in op.windows:
            if key in by_key:
                open_by_key[key].append((start, end))
        accepted: dict = {}
        closed: dict = {}
        lost: list = []
        for key, new in by_key.items():
            for start, end, members in _clusters([(s, e, None) for s, e in open_by_key[key]] + new):
                fresh = [(s, e, n) for s, e, n in members if n is not None]
                old = [(key, s, e) for s, e, n in members if n is None]
                window = (key, start, end)
                states = [op.windows.pop(w) for w in old]
                if old == [window]:
                    state = states[0]
                elif states:
                    state, _ = op.driver.merge(states, start, end, watermark, processing_time)
                    if state.closed:  # Beam ORs the finished bits: the merged window is closed
                        lost += [(key, s.start, s.end, sorted(set(s.pending)), start, end)
                                 for s in states if s.pending and not s.closed]
                else:
                    state = None
                if state is not None:
                    op.windows[window] = state
                if state is not None and state.closed:
                    closed.update({(key, s, e): (start, end, n) for s, e, n in fresh})
                else:
                    accepted[window] = sum(n for _, _, n in fresh)
        return accepted, closed, lost

    def _split_closed(self, spark: Any, assigned: Any, closed: dict) -> tuple[Any, Any]:
        """The rows of micro-batch sessions that joined a closed window (dropped), and the others (kept)."""
        from pyspark.sql import functions as F

        op = self.op
        marks = spark.createDataFrame([(k, s, e, cs, ce) for (k, s, e), (cs, ce, _) in closed.items()],
                                      "__key string, __ws bigint, __we bigint, __cs bigint, __ce bigint")
        joined = assigned.join(F.broadcast(marks), ["__key", "__ws", "__we"], "left")
        dropped = joined.where(F.col("__cs").isNotNull()).select(
            *[F.col(f"`{c}`") for c in op.relation_columns], F.timestamp_micros("__cs").alias("window_start"),
            F.timestamp_micros("__ce").alias("window_end"), F.lit(DROP_CLOSED).alias("reason"))
        return dropped, joined.where(F.col("__cs").isNull()).drop("__cs", "__ce")

    def _stored_rows_of(self, spark: Any, lost: list) -> Any:
        """Rows that earlier windows held (unemitted) when they merged into a closed one: read back, dropped."""
        from pyspark.sql import functions as F

        op = self.op
        marks = spark.createDataFrame(
            [(k, s, e, t, cs, ce) for k, s, e, tokens, cs, ce in lost for t in tokens],
            "__key string, __ls bigint, __le bigint, __mb bigint, __cs bigint, __ce bigint")
        batches = sorted({t for _k, _s, _e, tokens, _cs, _ce in lost for t in tokens})
        stored = spark.read.schema(op.rows_schema).parquet(*[op.store.rows_path(b) for b in batches])
        joined = stored.join(F.broadcast(marks), ["__key", "__mb"]).where(
            (F.col("__ts") >= F.col("__ls")) & (F.col("__ts") < F.col("__le")))
        return joined.select(*[F.col(f"`{c}`") for c in op.relation_columns],
                             F.timestamp_micros("__cs").alias("window_start"),
                             F.timestamp_micros("__ce").alias("window_end"), F.lit(DROP_CLOSED).alias("reason"))


def never_finishes(trigger: Any) -> bool:
    """A trigger whose machine never finishes, so its window stays open until it expires."""
    if isinstance(trigger, (plan.Repeatedly, plan.Never, plan.EmitFinal)):
        return True
    return isinstance(trigger, plan.AfterWatermark) and trigger.late is not None


def _unqualify(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Column) and node.table == "__r":
        return exp.column(node.name, quoted=True)
    return node


def _clusters(items: list) -> list:
    """Sort spans and group those that overlap or touch: [(start, end, [(s, e, payload), ...]), ...]."""
    clusters: list[list] = []
    for start, end, payload in sorted(items, key=lambda i: (i[0], i[1])):
        if clusters and start <= clusters[-1][1]:
            clusters[-1][1] = max(clusters[-1][1], end)
            clusters[-1][2].append((start, end, payload))
        else:
            clusters.append([start, end, [(start, end, payload)]])
    return [(s, e, m) for s, e, m in clusters]
