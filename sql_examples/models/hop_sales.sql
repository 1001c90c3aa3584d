-- 10-minute windows every 5 minutes: a bid counts in two windows.
SELECT window_start, window_end, SUM(price) AS total_price
FROM HOP(TABLE {{ ref('stg_bids') }}, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
