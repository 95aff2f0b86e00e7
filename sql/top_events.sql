-- Returns: the ten events of one category group with the highest ticket revenue (eventid,
--          eventname, catname, venuename, sales, tickets, revenue), highest revenue first
--          (ties by eventid).
-- Parameters: 1. catgroup (varchar): a category group, e.g. 'Shows' or 'Concerts'.
SELECT e.eventid,
       e.eventname,
       c.catname,
       v.venuename,
       count(*) AS sales,
       sum(s.qtysold) AS tickets,
       sum(s.pricepaid) AS revenue
  FROM sale AS s
  JOIN event AS e ON e.eventid = s.eventid
  JOIN category AS c ON c.catid = e.catid
  JOIN venue AS v ON v.venueid = e.venueid
 WHERE c.catgroup = ?
 GROUP BY e.eventid, e.eventname, c.catname, v.venuename
 ORDER BY revenue DESC, e.eventid
 LIMIT 10
