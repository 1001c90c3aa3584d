-- HOP (slide 5 minutes, size 10 minutes), default emission; MICRO BATCH BY puts two rows in one micro-batch.
CREATE OR REPLACE TEMPORARY VIEW hop_arrivals AS SELECT * FROM VALUES
  (0, TIMESTAMP'2020-04-15 08:01:00', 1),
  (0, TIMESTAMP'2020-04-15 08:06:00', 2),
  (1, TIMESTAMP'2020-04-15 08:12:00', 3),
  (2, TIMESTAMP'2020-04-15 08:03:00', 4)
  AS t(batch, ts, v);

CREATE STREAM hop_stream FROM TABLE hop_arrivals ARRIVAL ORDER BY batch, ts MICRO BATCH BY batch
  WATERMARK FOR ts AS ts - INTERVAL '2' MINUTES;

-- 08:01 is in [07:55, 08:05) and [08:00, 08:10); 08:06 in [08:00, 08:10) and [08:05, 08:15); 08:12 in
-- [08:05, 08:15) and [08:10, 08:20). No lateness: one ON_TIME, final pane per window.
--   mb 0: 08:01, 08:06   W -> 08:04 (nothing ends by then: the no-data batch takes no number)
--   mb 1: 08:12          W -> 08:10
--   mb 2: (no data)      [07:55, 08:05) = 1 and [08:00, 08:10) = 1 + 2 fire
--   mb 3: 08:03          both its windows ended (W = 08:10): dropped (counted; no LATE ROWS TO here)
--   mb 4: end of table   [08:05, 08:15) = 2 + 3 and [08:10, 08:20) = 3 fire
SELECT window_start, window_end, SUM(v) AS total
FROM HOP(TABLE hop_stream, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
GROUP BY window_start, window_end;
-- expect:
-- window_start        | window_end          | total | pane_index | pane_timing | is_final | micro_batch
-- 2020-04-15 07:55:00 | 2020-04-15 08:05:00 | 1     | 0          | ON_TIME     | true     | 2
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 3     | 0          | ON_TIME     | true     | 2
-- 2020-04-15 08:05:00 | 2020-04-15 08:15:00 | 5     | 0          | ON_TIME     | true     | 4
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 3     | 0          | ON_TIME     | true     | 4
