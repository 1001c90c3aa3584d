{{ config(materialized='table') }}
-- Window Top-N: the best {{ var('top_n', 1) }} supplier(s) of every window.
SELECT window_start, window_end, supplier_id, price, rownum
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
    FROM {{ ref('supplier_window_sales') }}
)
WHERE rownum <= {{ var('top_n', 1) }}
