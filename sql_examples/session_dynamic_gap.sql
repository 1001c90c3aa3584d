-- SESSION windows with a dynamic gap: the gap is an expression over each row's columns
-- (as Spark's session_window allows). Here a big bid (price >= 4) keeps its item's session
-- open for 5 minutes, a small one for 1 minute. Each bid at t opens [t, t + its gap); windows
-- merge when they overlap or touch.

CREATE OR REPLACE TEMPORARY VIEW session_bids_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/bids_session.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW session_bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM session_bids_csv;

-- A: 08:06 (2.00) opens [08:06, 08:07), which touches [08:07, 08:12) of 08:07 (4.00): one session.
-- B: 08:09 (5.00) opens [08:09, 08:14), which covers [08:11, 08:12) of 08:11 (3.00);
--    08:17 (4.00) opens [08:17, 08:22): a second session.
-- C: 08:13 (1.00) opens [08:13, 08:14); 08:15 (6.00) opens [08:15, 08:20): they do not touch.
SELECT item, window_start, window_end, COUNT(*) AS bids, SUM(price) AS total_price
FROM SESSION(
    TABLE session_bids PARTITION BY item,
    DESCRIPTOR(bidtime),
    CASE WHEN price >= 4 THEN INTERVAL '5' MINUTES ELSE INTERVAL '1' MINUTE END)
GROUP BY item, window_start, window_end
ORDER BY item, window_start;
-- expect:
-- item | window_start        | window_end          | bids | total_price
-- A    | 2020-04-15 08:06:00 | 2020-04-15 08:12:00 | 2    | 6.00
-- B    | 2020-04-15 08:09:00 | 2020-04-15 08:14:00 | 2    | 8.00
-- B    | 2020-04-15 08:17:00 | 2020-04-15 08:22:00 | 1    | 4.00
-- C    | 2020-04-15 08:13:00 | 2020-04-15 08:14:00 | 1    | 1.00
-- C    | 2020-04-15 08:15:00 | 2020-04-15 08:20:00 | 1    | 6.00
