-- The global window: an aggregation with EMIT and no window TVF fires a pane per key every 2 rows.
CREATE OR REPLACE TEMPORARY VIEW global_arrivals AS SELECT * FROM VALUES
  (0, TIMESTAMP'2020-04-15 08:00:00', 'A', 1),
  (0, TIMESTAMP'2020-04-15 08:01:00', 'B', 2),
  (1, TIMESTAMP'2020-04-15 08:02:00', 'A', 3),
  (2, TIMESTAMP'2020-04-15 08:03:00', 'B', 5),
  (2, TIMESTAMP'2020-04-15 08:04:00', 'A', 4),
  (2, TIMESTAMP'2020-04-15 08:05:00', 'A', 6),
  (3, TIMESTAMP'2020-04-15 08:06:00', 'A', 10)
  AS t(batch, ts, item, v);

CREATE STREAM global_stream FROM TABLE global_arrivals ARRIVAL ORDER BY ts MICRO BATCH BY batch
  WATERMARK FOR ts AS ts;

-- Triggers are evaluated once per micro-batch; panes accumulate (the default).
--   mb 0: A 1, B 2         one row each: nothing fires
--   mb 1: A 3              A has 2 rows: pane 0 = 1 + 3 (EARLY: the global window never ends)
--   mb 2: B 5, A 4, A 6    B: pane 0 = 2 + 5; A has 2 new rows: pane 1 = 1 + 3 + 4 + 6
--   mb 3: A 10             1 new row: nothing
--   mb 4: end of table     W = +infinity ends the global window: A's pending row fires a last pane
--                          (LATE: after the window's end, not by AFTER WATERMARK), final; B has none pending
SELECT item, SUM(v) AS total, COUNT(*) AS n
FROM global_stream
GROUP BY item
EMIT WITH TRIGGER EVERY 2 ROWS;
-- expect:
-- item | total | n | pane_index | pane_timing | is_final | micro_batch
-- A    | 4     | 2 | 0          | EARLY       | false    | 1
-- A    | 14    | 4 | 1          | EARLY       | false    | 2
-- B    | 7     | 2 | 0          | EARLY       | false    | 2
-- A    | 24    | 5 | 2          | LATE        | true     | 4
