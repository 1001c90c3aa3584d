"""Replay (GRAMMAR 3): a streaming query over ``CREATE STREAM s FROM TABLE t ARRIVAL ORDER BY ...``.

The table's rows are cut into micro-batches (``MICRO BATCH BY``; default one row each), in arrival
order, and fed to the *same* micro-batch operator a streaming table runs, so replay gives exactly the
panes a streaming run gives for the same micro-batches. As in a live stream, a micro-batch that moves
the watermark is followed by a no-data micro-batch (the one in which the windows it closed fire); when
the table ends, a last no-data micro-batch runs with the watermark at +infinity.

The processing-time clock of a micro-batch is ``PROCESSING TIME BY`` (its largest value in the batch),
else the micro-batch number in seconds after the epoch (no-data batches keep the clock where it is).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from typing import Any

from sqlwin.streaming.operator import MicroBatchOperator
from sqlwin.streaming.shape import StreamingShape
from sqlwin.streaming.sinks import BatchSink

SECOND = 1_000_000
BATCH = "__sqlwin_replay_batch"
CLOCK = "__sqlwin_replay_clock"


def replay(spark: Any, shape: StreamingShape, late_view: str | None = None) -> Any:
    """The panes of the replayed query (a batch DataFrame with ``micro_batch``); LATE ROWS TO becomes a view."""
    from pyspark.sql import functions as F

    stream = shape.stream
    folder = tempfile.mkdtemp(prefix="sqlwin-replay-")  # scratch state: the panes are returned, not kept
    tag = f"replay_{uuid.uuid4().hex[:8]}"
    sink = BatchSink(f"__sqlwin_out_{tag}", os.path.join(folder, "data"))
    late_name = shape.late_rows_to
    late_sink = BatchSink(late_name, os.path.join(folder, "late_rows")) if late_name else None
    try:
        operator = MicroBatchOperator(spark, shape, folder, sink, late_sink, tag)
        rows = spark.table(stream.name)
        order = ", ".join(o.sql("spark") for o in stream.arrival_order)
        group = stream.micro_batch_by.sql("spark") if stream.micro_batch_by is not None else None
        clock = getattr(stream, "processing_time_by", None)
        numbered = rows.selectExpr("*", f"ROW_NUMBER() OVER (ORDER BY {order}) AS __sqlwin_arrival")
        if group is not None:
            numbered = numbered.selectExpr("*", f"{group} AS __sqlwin_group")
            firsts = numbered.groupBy("__sqlwin_group").agg(F.min("__sqlwin_arrival").alias("__first"))
            numbered = numbered.join(firsts, "__sqlwin_group").selectExpr(
                "*", f"DENSE_RANK() OVER (ORDER BY __first) - 1 AS {BATCH}").drop("__first", "__sqlwin_group")
        else:
            numbered = numbered.selectExpr("*", f"__sqlwin_arrival - 1 AS {BATCH}")
        if clock is not None:
            numbered = numbered.selectExpr("*", f"UNIX_MICROS({clock.sql('spark')}) AS {CLOCK}")
        numbered = numbered.drop("__sqlwin_arrival").localCheckpoint()
        clock_of = F.max(CLOCK) if clock is not None else F.lit(None).cast("bigint")
        plan = numbered.groupBy(BATCH).agg(clock_of.alias("clock")).orderBy(BATCH).collect()
        data_columns = [c for c in numbered.columns if c not in (BATCH, CLOCK)]
        processing_time = 0
        for entry in plan:
            processing_time = entry["clock"] if clock is not None else operator.next_batch * SECOND
            batch = numbered.where(F.col(BATCH) == entry[BATCH]).select(*data_columns)
            before = operator.watermark
            operator.step(spark, batch, processing_time)
            if operator.watermark > before:  # the no-data micro-batch a live stream runs next
                operator.step(spark, None, processing_time if clock is not None else operator.next_batch * SECOND)
        final_clock = processing_time if clock is not None else operator.next_batch * SECOND
        operator.step(spark, None, final_clock, end_of_input=True)
        result = sink.read(spark).orderBy("micro_batch").localCheckpoint()  # panes in the order they came
        if late_sink is not None:
            late_sink.read(spark).localCheckpoint().createOrReplaceTempView(late_name)
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)
