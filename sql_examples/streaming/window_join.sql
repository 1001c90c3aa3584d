-- A window join of two streams, live or replayed (Flink's "Window Join" page, its FULL JOIN example): each side
-- is a window TVF over its stream, and a window's join is emitted once the watermarks of both sides have passed
-- its end; a FULL join emits the rows without a match of either side then. The answer is the one Flink's
-- documentation prints. Both sides here read one replay stream (a `side` column says which): a replay reads one
-- replay stream, as the batch query reads one table.
CREATE OR REPLACE TEMPORARY VIEW events AS SELECT * FROM VALUES
  ('L', TIMESTAMP'2020-04-15 12:02:00', 1, 'L1'),
  ('R', TIMESTAMP'2020-04-15 12:01:00', 2, 'R2'),
  ('L', TIMESTAMP'2020-04-15 12:06:00', 2, 'L2'),
  ('R', TIMESTAMP'2020-04-15 12:04:00', 3, 'R3'),
  ('L', TIMESTAMP'2020-04-15 12:03:00', 3, 'L3'),
  ('R', TIMESTAMP'2020-04-15 12:05:00', 4, 'R4')
  AS t(side, row_time, num, id);

CREATE STREAM event_stream FROM TABLE events ARRIVAL ORDER BY row_time
  WATERMARK FOR row_time AS row_time - INTERVAL '1' MINUTE;

-- One row per micro-batch in row_time order; W = max row_time - 1 min. After the row at 12:06 W is 12:05: the
-- sides' windows [12:00, 12:05) fire, then the join's (its watermark is the smaller of the sides', handed on
-- after their panes). [12:05, 12:10) is joined at the end of the input. `micro_batch` counts the join's own
-- micro-batches that did something (its watermark moved, or side panes came): the rows from 12:02 to 12:06 each
-- move it (0-4); the sides fire [12:00, 12:05) (5); the join's watermark reaches 12:05 and joins it (6); the end
-- of the input: the sides fire [12:05, 12:10) (7), then the join (8).
SELECT L.num AS L_Num, L.id AS L_Id, R.num AS R_Num, R.id AS R_Id,
       COALESCE(L.window_start, R.window_start) AS window_start,
       COALESCE(L.window_end, R.window_end) AS window_end
FROM (SELECT * FROM TUMBLE(TABLE(SELECT * FROM event_stream WHERE side = 'L'), DESCRIPTOR(row_time),
                           INTERVAL '5' MINUTES)) L
FULL JOIN (SELECT * FROM TUMBLE(TABLE(SELECT * FROM event_stream WHERE side = 'R'), DESCRIPTOR(row_time),
                                INTERVAL '5' MINUTES)) R
ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end;
-- expect:
-- L_Num | L_Id | R_Num | R_Id | window_start        | window_end          | pane_index | pane_timing | is_final | micro_batch
-- 1     | L1   | NULL  | NULL | 2020-04-15 12:00:00 | 2020-04-15 12:05:00 | 0          | ON_TIME     | true     | 6
-- NULL  | NULL | 2     | R2   | 2020-04-15 12:00:00 | 2020-04-15 12:05:00 | 0          | ON_TIME     | true     | 6
-- 3     | L3   | 3     | R3   | 2020-04-15 12:00:00 | 2020-04-15 12:05:00 | 0          | ON_TIME     | true     | 6
-- 2     | L2   | NULL  | NULL | 2020-04-15 12:05:00 | 2020-04-15 12:10:00 | 0          | ON_TIME     | true     | 8
-- NULL  | NULL | 4     | R4   | 2020-04-15 12:05:00 | 2020-04-15 12:10:00 | 0          | ON_TIME     | true     | 8

-- Window Top-N over a window join, the join written as batch queries write it (the TVFs joined directly), LEFT:
-- per window the left row with the largest num, with its match if any.
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY L_Num DESC) AS rownum FROM (
    SELECT L.num AS L_Num, R.num AS R_Num, L.window_start, L.window_end
    FROM TUMBLE(TABLE(SELECT * FROM event_stream WHERE side = 'L'), DESCRIPTOR(row_time), INTERVAL '5' MINUTES) L
    LEFT JOIN TUMBLE(TABLE(SELECT * FROM event_stream WHERE side = 'R'), DESCRIPTOR(row_time),
                     INTERVAL '5' MINUTES) R
    ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end)
) WHERE rownum <= 1;
-- expect:
-- L_Num | R_Num | window_start        | window_end          | pane_index | pane_timing | is_final | rownum | micro_batch
-- 3     | 3     | 2020-04-15 12:00:00 | 2020-04-15 12:05:00 | 0          | ON_TIME     | true     | 1      | 6
-- 2     | NULL  | 2020-04-15 12:05:00 | 2020-04-15 12:10:00 | 0          | ON_TIME     | true     | 1      | 8

