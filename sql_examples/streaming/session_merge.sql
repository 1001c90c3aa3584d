-- SESSION windows (gap 5 minutes): a late row bridges two sessions, which merge into a new window.
CREATE OR REPLACE TEMPORARY VIEW session_arrivals AS SELECT * FROM VALUES
  (1, 'A', TIMESTAMP'2020-04-15 08:01:00', 1),
  (2, 'A', TIMESTAMP'2020-04-15 08:09:00', 2),
  (3, 'A', TIMESTAMP'2020-04-15 08:05:00', 3),
  (4, 'A', TIMESTAMP'2020-04-15 08:20:00', 4)
  AS t(seq, item, ts, v);

CREATE STREAM session_stream FROM TABLE session_arrivals ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts - INTERVAL '2' MINUTES;

--   mb 0: 08:01        session [08:01, 08:06)                      W -> 07:59
--   mb 1: 08:09        session [08:09, 08:14)                      W -> 08:07
--   mb 2: (no data)    [08:01, 08:06) fires ON_TIME; it expires at 08:06 + 3 min, so not final
--   mb 3: 08:05        its [08:05, 08:10) is not past 08:10 + 3 min: kept; it overlaps both sessions,
--                      which merge into the new window [08:01, 08:14) (its panes number from 0 again)
--   mb 4: 08:20        session [08:20, 08:25)                      W -> 08:18
--   mb 5: (no data)    [08:01, 08:14) fires ON_TIME: 1 + 2 + 3, and expires (08:18 >= 08:14 + 3 min)
--   mb 6: end of table [08:20, 08:25) fires
SELECT window_start, window_end, item, SUM(v) AS total, COUNT(*) AS n
FROM SESSION(TABLE session_stream PARTITION BY item, DESCRIPTOR(ts), INTERVAL '5' MINUTES)
GROUP BY window_start, window_end, item
ALLOWED LATENESS INTERVAL '3' MINUTES;
-- expect:
-- window_start        | window_end          | item | total | n | pane_index | pane_timing | is_final | micro_batch
-- 2020-04-15 08:01:00 | 2020-04-15 08:06:00 | A    | 1     | 1 | 0          | ON_TIME     | false    | 2
-- 2020-04-15 08:01:00 | 2020-04-15 08:14:00 | A    | 6     | 3 | 0          | ON_TIME     | true     | 5
-- 2020-04-15 08:20:00 | 2020-04-15 08:25:00 | A    | 4     | 1 | 0          | ON_TIME     | true     | 6
