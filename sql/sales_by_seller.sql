-- Prepared statement (PREPARE sales_by_seller FROM ...; EXECUTE sales_by_seller USING ?).
-- Returns: one row per event one seller sold tickets for (eventid, eventname, sales, tickets,
--          revenue, commission), highest revenue first (ties by eventid).
-- Parameters: 1. sellerid (integer): the seller's users.userid.
SELECT s.eventid,
       e.eventname,
       count(*) AS sales,
       sum(s.qtysold) AS tickets,
       sum(s.pricepaid) AS revenue,
       sum(s.commission) AS commission
  FROM sale AS s
  JOIN event AS e ON e.eventid = s.eventid
 WHERE s.sellerid = ?
 GROUP BY s.eventid, e.eventname
 ORDER BY revenue DESC, s.eventid
