-- The Dataflow triggers example: one 10-minute window, key X, a pane every 3 rows,
-- accumulating then discarding (sqlwin replay dataflow_panes.sql --plot panes.png draws both).
CREATE OR REPLACE TEMPORARY VIEW dataflow_arrivals AS SELECT * FROM VALUES
  (1, 'X', TIMESTAMP'2020-04-15 12:01:00', 5),
  (2, 'X', TIMESTAMP'2020-04-15 12:05:00', 8),
  (3, 'X', TIMESTAMP'2020-04-15 12:03:00', 3),
  (4, 'X', TIMESTAMP'2020-04-15 12:07:00', 15),
  (5, 'X', TIMESTAMP'2020-04-15 12:02:00', 19),
  (6, 'X', TIMESTAMP'2020-04-15 12:08:00', 23),
  (7, 'X', TIMESTAMP'2020-04-15 12:04:00', 9),
  (8, 'X', TIMESTAMP'2020-04-15 12:06:00', 13),
  (9, 'X', TIMESTAMP'2020-04-15 12:09:00', 10)
  AS t(seq, k, ts, v);

CREATE STREAM dataflow_stream FROM TABLE dataflow_arrivals ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE;

-- Every row is in [12:00, 12:10); W = max ts - 1 minute stays below 12:10, so every pane is EARLY.
-- One row per micro-batch (0 .. 8); a pane at the 3rd, 6th and 9th row. At the end of the table the window
-- expires with no pending row: no further pane, and is_final stays false (GRAMMAR 4).
SELECT k, window_start, window_end, SUM(v) AS total, COUNT(*) AS n
FROM TUMBLE(TABLE dataflow_stream, DESCRIPTOR(ts), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end, k
EMIT WITH TRIGGER EVERY 3 ROWS ACCUMULATING;
-- expect:
-- k | window_start        | window_end          | total | n | pane_index | pane_timing | is_final | micro_batch
-- X | 2020-04-15 12:00:00 | 2020-04-15 12:10:00 | 16    | 3 | 0          | EARLY       | false    | 2
-- X | 2020-04-15 12:00:00 | 2020-04-15 12:10:00 | 73    | 6 | 1          | EARLY       | false    | 5
-- X | 2020-04-15 12:00:00 | 2020-04-15 12:10:00 | 105   | 9 | 2          | EARLY       | false    | 8

-- The same, DISCARDING: [5, 8, 3], [15, 19, 23], [9, 13, 10].
SELECT k, window_start, window_end, SUM(v) AS total, COUNT(*) AS n
FROM TUMBLE(TABLE dataflow_stream, DESCRIPTOR(ts), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end, k
EMIT WITH TRIGGER EVERY 3 ROWS DISCARDING;
-- expect:
-- k | window_start        | window_end          | total | n | pane_index | pane_timing | is_final | micro_batch
-- X | 2020-04-15 12:00:00 | 2020-04-15 12:10:00 | 16    | 3 | 0          | EARLY       | false    | 2
-- X | 2020-04-15 12:00:00 | 2020-04-15 12:10:00 | 57    | 3 | 1          | EARLY       | false    | 5
-- X | 2020-04-15 12:00:00 | 2020-04-15 12:10:00 | 32    | 3 | 2          | EARLY       | false    | 8
