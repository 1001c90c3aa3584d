-- Nexmark q7, highest bid: the bids with the highest price in each 10-second window.
SELECT b.auction, b.price, b.bidder, b.date_time
FROM bids b
JOIN (
  SELECT MAX(price) AS maxprice, window_end AS date_time
  FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
  GROUP BY window_start, window_end
) b1 ON b.price = b1.maxprice
WHERE b.date_time BETWEEN b1.date_time - INTERVAL '10' SECONDS AND b1.date_time
