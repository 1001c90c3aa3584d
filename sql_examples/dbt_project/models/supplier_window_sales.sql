{{ config(materialized='table') }}
-- Sales per supplier and 10-minute window: the input of the Top-N model.
SELECT window_start, window_end, supplier_id, SUM(price) AS price, COUNT(*) AS cnt
FROM TUMBLE(TABLE {{ ref('bids') }}, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end, supplier_id
