-- Cascaded windows (Flink's "Cascading Window Aggregation"): a 10-minute TUMBLE over the 5-minute per-supplier
-- windows' window_time. The inner windows fire into the outer ones as the watermark passes them, each counted
-- once; an outer window fires once the watermark handed on by the inner aggregation passes its end.
CREATE OR REPLACE TEMPORARY VIEW bid AS SELECT * FROM VALUES
  (TIMESTAMP'2020-04-15 08:05:00', 4.00, 'C', 'supplier1'),
  (TIMESTAMP'2020-04-15 08:07:00', 2.00, 'A', 'supplier1'),
  (TIMESTAMP'2020-04-15 08:09:00', 5.00, 'D', 'supplier2'),
  (TIMESTAMP'2020-04-15 08:11:00', 3.00, 'B', 'supplier2'),
  (TIMESTAMP'2020-04-15 08:13:00', 1.00, 'E', 'supplier1'),
  (TIMESTAMP'2020-04-15 08:17:00', 6.00, 'F', 'supplier2')
  AS t(bidtime, price, item, supplier_id);

CREATE STREAM bid_stream FROM TABLE bid ARRIVAL ORDER BY bidtime
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND;

-- Inner 5-minute windows: [08:05, 08:10) supplier1 6.00, supplier2 5.00 (window_time 08:09:59.999);
-- [08:10, 08:15) supplier2 3.00, supplier1 1.00; [08:15, 08:20) supplier2 6.00. Outer 10-minute windows:
-- [08:00, 08:10) = 6 + 5 = 11.00 once W passes 08:10 (after the row at 08:11); [08:10, 08:20) = 3 + 1 + 6 =
-- 10.00 at the end of the input. The inner aggregation emits only final panes to the outer one.
-- micro_batch counts the outer stage's micro-batches that did something: its watermark (the inner one's, handed
-- on a micro-batch later) moved, or panes reached or left it. After 08:05 (the no-data batch that follows it):
-- 0; after 08:07: 1; after 08:09: 2; 08:11 moves W to 08:10:59: the inner [08:05, 08:10) fires into the outer
-- window (3), which fires in the next one (4); 08:13: 5; 08:17: the inner [08:10, 08:15) fires (6); the end of
-- the input fires the inner [08:15, 08:20) (7), then the outer [08:10, 08:20) (8).
WITH window1 AS (
  SELECT window_start AS window_5mintumble_start, window_end AS window_5mintumble_end,
         window_time AS rowtime, SUM(price) AS partial_price
  FROM TUMBLE(TABLE bid_stream, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)
  GROUP BY supplier_id, window_start, window_end, window_time)
SELECT window_start, window_end, SUM(partial_price) AS total_price
FROM TUMBLE(TABLE window1, DESCRIPTOR(rowtime), INTERVAL '10' MINUTES)
GROUP BY window_start, window_end;
-- expect:
-- window_start        | window_end          | total_price | pane_index | pane_timing | is_final | micro_batch
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | 11.00       | 0          | ON_TIME     | true     | 4
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | 10.00       | 0          | ON_TIME     | true     | 8

-- Window Top-N over cascaded windows: per 10-minute window the supplier with the largest total.
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY partial_price DESC) AS rownum FROM (
    SELECT window_start, window_end, supplier_id, SUM(partial_price) AS partial_price
    FROM TUMBLE(TABLE(
      SELECT window_time AS rowtime, supplier_id, SUM(price) AS partial_price
      FROM TUMBLE(TABLE bid_stream, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)
      GROUP BY supplier_id, window_start, window_end, window_time), DESCRIPTOR(rowtime), INTERVAL '10' MINUTES)
    GROUP BY window_start, window_end, supplier_id)
) WHERE rownum <= 1;
-- expect:
-- window_start        | window_end          | supplier_id | partial_price | pane_index | pane_timing | is_final | rownum | micro_batch
-- 2020-04-15 08:00:00 | 2020-04-15 08:10:00 | supplier1   | 6.00          | 0          | ON_TIME     | true     | 1      | 4
-- 2020-04-15 08:10:00 | 2020-04-15 08:20:00 | supplier2   | 9.00          | 0          | ON_TIME     | true     | 1      | 8
