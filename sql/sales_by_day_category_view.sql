-- Creates: the view sales_by_day_category, one row per sale day (UTC) and category: sale_date,
--          catgroup, catname, sales, tickets, revenue. sales_by_day.sql and
--          sales_by_category.sql read it.
-- Parameters: none.
CREATE OR REPLACE VIEW sales_by_day_category AS
SELECT CAST(s.saletime AS date) AS sale_date,
       c.catgroup,
       c.catname,
       count(*) AS sales,
       sum(s.qtysold) AS tickets,
       sum(s.pricepaid) AS revenue
  FROM sale AS s
  JOIN event AS e ON e.eventid = s.eventid
  JOIN category AS c ON c.catid = e.catid
 GROUP BY CAST(s.saletime AS date), c.catgroup, c.catname
