"""A micro-batch's input as the operator's queries read it, and the statistics that move the watermark.

Each stream the query reads gets its rows of the micro-batch under its own view (several streams arrive as
one DataFrame, told apart by ``SOURCE_COLUMN``), with only its declared columns and its PROCTIME column set
to the micro-batch's clock. The statistics are aggregates over the same rows (row count ``n``, largest time
``m<i>`` of stream ``i``: of its marker rows' watermark where it is punctuated), so that an assigner's fused
scan computes them in its own Spark job.
"""

from __future__ import annotations

from typing import Any

from sqlwin.plan.statements import CreateStream
from sqlwin.streaming.context import QueryShape, Views
from sqlwin.streaming.sources import SOURCE_COLUMN


class BatchInput:
    def __init__(self, shape: QueryShape, streams: list, views: Views):
        self.shape = shape
        self.streams = streams
        self.views = views

    def read(self, data: Any, processing_time: int) -> tuple[int, list[int | None]]:
        """Register each stream's rows of the micro-batch (None: a no-data micro-batch); returns the row count
        and each stream's largest time."""
        if data is None:
            return 0, [None] * len(self.streams)
        return self.statistics(data.agg(*self.register(data, processing_time)).collect()[0])

    def register(self, data: Any, processing_time: int) -> list:
        """Register each stream's rows of the micro-batch as its view; returns the aggregates of the
        micro-batch's statistics (``n`` rows, ``m<i>`` the largest time of stream ``i``)."""
        from pyspark.sql import functions as F

        several = len(self.streams) > 1
        stats = [F.count(F.lit(1)).alias("n")]
        for i, stream in enumerate(self.streams):
            part = data.where(F.col(SOURCE_COLUMN) == i).drop(SOURCE_COLUMN) if several else data
            if isinstance(stream, CreateStream):
                columns = {c.name for c in stream.columns}
                part = part.select(*[c for c in part.columns if c in columns])
                if stream.proctime_column:
                    part = part.withColumn(stream.proctime_column, F.timestamp_micros(F.lit(processing_time)))
            part.createOrReplaceTempView(self.views.batch_of(i))
            mine = (F.col(SOURCE_COLUMN) == i) if several else F.lit(True)
            stats.append(F.max(F.when(mine, watermark_value(stream, self.shape.time_column, data.columns)))
                         .cast("bigint").alias(f"m{i}"))
        return stats

    def statistics(self, row: Any) -> tuple[int, list[int | None]]:
        """(rows, each stream's largest time) from the statistics' row; None where rows do not move the stream's
        watermark (windows in processing time, a PROCTIME() watermark)."""
        if self.shape.processing_time:  # event times do not move a processing-time watermark
            return int(row["n"]), [None] * len(self.streams)
        return int(row["n"]), [None if s.watermark is not None and s.watermark.follows_clock else row[f"m{i}"]
                               for i, s in enumerate(self.streams)]


def with_statistics(frame: Any, rows: Any, stats: list) -> tuple[Any, Any]:
    """(``frame`` and a branch without rows, the ``Observation`` of ``stats`` over a micro-batch's ``rows``): the
    statistics are taken as the job that reads ``frame`` reads the rows. ``rows.agg(*stats)`` in the union instead
    would shuffle to one partition: one more stage, and under adaptive execution one more Spark job, per
    micro-batch. The branch's condition is never true, and neither folded nor rewritten (``rand() < 0`` is, which
    removes the observation with it); it adds the always-NULL column ``__summary``."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation()
    branch = rows.observe(observation, *stats).where(F.spark_partition_id() < 0)
    return frame.unionByName(branch.select(F.lit(True).alias("__summary")), allowMissingColumns=True), observation


def watermark_value(stream: Any, time_column: str | None, columns: list[str]) -> Any:
    """What a row offers the watermark, in epoch microseconds (its largest over a micro-batch moves the
    watermark): the row's time; for a punctuated watermark, ``expr`` over the marker rows and NULL over the
    others (GRAMMAR 3); NULL where the stream has no such column."""
    from pyspark.sql import functions as F

    watermark = stream.watermark
    if watermark is not None and watermark.punctuated:
        return F.when(F.expr(watermark.where.sql("spark")), F.unix_micros(F.expr(watermark.expression.sql("spark"))))
    time_column = watermark.column if watermark is not None else time_column
    return F.unix_micros(F.col(f"`{time_column}`")) if time_column in columns else F.lit(None)
