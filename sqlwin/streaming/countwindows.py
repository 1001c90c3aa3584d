"""Count windows (Apache Storm's forms, GRAMMAR 1) in the custom streaming path.

Rows are numbered per partition in ``ts`` order, so a row can be numbered only once no earlier row can
come: once the watermark has passed it. Per micro-batch, with ``W`` the watermark in force:

1. A new row whose ``ts`` is at or behind ``W`` is **late**: numbering it would renumber every later window,
   so it is dropped (``'late'``, to LATE ROWS TO with NULL ``window_start``/``window_end``: it belongs to
   no window yet). The other rows **wait** (``count_windows/waiting/<n>``, state like any stored row).
2. Waiting rows with ``ts <= W`` are numbered, continuing each partition's count, in the batch backend's
   order (ts, then every other column): exactly the numbers the batch query gives the rows that are not late.
3. Each numbered row joins its window(s), and each count window is one pane unit of the pane driver
   (``__key`` names it). A window **completes** when its last row is numbered; the pane driver then sees the
   watermark pass its end, so the default emission and EMIT FINAL fire it once, ON_TIME and final, in the
   micro-batch that numbered that row (the one after the micro-batch that moved the watermark past it).
   Windows still filling when the input ends are never emitted (the batch rule). The windows of
   ``HOP ROWS m, d`` and ``HOP d, ROWS n`` are known only once complete, from the rows kept for them
   (``count_windows/history/<n>``: the last ``d`` of event time, or the last n rows per partition).

Triggers (``check_count_query``): a growing window (TUMBLE ROWS, HOP ROWS m, ROWS n) may fire early panes
while it fills (count and processing-time triggers, AFTER WATERMARK EARLY), bounded by the rows numbered
so far; its completion is its end of window, so a LATE sub-trigger or ALLOWED LATENESS, which only late
rows would use, is an error, as is any early firing of the two forms whose windows are known only complete.

State is exactly once as the operator's: files are written per micro-batch (replaced on a re-run) and this
module's bookkeeping is part of ``state/<n>.json``; files it no longer references are deleted at the start
of the next micro-batch (or after a restart), once that commit is on disk.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlwin.core.panes import DROP_CLOSED, DROP_LATE, MAX_TIME, MIN_TIME, FiredPaneList, PaneDriver
from sqlwin.dialect import nodes as n
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import COUNT_WINDOW_COLUMNS, CountForm
from sqlwin.streaming import storage
from sqlwin.streaming.assigner import WindowAssigner, rows_of
from sqlwin.streaming.committer import Commit
from sqlwin.streaming.context import OperatorContext, PaneEngine, QueryShape
from sqlwin.streaming.countsql import MS, CountWindowSql
from sqlwin.streaming.engines import WindowStates

GROWING = (CountForm.TUMBLE_ROWS, CountForm.HOP_ROWS_ROWS)
KNOWN_WHEN_COMPLETE = {CountForm.HOP_ROWS_TIME: "HOP(..., ROWS m, d)", CountForm.HOP_TIME_ROWS: "HOP(..., d, ROWS n)"}


class CountWindowAssigner(WindowAssigner):
    """Numbers rows as the watermark passes them and hands the pane driver one unit per count window."""

    STATE_KEY = "count_windows"  # its part of the operator's committed state (``state/<n>.json``)

    def __init__(self, operator: OperatorContext):
        super().__init__(operator)
        self.sql = CountWindowSql(operator.shape, operator.query.compiler, operator.views)
        self.form = self.sql.form
        self.arrivals_sql = self.sql.arrivals()
        self.root = storage.join(operator.store.root, "count_windows")
        self.view = f"{operator.views.batch}_count"
        self.numbered_to = MIN_TIME  # every row with ts <= numbered_to is numbered (or was dropped late)
        self.next_ts: int | None = None  # the earliest waiting row not yet numbered
        self.bases: dict[str, int] = {}  # rows numbered so far, per partition (JSON of PARTITION BY values)
        self.waiting: dict[str, list[int]] = {}  # batch -> [rows, max ts] of waiting files not fully numbered
        self.units: dict[str, list[int]] = {}  # growing windows not complete: key -> [start, end so far]
        self.history: list[int] | None = None  # [batch, rows] of the rows kept for windows not yet known
        self.boundaries: dict[str, list[int]] = {}  # HOP d, ROWS n: boundaries with rows, not complete
        self.ordinals: dict[str, int] = {}  # HOP d, ROWS n: window_index of the next boundary, per partition
        self.completing: dict[tuple, int] = {}  # this micro-batch: window -> its end
        self.changed = False

    # -- state --------------------------------------------------------------------------------
    def snapshot(self, commit: Commit) -> dict:
        return {self.STATE_KEY: {"numbered_to": self.numbered_to, "next_ts": self.next_ts, "bases": self.bases,
                                 "waiting": self.waiting, "units": self.units, "history": self.history,
                                 "boundaries": self.boundaries, "ordinals": self.ordinals}}

    def restore(self, commit: Commit) -> None:
        data = commit.data.get(self.STATE_KEY)
        if data:
            self.numbered_to, self.next_ts = data["numbered_to"], data["next_ts"]
            self.bases, self.waiting, self.units = data["bases"], data["waiting"], data["units"]
            self.history, self.boundaries, self.ordinals = data["history"], data["boundaries"], data["ordinals"]

    def delete_uncommitted(self) -> None:
        self._delete_unreferenced()

    def pane_engine(self, driver: PaneDriver, columnar: bool, committed: dict | None) -> PaneEngine:
        return CountWindowPanes(driver, self)

    def _path(self, kind: str, batch: int | str) -> str:
        return storage.join(self.root, kind, str(batch))

    def _delete_unreferenced(self) -> None:
        """Files the committed state no longer names: fully numbered waiting rows, superseded history, and
        whatever an attempt that did not commit wrote (its re-run writes them again)."""
        keep = {"waiting": set(self.waiting), "history": {str(self.history[0])} if self.history else set()}
        for kind, names in keep.items():
            for name in storage.listdir(storage.join(self.root, kind)):
                if name not in names:
                    storage.delete(self._path(kind, name))

    @property
    def state_rows(self) -> int:
        return sum(rows for rows, _ in self.waiting.values()) + (self.history[1] if self.history else 0)

    def due(self, watermark: int) -> bool:
        """Whether a micro-batch at ``watermark`` numbers rows or completes a window (so one must run)."""
        return any(t <= watermark for t in self.event_timers())

    def event_timers(self) -> list[int]:
        pending = [min(b) - 1 for b in self.boundaries.values() if b]
        return ([self.next_ts] if self.next_ts is not None else []) + ([min(pending)] if pending else [])

    # -- 1. rows ------------------------------------------------------------------------------
    def assign(self, spark: Any, batch: int, watermark: int, with_rows: bool) -> dict:
        """The micro-batch's rows wait or are dropped late; waiting rows the watermark passed are numbered
        and assigned. Returns the new-row counts per window (pane unit) for ``CountWindowPanes.drive``."""
        self.changed = False
        self.completing = {}
        self._delete_unreferenced()  # what the last commit let go
        cached: list = []
        late_parts: list = []
        dropped = 0
        accepted: dict = {}
        try:
            if with_rows:
                dropped += self._arrive(spark, batch, watermark, late_parts, cached)
            if self.due(watermark):
                accepted, closed = self._number(spark, batch, watermark, late_parts, cached)
                dropped += closed
            self.op.write_late(late_parts, batch, watermark, dropped)
        finally:
            for df in cached:
                df.unpersist()
        return accepted

    def _arrive(self, spark: Any, batch: int, watermark: int, late_parts: list, cached: list) -> int:
        """The micro-batch's rows wait (``waiting/<n>``) or are dropped late; the writing job itself counts both
        and measures the waiting rows' times (an observation: no job of its own)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        rows = spark.sql(self.arrivals_sql).persist()  # the late rows are read from it after the write
        cached.append(rows)
        late = F.col("__ts") <= F.lit(watermark)
        observation = Observation()
        measured = rows.observe(observation, F.count(F.when(late, 1)).alias("late"),
                                F.count(F.when(~late, 1)).alias("kept"),
                                F.min(F.when(~late, F.col("__ts"))).alias("lo"),
                                F.max(F.when(~late, F.col("__ts"))).alias("hi"))
        columns = [F.col(f"`{c}`") for c in self.op.relation_columns] + [F.col("__ts"), F.col("__part")]
        path = self._path("waiting", batch)
        measured.where(~late).select(*columns).write.mode("overwrite").parquet(path)
        stats = observation.get
        if stats["late"]:
            late_parts.append(self.late_rows(rows.where(late), None, None, DROP_LATE))
        if stats["kept"]:
            self.waiting[str(batch)] = [int(stats["kept"]), int(stats["hi"])]
            self.next_ts = stats["lo"] if self.next_ts is None else min(self.next_ts, stats["lo"])
            self.changed = True
        else:  # every row late: nothing waits
            storage.delete(path)
        return int(stats["late"])

    def late_rows(self, rows: Any, start: str | None, end: str | None, reason: str) -> Any:
        """Dropped rows in LATE ROWS TO's columns; the window bounds from columns of micros (None: NULL)."""
        from pyspark.sql import functions as F

        def bound(column: str | None, name: str) -> Any:
            if column is None:
                return F.lit(None).cast(self.op.assigned_schema[name].dataType).alias(name)
            value = self.op.query.compiler.from_us(exp.column(column), self.op.shape.window)
            return F.expr(value.sql(dialect="spark")).alias(name)

        return rows.select(*[F.col(f"`{c}`") for c in self.op.relation_columns], bound(start, "window_start"),
                           bound(end, "window_end"), F.lit(reason).alias("reason"))

    # -- 2. numbering -------------------------------------------------------------------------
    def _number(self, spark: Any, batch: int, watermark: int, late_parts: list, cached: list) -> tuple[dict, int]:
        from pyspark.sql import functions as F

        self.changed = True
        files = [self._path("waiting", b) for b, (_, hi) in sorted(self.waiting.items(), key=lambda i: int(i[0]))
                 if hi > self.numbered_to]
        numbered = None
        previous = dict(self.bases)
        self.next_ts = None
        if files:
            waiting = spark.read.parquet(*files).where(F.col("__ts") > F.lit(self.numbered_to))
            now = F.col("__ts") <= F.lit(watermark)
            for part, n, rest in rows_of(waiting.groupBy("__part").agg(
                    F.count(F.when(now, 1)).alias("n"), F.min(F.when(~now, F.col("__ts"))).alias("rest"))):
                if n:
                    self.bases[part] = self.bases.get(part, 0) + int(n)
                if rest is not None:
                    self.next_ts = int(rest) if self.next_ts is None else min(self.next_ts, int(rest))
            waiting.where(now).createOrReplaceTempView(f"{self.view}_todo")
            self._bases(spark, previous, "count_bases", batch).createOrReplaceTempView(f"{self.view}_bases")
            numbered = spark.sql(self.sql.numbering(f"{self.view}_todo", f"{self.view}_bases"))
            if self.form not in GROWING:  # read by several joins there
                numbered = numbered.persist()
                cached.append(numbered)
            numbered.createOrReplaceTempView(f"{self.view}_numbered")
        self.numbered_to = watermark
        self.waiting = {b: v for b, v in self.waiting.items() if v[1] > watermark}
        if self.form in GROWING:
            if numbered is None:
                return {}, 0
            windowed = spark.sql(self.sql.growing_assignment(f"{self.view}_numbered"))
            return self._grow(spark, windowed, batch, late_parts, cached)
        held = self._held(spark, numbered)
        if self.form is CountForm.HOP_ROWS_TIME:
            return self._hop_rows_time(spark, numbered, held, batch, cached)
        return self._hop_time_rows(spark, numbered, held, previous, batch, cached)

    # -- 3a. growing windows: TUMBLE ROWS n, HOP ROWS m, ROWS n ------------------------------
    def _grow(self, spark: Any, windowed: Any, batch: int, late_parts: list, cached: list) -> tuple[dict, int]:
        from pyspark.sql import functions as F

        op = self.op
        keyed = self._keyed(spark, windowed, cached)
        units = rows_of(keyed.groupBy("__key", "__part", "__wk").agg(
            F.count(F.when(F.col("__keep"), 1)).alias("kept"), F.min("__ts").alias("lo"),
            F.max("__ts").alias("hi")))
        accepted: dict = {}
        closed: dict[str, tuple[int, int]] = {}
        for key, part, wk, kept, lo, hi in units:
            kept = int(kept)
            start, end = self.units.get(key, [int(lo), MIN_TIME])
            end = max(end, int(hi) + MS)
            window = (key, start, MAX_TIME)  # a growing window is named by its key; its end is not known yet
            state = op.windows.get(window)
            if state is not None and state.closed:  # its trigger finished: later rows are dropped
                if kept:
                    closed[key] = (start, end)
            elif kept:
                if state is None:
                    op.windows[window] = op.driver.new_window(start, MAX_TIME)
                accepted[window] = kept
            if self.sql.is_complete(int(wk), self.bases[part]):
                self.units.pop(key, None)
                if window in op.windows:
                    self.completing[window] = end
            else:
                self.units[key] = [start, end]
        kept_rows = keyed.where(F.col("__keep"))
        dropped = 0
        if closed:
            marks = spark.createDataFrame([(k, s, e) for k, (s, e) in closed.items()],
                                          "__key string, __cs bigint, __ce bigint")
            kept_rows = kept_rows.join(F.broadcast(marks), "__key", "left")
            gone = kept_rows.where(F.col("__cs").isNotNull())
            dropped = gone.count()
            late_parts.append(self.late_rows(gone, "__cs", "__ce", DROP_CLOSED))
            kept_rows = kept_rows.where(F.col("__cs").isNull())
        self._store(kept_rows, batch, sum(accepted.values()))
        return accepted, dropped

    # -- 3b. windows known once complete: HOP ROWS m, d and HOP d, ROWS n ---------------------
    def _held(self, spark: Any, numbered: Any) -> Any:
        """The numbered rows these windows may hold: the kept history plus the rows numbered now."""
        parts = [spark.read.parquet(self._path("history", self.history[0]))] if self.history else []
        if numbered is not None:
            parts.append(numbered)
        if not parts:
            return None
        held = parts[0]
        for part in parts[1:]:
            held = held.unionByName(part)
        return held

    def _hop_rows_time(self, spark: Any, numbered: Any, held: Any, batch: int, cached: list) -> tuple[dict, int]:
        from pyspark.sql import functions as F

        if numbered is None:
            return {}, 0
        held.createOrReplaceTempView(f"{self.view}_held")
        spark.sql(self.sql.closing_rows(f"{self.view}_numbered")).createOrReplaceTempView(f"{self.view}_closers")
        windowed = spark.sql(self.sql.rows_to_time_windows(f"{self.view}_held", f"{self.view}_closers"))
        keyed = self._keyed(spark, windowed, cached)
        units = rows_of(keyed.groupBy("__key", "__part", "__wk", "__ws", "__we").agg(
            F.count(F.when(F.col("__keep"), 1)).alias("kept")))
        accepted = self._complete_units([(key, int(ws), int(we), int(kept)) for key, _part, _wk, ws, we, kept in units])
        self._store(keyed.where(F.col("__keep")), batch, sum(accepted.values()))
        # a later window ends after a row numbered later, so it starts after numbered_to + 1 ms - d
        self._keep_history(held.where(F.col("__ts") > F.lit(self.numbered_to + MS - self.op.shape.window.size)),
                           batch)
        return accepted, 0

    def _hop_time_rows(self, spark: Any, numbered: Any, held: Any, previous: dict, batch: int,
                       cached: list) -> tuple[dict, int]:
        from pyspark.sql import functions as F

        if numbered is not None:
            seen = numbered.select("__part", F.expr(self.sql.boundary()).alias("__we")).distinct().collect()
            for r in seen:
                self.boundaries.setdefault(r["__part"], []).append(int(r["__we"]))
        complete = []  # (partition, boundary, window_index): a boundary completes once no row before it can come
        for part, bounds in list(self.boundaries.items()):
            for b in sorted(set(bounds)):
                if b - 1 <= self.numbered_to:
                    complete.append((part, b, self.ordinals.get(part, 0)))
                    self.ordinals[part] = self.ordinals.get(part, 0) + 1
            left = sorted({b for b in bounds if b - 1 > self.numbered_to})
            if left:
                self.boundaries[part] = left
            else:
                del self.boundaries[part]
        accepted: dict = {}
        if complete:
            size = self.op.shape.window.size.n
            before = {(p, b): 0 for p, b, _ in complete}
            if numbered is not None:
                marks = spark.createDataFrame([(p, b) for p, b, _ in complete], "__part string, __we bigint")
                marks.createOrReplaceTempView(f"{self.view}_bounds")
                for r in spark.sql(self.sql.rows_before(f"{self.view}_numbered", f"{self.view}_bounds")).collect():
                    before[(r["__part"], int(r["__we"]))] = int(r["__before"])
            windows = []
            for p, b, k in complete:
                hi = previous.get(p, 0) + before[(p, b)]
                windows.append((p, k, b, hi - size, hi))
            spark.createDataFrame(windows, "__part string, __wk bigint, __we bigint, __lo bigint, __hi bigint") \
                .createOrReplaceTempView(f"{self.view}_windows")
            held.createOrReplaceTempView(f"{self.view}_held")
            windowed = spark.sql(self.sql.last_rows_windows(f"{self.view}_held", f"{self.view}_windows"))
            keyed = self._keyed(spark, windowed, cached)
            units = rows_of(keyed.groupBy("__key", "__part", "__wk", "__we").agg(
                F.count(F.when(F.col("__keep"), 1)).alias("kept"), F.min("__ts").alias("lo")))
            accepted = self._complete_units([(key, int(lo), int(we), int(kept))
                                             for key, _part, _wk, we, kept, lo in units])
            self._store(keyed.where(F.col("__keep")), batch, sum(accepted.values()))
        if held is not None:  # later windows hold at most the last n rows numbered so far
            size = self.op.shape.window.size.n
            bases = self._bases(spark, self.bases, "count_bases_after", batch)
            recent = held.join(F.broadcast(bases), "__part").where(F.col("__rn") >= F.col("__base") - size)
            self._keep_history(recent.drop("__base"), batch)
        return accepted, 0

    def _complete_units(self, units: list[tuple[str, int, int, int]]) -> dict:
        """Windows known only once complete: each is a new unit with all its rows, complete now."""
        accepted = {}
        for key, start, end, kept in units:
            if kept:
                window = (key, start, MAX_TIME)
                self.op.windows[window] = self.op.driver.new_window(start, MAX_TIME)
                accepted[window] = kept
                self.completing[window] = end
        return accepted

    def _keep_history(self, rows: Any, batch: int) -> None:
        """``history/<n>``: the rows later windows may hold, counted by the writing job (none: no folder)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        observation = Observation()
        path = self._path("history", batch)
        rows.observe(observation, F.count(F.lit(1)).alias("rows")).write.mode("overwrite").parquet(path)
        count = int(observation.get["rows"])
        if count:
            self.history = [batch, count]
        else:
            self.history = None
            storage.delete(path)

    # -- shared -------------------------------------------------------------------------------
    def _keyed(self, spark: Any, windowed: Any, cached: list) -> Any:
        view = f"{self.view}_windowed"
        windowed.createOrReplaceTempView(view)
        bounds = {name: self.op.assigned_schema[name].dataType.simpleString()
                  for name in ("window_start", "window_end", "window_time")}
        internal = [c for c in windowed.columns if c.startswith("__")]
        keyed = spark.sql(self.sql.keyed(view, bounds, internal)).persist()
        cached.append(keyed)
        return keyed

    def _bases(self, spark: Any, bases: dict[str, int], kind: str, batch: int) -> Any:
        """``bases`` (rows numbered per partition) as Spark reads them (``StateStore.scratch_frame``: Nexmark's
        ~28,000 auctions as a local DataFrame cost 0.3 s per micro-batch to make, and more to plan)."""
        import pyarrow as pa

        table = pa.table({"__part": pa.array(list(bases), pa.string()),
                          "__base": pa.array(list(bases.values()), pa.int64())})
        return self.op.store.scratch_frame(spark, kind, batch, table, "__part string, __base bigint")

    def _store(self, rows: Any, batch: int, count: int) -> None:
        if count:
            self.op.rows.write(self.stored_form(rows), batch, count)

    def stored_form(self, rows: Any) -> Any:
        """The windows' new rows (``keyed``'s, kept) as the pane relation reads them (``PaneQuery.relation_sql``):
        the rows, or their partial aggregates per window (``sqlwin.streaming.partials``) where the query
        decomposes."""
        from pyspark.sql import functions as F

        op = self.op
        present = set(rows.columns)
        rows = rows.select(*[(F.col(f"`{f.name}`") if f.name in present else F.lit(None)).cast(f.dataType)
                             .alias(f.name) for f in op.assigned_schema.fields])
        decomposition = op.query.decomposition
        if decomposition is not None:
            rows.withColumn("__status", F.lit(None).cast("string")).createOrReplaceTempView(op.views.annotated)
            sql = decomposition.partial_sql(op.views.annotated, op.shape.source_alias, len(op.shape.keys))
            rows = rows.sparkSession.sql(sql).drop("__status", "__n")  # the micro-batch's session
        return rows


class CountWindowPanes(WindowStates):
    """The pane engine of count windows: ``WindowStates``, where a window completes when the assigner numbers
    its last row (so its end is known only then), not when the watermark passes an end known before."""

    def __init__(self, driver: PaneDriver, assigner: CountWindowAssigner):
        super().__init__(driver)
        self.assigner = assigner

    def drive(self, accepted: dict, batch: int, watermark: int, processing_time: int,
              token: int) -> tuple[FiredPaneList, int]:
        """The pane driver over the count windows: those that got rows and those whose timers are due (with
        the watermark short of their end: they are still filling), then, for each window complete now, one
        more call with the watermark at its end: its ON_TIME (and final) pane, and it expires."""
        completing = self.assigner.completing
        fired = FiredPaneList()
        expired = 0
        if watermark >= MAX_TIME:  # the input ended: windows still filling never complete (the batch rule)
            for window in [w for w in self.windows if w not in completing]:
                del self.windows[window]
                expired += 1
            accepted = {w: c for w, c in accepted.items() if w in completing}
        due = [w for w, s in self.windows.items() if w not in accepted and self.is_due(s, watermark, processing_time)]
        filling = min(watermark, MAX_TIME - 1)
        for window in [*accepted, *due]:
            state = self.windows[window]
            count = accepted.get(window, 0)
            outcome = self.driver.process(state, [token] if count else [], filling, processing_time, count=count)
            if outcome.pane is not None:
                fired.append((window[0], window[1], self._end_so_far(window)), outcome.pane)
        for window, end in completing.items():
            state = self.windows.pop(window)
            expired += 1
            if state.closed:
                continue
            state.end = end  # the watermark of its rows passes its end now
            outcome = self.driver.process(state, [], MAX_TIME, processing_time)
            if outcome.pane is not None:
                fired.append((window[0], window[1], end), outcome.pane)
        return fired, expired

    def _end_so_far(self, window: tuple) -> int:
        if window in self.assigner.completing:
            return self.assigner.completing[window]
        return self.assigner.units[window[0]][1]


def check_count_query(shape: QueryShape) -> None:
    """What a streaming count-window query must be (errors before anything starts, at the clause)."""
    spec, query, carrier = shape.window, shape.query, shape.carrier
    if not shape.aggregated:
        raise SqlwinError.at(spec.node, "in a streaming query, count windows feed an aggregation (GROUP BY "
                                        "window_start, window_end and the PARTITION BY columns)")
    if shape.processing_time:
        raise SqlwinError.at(spec.node, "count windows number rows in event time; in a streaming query they "
                                        "cannot be over a PROCTIME() column")
    group = carrier.args.get("group")
    names = [k.name.lower() for k in shape.keys if isinstance(k, exp.Column)]
    partition = sorted(p.lower() for p in spec.partition_by)
    if len(names) != len(shape.keys) or sorted(n for n in names if n != "window_index") != partition:
        raise SqlwinError.at(group or carrier, "a streaming count-window aggregation groups by window_start, "
                                               "window_end (optionally window_index) and exactly the PARTITION BY "
                                               "columns of the window")
    where = carrier.args.get("where")
    if where is not None and any(c.name.lower() in COUNT_WINDOW_COLUMNS[:3] for c in where.find_all(exp.Column)):
        raise SqlwinError.at(where, "in a streaming query, a count window's bounds are known only once it is "
                                    "complete: filter them in HAVING or an outer query, not in WHERE")
    selects = list(query.node.find_all(exp.Select))
    lateness = next((s.args["lateness"] for s in selects if s.args.get("lateness")), None)
    if query.lateness.allowed and lateness is not None:
        raise SqlwinError.at(lateness, "count windows drop every row at or behind the watermark (it would renumber "
                                       "later windows), so ALLOWED LATENESS must be 0 over them")
    emit = next((s.args["emit"] for s in selects if s.args.get("emit")), None)
    if emit is None or (emit.args.get("sugar") or "").upper() in ("FINAL", "ON WINDOW CLOSE"):
        return
    changes = (emit.args.get("sugar") or "").upper() == "CHANGES"
    for node in emit.find_all(n.TriggerAfterWatermark):
        if node.args.get("late") is not None:
            raise SqlwinError.at(node.args["late"], "a LATE trigger never fires over count windows: a row behind "
                                                    "the watermark is dropped, never added to a window")
    if spec.count_form not in GROWING:
        early = [t for t in emit.find_all(n.TriggerAfterCount, n.TriggerAfterProcessingTime, n.TriggerEveryRows,
                                          n.TriggerEveryInterval)]
        early += [t.args["early"] for t in emit.find_all(n.TriggerAfterWatermark) if t.args.get("early")]
        if early or changes:
            raise SqlwinError.at(early[0] if early else emit,
                                 f"the windows of {KNOWN_WHEN_COMPLETE[spec.count_form]} are known only once "
                                 "complete, so they fire only then: use the default emission, EMIT FINAL, AFTER "
                                 "WATERMARK (without EARLY) or NEVER")
