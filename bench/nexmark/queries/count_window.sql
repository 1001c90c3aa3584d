-- Count window (Storm's withTumblingWindow(Count 10)): every 10 consecutive bids of an auction, in time order.
SELECT auction, window_index, window_start, window_end, COUNT(*) AS n, AVG(price) AS avg_price, MAX(price) AS max_price
FROM TUMBLE(TABLE bids PARTITION BY auction, DESCRIPTOR(date_time), ROWS 10)
GROUP BY auction, window_index, window_start, window_end
