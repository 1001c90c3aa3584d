-- HOP (sliding) windows: size 10 minutes, a new window every 5 minutes, so each bid
-- falls in two windows. The Flink documentation's HOP example over the Bid table.

CREATE OR REPLACE TEMPORARY VIEW bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM bids_csv;

-- HOP(data, timecol, slide, size): the slide comes before the size.
SELECT window_start, window_end, SUM(price) AS total_price
FROM TABLE(
    HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))
GROUP BY window_start, window_end
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | total_price
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 11.00
-- 2020-04-15 08:05:00 | 2020-04-15 08:15:00 | 15.00
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 10.00
-- 2020-04-15 08:15:00 | 2020-04-15 08:25:00 | 6.00

-- A slide longer than the size samples the stream: 5-minute windows every 10 minutes,
-- [08:00, 08:05), [08:10, 08:15), ...; bids in the gaps belong to no window (as in Flink).
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES, INTERVAL '5' MINUTES)
GROUP BY window_start, window_end
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | bids | total_price
-- 2020-04-15 08:10:00 | 2020-04-15 08:15:00 | 2    | 4.00
