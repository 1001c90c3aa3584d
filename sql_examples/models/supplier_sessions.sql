-- A supplier's session ends {{ var('session_gap_minutes', 5) }} minutes after its last bid.
SELECT supplier_id, window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM SESSION(TABLE {{ ref('stg_bids') }} PARTITION BY supplier_id, DESCRIPTOR(bidtime),
             INTERVAL '{{ var("session_gap_minutes", 5) }}' MINUTES)
GROUP BY supplier_id, window_start, window_end
