"""Keyed window state in Spark: the columnar pane engine stepped on the executors, not in the driver.

Spark's own stateful operators keep per-key state in executors' state stores, partitioned by key and saved
with the checkpoint. sqlwin's custom path runs inside ``foreachBatch`` (it decides lateness and fires panes
itself), where no state store is reachable: ``applyInPandasWithState`` and ``transformWithStateInPandas``
would have to receive every row of the stream in Python (7x Spark's native aggregation, SPARK_NOTES), while
here Spark has already reduced a micro-batch to one partial-aggregate row per (key, window). So the state is
a table Spark reads and writes, one version per micro-batch under the checkpoint:

    windows/<n>/kind=w/   every open window's state (``sqlwin.core.columnar.STATE``, and its timer)
    windows/<n>/kind=p/   the panes micro-batch n fired (the pane query reads them)

Micro-batch ``n`` joins version ``n-1`` with its new-row counts per window (``rows/<n>``, written by the fused
scan) on (key, start, end): Spark shuffles both by the window's key, and each partition's windows are stepped
by ``sqlwin.core.columnar.advance`` (the rules of ``PaneDriver``, as array expressions) in a ``mapInArrow``
over Arrow batches, in parallel on the executors; Spark writes the result as version ``n``. The driver gets
back only an ``Observation`` of global numbers (open and closed windows, the earliest timer, the first
micro-batch a pane still reads, panes fired, windows expired), which is all it commits: ``state/<n>.json``
names the version, and versions before the committed one are deleted once it is on disk. A micro-batch re-run
after a crash reads the same committed version and the same counts, and writes the same version again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from sqlwin.core import columnar
from sqlwin.core.columnar import KEY, STATE, ColumnarPanes, ComparisonTrigger, advance, fresh_state, timers_of
from sqlwin.core.panes import MAX_TIME
from sqlwin.streaming import storage
from sqlwin.streaming.committer import Commit, Durable

_TYPES = {np.int64: "bigint", np.bool_: "boolean"}
STATE_DDL = ", ".join(["key string", "start bigint", "end bigint", *[f"{c} {_TYPES[t]}" for c, t in STATE.items()],
                       "timer bigint", "ptimer bigint"])
PANE_DDL = "pane_index int, pane_timing string, is_final boolean, pane_lo bigint"
OUT_DDL = f"kind string, {STATE_DDL}, {PANE_DDL}, processed bigint, expired bigint"
COUNTS_DDL = "__key string, __ws bigint, __we bigint, __n bigint"  # what the engine reads of ``rows/<n>``
WINDOW, PANE, TALLY = "w", "p", "x"  # the kinds of rows a step writes: window state, fired pane, counts


def step_windows(trigger: ComparisonTrigger, lateness: int, accumulating: bool, batch: int, watermark: int,
                 processing_time: int, batches: Iterator[Any]) -> Iterator[Any]:
    """The executors' step: Arrow batches of (window state or none, new-row count ``n`` or none) rows in;
    the windows' new state, the panes fired and one tally row per batch out (``OUT_DDL``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = out_schema()
    for rb in batches:
        rows = rb.num_rows
        if not rows:
            continue
        has = pc.fill_null(rb["has_state"], False).to_numpy(zero_copy_only=False)
        counts = pc.fill_null(rb["n"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
        end = rb["end"].to_numpy(zero_copy_only=False).astype(np.int64)
        fresh = fresh_state(end, lateness)
        # (a NULL in a column an earlier version did not write: UNSET)
        col = {c: np.where(has, pc.fill_null(rb[c], t(columnar.UNSET.get(c, 0))).to_numpy(zero_copy_only=False),
                           fresh[c]).astype(t) for c, t in STATE.items()}
        step = advance(trigger, accumulating, col, end, counts, batch, watermark, processing_time)
        keep = ~step.expiring
        window = {"kind": np.full(int(keep.sum()), WINDOW, object), **{c: rb[c].filter(pa.array(keep)) for c in KEY},
                  **{c: v[keep] for c, v in col.items()}, "timer": timers_of(trigger, end, col)[keep],
                  "ptimer": columnar.processing_timers_of(col)[keep]}
        yield _batch(schema, window)
        if step.emit.any():
            emit = pa.array(step.emit)
            yield _batch(schema, {"kind": np.full(int(step.emit.sum()), PANE, object),
                                  **{c: rb[c].filter(emit) for c in KEY},
                                  "pane_index": step.index[step.emit].astype(np.int32),
                                  "pane_timing": step.timing[step.emit].astype(object),
                                  "is_final": step.is_final[step.emit].astype(bool),
                                  "pane_lo": step.lo[step.emit]})
        yield _batch(schema, {"kind": np.array([TALLY], object), "processed": np.array([step.processed.sum()]),
                              "expired": np.array([step.expiring.sum()])})


def out_schema() -> Any:
    """``OUT_DDL`` in Arrow (built without Spark: executors' Python workers have no session)."""
    import pyarrow as pa

    types = {"string": pa.string(), "bigint": pa.int64(), "boolean": pa.bool_(), "int": pa.int32()}
    return pa.schema([pa.field(name, types[kind]) for name, kind in
                      (column.split(" ") for column in OUT_DDL.split(", "))])


def _batch(schema: Any, columns: dict[str, Any]) -> Any:
    """A record batch of ``schema`` with ``columns`` (the others NULL)."""
    import pyarrow as pa

    rows = len(next(iter(columns.values())))
    return pa.RecordBatch.from_arrays(
        [pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(rows, f.type) for f in schema],
        schema=schema)


@dataclass
class KeyedCounts:
    """A micro-batch's new-row counts per window, as the keyed engine takes them: the stored partial rows
    (``rows/<n>``, one per window with its count ``__n``), or none."""

    path: str | None = None
    windows: int = 0


@dataclass
class KeyedFired:
    """The panes a micro-batch fired, where Spark wrote them (``windows/<n>/kind=p``)."""

    path: str
    count: int
    first_batch: int | None  # the first micro-batch some pane reads (None: none reads any)

    def __len__(self) -> int:
        return self.count

    def batches(self, batch: int) -> set[int]:
        return set(range(self.first_batch, batch + 1)) if self.first_batch is not None else set()

    def frame(self, spark: Any, batch: int) -> Any:
        """The panes in ``outputs.FIRED_SCHEMA``: each reads the micro-batches ``[pane_lo, batch]``."""
        from pyspark.sql import functions as F

        panes = spark.read.schema(f"key string, start bigint, end bigint, {PANE_DDL}").parquet(self.path)
        tokens = F.when(F.col("pane_lo") >= 0, F.sequence(F.col("pane_lo"), F.lit(batch).cast("bigint"))) \
            .otherwise(F.array().cast("array<bigint>"))
        return panes.select(F.col("key").alias("__key"), F.col("start").alias("__ws"), F.col("end").alias("__we"),
                            "pane_index", "pane_timing", "is_final", tokens.alias("tokens"))


@dataclass
class Tombstones:
    """The closed windows (their trigger finished; late rows to them are dropped as ``window closed``), read
    from the committed state by Spark when a micro-batch classifies its rows."""

    path: str
    count: int

    def __bool__(self) -> bool:
        return self.count > 0

    def frame(self, spark: Any) -> Any:
        from pyspark.sql import functions as F

        return spark.read.schema(STATE_DDL).parquet(self.path).where(F.col("closed")) \
            .select(F.col("key").alias("__key"), F.col("start").alias("__ws"), F.col("end").alias("__we"))


class KeyedPanes(Durable):
    """The columnar pane engine with its windows in Spark (see the module's docstring); the driver keeps the
    committed version's number and its global numbers only."""

    EMPTY = {"windows": 0, "closed": 0, "min_timer": None, "earliest": None, "min_lo": None, "min_ptimer": None}
    placeable = True  # ``Placement`` may move its windows back to the driver (``ColumnarEngine``)

    def __init__(self, spark: Any, root: str, trigger: ComparisonTrigger, lateness: int, accumulating: bool):
        self.spark = spark
        self.root = storage.join(root, "windows")
        self.trigger = trigger
        self.lateness = lateness
        self.accumulating = accumulating
        self.version: int | None = None  # the micro-batch whose step wrote the windows now in force
        self.committed_version: int | None = None
        self.stats: dict = dict(self.EMPTY)
        self.changed = False  # the last step processed some window (its state changed: it must commit)

    @staticmethod
    def continues(committed: dict | None) -> bool:
        """Whether it goes on from ``committed``: a fresh start or its own commit (the driver engines' windows
        go on with them)."""
        return committed is None or "keyed" in committed or (not committed.get("columnar")
                                                              and not committed.get("windows"))

    def __len__(self) -> int:
        return int(self.stats["windows"])

    @staticmethod
    def accepted(*columns: Any) -> KeyedCounts:
        """No counts (a micro-batch without rows): the keyed scan hands its own (``KeyedCounts``)."""
        return KeyedCounts()

    def path(self, version: int) -> str:
        return storage.join(self.root, str(version))

    def _windows(self) -> Any:
        """The windows in force, each with ``has_state``."""
        from pyspark.sql import functions as F

        if self.version is None or not self.stats["windows"]:
            return self.spark.createDataFrame([], STATE_DDL).withColumn("has_state", F.lit(True))
        return self.spark.read.schema(STATE_DDL).parquet(storage.join(self.path(self.version), f"kind={WINDOW}")) \
            .withColumn("has_state", F.lit(True))

    def drive(self, accepted: KeyedCounts, batch: int, watermark: int, processing_time: int,
              token: int) -> tuple[KeyedFired, int]:
        """Step every window that got rows or whose timer is due (one Spark job; nothing when neither)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        due = self.any_due(watermark, processing_time)
        self.changed = False
        if not accepted.windows and not due:
            return KeyedFired(self.path(batch), 0, None), 0
        out = self._stepped(self._counts(accepted), batch, watermark, processing_time)
        observation = Observation()
        kind = F.col("kind")
        is_window = kind == WINDOW
        out = out.observe(observation,
                          F.count_if(is_window).alias("windows"),
                          F.count_if(is_window & F.col("closed")).alias("closed"),
                          F.min(F.when(is_window, F.col("timer"))).alias("min_timer"),
                          F.min(F.when(is_window & (F.col("timer") < MAX_TIME), F.col("timer"))).alias("earliest"),
                          F.min(F.when(is_window & (F.col("lo") >= 0), F.col("lo"))).alias("min_lo"),
                          F.min(F.when(is_window & (F.col("ptimer") < MAX_TIME), F.col("ptimer"))).alias("min_ptimer"),
                          F.count_if(kind == PANE).alias("fired"),
                          F.min(F.when((kind == PANE) & (F.col("pane_lo") >= 0), F.col("pane_lo"))).alias("pane_lo"),
                          F.sum(F.when(kind == TALLY, F.col("processed"))).alias("processed"),
                          F.sum(F.when(kind == TALLY, F.col("expired"))).alias("expired"))
        target = self.path(batch)
        out.where(kind != TALLY).write.mode("overwrite").partitionBy("kind").parquet(target)
        got = observation.get
        self.version = batch
        self.stats = {name: (int(got[name]) if got[name] is not None else None) for name in self.EMPTY}
        self.changed = bool(got["processed"])
        fired = KeyedFired(storage.join(target, f"kind={PANE}"), int(got["fired"]),
                           int(got["pane_lo"]) if got["pane_lo"] is not None else None)
        return fired, int(got["expired"] or 0)

    def _counts(self, accepted: KeyedCounts) -> Any:
        """The micro-batch's new-row counts (key, start, end, n), or None."""
        from pyspark.sql import functions as F

        if not accepted.windows:
            return None
        return self.spark.read.schema(COUNTS_DDL).parquet(accepted.path).select(
            F.col("__key").alias("key"), F.col("__ws").alias("start"), F.col("__we").alias("end"),
            F.col("__n").cast("bigint").alias("n"))

    def _stepped(self, counts: Any, batch: int, watermark: int, processing_time: int) -> Any:
        """The step's output (``OUT_DDL``): the windows in force joined with ``counts`` on (key, window), each
        partition stepped by ``step_windows``."""
        from pyspark.sql import functions as F

        windows = self._windows()
        windows = windows.join(counts, KEY, "full_outer") if counts is not None else \
            windows.withColumn("n", F.lit(0).cast("bigint"))
        trigger, lateness, accumulating = self.trigger, self.lateness, self.accumulating

        def step(batches: Iterator[Any]) -> Iterator[Any]:
            return step_windows(trigger, lateness, accumulating, batch, watermark, processing_time, batches)

        return windows.mapInArrow(step, OUT_DDL)

    def any_due(self, watermark: int, processing_time: int) -> bool:
        timer, ptimer = self.stats["min_timer"], self.stats["min_ptimer"]
        return (timer is not None and watermark >= timer) or (ptimer is not None and processing_time >= ptimer)

    # -- moving the windows between the driver and Spark ---------------------------------------------
    @classmethod
    def from_table(cls, spark: Any, root: str, panes: ColumnarPanes, batch: int) -> KeyedPanes:
        """The driver's windows (``panes``, as after micro-batch ``batch``) written as version ``batch``."""
        import pyarrow as pa

        engine = cls(spark, root, panes.trigger, panes.lateness, panes.accumulating)
        storage.delete(engine.path(batch))  # what an attempt that crashed may have left
        table = panes.to_arrow()
        timers, ptimers = panes.timers(), panes.processing_timers()
        table = table.append_column("timer", pa.array(timers, pa.int64()))
        table = table.append_column("ptimer", pa.array(ptimers, pa.int64()))
        storage.write_parquet(storage.join(engine.path(batch), f"kind={WINDOW}", "part-00000.parquet"), table)
        lo = table["lo"].to_numpy()
        finite = timers[timers < MAX_TIME]
        engine.version = batch
        engine.stats = {"windows": table.num_rows, "closed": int(table["closed"].to_numpy().sum()),
                        "min_timer": int(timers.min()) if len(timers) else None,
                        "earliest": int(finite.min()) if len(finite) else None,
                        "min_lo": int(lo[lo >= 0].min()) if (lo >= 0).any() else None,
                        "min_ptimer": int(ptimers[ptimers < MAX_TIME].min()) if (ptimers < MAX_TIME).any() else None}
        return engine

    def to_table(self, panes: ColumnarPanes) -> ColumnarPanes:
        """The windows in force, restored into the driver's ``panes``."""
        if self.version is not None and self.stats["windows"]:
            path = storage.join(self.path(self.version), f"kind={WINDOW}")
            panes.restore(self.spark.read.schema(STATE_DDL).parquet(path).drop("timer", "ptimer").toArrow())
        return panes

    def closed(self) -> Tombstones | list:
        if self.version is None or not self.stats["closed"]:
            return []
        return Tombstones(storage.join(self.path(self.version), f"kind={WINDOW}"), int(self.stats["closed"]))

    def live_batches(self, stored: set[int]) -> set[int]:
        """Of the ``stored`` micro-batches, those a later pane may read: from the first any open window's next
        pane reads (kept whole from there: a bound, not each window's range)."""
        first = self.stats["min_lo"]
        return {b for b in stored if first is not None and b >= first}

    def timers(self, now: int) -> tuple[list[int], list[int]]:
        """The earliest processing-time timer after ``now`` (a step leaves none at or before its own time) and
        the earliest event-time one."""
        earliest, ptimer = self.stats["earliest"], self.stats["min_ptimer"]
        return [ptimer] if ptimer is not None and ptimer > now else [], [earliest] if earliest is not None else []

    # -- committed with the micro-batch --------------------------------------------------------------
    def snapshot(self, commit: Commit) -> dict:
        return {"columnar": True, "windows": [], "keyed": {"version": self.version, "stats": self.stats}}

    def restore(self, commit: Commit) -> None:
        keyed = commit.data.get("keyed")
        if keyed is not None:
            self.version = keyed["version"]
            self.stats = {**self.EMPTY, **keyed["stats"]}  # (an earlier version's commit has no processing timer)
        self.committed_version = self.version

    def delete_uncommitted(self) -> None:
        """The versions a step wrote after the committed one (a crashed attempt's): never read again."""
        self._delete(lambda v: self.committed_version is None or v > self.committed_version)

    def committed(self) -> None:
        """The versions before the one in force: no re-run reads them now."""
        self.committed_version = self.version
        if self.version is not None:
            self._delete(lambda v: v < self.version)

    def _delete(self, which: Any) -> None:
        if not storage.isdir(self.root):
            return
        for name in storage.listdir(self.root):
            if name.isdigit() and which(int(name)):
                storage.delete(storage.join(self.root, name))


class Placement:
    """Where the columnar engine's windows live (session conf ``sqlwin.streaming.state``): ``executors`` (in
    Spark, ``KeyedPanes``), ``driver`` (``ColumnarEngine``, the table saved with each commit), or ``auto`` (the
    default): in the driver while there are at most ``limit`` open windows (``sqlwin.streaming.state.
    driverWindows``, default 250,000: a micro-batch costs one Spark job fewer, and the driver's step over a table of
    that size takes a fraction of a second where Spark's read-join-write of it takes seconds), in Spark
    beyond that, and back at half of it. Both hold the same columns, so a move is a copy, made after a
    micro-batch's step and committed with it."""

    MODES = ("auto", "executors", "driver")

    def __init__(self, spark: Any, root: str, mode: str = "auto", limit: int = 250_000):
        self.spark = spark
        self.root = root
        self.mode = mode if mode in self.MODES else "auto"
        self.limit = limit
        self.last_windows: int | None = None  # the windows the last data micro-batch brought rows to

    @classmethod
    def of(cls, spark: Any, root: str) -> Placement:
        mode = str(spark.conf.get("sqlwin.streaming.state", "auto")).lower()
        return cls(spark, root, mode, int(spark.conf.get("sqlwin.streaming.state.driverWindows", "250000")))

    def initial(self, engine: Any, committed: dict | None, keyed: type[KeyedPanes] | None = None) -> Any:
        """The engine to start or resume with: ``engine`` (the driver's columnar one) or ``keyed`` (in Spark:
        ``KeyedPanes``, or its subclass for windows that merge). A commit resumes with the engine that wrote
        it, whatever the mode now (then ``place`` moves it, if it may)."""
        keyed = keyed or KeyedPanes
        if (committed is not None and "keyed" in committed) or (self.mode == "executors" and
                                                                  keyed.continues(committed)):
            panes = engine.panes
            return keyed(self.spark, self.root, panes.trigger, panes.lateness, panes.accumulating)
        return engine

    def unsure(self, engine: Any) -> bool:
        """Whether a data micro-batch might take the driver engine's windows past ``limit``: the first one (its
        size not yet seen), or one twice the last one's would. Its scan then writes the counts where Spark reads
        them and the driver reads them back only if they stay below ``limit``, so that a first micro-batch of a
        million new windows never passes through the driver's memory (``TimeWindowAssigner.scan``)."""
        from sqlwin.streaming.engines import ColumnarEngine

        return self.mode == "auto" and isinstance(engine, ColumnarEngine) and engine.placeable and (
            self.last_windows is None or len(engine) + 2 * self.last_windows > self.limit)

    def seen(self, windows: int) -> None:
        """A data micro-batch brought rows to ``windows`` windows."""
        self.last_windows = windows

    def moves(self, engine: Any, new_windows: int) -> bool:
        """Whether a micro-batch bringing rows to ``new_windows`` windows (at most) takes the driver engine's
        windows past ``limit``: they then move to Spark before its step, so the driver never holds them."""
        from sqlwin.streaming.engines import ColumnarEngine

        return self.mode == "auto" and isinstance(engine, ColumnarEngine) and engine.placeable and \
            len(engine) + new_windows > self.limit

    def before_step(self, engine: Any, accepted: Any, batch: int) -> Any:
        """Before micro-batch ``batch``'s step: the engine for counts ``accepted``; where the scan handed them
        as ``KeyedCounts`` (``moves``), the driver's windows are written as the version before ``batch``."""
        from sqlwin.streaming.engines import ColumnarEngine

        if not isinstance(accepted, KeyedCounts) or not isinstance(engine, ColumnarEngine) or not engine.placeable:
            return engine
        panes = engine.panes
        if batch > 0 and len(panes):
            return KeyedPanes.from_table(self.spark, self.root, panes, batch - 1)
        return KeyedPanes(self.spark, self.root, panes.trigger, panes.lateness, panes.accumulating)

    def place(self, engine: Any, batch: int) -> Any:
        """After micro-batch ``batch``'s step: the engine where its windows belong now."""
        from sqlwin.streaming.engines import ColumnarEngine

        driver = self.mode == "driver" or (self.mode == "auto" and len(engine) <= self.limit)
        spark = self.mode == "executors" or (self.mode == "auto" and len(engine) > self.limit)
        if isinstance(engine, ColumnarEngine) and engine.placeable and spark:
            return KeyedPanes.from_table(self.spark, self.root, engine.panes, batch)
        if isinstance(engine, KeyedPanes) and engine.placeable and driver and \
                (self.mode == "driver" or len(engine) <= self.limit // 2):
            return ColumnarEngine(engine.to_table(ColumnarPanes(engine.trigger, engine.lateness, engine.accumulating)))
        return engine
