-- Early and late firings: per auction and 10-second window, a pane every 1000 bids before the window
-- closes, the final pane when the watermark passes its end, then a pane for each late bid within a minute.
-- Over a table (batch) this returns the final result of every window; a stream emits every pane.
SELECT window_start, window_end, auction, COUNT(*) AS num, MAX(price) AS max_price
FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
GROUP BY window_start, window_end, auction
ALLOWED LATENESS INTERVAL '1' MINUTE
EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 1000 ROWS LATE EVERY 1 ROWS
