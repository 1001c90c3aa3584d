-- Window Top-N: the best-selling supplier of every window.
SELECT window_start, window_end, supplier_id, price, rownum
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
    FROM {{ ref('supplier_window_sales') }}
)
WHERE rownum <= 1
