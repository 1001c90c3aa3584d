-- Flink's evictors (GRAMMAR 4: EVICT [BEFORE|AFTER] KEEP LAST n ROWS | KEEP LAST interval | DELTA(expr) < t).
-- At each firing the evictor runs over the window's contents in arrival order; EVICT BEFORE (the default)
-- aggregates what it leaves, and evicted rows leave the window for good: later panes never see them.
--
-- Replay (GRAMMAR 3): one reading per micro-batch in `seq` order (micro-batches 0..8), W = the last ts;
-- the end of the table is micro-batch 9. `temps` lists a pane's input in arrival order.

CREATE OR REPLACE TEMPORARY VIEW readings AS
SELECT * FROM VALUES
  (1, 's1', 20, TIMESTAMP '2024-01-01 12:00:00'),
  (2, 's1', 22, TIMESTAMP '2024-01-01 12:00:10'),
  (3, 's2', 30, TIMESTAMP '2024-01-01 12:00:15'),
  (4, 's1', 21, TIMESTAMP '2024-01-01 12:00:20'),
  (5, 's1', 25, TIMESTAMP '2024-01-01 12:00:30'),
  (6, 's2', 31, TIMESTAMP '2024-01-01 12:00:35'),
  (7, 's1', 24, TIMESTAMP '2024-01-01 12:00:40'),
  (8, 's1', 23, TIMESTAMP '2024-01-01 12:00:50'),
  (9, 's2', 33, TIMESTAMP '2024-01-01 12:00:55')
AS t(seq, sensor, temp, ts);

CREATE STREAM reading_arrivals FROM TABLE readings
  ARRIVAL ORDER BY seq
  WATERMARK FOR ts AS ts;

-- 1. Flink's KeyedStream.countWindow(3, 2) = GlobalWindows + CountTrigger.of(2) + CountEvictor.of(3): every
--    2 readings of a sensor, the average of its last 3. s1 fires at its 2nd, 4th and 6th reading (micro-
--    batches 1, 4, 7): [20, 22], then [20, 22, 21, 25] keeps [22, 21, 25], then [22, 21, 25, 24, 23] keeps
--    [25, 24, 23] (20 and 21 were evicted before). s2 fires at its 2nd reading; its 3rd is pending when the
--    table ends, and the end of input fires what is left (Beam's expiry pane; Flink's countWindow would keep
--    it): [30, 31, 33], LATE (the watermark is past the global window's end), final.
SELECT sensor,
       transform(array_sort(collect_list(struct(seq, temp))), e -> e.temp) AS temps,
       round(avg(temp), 2) AS avg_temp
FROM reading_arrivals
GROUP BY sensor
EVICT KEEP LAST 3 ROWS
EMIT WITH TRIGGER EVERY 2 ROWS;
-- expect:
-- sensor | temps        | avg_temp | pane_index | pane_timing | is_final | micro_batch
-- s1     | [20, 22]     | 21.0     | 0          | EARLY       | false    | 1
-- s1     | [22, 21, 25] | 22.67    | 1          | EARLY       | false    | 4
-- s2     | [30, 31]     | 30.5     | 0          | EARLY       | false    | 5
-- s1     | [25, 24, 23] | 24.0     | 2          | EARLY       | false    | 7
-- s2     | [30, 31, 33] | 31.33    | 1          | LATE        | true     | 9

-- 2. TimeEvictor: KEEP LAST INTERVAL '20' SECONDS keeps the readings with ts > (newest ts - 20 s), in a
--    1-minute window with early panes every 2 readings. s1 at micro-batch 4: newest 12:00:30, so 20 (12:00:00)
--    and 22 (12:00:10) leave; at 7: newest 12:00:50 leaves 24 and 23. s2 at 5: 30 (12:00:15) is exactly 20 s
--    older than 31 and leaves. At the end of the table the watermark passes 12:01: the ON_TIME panes fire
--    (s1's with no new reading, Beam fires on time always) and evict again: s2's 33 (12:00:55) evicts 31.
SELECT sensor, window_start, window_end,
       transform(array_sort(collect_list(struct(seq, temp))), e -> e.temp) AS temps,
       max(temp) AS max_temp
FROM TUMBLE(TABLE reading_arrivals, DESCRIPTOR(ts), INTERVAL '1' MINUTE)
GROUP BY sensor, window_start, window_end
EVICT KEEP LAST INTERVAL '20' SECONDS
EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS;
-- expect:
-- sensor | window_start        | window_end          | temps    | max_temp | pane_index | pane_timing | is_final | micro_batch
-- s1     | 2024-01-01 12:00:00 | 2024-01-01 12:01:00 | [20, 22] | 22       | 0          | EARLY       | false    | 1
-- s1     | 2024-01-01 12:00:00 | 2024-01-01 12:01:00 | [21, 25] | 25       | 1          | EARLY       | false    | 4
-- s2     | 2024-01-01 12:00:00 | 2024-01-01 12:01:00 | [31]     | 31       | 0          | EARLY       | false    | 5
-- s1     | 2024-01-01 12:00:00 | 2024-01-01 12:01:00 | [24, 23] | 24       | 2          | EARLY       | false    | 7
-- s1     | 2024-01-01 12:00:00 | 2024-01-01 12:01:00 | [24, 23] | 24       | 3          | ON_TIME     | true     | 9
-- s2     | 2024-01-01 12:00:00 | 2024-01-01 12:01:00 | [33]     | 33       | 1          | ON_TIME     | true     | 9
