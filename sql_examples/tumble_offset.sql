-- TUMBLE with an offset: shift where windows start (Flink's optional 4th argument).
-- From the Flink documentation: 10-minute windows shifted by 1 minute, written with named
-- arguments (DATA => must come first); and days of a UTC+8 time zone with a negative offset.

CREATE OR REPLACE TEMPORARY VIEW bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM bids_csv;

-- Windows [08:01, 08:11), [08:11, 08:21): the bid at 08:11 now opens the second window.
SELECT window_start, window_end, SUM(price) AS total_price
FROM TABLE(
    TUMBLE(
        DATA => TABLE bids,
        TIMECOL => DESCRIPTOR(bidtime),
        SIZE => INTERVAL '10' MINUTES,
        OFFSET => INTERVAL '1' MINUTES))
GROUP BY window_start, window_end
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | total_price
-- 2020-04-15 08:01:00 | 2020-04-15 08:11:00 | 11.00
-- 2020-04-15 08:11:00 | 2020-04-15 08:21:00 | 10.00

-- Calendar days in UTC+8 (timestamps are UTC): a day starts at 16:00 UTC of the day before.
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '1' DAY, INTERVAL '-8' HOUR)
GROUP BY window_start, window_end;
-- expect:
-- window_start        | window_end          | bids | total_price
-- 2020-04-14 16:00:00 | 2020-04-15 16:00:00 | 6    | 21.00
