-- Window deduplication: keep one row per window (and key) with ROW_NUMBER() = 1.
-- Same Bid table as the Flink documentation's Window Top-N / Deduplication pages.

CREATE OR REPLACE TEMPORARY VIEW topn_bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids_topn.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW topn_bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM topn_bids_csv;

-- The last bid of every 10-minute window (the Flink documentation's example).
SELECT *
FROM (
    SELECT bidtime, price, item, supplier_id, window_start, window_end,
           ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY bidtime DESC) AS rownum
    FROM TABLE(TUMBLE(TABLE topn_bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
)
WHERE rownum <= 1
ORDER BY window_start;
-- expect:
-- bidtime             | price | item | supplier_id | window_start        | window_end          | rownum
-- 2020-04-15 08:09:00 | 5.00  | D    | supplier4   | 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 1
-- 2020-04-15 08:17:00 | 6.00  | F    | supplier5   | 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 1

-- The first bid of every supplier in every window: supplier1 bid twice in [08:00, 08:10)
-- (A at 08:05, G at 08:07); only A is kept. Every other (window, supplier) has one bid.
SELECT window_start, window_end, supplier_id, bidtime, item, price
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, supplier_id ORDER BY bidtime) AS rn
    FROM TUMBLE(TABLE topn_bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
)
WHERE rn = 1
ORDER BY window_start, supplier_id;
-- expect:
-- window_start        | window_end          | supplier_id | bidtime             | item | price
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier1   | 2020-04-15 08:05:00 | A    | 4.00
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier2   | 2020-04-15 08:06:00 | C    | 4.00
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier3   | 2020-04-15 08:08:00 | B    | 2.00
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier4   | 2020-04-15 08:09:00 | D    | 5.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier1   | 2020-04-15 08:13:00 | E    | 1.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier2   | 2020-04-15 08:15:00 | H    | 3.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier3   | 2020-04-15 08:11:00 | B    | 2.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier5   | 2020-04-15 08:17:00 | F    | 6.00
