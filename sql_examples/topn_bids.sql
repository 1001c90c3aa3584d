-- Window Top-N: ROW_NUMBER() over each window, keep the first N rows. Both queries are the
-- Flink documentation's Window Top-N examples (their own Bid table).

CREATE OR REPLACE TEMPORARY VIEW topn_bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids_topn.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW topn_bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM topn_bids_csv;

-- Top 3 suppliers by total price in every 10-minute window (Top-N after a window aggregation).
SELECT *
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
    FROM (
        SELECT window_start, window_end, supplier_id, SUM(price) AS price, COUNT(*) AS cnt
        FROM TABLE(TUMBLE(TABLE topn_bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end, supplier_id
    )
)
WHERE rownum <= 3
ORDER BY window_start, rownum;
-- expect:
-- window_start        | window_end          | supplier_id | price | cnt | rownum
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier1   | 6.00  | 2   | 1
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier4   | 5.00  | 1   | 2
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier2   | 4.00  | 1   | 3
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier5   | 6.00  | 1   | 1
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier2   | 3.00  | 1   | 2
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier3   | 2.00  | 1   | 3

-- Top 3 bids (items) by price in every window, straight over the TVF. A and C tie at 4.00:
-- `item` breaks the tie so that the result is deterministic.
SELECT *
FROM (
    SELECT bidtime, price, item, supplier_id, window_start, window_end,
           ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC, item) AS rownum
    FROM TUMBLE(TABLE topn_bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
)
WHERE rownum <= 3
ORDER BY window_start, rownum;
-- expect:
-- bidtime             | price | item | supplier_id | window_start        | window_end          | rownum
-- 2020-04-15 08:09:00 | 5.00  | D    | supplier4   | 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 1
-- 2020-04-15 08:05:00 | 4.00  | A    | supplier1   | 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 2
-- 2020-04-15 08:06:00 | 4.00  | C    | supplier2   | 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 3
-- 2020-04-15 08:17:00 | 6.00  | F    | supplier5   | 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 1
-- 2020-04-15 08:15:00 | 3.00  | H    | supplier2   | 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 2
-- 2020-04-15 08:11:00 | 2.00  | B    | supplier3   | 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 3
