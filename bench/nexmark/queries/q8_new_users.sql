-- Nexmark q8, new users: persons who opened an auction in the 10-second window in which they registered
-- (a TUMBLE window join).
SELECT p.id, p.name, p.starttime
FROM (
  SELECT id, name, window_start AS starttime, window_end AS endtime
  FROM TUMBLE(TABLE persons, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
  GROUP BY id, name, window_start, window_end
) p
JOIN (
  SELECT seller, window_start AS starttime, window_end AS endtime
  FROM TUMBLE(TABLE auctions, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
  GROUP BY seller, window_start, window_end
) a ON p.id = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime
