-- Apache Storm's withTumblingWindow(Count 3): every 3 bids in bidtime order.
SELECT window_index, window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM TUMBLE(TABLE {{ ref('stg_bids') }}, DESCRIPTOR(bidtime), ROWS 3)
GROUP BY window_index, window_start, window_end
