-- Window join: join two windowed tables on window_start and window_end (plus any keys), so
-- rows only meet rows of the same window. The Flink documentation's Window Join example.

CREATE OR REPLACE TEMPORARY VIEW left_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/join_left.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW right_csv
USING csv OPTIONS (path '${sqlwin.file_dir}/data/join_right.csv', header 'true', inferSchema 'false');

CREATE OR REPLACE TEMPORARY VIEW left_table AS
SELECT CAST(row_time AS TIMESTAMP) AS row_time, CAST(num AS INT) AS num, id FROM left_csv;

CREATE OR REPLACE TEMPORARY VIEW right_table AS
SELECT CAST(row_time AS TIMESTAMP) AS row_time, CAST(num AS INT) AS num, id FROM right_csv;

-- FULL JOIN on num within 5-minute windows: L3 (12:03) and R3 (12:04) meet in [12:00, 12:05);
-- R2 has no left partner with num 2 in its window (L2 is at 12:06, in the next one).
SELECT L.num AS L_Num, L.id AS L_Id, R.num AS R_Num, R.id AS R_Id,
       COALESCE(L.window_start, R.window_start) AS window_start,
       COALESCE(L.window_end, R.window_end) AS window_end
FROM (
    SELECT * FROM TABLE(TUMBLE(TABLE left_table, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))
) L
FULL JOIN (
    SELECT * FROM TABLE(TUMBLE(TABLE right_table, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))
) R
ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end
ORDER BY window_start, COALESCE(L.num, R.num);
-- expect:
-- L_Num | L_Id | R_Num | R_Id | window_start        | window_end
-- 1     | L1   | NULL  | NULL | 2020-04-15 12:00:00 | 2020-04-15 12:05:00
-- NULL  | NULL | 2     | R2   | 2020-04-15 12:00:00 | 2020-04-15 12:05:00
-- 3     | L3   | 3     | R3   | 2020-04-15 12:00:00 | 2020-04-15 12:05:00
-- 2     | L2   | NULL  | NULL | 2020-04-15 12:05:00 | 2020-04-15 12:10:00
-- NULL  | NULL | 4     | R4   | 2020-04-15 12:05:00 | 2020-04-15 12:10:00

-- INNER JOIN, with the TVFs directly in the FROM clause.
SELECT L.id AS left_id, R.id AS right_id, L.window_start, L.window_end
FROM TUMBLE(TABLE left_table, DESCRIPTOR(row_time), INTERVAL '5' MINUTES) AS L
JOIN TUMBLE(TABLE right_table, DESCRIPTOR(row_time), INTERVAL '5' MINUTES) AS R
  ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end;
-- expect:
-- left_id | right_id | window_start        | window_end
-- L3      | R3       | 2020-04-15 12:00:00 | 2020-04-15 12:05:00
