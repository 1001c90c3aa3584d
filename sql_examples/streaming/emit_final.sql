-- EMIT FINAL with ALLOWED LATENESS: one pane per window, once the watermark passes its end + lateness.
CREATE OR REPLACE TEMPORARY VIEW final_arrivals AS SELECT * FROM VALUES
  (1, TIMESTAMP'2020-04-15 08:03:00', 1),
  (2, TIMESTAMP'2020-04-15 08:11:00', 2),
  (3, TIMESTAMP'2020-04-15 08:08:00', 3),
  (4, TIMESTAMP'2020-04-15 08:13:00', 4)
  AS t(seq, ts, v);

CREATE STREAM final_stream FROM TABLE final_arrivals ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts;

--   mb 0: 08:03
--   mb 1: 08:11          W -> 08:11: [08:00, 08:10) has ended but not 08:10 + 2 min: no pane yet
--   mb 2: 08:08          late but within the lateness: counted in [08:00, 08:10), no pane
--   mb 3: 08:13          W -> 08:13
--   mb 4: (no data)      W >= 08:12: [08:00, 08:10) fires once: 1 + 3 (ON_TIME, final)
--   mb 5: end of table   [08:10, 08:20) fires: 2 + 4
SELECT window_start, window_end, SUM(v) AS total, COUNT(*) AS n
FROM TUMBLE(TABLE final_stream, DESCRIPTOR(ts), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end
ALLOWED LATENESS INTERVAL '2' MINUTES
EMIT FINAL;
-- expect:
-- window_start        | window_end          | total | n | pane_index | pane_timing | is_final | micro_batch
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 4     | 2 | 0          | ON_TIME     | true     | 4
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 6     | 2 | 0          | ON_TIME     | true     | 5
