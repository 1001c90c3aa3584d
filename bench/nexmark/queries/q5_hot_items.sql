-- Nexmark q5, hot items: the auctions with the most bids in each 10-second window, sliding every 2 seconds.
WITH auction_bids AS (
  SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
  FROM HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECONDS, INTERVAL '10' SECONDS)
  GROUP BY auction, window_start, window_end
), max_bids AS (
  SELECT MAX(num) AS maxn, starttime, endtime FROM auction_bids GROUP BY starttime, endtime
)
SELECT a.auction, a.num, a.starttime, a.endtime
FROM auction_bids a
JOIN max_bids m ON a.starttime = m.starttime AND a.endtime = m.endtime AND a.num >= m.maxn
