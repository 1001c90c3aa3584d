-- Apache Storm's windows in SQL (GRAMMAR section 1, "Count-based sizes"): a size or slide
-- may be `ROWS n` instead of an interval. Rows are numbered 0, 1, 2, ... (per partition) in
-- `ts` order, ties broken by the other columns in schema order, so results are deterministic.
-- Count windows add `window_index`.
--
-- The input has a tie (two readings at 10:00:03; s1 sorts before s2) and arrives out of
-- order in the file. Sorted, the rows are:
--   row  ts        sensor reading
--   r0   10:00:01  s1     10
--   r1   10:00:03  s1     25
--   r2   10:00:03  s2     20
--   r3   10:00:05  s1     15
--   r4   10:00:07  s1     30
--   r5   10:00:12  s2     40
--   r6   10:00:15  s1     50
--   r7   10:00:21  s2     60
-- Each query lists the readings a window holds, sorted, to show which rows it got.

CREATE OR REPLACE TEMPORARY VIEW events_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/sensor_events.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW events AS
SELECT CAST(ts AS TIMESTAMP) AS ts, sensor, CAST(reading AS INT) AS reading
FROM events_csv;

-- 1. Storm withTumblingWindow(Count 3): window k holds rows [3k, 3k+3); only complete windows
--    are emitted (r6, r7 wait for a third row). window_start is the first row's ts,
--    window_end the last row's ts + 1 ms.
SELECT window_index, window_start, window_end, COUNT(*) AS n, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM TUMBLE(TABLE events, DESCRIPTOR(ts), ROWS 3)
GROUP BY window_index, window_start, window_end
ORDER BY window_index;
-- expect:
-- window_index | window_start        | window_end              | n | total | readings
-- 0            | 2024-01-01 10:00:01 | 2024-01-01 10:00:03.001 | 3 | 55    | [10, 20, 25]
-- 1            | 2024-01-01 10:00:05 | 2024-01-01 10:00:12.001 | 3 | 85    | [15, 30, 40]

-- 2. Storm withWindow(Count 3, Count 2): every 2 rows, the last 3 rows. Window k (k = 1, 2, ...)
--    closes at row 2k - 1 and holds rows [max(0, 2k - 3), 2k): the first holds only 2 rows.
SELECT window_index, window_start, window_end, COUNT(*) AS n, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM HOP(TABLE events, DESCRIPTOR(ts), ROWS 2, ROWS 3)
GROUP BY window_index, window_start, window_end
ORDER BY window_index;
-- expect:
-- window_index | window_start        | window_end              | n | total | readings
-- 1            | 2024-01-01 10:00:01 | 2024-01-01 10:00:03.001 | 2 | 35    | [10, 25]
-- 2            | 2024-01-01 10:00:03 | 2024-01-01 10:00:05.001 | 3 | 60    | [15, 20, 25]
-- 3            | 2024-01-01 10:00:05 | 2024-01-01 10:00:12.001 | 3 | 85    | [15, 30, 40]
-- 4            | 2024-01-01 10:00:12 | 2024-01-01 10:00:21.001 | 3 | 150   | [40, 50, 60]

-- 3. Storm withWindow(Count 3): at every row, the last 3 rows. Windows 2 and 3 have the same
--    bounds (r1 and r2 share a ts) but hold different rows: group by window_index.
SELECT window_index, window_start, window_end, COUNT(*) AS n, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM HOP(TABLE events, DESCRIPTOR(ts), ROWS 1, ROWS 3)
GROUP BY window_index, window_start, window_end
ORDER BY window_index;
-- expect:
-- window_index | window_start        | window_end              | n | total | readings
-- 1            | 2024-01-01 10:00:01 | 2024-01-01 10:00:01.001 | 1 | 10    | [10]
-- 2            | 2024-01-01 10:00:01 | 2024-01-01 10:00:03.001 | 2 | 35    | [10, 25]
-- 3            | 2024-01-01 10:00:01 | 2024-01-01 10:00:03.001 | 3 | 55    | [10, 20, 25]
-- 4            | 2024-01-01 10:00:03 | 2024-01-01 10:00:05.001 | 3 | 60    | [15, 20, 25]
-- 5            | 2024-01-01 10:00:03 | 2024-01-01 10:00:07.001 | 3 | 65    | [15, 20, 30]
-- 6            | 2024-01-01 10:00:05 | 2024-01-01 10:00:12.001 | 3 | 85    | [15, 30, 40]
-- 7            | 2024-01-01 10:00:07 | 2024-01-01 10:00:15.001 | 3 | 120   | [30, 40, 50]
-- 8            | 2024-01-01 10:00:12 | 2024-01-01 10:00:21.001 | 3 | 150   | [40, 50, 60]

-- 4. Storm withWindow(Count 3, Duration 5s): every 5 seconds (boundaries aligned like a
--    5-second TUMBLE, after at least one new row), the last 3 rows before the boundary.
--    window_end is the boundary, window_start the first held row's ts.
SELECT window_start, window_end, COUNT(*) AS n, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECONDS, ROWS 3)
GROUP BY window_start, window_end
ORDER BY window_end;
-- expect:
-- window_start        | window_end          | n | total | readings
-- 2024-01-01 10:00:01 | 2024-01-01 10:00:05 | 3 | 55    | [10, 20, 25]
-- 2024-01-01 10:00:03 | 2024-01-01 10:00:10 | 3 | 65    | [15, 20, 30]
-- 2024-01-01 10:00:05 | 2024-01-01 10:00:15 | 3 | 85    | [15, 30, 40]
-- 2024-01-01 10:00:07 | 2024-01-01 10:00:20 | 3 | 120   | [30, 40, 50]
-- 2024-01-01 10:00:12 | 2024-01-01 10:00:25 | 3 | 150   | [40, 50, 60]

