-- The Storm windowing document's event-time example ("Watermarks"): window length 20 s, sliding
-- interval 10 s, max lag 5 s, i.e. HOP(..., INTERVAL '10' SECONDS, INTERVAL '20' SECONDS) over a stream
-- WATERMARK FOR ts AS ts - INTERVAL '5' SECONDS, with the default trigger (one pane per window when
-- the watermark passes its end; Storm evaluates a window when a watermark reaches it).
--
-- Replay (GRAMMAR 3): tuples e1..e6 arrive in one micro-batch and e7..e10 in the next (Storm receives
-- them between 9:00:00-9:00:01 and 9:00:01-9:00:02):
--   micro-batch 0: e1..e6; the watermark becomes 6:00:36 - 5 s = 6:00:31 (Storm's w1)
--   micro-batch 1: no data; fires the windows ending by 6:00:31, as Storm lists them:
--                  [5:59:50, 6:00:10) e1 e2 e3; [6:00:00, 6:00:20) e1 e2 e3 e4; [6:00:10, 6:00:30) e4 e5
--                  (e6 is not evaluated: 6:00:36 is past the watermark)
--   micro-batch 2: e7..e10; the watermark becomes 8:00:39 - 5 s = 8:00:34 (Storm's w2)
--   micro-batch 3: no data; fires the windows ending in (6:00:31, 8:00:34]:
--                  [6:00:20, 6:00:40) e5 e6; [6:00:30, 6:00:50) e6; [8:00:10, 8:00:30) e7 e8 e9
--                  (the windows between 6:00:50 and 8:00:10 hold no tuple: none is emitted)
--   e10's windows, [8:00:20, 8:00:40) (with e7 e8 e9) and [8:00:30, 8:00:50), end after 8:00:34: still
--   open, as in Storm. Only when the table ends (micro-batch 4, watermark +infinity) do they fire.
-- A replay returns its panes by micro_batch; within one, in no particular order (compared as a set).

CREATE OR REPLACE TEMPORARY VIEW storm_tuples AS
SELECT * FROM VALUES
  (1,  TIMESTAMP '2024-01-01 06:00:03', 0),
  (2,  TIMESTAMP '2024-01-01 06:00:05', 0),
  (3,  TIMESTAMP '2024-01-01 06:00:07', 0),
  (4,  TIMESTAMP '2024-01-01 06:00:18', 0),
  (5,  TIMESTAMP '2024-01-01 06:00:26', 0),
  (6,  TIMESTAMP '2024-01-01 06:00:36', 0),
  (7,  TIMESTAMP '2024-01-01 08:00:25', 1),
  (8,  TIMESTAMP '2024-01-01 08:00:26', 1),
  (9,  TIMESTAMP '2024-01-01 08:00:27', 1),
  (10, TIMESTAMP '2024-01-01 08:00:39', 1)
AS t(n, ts, received);

CREATE STREAM storm_arrivals FROM TABLE storm_tuples
  ARRIVAL ORDER BY received, n
  MICRO BATCH BY received
  WATERMARK FOR ts AS ts - INTERVAL '5' SECONDS;

SELECT window_start, window_end, transform(array_sort(collect_list(n)), i -> concat('e', i)) AS tuples
FROM HOP(TABLE storm_arrivals, DESCRIPTOR(ts), INTERVAL '10' SECONDS, INTERVAL '20' SECONDS)
GROUP BY window_start, window_end;
-- expect:
-- window_start        | window_end          | tuples           | pane_index | pane_timing | is_final | micro_batch
-- 2024-01-01 05:59:50 | 2024-01-01 06:00:10 | [e1, e2, e3]     | 0          | ON_TIME     | true     | 1
-- 2024-01-01 06:00:00 | 2024-01-01 06:00:20 | [e1, e2, e3, e4] | 0          | ON_TIME     | true     | 1
-- 2024-01-01 06:00:10 | 2024-01-01 06:00:30 | [e4, e5]         | 0          | ON_TIME     | true     | 1
-- 2024-01-01 06:00:20 | 2024-01-01 06:00:40 | [e5, e6]         | 0          | ON_TIME     | true     | 3
-- 2024-01-01 06:00:30 | 2024-01-01 06:00:50 | [e6]             | 0          | ON_TIME     | true     | 3
-- 2024-01-01 08:00:10 | 2024-01-01 08:00:30 | [e7, e8, e9]     | 0          | ON_TIME     | true     | 3
-- 2024-01-01 08:00:20 | 2024-01-01 08:00:40 | [e7, e8, e9, e10] | 0         | ON_TIME     | true     | 4
-- 2024-01-01 08:00:30 | 2024-01-01 08:00:50 | [e10]            | 0          | ON_TIME     | true     | 4
