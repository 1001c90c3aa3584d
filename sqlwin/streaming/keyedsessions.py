"""SESSION windows' keyed state in Spark: their merges and their panes stepped on the executors.

``KeyedPanes`` joins the windows in force with a micro-batch's counts on (key, window); a session's bounds change
when it merges, so here the two are put side by side instead: Spark shuffles the open sessions (version ``n-1``)
and the micro-batch's own sessions (``rows/<n>``, one partial row per micro-batch session with its row count)
by key and sorts each partition by (key, start, end), and each key's rows, read in that order by a
``mapInArrow``, are merged (``sqlwin.core.sessionmerge``, Beam's ``onMerge``) and stepped (``ColumnarPanes``) on
the executor, in parallel. The output is ``KeyedPanes``'s (the new version's sessions, the panes fired, a tally
per batch), and so is everything the driver keeps (an ``Observation`` of global numbers, committed with the
micro-batch). Sessions with their state in Spark stay there (``placeable``: the driver's engine for sessions,
``SessionColumns``, merges in the driver and does not move either).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from sqlwin.core import columnar
from sqlwin.core.columnar import KEY, STATE, ColumnarPanes, ComparisonTrigger
from sqlwin.core.sessionmerge import merge_sessions
from sqlwin.streaming.keyedstate import OUT_DDL, PANE, STATE_DDL, TALLY, WINDOW, KeyedPanes, _batch, out_schema


def step_sessions(trigger: ComparisonTrigger, lateness: int, accumulating: bool, batch: int, watermark: int,
                  processing_time: int, batches: Iterator[Any]) -> Iterator[Any]:
    """The executors' step over one partition sorted by key: Arrow batches of open sessions (``has_state``) and
    the micro-batch's own sessions (``n``) in, ``OUT_DDL`` out. A key's rows may span two batches: each batch
    steps the keys it holds whole and keeps its last key's rows for the next."""
    import pyarrow as pa
    import pyarrow.compute as pc

    held = None
    for rb in batches:
        if not rb.num_rows:
            continue
        table = pa.Table.from_batches([rb]) if held is None else pa.concat_tables([held, pa.Table.from_batches([rb])])
        cut = pc.index(table["key"], table["key"][-1]).as_py()  # the first row of the last key
        if cut:
            yield from _step_keys(trigger, lateness, accumulating, batch, watermark, processing_time,
                                  table.slice(0, cut))
        held = table.slice(cut)
    if held is not None:
        yield from _step_keys(trigger, lateness, accumulating, batch, watermark, processing_time, held)


def _step_keys(trigger: ComparisonTrigger, lateness: int, accumulating: bool, batch: int, watermark: int,
               processing_time: int, table: Any) -> Iterator[Any]:
    """Whole keys' sessions merged and stepped as the driver's ``SessionColumns`` steps them."""
    import pyarrow.compute as pc

    has = pc.fill_null(table["has_state"], False)
    panes = ColumnarPanes(trigger, lateness, accumulating)
    if pc.any(has).as_py():
        panes.restore(table.filter(has).select([*KEY, *STATE]))
    spans = table.filter(pc.invert(has)).select([*KEY, "n"]).to_pandas()
    counts = merge_sessions(panes, spans.astype({"key": object, "n": np.int64}), watermark)
    fired, expired = panes.step(counts, batch, watermark, processing_time)
    schema = out_schema()
    windows = panes.table
    if len(windows):
        index = windows.index
        end = index.get_level_values("end").to_numpy(np.int64)
        col = {c: windows[c].to_numpy() for c in STATE}
        yield _batch(schema, {"kind": np.full(len(windows), WINDOW, object),
                              "key": index.get_level_values("key").to_numpy(object),
                              "start": index.get_level_values("start").to_numpy(np.int64), "end": end, **col,
                              "timer": columnar.timers_of(trigger, end, col),
                              "ptimer": columnar.processing_timers_of(col)})
    if len(fired):
        frame = fired.frame
        yield _batch(schema, {"kind": np.full(len(frame), PANE, object), "key": frame["key"].to_numpy(object),
                              "start": frame["start"].to_numpy(np.int64), "end": frame["end"].to_numpy(np.int64),
                              "pane_index": frame["pane_index"].to_numpy(np.int32),
                              "pane_timing": frame["pane_timing"].to_numpy(object),
                              "is_final": frame["is_final"].to_numpy(bool), "pane_lo": frame["lo"].to_numpy(np.int64)})
    yield _batch(schema, {"kind": np.array([TALLY], object), "processed": np.array([panes.processed]),
                          "expired": np.array([expired])})


class KeyedSessions(KeyedPanes):
    """``KeyedPanes`` for SESSION windows: the open sessions and the micro-batch's own, side by side per key."""

    placeable = False

    def _stepped(self, counts: Any, batch: int, watermark: int, processing_time: int) -> Any:
        from pyspark.sql import functions as F

        windows = self._windows().withColumn("n", F.lit(None).cast("bigint"))
        if counts is not None:
            spans = counts.select(*KEY, "n", *[F.lit(None).cast(t).alias(c) for c, t in
                                               (column.split(" ") for column in STATE_DDL.split(", ")[3:])],
                                  F.lit(False).alias("has_state"))
            windows = windows.unionByName(spans)
        trigger, lateness, accumulating = self.trigger, self.lateness, self.accumulating

        def step(batches: Iterator[Any]) -> Iterator[Any]:
            return step_sessions(trigger, lateness, accumulating, batch, watermark, processing_time, batches)

        return windows.repartition(F.col("key")).sortWithinPartitions(*KEY).mapInArrow(step, OUT_DDL)
