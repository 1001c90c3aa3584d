-- Running totals per channel: every 10 seconds, the bids so far in the current minute (CUMULATE).
SELECT window_start, window_end, channel, COUNT(*) AS bids, SUM(price) AS volume, MAX(price) AS top_price
FROM CUMULATE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS, INTERVAL '1' MINUTE)
GROUP BY window_start, window_end, channel
