-- SESSION with a dynamic gap in streaming: a bid of 4.00 or more keeps its item's session open 5 minutes,
-- a smaller one 1 minute. Sessions merge across micro-batches, as with a static gap.
CREATE OR REPLACE TEMPORARY VIEW gap_bids AS SELECT * FROM VALUES
  (1, 'A', TIMESTAMP'2020-04-15 08:06:00', 2.00),
  (2, 'A', TIMESTAMP'2020-04-15 08:07:00', 4.00),
  (3, 'A', TIMESTAMP'2020-04-15 08:15:00', 1.00),
  (4, 'A', TIMESTAMP'2020-04-15 08:13:00', 5.00),
  (5, 'A', TIMESTAMP'2020-04-15 08:30:00', 1.00)
  AS t(seq, item, ts, price);

CREATE STREAM gap_stream FROM TABLE gap_bids ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts - INTERVAL '2' MINUTES;

--   mb 0: 08:06 (2.00) opens [08:06, 08:07)                       W -> 08:04
--   mb 1: 08:07 (4.00) opens [08:07, 08:12): touches, one session [08:06, 08:12)   W -> 08:05
--   mb 2: 08:15 (1.00) opens [08:15, 08:16)                       W -> 08:13
--   mb 3: (no data)    [08:06, 08:12) fires (ON_TIME; lateness 0, so final)
--   mb 4: 08:13 (5.00) opens [08:13, 08:18): not late (08:18 > 08:13); it covers [08:15, 08:16): they merge
--   mb 5: 08:30 (1.00) opens [08:30, 08:31)                       W -> 08:28
--   mb 6: (no data)    [08:13, 08:18) fires
--   mb 7: end of table [08:30, 08:31) fires
SELECT window_start, window_end, item, SUM(price) AS total, COUNT(*) AS n
FROM SESSION(TABLE gap_stream PARTITION BY item, DESCRIPTOR(ts),
             CASE WHEN price >= 4 THEN INTERVAL '5' MINUTES ELSE INTERVAL '1' MINUTE END)
GROUP BY window_start, window_end, item;
-- expect:
-- window_start        | window_end          | item | total | n | pane_index | pane_timing | is_final | micro_batch
-- 2020-04-15 08:06:00 | 2020-04-15 08:12:00 | A    | 6.00  | 2 | 0          | ON_TIME     | true     | 3
-- 2020-04-15 08:13:00 | 2020-04-15 08:18:00 | A    | 6.00  | 2 | 0          | ON_TIME     | true     | 6
-- 2020-04-15 08:30:00 | 2020-04-15 08:31:00 | A    | 1.00  | 1 | 0          | ON_TIME     | true     | 7
