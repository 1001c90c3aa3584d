-- The Dataflow triggers document's example ("ウィンドウの累積モード"): fixed 10-minute windows, a
-- repeating trigger that fires every 3 elements (Repeatedly.forever(AfterPane.elementCountAtLeast(3)),
-- in sqlwin EVERY 3 ROWS = REPEATEDLY AFTER COUNT 3), key X only, all events in order.
--
-- Replay (GRAMMAR 3): the rows arrive one per micro-batch in `seq` order, all in the window
-- [12:00, 12:10). The trigger is evaluated once per micro-batch, so it fires on the 3rd, 6th and 9th
-- value (micro-batches 2, 5, 8). No AFTER WATERMARK: every pane is EARLY (the watermark is before the
-- window's end), and when the table ends nothing is left to emit, so there is no fourth pane.
-- `values` lists a pane's input in arrival order; `average` is the document's Combine.perKey average
-- (it prints 5.3 for 16 / 3). A replay returns its panes by micro_batch.

CREATE OR REPLACE TEMPORARY VIEW key_x AS
SELECT * FROM VALUES
  (1, 'X', 5,  TIMESTAMP '2024-01-01 12:00:00'),
  (2, 'X', 8,  TIMESTAMP '2024-01-01 12:01:00'),
  (3, 'X', 3,  TIMESTAMP '2024-01-01 12:02:00'),
  (4, 'X', 15, TIMESTAMP '2024-01-01 12:03:00'),
  (5, 'X', 19, TIMESTAMP '2024-01-01 12:04:00'),
  (6, 'X', 23, TIMESTAMP '2024-01-01 12:05:00'),
  (7, 'X', 9,  TIMESTAMP '2024-01-01 12:06:00'),
  (8, 'X', 13, TIMESTAMP '2024-01-01 12:07:00'),
  (9, 'X', 10, TIMESTAMP '2024-01-01 12:08:00')
AS t(seq, key, value, ts);

CREATE STREAM key_x_arrivals FROM TABLE key_x
  ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts;

-- 1. Accumulating mode (.accumulatingFiredPanes()): each pane holds every value so far.
--    Document: [5, 8, 3] (5.3), [5, 8, 3, 15, 19, 23] (12.167), [5, 8, 3, 15, 19, 23, 9, 13, 10] (11.667).
SELECT key, window_start, window_end,
       transform(array_sort(collect_list(struct(seq, value))), e -> e.value) AS values,
       round(avg(value), 3) AS average
FROM TUMBLE(TABLE key_x_arrivals, DESCRIPTOR(ts), INTERVAL '10' MINUTES)
GROUP BY key, window_start, window_end
EMIT WITH TRIGGER EVERY 3 ROWS ACCUMULATING;
-- expect:
-- key | window_start        | window_end          | values                              | average | pane_index | pane_timing | is_final | micro_batch
-- X   | 2024-01-01 12:00:00 | 2024-01-01 12:10:00 | [5, 8, 3]                           | 5.333   | 0          | EARLY       | false    | 2
-- X   | 2024-01-01 12:00:00 | 2024-01-01 12:10:00 | [5, 8, 3, 15, 19, 23]               | 12.167  | 1          | EARLY       | false    | 5
-- X   | 2024-01-01 12:00:00 | 2024-01-01 12:10:00 | [5, 8, 3, 15, 19, 23, 9, 13, 10]    | 11.667  | 2          | EARLY       | false    | 8

-- 2. Discarding mode (.discardingFiredPanes()): each pane holds the values since the previous one.
--    Document: [5, 8, 3] (5.3), [15, 19, 23] (19), [9, 13, 10] (10.667).
SELECT key, window_start, window_end,
       transform(array_sort(collect_list(struct(seq, value))), e -> e.value) AS values,
       round(avg(value), 3) AS average
FROM TUMBLE(TABLE key_x_arrivals, DESCRIPTOR(ts), INTERVAL '10' MINUTES)
GROUP BY key, window_start, window_end
EMIT WITH TRIGGER REPEATEDLY AFTER COUNT 3 DISCARDING;
-- expect:
-- key | window_start        | window_end          | values       | average | pane_index | pane_timing | is_final | micro_batch
-- X   | 2024-01-01 12:00:00 | 2024-01-01 12:10:00 | [5, 8, 3]    | 5.333   | 0          | EARLY       | false    | 2
-- X   | 2024-01-01 12:00:00 | 2024-01-01 12:10:00 | [15, 19, 23] | 19.0    | 1          | EARLY       | false    | 5
-- X   | 2024-01-01 12:00:00 | 2024-01-01 12:10:00 | [9, 13, 10]  | 10.667  | 2          | EARLY       | false    | 8
