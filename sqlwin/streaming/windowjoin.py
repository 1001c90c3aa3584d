"""The window join of a streaming query (Flink's ``WindowJoinOperator``): the panes of its two sides, each a
window stage of its own, joined per window once the watermarks of both sides have passed the window's end.

The join keeps its sides' panes where the stages wrote them (their output folders, by micro-batch), the largest
window end each folder holds, and its own watermark: the smaller of the sides' watermarks, forwarded after their
panes (``core.panes.ForwardedWatermark``'s rule). In micro-batch ``n``, with ``W`` its watermark and ``P`` the
previous micro-batch's:

- **ON_TIME**: every window with rows on either side whose end (plus the join's ``delay``, 0 but for a stream
  joined by a time range: ``intervaljoin``) lies in ``(P, W]`` is joined: the user's
  statement runs over the sides' views, each holding that window's latest pane per key (all its rows for a window
  TVF side). An inner join emits the matches, an outer join its unmatched rows too.
- **LATE**: a side whose ALLOWED LATENESS lets a window take rows after its end emits LATE panes; each one that
  reaches the join for a window already joined joins that window again, with the latest pane of each side (so the
  LATE pane of the join restates the window's whole join, as an ACCUMULATING pane does). ``pane_index`` counts the
  join's panes of the window: a window that no side had rows of when the watermark passed its end, and that a
  side's LATE pane brings, is joined then for the first time, its pane LATE and numbered 0.
- **is_final**: a pane emitted where the window is forgotten (below: ``W`` past its end plus the lateness, or the
  end of the input) is its last, as a window stage's pane where its window expires (Beam's garbage collection).
- A window is forgotten once ``W`` passes its end plus the sides' largest lateness, and the folders whose windows
  are all forgotten are deleted after the commit.

Only global numbers and the windows whose panes may still change live in the driver (committed with the
micro-batch); the rows stay in Spark.
"""

from __future__ import annotations

from typing import Any

from sqlwin.core.panes import MAX_TIME, MIN_TIME
from sqlwin.streaming import storage
from sqlwin.streaming.sinks import windows_of
from sqlwin.streaming.stages import HIDDEN_BOUNDS, HIDDEN_PANE, JOIN_BATCH, PANES, WindowJoin
from sqlwin.streaming.state import StateStore

PANES_SCHEMA = "__p_ws bigint, __p_we bigint, __p_pi int, __p_pt string, __p_fin boolean"  # a micro-batch's panes


