-- Returns: TICKIT ticket sales per category (catgroup, catname, sales, tickets, revenue), highest
--          revenue first (ties by catname). Reads the view sales_by_day_category.
-- Parameters: none.
SELECT catgroup,
       catname,
       sum(sales) AS sales,
       sum(tickets) AS tickets,
       sum(revenue) AS revenue
  FROM sales_by_day_category
 GROUP BY catgroup, catname
 ORDER BY revenue DESC, catname
