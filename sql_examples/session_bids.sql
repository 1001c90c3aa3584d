-- SESSION windows: a bid at time t opens [t, t + gap); windows of the same partition
-- merge when they overlap or touch, so a session ends after `gap` without bids.
-- The first query is the Flink documentation's SESSION example (its own Bid table).

CREATE OR REPLACE TEMPORARY VIEW session_bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids_session.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW session_bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM session_bids_csv;

-- Sessions per item with a 5-minute gap. Item B bids at 08:09 and 08:11 (one session, it
-- ends 5 minutes after the last bid), then at 08:17: 6 minutes later, a new session.
SELECT window_start, window_end, item, SUM(price) AS total_price
FROM TABLE(
    SESSION(TABLE session_bids PARTITION BY item, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))
GROUP BY item, window_start, window_end
ORDER BY window_start, item;
-- expect:
-- window_start        | window_end          | item | total_price
-- 2020-04-15 08:06:00 | 2020-04-15 08:12:00 | A    | 6.00
-- 2020-04-15 08:09:00 | 2020-04-15 08:16:00 | B    | 8.00
-- 2020-04-15 08:13:00 | 2020-04-15 08:20:00 | C    | 7.00
-- 2020-04-15 08:17:00 | 2020-04-15 08:22:00 | B    | 4.00

-- Without PARTITION BY, all bids share one timeline: no two consecutive bids are 5 minutes
-- apart, so they form a single session.
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM SESSION(TABLE session_bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)
GROUP BY window_start, window_end;
-- expect:
-- window_start        | window_end          | bids | total_price
-- 2020-04-15 08:06:00 | 2020-04-15 08:22:00 | 7    | 25.00

-- With a maximum duration of 5 minutes, a bid at or past window_start + 5 minutes starts a
-- new session, and a session ends at min(last bid + gap, window_start + max_duration):
-- 08:06, 08:07, 08:09 | 08:11 (= 08:06 + 5 min), 08:13, 08:15 | 08:17 (= 08:11 + 6 min).
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM SESSION(TABLE session_bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '5' MINUTES)
GROUP BY window_start, window_end
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | bids | total_price
-- 2020-04-15 08:06:00 | 2020-04-15 08:11:00 | 3    | 11.00
-- 2020-04-15 08:11:00 | 2020-04-15 08:16:00 | 3    | 10.00
-- 2020-04-15 08:17:00 | 2020-04-15 08:22:00 | 1    | 4.00