class JoinStage:
    def __init__(self, spark: Any, join: WindowJoin, location: str, sink: Any, side_outputs: list[Any],
                 lateness: list[int]):
        self.spark = spark
        self.join = join
        self.sink = sink
        self.side_outputs = side_outputs
        self.lateness = max(lateness)
        self.delay = join.delay
        self.store = StateStore(location)
        self.sql = join.statement.sql(dialect="spark")
        self.current = self.pending = self.in_force = MIN_TIME
        self.next_batch = 0
        self.last_source_batch = -1
        self.last_source_step = 0
        self.retained: list[dict[int, int]] = [{} for _ in join.sides]  # side folder -> its largest window end
        self.retained_rows: list[dict[int, int]] = [{} for _ in join.sides]  # side folder -> its pane rows
        # side folder -> its windows (start, end): the join finds the windows to join without reading the folders
        self.retained_windows: list[dict[int, list[tuple[int, int]]]] = [{} for _ in join.sides]
        self.released: dict[str, int] = {}  # "start,end" -> panes the join emitted, while LATE panes may come
        self.counters = {"panes": 0, "micro_batches": 0}
        self.committed_counters, self.committed_watermark = dict(self.counters), MIN_TIME  # the status' (operator.py)
        for output in side_outputs:  # each side's write measures what the join keeps of it: no job to read it
            output.window_bounds = HIDDEN_BOUNDS
        self._restore()
        self._views(spark, spark.createDataFrame([], PANES_SCHEMA))
        self.sink.set_schema(spark.sql(self.sql).schema)
        self.sink.register(spark)

    # -- state ------------------------------------------------------------------------------------
    def _restore(self) -> None:
        batch = self.store.last_committed()
        if batch < 0:
            return
        data = self.store.load(batch)
        self.next_batch = batch + 1
        self.last_source_batch = data["source_batch"]
        self.last_source_step = data.get("source_step", 0)
        self.current, self.pending, self.in_force = data["current"], data["pending"], data["in_force"]
        self.retained = [{int(k): v for k, v in side.items()} for side in data["retained"]]
        rows = data.get("retained_rows") or [{} for _ in self.retained]  # not kept before alignment's measurements
        self.retained_rows = [{int(k): v for k, v in side.items()} for side in rows]
        windows = data.get("retained_windows")
        if windows is None:  # a commit from before windows were kept: the kept folders' windows read once
            self.retained_windows = [{n: self._measure(self.spark, self.side_outputs[i].batch_path(n))[1]
                                      for n in side} for i, side in enumerate(self.retained)]
        else:
            self.retained_windows = [{int(k): [tuple(w) for w in v] for k, v in side.items()} for side in windows]
        self.released = dict(data["released"])
        self.counters.update(data["counters"])
        self.committed_counters, self.committed_watermark = dict(self.counters), self.current

    def _commit(self, batch: int) -> None:
        self.store.commit(batch, {"source_batch": self.last_source_batch,
                                  **({"source_step": self.last_source_step} if self.last_source_step else {}),
                                  "current": self.current,
                                  "pending": self.pending, "in_force": self.in_force,
                                  "retained": [{str(k): v for k, v in side.items()} for side in self.retained],
                                  "retained_rows": [{str(k): v for k, v in side.items()}
                                                    for side in self.retained_rows],
                                  "retained_windows": [{str(k): [list(w) for w in v] for k, v in side.items()}
                                                       for side in self.retained_windows],
                                  "released": self.released, "counters": self.counters})
        self.next_batch = batch + 1
        self.committed_counters, self.committed_watermark = dict(self.counters), self.current

    # -- the watermark ------------------------------------------------------------------------------
    def forward(self, watermark: int) -> None:
        """The sides' watermark of this micro-batch: in force from the next one (after their panes)."""
        self.pending = max(self.pending, min(watermark, MAX_TIME))

    def wants_micro_batch(self, next_forward: int) -> bool:
        """Whether the next micro-batch may join a window: the watermark moves and some side has panes kept."""
        moving = self.current > self.in_force or next_forward > self.current
        return moving and any(self.retained)

    @property
    def open_windows(self) -> int:
        return len(self.released)

    @property
    def state_rows(self) -> int:
        """The sides' pane rows the join keeps: windows waiting for the other side's watermark, or for LATE panes."""
        return sum(sum(side.values()) for side in self.retained_rows)

    # -- one micro-batch ------------------------------------------------------------------------------
    def step(self, spark: Any, side_batches: list[int | None], source_batch: int | None = None,
             source_step: int = 0) -> int:
        """Step ``source_step`` of Spark's micro-batch ``source_batch`` (the staged operator skips the steps the
        join committed before a crash): the sides' new panes (their output micro-batch numbers), the windows
        joined; returns how many windows were joined."""
        batch = self.next_batch
        previous, watermark = self.in_force, self.current
        self.in_force = watermark
        new: list[int | None] = [None] * len(side_batches)
        for i, n in enumerate(side_batches):
            if n is None:
                continue
            rows, windows = self._side_batch(spark, i, n)
            if rows:
                self.retained[i][n] = max((end for _, end in windows), default=MIN_TIME)
                self.retained_rows[i][n] = rows
                self.retained_windows[i][n] = windows
                new[i] = n
        windows = self._windows(spark, previous, watermark, new)
        self._emit(spark, windows, batch)
        expired = self._expire(watermark)
        self.current = max(self.current, self.pending)
        if source_batch is not None:
            self.last_source_batch, self.last_source_step = source_batch, source_step
        if any(n is not None for n in new) or windows or expired or watermark > previous or self.current > watermark:
            self.counters["panes"] += len(windows)
            self.counters["micro_batches"] += 1
            self._commit(batch)
            for i, n in expired:
                self._forget(i, n)
        return len(windows)

    # -- where the join touches Spark (a planned replay's join answers these from what its sides fired) ----------
    def _side_batch(self, spark: Any, side: int, n: int) -> tuple[int, list[tuple[int, int]]]:
        """(rows, windows) of side ``side``'s output micro-batch ``n``."""
        output = self.side_outputs[side]
        return output.written.pop(n, None) or self._measure(spark, output.batch_path(n))

    def _emit(self, spark: Any, windows: list[tuple], batch: int) -> None:
        """The join of ``windows`` (each with its pane), written as micro-batch ``batch`` of the sink."""
        if windows:
            self._views(spark, spark.createDataFrame(windows, PANES_SCHEMA))
            self.sink.write(spark.sql(self.sql), batch)
        else:
            self.sink.clear(batch)

    def _forget(self, side: int, n: int) -> None:
        """Side ``side``'s output micro-batch ``n``: no window it holds is joined again."""
        storage.delete(self.side_outputs[side].batch_path(n))

    def _found(self, previous: int, watermark: int, new: list[int | None]) -> list[tuple[int, int, bool]]:
        """(start, end, late) of every window of the kept side outputs to join now: its end passed now, or (late)
        a side brought a pane of it again. From the windows each kept output holds: no Spark job."""
        found: dict[tuple[int, int], bool] = {}
        for i, kept in enumerate(self.retained):
            if not (watermark > previous or new[i] is not None):
                continue
            for n, end in kept.items():
                if not (previous < end + self.delay or n == new[i]):
                    continue
                for ws, we in self.retained_windows[i][n]:
                    due_at = we + self.delay
                    if previous < due_at <= watermark or (due_at <= previous and n == new[i]):
                        found[(ws, we)] = due_at <= previous  # late: joined before (a function of its end)
        return [(ws, we, late) for (ws, we), late in found.items()]

    def _side_rows(self, spark: Any, side: int, kept: list[int]) -> Any:
        """The rows of side ``side``'s output micro-batches ``kept``, each with its micro-batch (``__jb``)."""
        from pyspark.sql import functions as F

        output = self.side_outputs[side]
        rows = None
        for n in kept:
            part = spark.read.schema(_without_batch(output.schema)).parquet(output.batch_path(n)) \
                .withColumn("__jb", F.lit(n))
            rows = part if rows is None else rows.unionByName(part)
        return rows

    @staticmethod
    def _measure(spark: Any, path: str) -> tuple[int, list[tuple[int, int]]]:
        """(rows, windows) of a side's folder that another run wrote (a micro-batch run again after a crash whose
        side stage had committed it): read back; no folder, no rows."""
        from pyspark.sql import functions as F

        if not storage.exists(path):
            return 0, []
        row = spark.read.parquet(path).agg(F.count(F.lit(1)), windows_of(HIDDEN_BOUNDS)).first()
        return int(row[0]), sorted(tuple(w) for w in row[1])

    def _windows(self, spark: Any, previous: int, watermark: int, new: list[int | None]) -> list[tuple]:
        """The windows this micro-batch joins, each with its pane: ON_TIME where the watermark passed its end
        now, LATE where a side brought a pane of a window joined before."""
        windows = []
        for ws, we, late in sorted(self._found(previous, watermark, new), key=lambda r: (r[1], r[0])):
            key = f"{ws},{we}"
            final = self._expires(we, watermark)
            if late:
                # a window no side had rows of when the watermark passed its end was never joined: its first
                # pane is LATE and numbered 0 (``pane_index`` counts the join's panes of the window, as a window
                # stage numbers the first pane of a window whose rows all came late)
                index = self.released.get(key, 0)
                windows.append((ws, we, index, "LATE", final))
                self.released[key] = index + 1
            else:
                windows.append((ws, we, 0, "ON_TIME", final))
                if self.lateness:
                    self.released[key] = 1
        return windows

    def _expires(self, end: int, watermark: int) -> bool:
        """Whether a window ending at ``end`` is forgotten at ``watermark`` (``_expire``: its end plus the sides'
        lateness passed, or the end of input): a pane the join emits then is its last (``is_final``, as a window
        stage's pane in the call where its window expires: ``core.panes``), the ON_TIME pane at +infinity too."""
        return watermark >= MAX_TIME or end + self.delay <= watermark - self.lateness

    def _expire(self, watermark: int) -> list[tuple[int, int]]:
        """Folders whose windows can no longer be joined again (their end plus lateness passed), forgotten."""
        gone = []
        for i, kept in enumerate(self.retained):
            for n, end in list(kept.items()):
                if self._expires(end, watermark):
                    gone.append((i, n))
                    del kept[n]
                    self.retained_rows[i].pop(n, None)
                    self.retained_windows[i].pop(n, None)
        for key in list(self.released):
            if self._expires(int(key.split(",")[1]), watermark):
                del self.released[key]
        return gone

    # -- the views the user's statement reads ----------------------------------------------------------
    def _views(self, spark: Any, panes: Any, by: str | None = None) -> None:
        """Each side's view: its latest pane per window and key of the windows ``panes`` names, with that
        window's join pane (hidden columns the statement selects as ``pane_index``, ...). In the micro-batch's
        session (``foreachBatch`` runs in a session of its own, whose temporary views are its own). ``by``: a
        column of ``panes`` and of the side rows (``_side_rows``) numbering several of the join's micro-batches,
        each with its own windows and kept outputs (a planned replay's), kept in the views as ``JOIN_BATCH``."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        for i, side in enumerate(self.join.sides):
            output = self.side_outputs[i]
            kept = sorted(self.retained[i])
            rows = self._side_rows(spark, i, kept) if kept or by is not None else None
            if rows is None:
                rows = spark.createDataFrame([], _without_batch(output.schema)).withColumn("__jb", F.lit(0))
            keys = [*([by] if by else []), *HIDDEN_BOUNDS, *(f"__sqlwin_k{k}" for k in range(side.stage.keys))]
            latest = Window.partitionBy(*keys).orderBy(F.col("__jb").desc(), F.col("pane_index").desc())
            rows = rows.withColumn("__rank", F.dense_rank().over(latest)).where("__rank = 1")
            on = (F.unix_micros(HIDDEN_BOUNDS[0]) == panes["__p_ws"]) & \
                (F.unix_micros(HIDDEN_BOUNDS[1]) == panes["__p_we"])
            rows = rows.join(F.broadcast(panes), on & (rows[by] == panes[by]) if by else on)
            columns = [c for c in output.schema.fieldNames() if c not in (*PANES, "micro_batch")]
            batch = [panes[by].alias(JOIN_BATCH)] if by else []
            rows.select(*[F.col(f"`{c}`") for c in columns], *(panes[p].alias(h) for p, h in
                                                                zip(("__p_pi", "__p_pt", "__p_fin"), HIDDEN_PANE,
                                                                    strict=True)), *batch) \
                .createOrReplaceTempView(side.view)


def _without_batch(schema: Any) -> Any:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name != "micro_batch"])
