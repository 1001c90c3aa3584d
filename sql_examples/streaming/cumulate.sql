-- CUMULATE (step 5 minutes, size 10 minutes), default emission, one row per micro-batch.
CREATE OR REPLACE TEMPORARY VIEW cumulate_arrivals AS SELECT * FROM VALUES
  (1, TIMESTAMP'2020-04-15 08:01:00', 1),
  (2, TIMESTAMP'2020-04-15 08:04:00', 2),
  (3, TIMESTAMP'2020-04-15 08:06:00', 3),
  (4, TIMESTAMP'2020-04-15 08:11:00', 4)
  AS t(seq, ts, v);

CREATE STREAM cumulate_stream FROM TABLE cumulate_arrivals ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts;

-- Windows [08:00, 08:05) and [08:00, 08:10), then [08:10, 08:15) and [08:10, 08:20); W = max ts.
--   mb 0: 08:01, mb 1: 08:04   W -> 08:04
--   mb 2: 08:06                W -> 08:06
--   mb 3: (no data)            [08:00, 08:05) fires: 1 + 2
--   mb 4: 08:11                W -> 08:11
--   mb 5: (no data)            [08:00, 08:10) fires: 1 + 2 + 3
--   mb 6: end of table         [08:10, 08:15) and [08:10, 08:20) fire: 4
SELECT window_start, window_end, SUM(v) AS total, COUNT(*) AS n
FROM CUMULATE(TABLE cumulate_stream, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
GROUP BY window_start, window_end;
-- expect:
-- window_start        | window_end          | total | n | pane_index | pane_timing | is_final | micro_batch
-- 2020-04-15 08:00:00 | 2020-04-15 08:05:00 | 3     | 2 | 0          | ON_TIME     | true     | 3
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 6     | 3 | 0          | ON_TIME     | true     | 5
-- 2020-04-15 08:10:00 | 2020-04-15 08:15:00 | 4     | 1 | 0          | ON_TIME     | true     | 6
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 4     | 1 | 0          | ON_TIME     | true     | 6
