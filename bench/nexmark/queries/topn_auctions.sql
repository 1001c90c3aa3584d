-- Window Top-N: the 3 auctions with the most bids in each 10-second window (ties by auction id).
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY num DESC, auction) AS rownum
  FROM (
    SELECT window_start, window_end, auction, COUNT(*) AS num, MAX(price) AS max_price
    FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
    GROUP BY window_start, window_end, auction
  )
) WHERE rownum <= 3
