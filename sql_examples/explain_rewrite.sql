-- EXPLAIN REWRITE shows the plain Spark SQL that sqlwin runs for a query, without running it.
-- The produced SQL can be run by any Spark SQL client (spark-sql, beeline, a notebook).
-- `sqlwin rewrite FILE` prints the same for every statement of a file, without Spark.

CREATE OR REPLACE TEMPORARY VIEW bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM bids_csv;

-- Prints the rewritten SQL (it depends on the plan sqlwin picks, so it has no expect block;
-- the test runs it and checks that it returns the rows of the query below).
EXPLAIN REWRITE
SELECT window_start, window_end, SUM(price) AS total_price
FROM HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
ORDER BY window_start;

-- The query itself.
SELECT window_start, window_end, SUM(price) AS total_price
FROM HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | total_price
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 11.00
-- 2020-04-15 08:05:00 | 2020-04-15 08:15:00 | 15.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 10.00
-- 2020-04-15 08:15:00 | 2020-04-15 08:25:00 | 6.00
