-- CUMULATE windows: within each 10-minute period, a window that grows every 2 minutes
-- ([08:00, 08:02), [08:00, 08:04), ... [08:00, 08:10)): running totals that restart
-- every period. The Flink documentation's CUMULATE example over the Bid table.
-- Windows that hold no bid produce no row.

CREATE OR REPLACE TEMPORARY VIEW bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM bids_csv;

-- CUMULATE(data, timecol, step, size): size must be a multiple of step.
SELECT window_start, window_end, SUM(price) AS total_price
FROM TABLE(
    CUMULATE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES))
GROUP BY window_start, window_end
ORDER BY window_start, window_end;
-- expect:
-- window_start        | window_end          | total_price
-- 2020-04-15 08:00:00 | 2020-04-15 08:06:00 | 4.00
-- 2020-04-15 08:00:00 | 2020-04-15 08:08:00 | 6.00
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 11.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:12:00 | 3.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:14:00 | 4.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:16:00 | 4.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:18:00 | 10.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 10.00
