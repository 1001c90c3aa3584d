"""Replay (GRAMMAR 3): a streaming query over ``CREATE STREAM s FROM TABLE t ARRIVAL ORDER BY ...``.

The table's rows are cut into micro-batches (``MICRO BATCH BY``; default one row each), in arrival
order, and the *same* micro-batch operator a streaming table runs decides lateness and drives the pane
driver, so replay gives exactly the panes a streaming run gives for the same micro-batches. As in a live
stream, a micro-batch that moves the watermark is followed by a no-data micro-batch (the one in which the
windows it closed fire); when the table ends, a last no-data micro-batch runs with the watermark at
+infinity.

The processing-time clock of a micro-batch is ``PROCESSING TIME BY`` (its largest value in the batch),
else the micro-batch number in seconds after the epoch (no-data batches keep the clock where it is).

Two ways to run it, one semantics (``PlannedReplay`` is the operator with its Spark work done up front):

- **planned** (windows that do not move: TUMBLE, HOP, CUMULATE, the global window): Spark assigns every
  row of the table to its windows once and aggregates it per (key, window, micro-batch) (partial
  aggregates, or the rows where the query needs them); the operator then steps through the micro-batches
  in Python on those counts alone (the watermark a running max, lateness a comparison, the pane driver per
  window, or the columnar one over every window at once where micro-batches hold many windows), and one
  Spark job computes every fired pane (the statement partitioned by micro-batch where it relates panes:
  ``partitioned``). A handful of Spark jobs whatever the number of micro-batches.
- **planned count windows** (``countreplay``: TUMBLE ROWS and HOP ROWS windows that fire once, when
  complete): the watermark sequence comes from the operator's own steps over the per-micro-batch summary, and
  one Spark job numbers every kept row and finds the micro-batch that numbers it.
- **planned window joins** (``joinreplay``: sides that read streams, each a window aggregation whose panes
  are one row each): each side a planned replay, the join stepped on which windows the sides fired when, the
  join's panes computed at the end in one query.
- **planned sessions** (``sessionreplay``: SESSION windows whose state is partial aggregates, so no session
  closes before it expires): the watermark sequence from the operator's own steps, one Spark job drops the
  late rows and sessionizes the others per key and micro-batch, the operator merges those sessions in Python.
- **stepped** (SESSION windows whose stored rows move between sessions as they merge or may be dropped when
  one closes, and MAX_DURATION sessions; count windows with early panes or windows known only once complete;
  cascaded windows and the other window joins): the operator runs each micro-batch's rows through Spark, as a
  streaming table does.

Modules: ``replaycut`` (the micro-batches of a table, and the loop that drives an operator through them),
``plannedreplay``, ``countreplay``, ``sessionreplay``, ``joinreplay``; this one chooses.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlwin.plan.windows import WindowKind
from sqlwin.streaming import catalog, committer, storage
from sqlwin.streaming.countreplay import PlannedCountReplay
from sqlwin.streaming.joinreplay import PlannedStagedReplay
from sqlwin.streaming.operator import MicroBatchOperator
from sqlwin.streaming.plannedreplay import PlannedReplay
from sqlwin.streaming.replaycut import Cut, side_by_side, stepped
from sqlwin.streaming.sessionreplay import PlannedSessionReplay
from sqlwin.streaming.shape import StreamingShape
from sqlwin.streaming.sinks import BatchSink, ReplaySink
from sqlwin.streaming.staged import StagedOperator
from sqlwin.streaming.stages import StagedShape


def replay(spark: Any, shape: StreamingShape | StagedShape, late_view: str | None = None) -> Any:
    """The panes of the replayed query (a batch DataFrame with ``micro_batch``); LATE ROWS TO becomes a view."""
    folder = storage.scratch_folder(spark, "sqlwin-replay-")  # scratch state: the panes are returned, not kept
    tag = f"replay_{uuid.uuid4().hex[:8]}"
    sink = ReplaySink(f"__sqlwin_out_{tag}", storage.join(folder, "data"))
    late_name = shape.late_rows_to
    late_sink = ReplaySink(late_name, storage.join(folder, "late_rows")) if late_name else None
    try:
        with committer.volatile():  # scratch state: nothing restores it
            result, late = _run(spark, shape, folder, sink, late_sink, tag)
        if late_name is not None:
            catalog.add_late_view(spark, late_name, late.localCheckpoint())
        return result
    finally:
        storage.delete(folder)
        drop_views_of(spark, tag)


def drop_views_of(spark: Any, tag: str) -> None:
    """The temporary views a replay made for its micro-batches (their names end with its ``tag``): its result and
    late rows hold their rows, and a session (a JDBC client's) that replays again and again would keep them all."""
    for row in spark.sql(f"SHOW VIEWS LIKE '__sqlwin_*{tag}*'").collect():
        if row["isTemporary"]:
            spark.catalog.dropTempView(row["viewName"])


def _run(spark: Any, shape: StreamingShape | StagedShape, folder: str, sink: BatchSink,
         late_sink: BatchSink | None, tag: str) -> tuple[Any, Any]:
    """(panes, late rows): planned where the windows do not move, else stepped micro-batch by micro-batch."""
    has_clock = getattr(shape.stream, "processing_time_by", None) is not None
    if isinstance(shape, StagedShape):  # several windows: each micro-batch through the stages
        if PlannedStagedReplay.applies(shape):
            joined = PlannedStagedReplay(spark, shape, folder, sink, late_sink, tag)
            if joined.plannable():
                return joined.run(has_clock)
        numbered, plan = side_by_side(spark, shape.streams) if len(shape.streams) > 1 else \
            Cut(spark, shape).numbered()
        operator = StagedOperator(spark, shape, folder, sink, late_sink, tag)
        return stepped(spark, operator, sink, late_sink, numbered, plan, has_clock)
    window = shape.window
    planner = PlannedReplay
    if window is not None and window.is_count_based:
        planner = PlannedCountReplay
    elif window is not None and window.kind is WindowKind.SESSION:
        planner = PlannedSessionReplay
    planned = planner(spark, shape, folder, sink, late_sink, tag)
    if planned.plannable(cut := Cut(spark, shape)):
        return planned.run(cut, has_clock)
    numbered, plan = cut.numbered()
    operator = MicroBatchOperator(spark, shape, folder, sink, late_sink, tag)
    return stepped(spark, operator, sink, late_sink, numbered, plan, has_clock)
