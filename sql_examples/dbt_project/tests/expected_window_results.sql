-- Every model's rows, exactly: worked out by hand from seeds/bids.csv (Flink's Bid table).
-- A dbt singular test fails when it returns rows: here, any row missing or unexpected.
WITH expected AS (
    SELECT model, key, CAST(window_start AS TIMESTAMP) AS window_start,
           CAST(window_end AS TIMESTAMP) AS window_end, CAST(total AS DECIMAL(20, 2)) AS total
    FROM VALUES
        ('tumble',  '',          '2020-04-15 08:00:00', '2020-04-15 08:10:00', 11.00),
        ('tumble',  '',          '2020-04-15 08:10:00', '2020-04-15 08:20:00', 10.00),
        ('hop',     '',          '2020-04-15 08:00:00', '2020-04-15 08:10:00', 11.00),
        ('hop',     '',          '2020-04-15 08:05:00', '2020-04-15 08:15:00', 15.00),
        ('hop',     '',          '2020-04-15 08:10:00', '2020-04-15 08:20:00', 10.00),
        ('hop',     '',          '2020-04-15 08:15:00', '2020-04-15 08:25:00',  6.00),
        ('session', 'supplier1', '2020-04-15 08:05:00', '2020-04-15 08:12:00',  6.00),
        ('session', 'supplier1', '2020-04-15 08:13:00', '2020-04-15 08:18:00',  1.00),
        ('session', 'supplier2', '2020-04-15 08:09:00', '2020-04-15 08:16:00',  8.00),
        ('session', 'supplier2', '2020-04-15 08:17:00', '2020-04-15 08:22:00',  6.00),
        ('top1',    'supplier1', '2020-04-15 08:00:00', '2020-04-15 08:10:00',  6.00),
        ('top1',    'supplier2', '2020-04-15 08:10:00', '2020-04-15 08:20:00',  9.00),
        ('rows3',   '0',         '2020-04-15 08:05:00', '2020-04-15 08:09:00.001', 11.00),
        ('rows3',   '1',         '2020-04-15 08:11:00', '2020-04-15 08:17:00.001', 10.00)
        AS t(model, key, window_start, window_end, total)
),
actual AS (
    SELECT 'tumble' AS model, '' AS key, window_start, window_end, CAST(total_price AS DECIMAL(20, 2)) AS total
    FROM {{ ref('tumble_sales') }}
    UNION ALL
    SELECT 'hop', '', window_start, window_end, CAST(total_price AS DECIMAL(20, 2)) FROM {{ ref('hop_sales') }}
    UNION ALL
    SELECT 'session', supplier_id, window_start, window_end, CAST(total_price AS DECIMAL(20, 2))
    FROM {{ ref('supplier_sessions') }}
    UNION ALL
    SELECT 'top1', supplier_id, window_start, window_end, CAST(price AS DECIMAL(20, 2))
    FROM {{ ref('top_supplier_per_window') }}
    UNION ALL
    SELECT 'rows3', CAST(window_index AS STRING), window_start, window_end, CAST(total_price AS DECIMAL(20, 2))
    FROM {{ ref('count_windows') }}
)
SELECT 'missing' AS problem, * FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM actual)
UNION ALL
SELECT 'unexpected' AS problem, * FROM (SELECT * FROM actual EXCEPT ALL SELECT * FROM expected)
