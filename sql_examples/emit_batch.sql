-- EMIT and ALLOWED LATENESS on a batch query. These clauses (GRAMMAR section 4) say when a
-- streaming query emits panes. Over a table (a bounded input) every window is complete, so a
-- batch query returns exactly the final results: the same rows as without the clauses.

CREATE OR REPLACE TEMPORARY VIEW bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM bids_csv;

-- Early panes every 2 bids, late rows accepted for 1 minute: in batch, the final panes.
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
ALLOWED LATENESS INTERVAL '1' MINUTE
EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS ACCUMULATING
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | bids | total_price
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 3    | 11.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 3    | 10.00

-- ksqlDB/RisingWave style: one final result per window once the grace period is over.
SELECT window_start, window_end, SUM(price) AS total_price
FROM HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
GRACE PERIOD INTERVAL '2' MINUTES
EMIT FINAL
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | total_price
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 11.00
-- 2020-04-15 08:05:00 | 2020-04-15 08:15:00 | 15.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 10.00
-- 2020-04-15 08:15:00 | 2020-04-15 08:25:00 | 6.00
