-- Returns: one row per Silver catalog table (table_name, row_count): every Copy-on-Write table,
--          and the Merge-on-Read table sale_mor as sale_mor_ro (read-optimized: base files only).
--          Its real-time view sale_mor_rt (base plus log files) is left out so that the file runs
--          on both engines: Athena reads it, Trino's Hudi connector does not (Spark does).
-- Parameters: none.
SELECT 'date' AS table_name, count(*) AS row_count FROM "date"
UNION ALL SELECT 'listing', count(*) FROM listing
UNION ALL SELECT 'sale', count(*) FROM sale
UNION ALL SELECT 'sale_mor_ro', count(*) FROM sale_mor_ro
UNION ALL SELECT 'category', count(*) FROM category
UNION ALL SELECT 'event', count(*) FROM event
UNION ALL SELECT 'venue', count(*) FROM venue
UNION ALL SELECT 'users', count(*) FROM users
UNION ALL SELECT 'customers', count(*) FROM customers
UNION ALL SELECT 'orders', count(*) FROM orders
UNION ALL SELECT 'order_items', count(*) FROM order_items
UNION ALL SELECT 'outbox', count(*) FROM outbox
ORDER BY table_name
