"""Hand-written Spark Structured Streaming equivalents of the streaming-capable queries.

Written as a Spark user would without sqlwin: ``withWatermark`` + ``window()`` / ``session_window()``
aggregations in append mode into a parquet file sink; where the query has a step around the window
aggregation (q5's hottest auctions, the Top-N), that step runs per micro-batch in ``foreachBatch`` (every
auction of a window is emitted in the same micro-batch, when the watermark passes its end); early firings
are Spark's update mode. Each function takes the streaming DataFrames of the tables the query reads (``bids``,
``persons``, ``auctions``; no watermark yet) and the watermark delay in seconds, and returns a ``StreamJob``
(nothing runs yet).
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


NativeStream = Callable[[dict[str, DataFrame], int], StreamJob]


def _watermarked(bids: DataFrame, delay_s: int) -> DataFrame:
    return bids.withWatermark("date_time", f"{delay_s} seconds")


def q5_hot_items(frames: dict[str, DataFrame], delay_s: int) -> StreamJob:
    bids = frames["bids"]
    counts = _watermarked(bids, delay_s) \
        .groupBy(F.window("date_time", "10 seconds", "2 seconds"), "auction") \
        .agg(F.count(F.lit(1)).alias("num")) \
        .select("auction", "num", F.col("window.start").alias("starttime"), F.col("window.end").alias("endtime"))

    def hottest(batch: DataFrame) -> DataFrame:
        top = batch.groupBy("starttime", "endtime").agg(F.max("num").alias("maxn"))
        return batch.join(top, ["starttime", "endtime"]).where("num >= maxn") \
            .select("auction", "num", "starttime", "endtime")

    return StreamJob(counts, per_batch=hottest)


def q11_user_sessions(frames: dict[str, DataFrame], delay_s: int) -> StreamJob:
    bids = frames["bids"]
    sessions = _watermarked(bids, delay_s) \
        .groupBy("bidder", F.session_window("date_time", "10 seconds")) \
        .agg(F.count(F.lit(1)).alias("bid_count")) \
        .select("bidder", "bid_count", F.col("session_window.start").alias("starttime"),
                F.col("session_window.end").alias("endtime"))
    return StreamJob(sessions)


def cumulate_channel(frames: dict[str, DataFrame], delay_s: int) -> StreamJob:
    bids = frames["bids"]
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


def topn_auctions(frames: dict[str, DataFrame], delay_s: int) -> StreamJob:
    bids = frames["bids"]
    counts = _watermarked(bids, delay_s) \
        .groupBy(F.window("date_time", "10 seconds"), "auction") \
        .agg(F.count(F.lit(1)).alias("num"), F.max("price").alias("max_price")) \
        .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                "auction", "num", "max_price")

    def top3(batch: DataFrame) -> DataFrame:
        rank = Window.partitionBy("window_start", "window_end").orderBy(F.desc("num"), "auction")
        return batch.withColumn("rownum", F.row_number().over(rank)).where("rownum <= 3")

    return StreamJob(counts, per_batch=top3)


def trigger_early_late(frames: dict[str, DataFrame], delay_s: int) -> StreamJob:
    bids = frames["bids"]
    # Spark's nearest to early and late firings: update mode emits every window that changed in a micro-batch;
    # allowed lateness of 1 minute is one more minute of watermark delay (a window's state is kept, and its
    # late rows counted, until max ts - delay - 1 minute passes its end, then they are dropped, as in sqlwin)
    counts = _watermarked(bids, delay_s + 60) \
        .groupBy(F.window("date_time", "10 seconds"), "auction") \
        .agg(F.count(F.lit(1)).alias("num"), F.max("price").alias("max_price")) \
        .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                "auction", "num", "max_price")
    return StreamJob(counts, output_mode="update", per_batch=lambda batch: batch, delay_s=delay_s + 60)


def q7_highest_bid(frames: dict[str, DataFrame], delay_s: int) -> StreamJob:
    # the window's bids and its highest price in one append-mode aggregation (Spark runs no stream-stream join
    # of a stream with its own aggregation here), then the bids at that price: every bid of a window at its MAX
    bid = F.struct("auction", "price", "bidder", "date_time")
    best = _watermarked(frames["bids"], delay_s) \
        .groupBy(F.window("date_time", "10 seconds")) \
        .agg(F.max("price").alias("maxprice"), F.collect_list(bid).alias("bids")) \
        .select("maxprice", F.explode("bids").alias("b")) \
        .where("b.price = maxprice") \
        .select("b.auction", "b.price", "b.bidder", "b.date_time")
    return StreamJob(best)


def q8_new_users(frames: dict[str, DataFrame], delay_s: int) -> StreamJob:
    # the window join of two window aggregations (persons by id and name, auctions by seller) as Spark runs it:
    # a stream-stream inner join of the two append-mode aggregations on the window and the person
    persons = _watermarked(frames["persons"], delay_s) \
        .groupBy(F.window("date_time", "10 seconds"), "id", "name").agg(F.count(F.lit(1)).alias("_p")) \
        .select("id", "name", F.col("window.start").alias("starttime"), F.col("window.end").alias("endtime"))
    auctions = _watermarked(frames["auctions"], delay_s) \
        .groupBy(F.window("date_time", "10 seconds"), "seller").agg(F.count(F.lit(1)).alias("_a")) \
        .select("seller", F.col("window.start").alias("a_start"), F.col("window.end").alias("a_end"))
    joined = persons.join(auctions, (persons.id == auctions.seller) & (persons.starttime == auctions.a_start)
                          & (persons.endtime == auctions.a_end)) \
        .select("id", "name", "starttime")
    return StreamJob(joined)


COUNT_N = 10  # count_window's ROWS 10
_ORDER = ["ts", "bidder", "price", "channel", "url", "seq"]  # ts, then the other columns (GRAMMAR 1's tie-break)
_COUNT_OUT = ("auction BIGINT, window_index BIGINT, window_start TIMESTAMP, window_end TIMESTAMP, n BIGINT, "
              "avg_price DOUBLE, max_price BIGINT")
# the rows a key keeps, as JSON columns (pyspark 4.3's Python worker fails to read an ARRAY in a state schema:
# KeyError 'elementType')
_COUNT_STATE = "next_index BIGINT, numbered BIGINT, rows STRING"


def count_window(frames: dict[str, DataFrame], delay_s: int) -> StreamJob:
    # Storm's count window by hand: per auction (applyInPandasWithState, event-time timeout), rows wait until the
    # watermark passes them, then are numbered in (ts, other columns) order and every 10 numbered rows make a
    # window. Spark drops the rows at or behind its watermark before the function sees them (the late rows).
    from pyspark.sql.streaming.state import GroupStateTimeout

    bids = _watermarked(frames["bids"], delay_s) \
        .select("auction", "date_time", F.unix_micros("date_time").alias("ts"), "bidder", "price", "channel", "url",
                "seq")
    return StreamJob(bids.groupBy("auction").applyInPandasWithState(
        _count_windows, _COUNT_OUT, _COUNT_STATE, "append", GroupStateTimeout.EventTimeTimeout))


def _count_windows(key, frames, state):
    import json

    import pandas as pd

    watermark_us = state.getCurrentWatermarkMs() * 1000
    if state.exists:
        next_index, numbered, kept = state.get
        rows = pd.DataFrame(json.loads(kept), columns=_ORDER)
    else:
        next_index, numbered, rows = 0, 0, pd.DataFrame({c: [] for c in _ORDER})
    new = [f[_ORDER] for f in frames]
    if new:
        fresh = pd.concat(new, ignore_index=True)
        rows = pd.concat([rows, fresh[fresh["ts"] > watermark_us]], ignore_index=True)  # late: at or behind W
    done, waiting = rows.iloc[:numbered], rows.iloc[numbered:]
    ready = waiting[waiting["ts"] <= watermark_us].sort_values(_ORDER, kind="mergesort")
    done = pd.concat([done, ready], ignore_index=True)
    waiting = waiting[waiting["ts"] > watermark_us]
    full = len(done) // COUNT_N * COUNT_N
    out = []
    for i in range(0, full, COUNT_N):
        w = done.iloc[i:i + COUNT_N]
        out.append((key[0], next_index, int(w["ts"].iloc[0]), int(w["ts"].iloc[-1]) + 1000, COUNT_N,
                    float(w["price"].mean()), int(w["price"].max())))
        next_index += 1
    rows = pd.concat([done.iloc[full:], waiting], ignore_index=True)
    state.update((next_index, len(done) - full, json.dumps(rows.to_numpy().tolist(), default=int)))
    if len(waiting):  # called again once the watermark passes the earliest waiting row (ms: one ms later at most)
        state.setTimeoutTimestamp(-(-int(waiting["ts"].min()) // 1000) + 1)
    if out:
        frame = pd.DataFrame(out, columns=["auction", "window_index", "window_start", "window_end", "n", "avg_price",
                                           "max_price"])
        for c in ("window_start", "window_end"):
            frame[c] = pd.to_datetime(frame[c], unit="us")
        yield frame
