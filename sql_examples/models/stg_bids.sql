-- Typed, cleaned bids (a temporary view: the default materialization).
SELECT bidtime, price, item, supplier_id
FROM {{ source('raw', 'bids') }}
WHERE bidtime IS NOT NULL
