-- 10-minute windows sliding every 5 minutes.
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM HOP(TABLE {{ ref('bids') }}, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
