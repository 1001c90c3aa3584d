-- TUMBLE: fixed-size, non-overlapping windows (Flink's TUMBLE window TVF).
-- The Bid table and the first query are the Apache Flink documentation's example
-- (Window TVF / Window Aggregation pages); the expected output is worked out by hand.
--
-- Run:  sqlwin run sql_examples/tumble_bids.sql
-- Each `-- expect:` block lists the rows the query above it returns (checked by
-- tests/test_examples.py).

-- The input: a CSV bundled next to this file, then a typed view over it.
CREATE OR REPLACE TEMPORARY VIEW bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW bids AS
SELECT CAST(bidtime AS TIMESTAMP)     AS bidtime,
       CAST(price AS DECIMAL(10, 2))  AS price,
       item,
       supplier_id
FROM bids_csv;

-- Total price of the bids of every 10-minute window. Windows are half-open
-- [window_start, window_end): the bid at 08:09 is in [08:00, 08:10), the one at 08:11 in [08:10, 08:20).
SELECT window_start, window_end, SUM(price) AS total_price
FROM TABLE(
    TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | total_price
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 11.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 10.00

-- The same windows per supplier (any GROUP BY keys may follow window_start, window_end).
SELECT window_start, window_end, supplier_id, COUNT(*) AS bids, SUM(price) AS total_price
FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end, supplier_id
ORDER BY window_start, supplier_id;
-- expect:
-- window_start        | window_end          | supplier_id | bids | total_price
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier1   | 2    | 6.00
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier2   | 1    | 5.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier1   | 1    | 1.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier2   | 2    | 9.00

-- What the TVF itself returns: every input column plus window_start, window_end and
-- window_time (= window_end - 1 ms, the rowtime of the window in Flink).
SELECT *
FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
ORDER BY bidtime;
-- expect:
-- bidtime             | price | item | supplier_id | window_start        | window_end          | window_time
-- 2020-04-15 08:05:00 | 4.00  | C    | supplier1   | 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 2020-04-15 08:09:59.999
-- 2020-04-15 08:07:00 | 2.00  | A    | supplier1   | 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 2020-04-15 08:09:59.999
-- 2020-04-15 08:09:00 | 5.00  | D    | supplier2   | 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 2020-04-15 08:09:59.999
-- 2020-04-15 08:11:00 | 3.00  | B    | supplier2   | 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 2020-04-15 08:19:59.999
-- 2020-04-15 08:13:00 | 1.00  | E    | supplier1   | 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 2020-04-15 08:19:59.999
-- 2020-04-15 08:17:00 | 6.00  | F    | supplier2   | 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 2020-04-15 08:19:59.999
