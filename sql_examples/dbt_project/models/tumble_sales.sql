{{ config(materialized='table') }}
-- Total price per 10-minute tumbling window (Flink's Window Aggregation example).
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM TABLE(TUMBLE(TABLE {{ ref('bids') }}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end
