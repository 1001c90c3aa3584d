-- Count windows (Apache Storm's withTumblingWindow(Count 3)) in streaming: rows are numbered per item in ts
-- order once the watermark has passed them, so a window fires when its third row is numbered, and holds
-- exactly the rows the batch query gives it. A row at or behind the watermark would renumber every later
-- window: it is dropped as late (its window bounds are NULL: it belongs to no window yet).
CREATE OR REPLACE TEMPORARY VIEW readings AS SELECT * FROM VALUES
  (1, 'A', TIMESTAMP'2024-01-01 10:00:01', 10),
  (2, 'A', TIMESTAMP'2024-01-01 10:00:04', 20),
  (3, 'B', TIMESTAMP'2024-01-01 10:00:03', 7),
  (4, 'A', TIMESTAMP'2024-01-01 10:00:03', 25),
  (5, 'A', TIMESTAMP'2024-01-01 10:00:09', 15),
  (6, 'A', TIMESTAMP'2024-01-01 10:00:02', 99),
  (7, 'A', TIMESTAMP'2024-01-01 10:00:12', 30),
  (8, 'A', TIMESTAMP'2024-01-01 10:00:11', 40),
  (9, 'A', TIMESTAMP'2024-01-01 10:00:20', 5)
  AS t(seq, item, ts, v);

CREATE STREAM reading_stream FROM TABLE readings ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts - INTERVAL '2' SECONDS;

-- One row per micro-batch; W in force = max ts - 2 s of the micro-batches before; rows with ts <= W are numbered.
--   mb 0: A@01 waits                       W -> 09:59:59 (nothing to number: the no-data batch takes no number)
--   mb 1: A@04 waits                       W -> :02
--   mb 2: (no data)  numbers A@01 (A row 0)
--   mb 3: B@03 waits (3 > 2)    mb 4: A@03 waits
--   mb 5: A@09 waits                       W -> :07
--   mb 6: (no data)  numbers A@03, A@04 (A rows 1, 2) and B@03 (B row 0): A's window 0 is complete, it fires
--   mb 7: A@02 is late (02 <= 07): dropped, to LATE ROWS TO
--   mb 8: A@12 waits                       W -> :10
--   mb 9: (no data)  numbers A@09 (row 3)
--   mb 10: A@11 waits (11 > 10)
--   mb 11: A@20 waits                      W -> :18
--   mb 12: (no data) numbers A@11, A@12 (rows 4, 5): A's window 1 fires
--   mb 13: end of table: A@20 is row 6; A's window 2 and B's window 0 never complete (the batch rule: not emitted)
SELECT window_start, window_end, window_index, item, SUM(v) AS total, COUNT(*) AS n
FROM TUMBLE(TABLE reading_stream PARTITION BY item, DESCRIPTOR(ts), ROWS 3)
GROUP BY window_start, window_end, window_index, item
LATE ROWS TO late_readings;
-- expect:
-- window_start        | window_end              | window_index | item | total | n | pane_index | pane_timing | is_final | micro_batch
-- 2024-01-01 10:00:01 | 2024-01-01 10:00:04.001 | 0            | A    | 55    | 3 | 0          | ON_TIME     | true     | 6
-- 2024-01-01 10:00:09 | 2024-01-01 10:00:12.001 | 1            | A    | 85    | 3 | 0          | ON_TIME     | true     | 12

SELECT * FROM late_readings;
-- expect:
-- seq | item | ts                  | v  | window_start | window_end | watermark           | reason | micro_batch
-- 6   | A    | 2024-01-01 10:00:02 | 99 | NULL         | NULL       | 2024-01-01 10:00:07 | late   | 7

-- Early panes while a window fills (bounded by the rows numbered so far), then its ON_TIME pane once complete:
-- in micro-batch 6, A's window 0 gets its last two rows (an EARLY pane), then is complete (the ON_TIME pane).
SELECT window_start, window_end, item, SUM(v) AS total, COUNT(*) AS n
FROM TUMBLE(TABLE reading_stream PARTITION BY item, DESCRIPTOR(ts), ROWS 3)
GROUP BY window_start, window_end, item
EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 1 ROWS;
-- expect:
-- window_start        | window_end              | item | total | n | pane_index | pane_timing | is_final | micro_batch
-- 2024-01-01 10:00:01 | 2024-01-01 10:00:01.001 | A    | 10    | 1 | 0          | EARLY       | false    | 2
-- 2024-01-01 10:00:01 | 2024-01-01 10:00:04.001 | A    | 55    | 3 | 1          | EARLY       | false    | 6
-- 2024-01-01 10:00:01 | 2024-01-01 10:00:04.001 | A    | 55    | 3 | 2          | ON_TIME     | true     | 6
-- 2024-01-01 10:00:03 | 2024-01-01 10:00:03.001 | B    | 7     | 1 | 0          | EARLY       | false    | 6
-- 2024-01-01 10:00:09 | 2024-01-01 10:00:09.001 | A    | 15    | 1 | 0          | EARLY       | false    | 9
-- 2024-01-01 10:00:09 | 2024-01-01 10:00:12.001 | A    | 85    | 3 | 1          | EARLY       | false    | 12
-- 2024-01-01 10:00:09 | 2024-01-01 10:00:12.001 | A    | 85    | 3 | 2          | ON_TIME     | true     | 12
