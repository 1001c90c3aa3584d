"""The hand-written native Spark equivalents of the queries in ``queries/``.

Written as a Spark expert would without sqlwin: ``window()``, ``session_window()``,
``explode(sequence())`` where Spark has no window function (CUMULATE), ``row_number()`` for count
windows and Top-N. Each keeps the relational shape of its sqlwin query (same joins, same
aggregates) so the ratio measures what sqlwin's window translation costs, not a different
algorithm. Each function takes the SparkSession and returns the DataFrame (nothing runs yet).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

Native = Callable[[SparkSession], DataFrame]


def q5_hot_items(spark: SparkSession) -> DataFrame:
    return spark.sql("""
        WITH auction_bids AS (
          SELECT auction, COUNT(*) AS num, window.start AS starttime, window.end AS endtime
          FROM bids GROUP BY window(date_time, '10 seconds', '2 seconds'), auction
        ), max_bids AS (
          SELECT MAX(num) AS maxn, starttime, endtime FROM auction_bids GROUP BY starttime, endtime
        )
        SELECT a.auction, a.num, a.starttime, a.endtime
        FROM auction_bids a
        JOIN max_bids m ON a.starttime = m.starttime AND a.endtime = m.endtime AND a.num >= m.maxn""")


def q7_highest_bid(spark: SparkSession) -> DataFrame:
    return spark.sql("""
        SELECT b.auction, b.price, b.bidder, b.date_time
        FROM bids b
        JOIN (SELECT MAX(price) AS maxprice, window.end AS date_time
              FROM bids GROUP BY window(date_time, '10 seconds')) b1
          ON b.price = b1.maxprice
        WHERE b.date_time BETWEEN b1.date_time - INTERVAL 10 SECONDS AND b1.date_time""")


def q8_new_users(spark: SparkSession) -> DataFrame:
    return spark.sql("""
        SELECT p.id, p.name, p.starttime
        FROM (SELECT id, name, window.start AS starttime, window.end AS endtime
              FROM persons GROUP BY id, name, window(date_time, '10 seconds')) p
        JOIN (SELECT seller, window.start AS starttime, window.end AS endtime
              FROM auctions GROUP BY seller, window(date_time, '10 seconds')) a
          ON p.id = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime""")


def q11_user_sessions(spark: SparkSession) -> DataFrame:
    return spark.sql("""
        SELECT bidder, COUNT(*) AS bid_count, session_window.start AS starttime, session_window.end AS endtime
        FROM bids GROUP BY bidder, session_window(date_time, '10 seconds')""")


def cumulate_channel(spark: SparkSession) -> DataFrame:
    # Spark has no cumulative window: each row joins the steps from its own to the end of its minute
    return spark.sql("""
        SELECT ws AS window_start, ws + make_dt_interval(0, 0, 0, 10 * k) AS window_end, channel,
               COUNT(*) AS bids, SUM(price) AS volume, MAX(price) AS top_price
        FROM (SELECT channel, price, date_time, window(date_time, '1 minute').start AS ws FROM bids)
        LATERAL VIEW explode(sequence(CAST((unix_micros(date_time) - unix_micros(ws)) DIV 10000000 AS INT) + 1, 6)) AS k
        GROUP BY ws, k, channel""")


def count_window(spark: SparkSession) -> DataFrame:
    # rows numbered per auction in time order, ties broken by the other columns (sqlwin's documented order)
    return spark.sql("""
        SELECT auction, k AS window_index, MIN(date_time) AS window_start,
               MAX(date_time) + INTERVAL 1 MILLISECOND AS window_end,
               COUNT(*) AS n, AVG(price) AS avg_price, MAX(price) AS max_price
        FROM (SELECT auction, price, date_time,
                     (ROW_NUMBER() OVER (PARTITION BY auction
                                         ORDER BY date_time, bidder, price, channel, url, seq) - 1) DIV 10 AS k
              FROM bids)
        GROUP BY auction, k HAVING COUNT(*) = 10""")


def topn_auctions(spark: SparkSession) -> DataFrame:
    return spark.sql("""
        SELECT * FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY num DESC, auction) AS rownum
          FROM (SELECT window.start AS window_start, window.end AS window_end, auction,
                       COUNT(*) AS num, MAX(price) AS max_price
                FROM bids GROUP BY window(date_time, '10 seconds'), auction)
        ) WHERE rownum <= 3""")


def trigger_early_late(spark: SparkSession) -> DataFrame:
    # over a table the triggers change nothing: the final result of each window
    return spark.sql("""
        SELECT window.start AS window_start, window.end AS window_end, auction,
               COUNT(*) AS num, MAX(price) AS max_price
        FROM bids GROUP BY window(date_time, '10 seconds'), auction""")
