-- Returns: TICKIT ticket sales per day (UTC), all categories (sale_date, sales, tickets, revenue),
--          oldest day first. Reads the view sales_by_day_category.
-- Parameters: none.
SELECT sale_date,
       sum(sales) AS sales,
       sum(tickets) AS tickets,
       sum(revenue) AS revenue
  FROM sales_by_day_category
 GROUP BY sale_date
 ORDER BY sale_date
