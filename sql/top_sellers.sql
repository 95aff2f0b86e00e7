-- Returns: the ten sellers with the highest ticket revenue (sellerid, username, sales, tickets,
--          revenue, commission), highest revenue first (ties by sellerid).
-- Parameters: none.
SELECT s.sellerid,
       u.username,
       count(*) AS sales,
       sum(s.qtysold) AS tickets,
       sum(s.pricepaid) AS revenue,
       sum(s.commission) AS commission
  FROM sale AS s
  JOIN users AS u ON u.userid = s.sellerid
 GROUP BY s.sellerid, u.username
 ORDER BY revenue DESC, s.sellerid
 LIMIT 10