-- 5. Storm withWindow(Duration 5s, Count 2): every 2 rows, the rows of the last 5 seconds.
--    Window k closes at row 2k - 1: window_end = its ts + 1 ms, window_start = window_end - 5 s.
--    Window 3 (closing at r5, 10:00:12) starts at 10:00:07.001, after r4 (10:00:07).
SELECT window_index, window_start, window_end, COUNT(*) AS n, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM HOP(TABLE events, DESCRIPTOR(ts), ROWS 2, INTERVAL '5' SECONDS)
GROUP BY window_index, window_start, window_end
ORDER BY window_index;
-- expect:
-- window_index | window_start            | window_end              | n | total | readings
-- 1            | 2024-01-01 09:59:58.001 | 2024-01-01 10:00:03.001 | 2 | 35    | [10, 25]
-- 2            | 2024-01-01 10:00:00.001 | 2024-01-01 10:00:05.001 | 4 | 70    | [10, 15, 20, 25]
-- 3            | 2024-01-01 10:00:07.001 | 2024-01-01 10:00:12.001 | 1 | 40    | [40]
-- 4            | 2024-01-01 10:00:16.001 | 2024-01-01 10:00:21.001 | 1 | 60    | [60]

-- 6. Storm withWindow(Duration 5s): at every row, the rows of the last 5 seconds up to it.
--    Window 2 closes at r1 and does not hold r2, though both are at 10:00:03.
SELECT window_index, window_start, window_end, COUNT(*) AS n, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM HOP(TABLE events, DESCRIPTOR(ts), ROWS 1, INTERVAL '5' SECONDS)
GROUP BY window_index, window_start, window_end
ORDER BY window_index;
-- expect:
-- window_index | window_start            | window_end              | n | total | readings
-- 1            | 2024-01-01 09:59:56.001 | 2024-01-01 10:00:01.001 | 1 | 10    | [10]
-- 2            | 2024-01-01 09:59:58.001 | 2024-01-01 10:00:03.001 | 2 | 35    | [10, 25]
-- 3            | 2024-01-01 09:59:58.001 | 2024-01-01 10:00:03.001 | 3 | 55    | [10, 20, 25]
-- 4            | 2024-01-01 10:00:00.001 | 2024-01-01 10:00:05.001 | 4 | 70    | [10, 15, 20, 25]
-- 5            | 2024-01-01 10:00:02.001 | 2024-01-01 10:00:07.001 | 4 | 90    | [15, 20, 25, 30]
-- 6            | 2024-01-01 10:00:07.001 | 2024-01-01 10:00:12.001 | 1 | 40    | [40]
-- 7            | 2024-01-01 10:00:10.001 | 2024-01-01 10:00:15.001 | 2 | 90    | [40, 50]
-- 8            | 2024-01-01 10:00:16.001 | 2024-01-01 10:00:21.001 | 1 | 60    | [60]

-- 7. Storm withWindow(Duration 10s, Duration 5s): a time-based sliding window (plain HOP).
SELECT window_start, window_end, COUNT(*) AS n, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECONDS, INTERVAL '10' SECONDS)
GROUP BY window_start, window_end
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | n | total | readings
-- 2024-01-01 09:59:55 | 2024-01-01 10:00:05 | 3 | 55    | [10, 20, 25]
-- 2024-01-01 10:00:00 | 2024-01-01 10:00:10 | 5 | 100   | [10, 15, 20, 25, 30]
-- 2024-01-01 10:00:05 | 2024-01-01 10:00:15 | 3 | 85    | [15, 30, 40]
-- 2024-01-01 10:00:10 | 2024-01-01 10:00:20 | 2 | 90    | [40, 50]
-- 2024-01-01 10:00:15 | 2024-01-01 10:00:25 | 2 | 110   | [50, 60]
-- 2024-01-01 10:00:20 | 2024-01-01 10:00:30 | 1 | 60    | [60]

-- 8. Storm withTumblingWindow(Duration 10s): a plain TUMBLE.
SELECT window_start, window_end, COUNT(*) AS n, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECONDS)
GROUP BY window_start, window_end
ORDER BY window_start;
-- expect:
-- window_start        | window_end          | n | total | readings
-- 2024-01-01 10:00:00 | 2024-01-01 10:00:10 | 5 | 100   | [10, 15, 20, 25, 30]
-- 2024-01-01 10:00:10 | 2024-01-01 10:00:20 | 2 | 90    | [40, 50]
-- 2024-01-01 10:00:20 | 2024-01-01 10:00:30 | 1 | 60    | [60]

-- Counting per partition: tumbling windows of 2 rows for every sensor.
-- s1: 10:00:01, :03 | :05, :07 | (:15 waits);  s2: 10:00:03, :12 | (:21 waits).
SELECT sensor, window_index, window_start, window_end, SUM(reading) AS total,
       sort_array(collect_list(reading)) AS readings
FROM TUMBLE(TABLE events PARTITION BY sensor, DESCRIPTOR(ts), ROWS 2)
GROUP BY sensor, window_index, window_start, window_end
ORDER BY sensor, window_index;
-- expect:
-- sensor | window_index | window_start        | window_end              | total | readings
-- s1     | 0            | 2024-01-01 10:00:01 | 2024-01-01 10:00:03.001 | 35    | [10, 25]
-- s1     | 1            | 2024-01-01 10:00:05 | 2024-01-01 10:00:07.001 | 45    | [15, 30]
-- s2     | 0            | 2024-01-01 10:00:03 | 2024-01-01 10:00:12.001 | 60    | [20, 40]
