-- Nexmark q7 as the streaming columns run it: a window join of the bids' 10-second TUMBLE with the window's
-- highest price (the bids of each window at its MAX). The batch text (../q7_highest_bid.sql) joins the bids to
-- the window MAX by a time range, an interval join, which sqlwin runs in batch only (README, "Limits"). sqlwin runs
-- this window join as the window Top-N it equals (the bids ranked first by price in their window): one window
-- operator (README, "Window joins and cascaded windows in streaming").
SELECT B.auction, B.price, B.bidder, B.date_time
FROM (SELECT * FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)) B
JOIN (
  SELECT MAX(price) AS maxprice, window_start, window_end
  FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
  GROUP BY window_start, window_end
) B1 ON B.window_start = B1.window_start AND B.window_end = B1.window_end AND B.price = B1.maxprice
