"""The edge cases on PostgreSQL (``ems`` and ``orders``), one function per case of
``docs/cdc-edge-cases.md`` that is a change at the source."""

from __future__ import annotations

import datetime as dt
import decimal

from helpers.errors import SourceError
from helpers.sources.edge_cases.session import (
    CATEGORY,
    CATEGORY_BY_GROUP,
    EVENT,
    ORDER_ITEMS,
    ORDERS,
    VENUE,
    EditSession,
)

__all__ = [
    "add_column",
    "burst",
    "delete_reinsert",
    "deletes",
    "exact_values",
    "partition_move",
    "rapid_updates",
    "toast",
    "toast_full_identity",
    "truncate",
]

_INSERT_CATEGORY = "INSERT INTO ems.category VALUES (%s, 'Scripted', %s, %s)"
_LATER_START = "UPDATE ems.event SET starttime = starttime + interval '1 hour' WHERE eventid = %s"


def deletes(s: EditSession) -> None:
    """Item 1: rows deleted after they reached Silver, and rows inserted and deleted in one round."""
    k = s.next_key(CATEGORY, "catid")
    with s.postgres("ems") as c:
        for i in (k, k + 1, k + 2):
            c.execute(_INSERT_CATEGORY, (i, f"del{i}", "to delete"))
    s.sync()  # k and k+1 are in Silver before they are deleted
    with s.postgres("ems") as c:
        for i in (k, k + 1):
            c.execute("DELETE FROM ems.category WHERE catid = %s", (i,))
        short_lived = (k + 3, k + 4)  # inserted and deleted within one round: never in Silver
        for i in short_lived:
            c.execute(_INSERT_CATEGORY, (i, f"del{i}", "to delete"))
        for i in short_lived:
            c.execute("DELETE FROM ems.category WHERE catid = %s", (i,))
    s.delete(CATEGORY, (k,), (k + 1,))
    s.delete(CATEGORY, *((i,) for i in short_lived), ingested=False)
    s.touch(CATEGORY, (k + 2,))
    s.sync()


def delete_reinsert(s: EditSession) -> None:
    """Item 2: delete and re-insert of one key in separate commits and in one transaction; the
    re-inserted row (``third``) must be in Silver."""
    k = s.next_key(CATEGORY, "catid")
    with s.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'first', 'v1')", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'gone', 'v1')", (k + 1,))
    s.sync()
    with s.postgres("ems") as c:  # separate commits, one ingestion round
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'second', 'v2')", (k,))
    with s.postgres("ems", autocommit=False) as c, c.transaction():  # one transaction
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'third', 'v3')", (k,))
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 1,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'back', 'v2')", (k + 1,))
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 1,))
    s.touch(CATEGORY, (k,))
    s.delete(CATEGORY, (k + 1,))
    s.sync()
    with s.postgres("ems") as c:  # deleted in one round, inserted again in the next
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'again', 'v4')", (k + 1,))
    s.undelete(CATEGORY, (k + 1,))
    s.sync()


def rapid_updates(s: EditSession) -> None:
    """Item 3: ten updates of one row within milliseconds, five of them in one transaction."""
    k = s.next_key(CATEGORY, "catid")
    with s.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'rapid', 'u0')", (k,))
        for n in range(1, 6):  # five commits within a few milliseconds
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (f"u{n}", k))
    with s.postgres("ems", autocommit=False) as c, c.transaction():  # and five in one transaction
        for n in range(6, 11):
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (f"u{n}", k))
    s.touch(CATEGORY, (k,))
    s.sync()


def partition_move(s: EditSession) -> None:
    """Item 5: a row moves to another ``catgroup`` partition and back (with an update in the round)."""
    k = s.next_key(CATEGORY_BY_GROUP, "catid")
    with s.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'mover', 'before')", (k,))
    s.sync()
    with s.postgres("ems") as c:
        c.execute("UPDATE ems.category SET catgroup = 'Moved', catdesc = 'after' WHERE catid = %s", (k,))
    s.touch(CATEGORY_BY_GROUP, (k,))
    s.sync()
    with s.postgres("ems") as c:  # and back again, with a move and an update in one round
        c.execute("UPDATE ems.category SET catgroup = 'Scripted' WHERE catid = %s", (k,))
        c.execute("UPDATE ems.category SET catdesc = 'back' WHERE catid = %s", (k,))
    s.sync()


def add_column(s: EditSession) -> None:
    """Item 6: a column added to ``venue`` and another widened (``venueseats`` from ``integer`` to
    ``bigint``) while capture runs; older rows have null in the new one, the new row a seat count
    past 2**31."""
    k = s.next_key(VENUE, "venueid")
    with s.postgres("ems") as c:
        c.execute("ALTER TABLE ems.venue ADD COLUMN IF NOT EXISTS venueurl varchar(200)")
        c.execute("ALTER TABLE ems.venue ALTER COLUMN venueseats TYPE bigint")
        c.execute(
            "INSERT INTO ems.venue (venueid, venuename, venuecity, venuestate, venueseats, venueurl)"
            " VALUES (%s, 'Scripted Hall', 'Nowhere', 'NA', 5000000000, 'https://example.com')",
            (k,),
        )
    s.touch(VENUE, (k,))
    s.sync()


