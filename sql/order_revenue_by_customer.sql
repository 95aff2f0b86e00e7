-- Dashboard dataset: revenue per customer from the order items the outbox carries as JSON
-- (outbox.payload: {"customer_id": .., "items": [{"quantity": .., "unit_price": "12.50"}, ..]}).
-- Returns: one row per customer with at least one order item (customer_id, customer_name, city,
--          order_count, avg_quantity: units per order, avg_revenue: revenue per order,
--          total_revenue: exact decimal), highest total revenue first (ties by customer_id).
-- Parameters: none.
WITH items AS (
    SELECT o.order_id,
           CAST(json_extract_scalar(o.payload, '$.customer_id') AS integer) AS customer_id,
           CAST(json_extract_scalar(item, '$.quantity') AS integer) AS quantity,
           CAST(json_extract_scalar(item, '$.unit_price') AS decimal(10, 2)) AS unit_price
      FROM outbox AS o
     CROSS JOIN UNNEST(CAST(json_extract(json_parse(o.payload), '$.items') AS array(json))) AS i (item)
),
per_order AS (
    SELECT customer_id,
           order_id,
           sum(quantity) AS quantity,
           sum(quantity * unit_price) AS revenue
      FROM items
     GROUP BY customer_id, order_id
)
SELECT p.customer_id,
       c.name AS customer_name,
       c.city,
       count(*) AS order_count,
       avg(CAST(p.quantity AS double)) AS avg_quantity,
       avg(CAST(p.revenue AS double)) AS avg_revenue,
       sum(p.revenue) AS total_revenue
  FROM per_order AS p
  JOIN customers AS c ON c.customer_id = p.customer_id
 GROUP BY p.customer_id, c.name, c.city
 ORDER BY total_revenue DESC, p.customer_id
