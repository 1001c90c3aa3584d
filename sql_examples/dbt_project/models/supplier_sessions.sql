-- Sessions of bids per supplier that end after 5 minutes without a bid.
SELECT supplier_id, window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM SESSION(TABLE {{ ref('bids') }} PARTITION BY supplier_id, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)
GROUP BY supplier_id, window_start, window_end