-- A stream joined with its own window aggregation, as a window join (Nexmark q7, the bids with the highest price
-- of their 10-second window): the bids' window TVF on one side, the window's MAX on the other.
CREATE OR REPLACE TEMPORARY VIEW bids AS SELECT * FROM VALUES
  (1, 10, 'x', TIMESTAMP'2024-01-01 00:00:01', 0),
  (2, 30, 'y', TIMESTAMP'2024-01-01 00:00:04', 1),
  (3, 30, 'z', TIMESTAMP'2024-01-01 00:00:03', 2),
  (4, 20, 'x', TIMESTAMP'2024-01-01 00:00:12', 3),
  (5, 50, 'y', TIMESTAMP'2024-01-01 00:00:08', 4),
  (6, 40, 'z', TIMESTAMP'2024-01-01 00:00:15', 5),
  (7, 99, 'x', TIMESTAMP'2024-01-01 00:00:02', 6),
  (8, 45, 'y', TIMESTAMP'2024-01-01 00:00:19', 7)
  AS t(auction, price, bidder, date_time, seq);

CREATE STREAM bid_stream FROM TABLE bids ARRIVAL ORDER BY seq
  WATERMARK FOR date_time AS date_time - INTERVAL '3' SECONDS;

-- W = max date_time - 3 s. Bid 7 (99 at :02) arrives when W is :12: its window [:00, :10) has fired, so it is
-- late on both sides and in neither result (the batch query over the bids would pick it). [:00, :10) joins 50
-- (bid 5) once W passes :10, [:10, :20) joins 45 (bid 8) at the end of the input. Both sides read the same
-- window of the same stream and the join keeps the rows at the window's MAX, so sqlwin runs it as one window
-- operator (a window Top-N: the rows ranked first by price within their window, `table.why` says so) and
-- `micro_batch` counts that operator's micro-batches that do something: bids 1 to 6 (0-5), the no-data
-- micro-batch after bid 6 moved W to :12, which fires [:00, :10) (6), bids 7 and 8 (7, 8; the no-data one after
-- bid 8 moves W to :16 and fires nothing, so it takes no number), the end of the input (9).
SELECT B.auction, B.price, B.bidder, B.date_time, B.window_end
FROM TUMBLE(TABLE bid_stream, DESCRIPTOR(date_time), INTERVAL '10' SECONDS) B
JOIN (SELECT MAX(price) AS maxprice, window_start, window_end
      FROM TUMBLE(TABLE bid_stream, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
      GROUP BY window_start, window_end) B1
ON B.window_start = B1.window_start AND B.window_end = B1.window_end AND B.price = B1.maxprice;
-- expect:
-- auction | price | bidder | date_time           | window_end          | pane_index | pane_timing | is_final | micro_batch
-- 5       | 50    | y      | 2024-01-01 00:00:08 | 2024-01-01 00:00:10 | 0          | ON_TIME     | true     | 6
-- 8       | 45    | y      | 2024-01-01 00:00:19 | 2024-01-01 00:00:20 | 0          | ON_TIME     | true     | 9

-- The same, as Nexmark writes q7: the bids joined to their window's MAX by a time range (a bid meets the window
-- whose end it is at most 10 s before, its own window and, for a bid exactly on a bound, the window it ends).
-- sqlwin runs it as a window join of the bids' ranges (a HOP of each window's [end - 10 s, end]) with the
-- windows; a window's rows meet once the watermark passes the end of its range (1 microsecond after the window's
-- end). The same bids, the same answer: bid 7 is late on both sides (the aggregation's window has fired, and so
-- has its range's end). `micro_batch` counts the join's own micro-batches that do something (its watermark
-- moved, or side panes came): [:00, :10) is joined in its seventh (6), [:10, :20) at the end of the input (8).
SELECT b.auction, b.price, b.bidder, b.date_time
FROM bid_stream b
JOIN (SELECT MAX(price) AS maxprice, window_end AS date_time
      FROM TUMBLE(TABLE bid_stream, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
      GROUP BY window_start, window_end) b1
ON b.price = b1.maxprice
WHERE b.date_time BETWEEN b1.date_time - INTERVAL '10' SECONDS AND b1.date_time;
-- expect:
-- auction | price | bidder | date_time           | pane_index | pane_timing | is_final | micro_batch
-- 5       | 50    | y      | 2024-01-01 00:00:08 | 0          | ON_TIME     | true     | 6
-- 8       | 45    | y      | 2024-01-01 00:00:19 | 0          | ON_TIME     | true     | 8
