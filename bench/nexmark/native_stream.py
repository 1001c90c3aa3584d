"""Hand-written Spark Structured Streaming equivalents of the streaming-capable queries.

Written as a Spark user would without sqlwin: ``withWatermark`` + ``window()`` / ``session_window()``
aggregations in append mode into a parquet file sink; where the query has a step around the window
aggregation (q5's hottest auctions, the Top-N), that step runs per micro-batch in ``foreachBatch`` (every
auction of a window is emitted in the same micro-batch, when the watermark passes its end); early firings
are Spark's update mode. Each function takes the bids as a streaming DataFrame (no watermark yet) and the
watermark delay in seconds, and returns a ``StreamJob`` (nothing runs yet).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


@dataclass
class StreamJob:
    """A streaming result, its output mode, and the step a ``foreachBatch`` sink applies per micro-batch."""

    frame: DataFrame
    output_mode: str = "append"
    per_batch: Callable[[DataFrame], DataFrame] | None = None  # None: Spark's parquet file sink
    delay_s: int = 0  # update mode: the watermark delay, to tell windows that closed from those still open


NativeStream = Callable[[DataFrame, int], StreamJob]


def _watermarked(bids: DataFrame, delay_s: int) -> DataFrame:
    return bids.withWatermark("date_time", f"{delay_s} seconds")


def q5_hot_items(bids: DataFrame, delay_s: int) -> StreamJob:
    counts = _watermarked(bids, delay_s) \
        .groupBy(F.window("date_time", "10 seconds", "2 seconds"), "auction") \
        .agg(F.count(F.lit(1)).alias("num")) \
        .select("auction", "num", F.col("window.start").alias("starttime"), F.col("window.end").alias("endtime"))

    def hottest(batch: DataFrame) -> DataFrame:
        top = batch.groupBy("starttime", "endtime").agg(F.max("num").alias("maxn"))
        return batch.join(top, ["starttime", "endtime"]).where("num >= maxn") \
            .select("auction", "num", "starttime", "endtime")

    return StreamJob(counts, per_batch=hottest)


def q11_user_sessions(bids: DataFrame, delay_s: int) -> StreamJob:
    sessions = _watermarked(bids, delay_s) \
        .groupBy("bidder", F.session_window("date_time", "10 seconds")) \
        .agg(F.count(F.lit(1)).alias("bid_count")) \
        .select("bidder", "bid_count", F.col("session_window.start").alias("starttime"),
                F.col("session_window.end").alias("endtime"))
    return StreamJob(sessions)


def cumulate_channel(bids: DataFrame, delay_s: int) -> StreamJob:
    # Spark has no cumulative window: group by the minute (its window() carries the watermark, so append
    # mode can close it) and by the step k; a bid joins the steps from its own to the end of the minute.
    # The six windows of a minute are emitted when the minute closes (sqlwin emits each at its own end).
    step = (F.unix_micros("date_time") - F.unix_micros(F.date_trunc("minute", "date_time"))) \
        .cast("long") / F.lit(10_000_000)
    first = F.floor(step).cast("int") + 1
    totals = _watermarked(bids, delay_s) \
        .withColumn("k", F.explode(F.sequence(first, F.lit(6)))) \
        .groupBy(F.window("date_time", "1 minute"), "k", "channel") \
        .agg(F.count(F.lit(1)).alias("bids"), F.sum("price").alias("volume"), F.max("price").alias("top_price")) \
        .select(F.col("window.start").alias("window_start"),
                (F.col("window.start") + F.make_dt_interval(secs=F.col("k") * 10)).alias("window_end"),
                "channel", "bids", "volume", "top_price")
    return StreamJob(totals)


def topn_auctions(bids: DataFrame, delay_s: int) -> StreamJob:
    counts = _watermarked(bids, delay_s) \
        .groupBy(F.window("date_time", "10 seconds"), "auction") \
        .agg(F.count(F.lit(1)).alias("num"), F.max("price").alias("max_price")) \
        .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                "auction", "num", "max_price")

    def top3(batch: DataFrame) -> DataFrame:
        rank = Window.partitionBy("window_start", "window_end").orderBy(F.desc("num"), "auction")
        return batch.withColumn("rownum", F.row_number().over(rank)).where("rownum <= 3")

    return StreamJob(counts, per_batch=top3)


def trigger_early_late(bids: DataFrame, delay_s: int) -> StreamJob:
    # Spark's nearest to early and late firings: update mode emits every window that changed in a micro-batch;
    # allowed lateness of 1 minute is one more minute of watermark delay (a window's state is kept, and its
    # late rows counted, until max ts - delay - 1 minute passes its end, then they are dropped, as in sqlwin)
    counts = _watermarked(bids, delay_s + 60) \
        .groupBy(F.window("date_time", "10 seconds"), "auction") \
        .agg(F.count(F.lit(1)).alias("num"), F.max("price").alias("max_price")) \
        .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                "auction", "num", "max_price")
    return StreamJob(counts, output_mode="update", per_batch=lambda batch: batch, delay_s=delay_s + 60)
