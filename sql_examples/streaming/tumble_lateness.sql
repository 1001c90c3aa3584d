-- TUMBLE with ALLOWED LATENESS and LATE ROWS TO, replayed one row per micro-batch.
-- Run: sqlwin run sql_examples/streaming/tumble_lateness.sql
CREATE OR REPLACE TEMPORARY VIEW arrivals AS SELECT * FROM VALUES
  (1, TIMESTAMP'2020-04-15 08:02:00', 2.00, 'A'),
  (2, TIMESTAMP'2020-04-15 08:07:00', 3.00, 'B'),
  (3, TIMESTAMP'2020-04-15 08:13:00', 1.00, 'C'),
  (4, TIMESTAMP'2020-04-15 08:09:00', 4.00, 'D'),
  (5, TIMESTAMP'2020-04-15 08:21:00', 6.00, 'E'),
  (6, TIMESTAMP'2020-04-15 08:04:00', 1.00, 'F')
  AS t(seq, bidtime, price, item);

CREATE STREAM bid_stream FROM TABLE arrivals ARRIVAL ORDER BY seq
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE;

-- W = max bidtime - 1 minute, in force from the next micro-batch. A micro-batch that moves W is
-- followed by a no-data micro-batch, which takes a number only if it fires or expires a window.
--   mb 0: 08:02         W -> 08:01 (the no-data batch does nothing: no number)
--   mb 1: 08:07         W -> 08:06
--   mb 2: 08:13         W -> 08:12
--   mb 3: (no data)     W = 08:12 >= 08:10: [08:00, 08:10) fires ON_TIME: 2 + 3; it expires at 08:15, so not final
--   mb 4: 08:09         late (W >= 08:10) but W < 08:10 + 5 min: kept, a LATE pane 2 + 3 + 4
--   mb 5: 08:21         W -> 08:20
--   mb 6: (no data)     [08:00, 08:10) expires (no pane); [08:10, 08:20) fires ON_TIME, expires at 08:25
--   mb 7: 08:04         W = 08:20 >= 08:10 + 5 min: dropped, written to late_bids
--   mb 8: end of table  W = +infinity: [08:20, 08:30) fires ON_TIME and final; [08:10, 08:20) expires
SELECT window_start, window_end, SUM(price) AS total, COUNT(*) AS bids
FROM TUMBLE(TABLE bid_stream, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
ALLOWED LATENESS INTERVAL '5' MINUTES
LATE ROWS TO late_bids;
-- expect:
-- window_start        | window_end          | total | bids | pane_index | pane_timing | is_final | micro_batch
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 5.00  | 2    | 0          | ON_TIME     | false    | 3
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 9.00  | 3    | 1          | LATE        | false    | 4
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 1.00  | 1    | 0          | ON_TIME     | false    | 6
-- 2020-04-15 08:20:00 | 2020-04-15 08:30:00 | 6.00  | 1    | 0          | ON_TIME     | true     | 8

-- The dropped row, with its window, the watermark in force and the micro-batch that dropped it.
SELECT * FROM late_bids;
-- expect:
-- seq | bidtime             | price | item | window_start        | window_end          | watermark           | reason | micro_batch
-- 6   | 2020-04-15 08:04:00 | 1.00  | F    | 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | late   | 7
