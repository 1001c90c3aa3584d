-- Nexmark q11, user sessions: bids per bidder session, a session ending after 10 seconds without a bid.
SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
GROUP BY bidder, window_start, window_end