def toast(s: EditSession) -> None:
    """Item 7: under ``REPLICA IDENTITY DEFAULT`` two updates of another column carry
    ``__debezium_unavailable_value`` for the untouched 12.8 kB ``eventname`` (stored out of line);
    Silver must keep the value. The identity is set back to FULL after."""
    k = s.next_key(EVENT, "eventid")
    with s.postgres("ems") as c:
        c.execute("ALTER TABLE ems.event ALTER COLUMN eventname TYPE text")
        c.execute("ALTER TABLE ems.event ALTER COLUMN eventname SET STORAGE EXTERNAL")
        c.execute("ALTER TABLE ems.event REPLICA IDENTITY DEFAULT")
        c.execute(
            "INSERT INTO ems.event (eventid, venueid, catid, dateid, eventname, starttime)"
            " SELECT %s, venueid, catid, dateid,"
            " (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) AS g),"
            " starttime FROM ems.event ORDER BY eventid LIMIT 1",
            (k,),
        )
        for _ in range(2):
            c.execute(_LATER_START, (k,))
        c.execute("ALTER TABLE ems.event REPLICA IDENTITY FULL")
    s.touch(EVENT, (k,))
    s.sync()


def toast_full_identity(s: EditSession) -> None:
    """Item 7 with full row images: a 20 kB text value, then an update of another column; under
    ``REPLICA IDENTITY FULL`` the update event carries the whole large value."""
    k = s.next_key(EVENT, "eventid")
    with s.postgres("ems") as c:
        c.execute("ALTER TABLE ems.event ALTER COLUMN eventname TYPE text")
        c.execute(
            "INSERT INTO ems.event (eventid, venueid, catid, dateid, eventname, starttime)"
            " SELECT %s, venueid, catid, dateid, %s, starttime FROM ems.event ORDER BY eventid LIMIT 1",
            (k, "x" * 20_000),
        )
        c.execute(_LATER_START, (k,))
    s.touch(EVENT, (k,))
    s.sync()


def exact_values(s: EditSession) -> None:
    """Item 8: extreme decimals, and timestamps with microseconds and an offset, in one transaction."""
    with s.postgres("orders") as c:
        rows = c.execute(
            "SELECT order_id, line_no FROM orders.order_items ORDER BY order_id, line_no LIMIT 2"
        ).fetchall()
    if len(rows) < 2:
        raise SourceError(
            "Failed to script exact values: orders.order_items has fewer than 2 rows (run notebook 01)"
        )
    (o1, l1), (o2, l2) = rows
    with s.postgres("orders", autocommit=False) as c, c.transaction():
        c.execute(
            "UPDATE orders.order_items SET unit_price = %s WHERE order_id = %s AND line_no = %s",
            (decimal.Decimal("99999999.99"), o1, l1),
        )
        c.execute(
            "UPDATE orders.order_items SET unit_price = %s WHERE order_id = %s AND line_no = %s",
            (decimal.Decimal("0.01"), o2, l2),
        )
        offset = dt.timezone(dt.timedelta(hours=5, minutes=30))
        c.execute(
            "UPDATE orders.orders SET updated_at = %s WHERE order_id = %s",
            (dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=offset), o1),
        )
        c.execute(
            "UPDATE orders.orders SET ordered_at = %s WHERE order_id = %s",
            (dt.datetime(1999, 12, 31, 23, 59, 59, 1, tzinfo=dt.UTC), o1),
        )
    s.touch(ORDER_ITEMS, (o1, l1), (o2, l2))
    s.touch(ORDERS, (o1,))
    s.sync()


def truncate(s: EditSession) -> None:
    """Day-2: ``TRUNCATE`` and a reload in one transaction (one row left out), then changes after it
    in the same round: Silver deletes every row as of the truncate and applies what follows."""
    k = s.next_key(CATEGORY, "catid")
    with s.postgres("ems") as c:
        for i in (k, k + 1):
            c.execute(_INSERT_CATEGORY, (i, f"tr{i}", "before truncate"))
    s.sync()  # both are in Silver before the truncate
    with s.postgres("ems", autocommit=False) as c, c.transaction():
        rows = c.execute(
            "SELECT catid, catgroup, catname, catdesc FROM ems.category WHERE catid <> %s", (k,)
        ).fetchall()
        c.execute("TRUNCATE ems.category")
        with c.cursor() as cur:
            cur.executemany("INSERT INTO ems.category VALUES (%s, %s, %s, %s)", rows)
    with s.postgres("ems") as c:  # after the truncate, same ingestion round
        c.execute("UPDATE ems.category SET catdesc = 'after truncate' WHERE catid = %s", (k + 1,))
        c.execute(_INSERT_CATEGORY, (k + 2, f"tr{k + 2}", "after truncate"))
    s.delete(CATEGORY, (k,))
    s.touch(CATEGORY, (k + 1,), (k + 2,))
    s.sync()


def burst(s: EditSession, n: int = 200) -> None:
    """Items 4 and 11 under load: ``n`` single-row commits (inserts, then updates) as fast as
    possible, for a test to kill a worker or run a snapshot meanwhile; every commit must arrive."""
    start = s.next_key(CATEGORY, "catid")
    ids = list(range(start, start + n // 2))
    with s.postgres("ems") as c:
        for i in ids:
            c.execute("INSERT INTO ems.category VALUES (%s, 'Burst', %s, 'b')", (i, f"b{i}"))
        for i in ids:
            c.execute("UPDATE ems.category SET catdesc = 'b2' WHERE catid = %s", (i,))
    s.touch(CATEGORY, *((i,) for i in ids))
    s.sync()
