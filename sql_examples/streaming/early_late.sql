-- Early and late firings, DISCARDING: each pane holds only the rows since the window's previous pane.
CREATE OR REPLACE TEMPORARY VIEW early_arrivals AS SELECT * FROM VALUES
  (1, TIMESTAMP'2020-04-15 08:01:00', 1),
  (2, TIMESTAMP'2020-04-15 08:03:00', 2),
  (3, TIMESTAMP'2020-04-15 08:05:00', 3),
  (4, TIMESTAMP'2020-04-15 08:12:00', 4),
  (5, TIMESTAMP'2020-04-15 08:07:00', 5),
  (6, TIMESTAMP'2020-04-15 08:16:00', 6)
  AS t(seq, ts, v);

CREATE STREAM early_stream FROM TABLE early_arrivals ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts;

--   mb 0: 08:01        1 row in [08:00, 08:10)
--   mb 1: 08:03        2 rows: EARLY pane 0 = 1 + 2
--   mb 2: 08:05        1 new row
--   mb 3: 08:12        W -> 08:12
--   mb 4: (no data)    W >= 08:10: ON_TIME pane 1 = 3 (the row since pane 0)
--   mb 5: 08:07        late, within the lateness (W < 08:15): LATE pane 2 = 5
--   mb 6: 08:16        [08:10, 08:20) has 2 rows: EARLY pane 0 = 4 + 6; W -> 08:16
--   mb 7: (no data)    [08:00, 08:10) expires (08:16 >= 08:15): no pane, but the batch takes a number
--   mb 8: end of table [08:10, 08:20): ON_TIME pane 1 holds no new row: an empty pane (SUM NULL,
--                      COUNT 0), as Beam fires on time always; final
SELECT window_start, window_end, SUM(v) AS total, COUNT(*) AS n
FROM TUMBLE(TABLE early_stream, DESCRIPTOR(ts), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
ALLOWED LATENESS INTERVAL '5' MINUTES
EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS DISCARDING;
-- expect:
-- window_start        | window_end          | total | n | pane_index | pane_timing | is_final | micro_batch
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 3     | 2 | 0          | EARLY       | false    | 1
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 3     | 1 | 1          | ON_TIME     | false    | 4
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 5     | 1 | 2          | LATE        | false    | 5
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 10    | 2 | 0          | EARLY       | false    | 6
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | NULL  | 0 | 1          | ON_TIME     | true     | 8
