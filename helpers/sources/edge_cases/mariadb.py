"""The edge cases on MariaDB (``ecomm``), one function per case of ``docs/cdc-edge-cases.md``
that is a change at the source (none for item 7: TOAST is PostgreSQL-only), and the row helpers
the conformance package's delivery faults use as well."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from helpers.errors import SourceError
from helpers.sources.edge_cases.session import DATE, SALE, SALE_BY_QTY, EditSession

__all__ = [
    "add_column",
    "copy_first_day",
    "delete_reinsert",
    "deletes",
    "exact_values",
    "insert_sale",
    "partition_move",
    "rapid_updates",
    "sale_template",
    "truncate",
]


def sale_template(cur: Any) -> dict[str, Any]:
    """The first sale's row, as the template of scripted sales."""
    cur.execute("SELECT * FROM sale ORDER BY salesid LIMIT 1")
    row = cur.fetchone()
    if row is None:
        raise SourceError("Failed to script a sale: ecomm.sale is empty (run notebook 01)")
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def insert_sale(cur: Any, salesid: int, template: Mapping[str, Any], **values: Any) -> None:
    """Insert a sale: the template's values, then ``values``, under ``salesid``."""
    row = {**template, **values, "salesid": salesid}
    cols = ", ".join(f"`{c}`" for c in row)
    marks = ", ".join(["%s"] * len(row))
    cur.execute(f"INSERT INTO sale ({cols}) VALUES ({marks})", tuple(row.values()))  # noqa: S608 - column names from the table


def copy_first_day(cur: Any, keys: Sequence[int], scenario: str) -> int:
    """Insert a copy of ``date``'s first day under each of ``keys``; that first day's key."""
    cur.execute("SELECT min(dateid) FROM `date`")
    top = cur.fetchone()
    if not top or top[0] is None:
        raise SourceError(f"Failed to script the {scenario} scenario: ecomm.date is empty")
    first = int(top[0])
    for key in keys:
        cur.execute(
            "INSERT INTO `date` (dateid, caldate, day, week, month, qtr, year, holiday)"
            " SELECT %s, caldate, day, week, month, qtr, year, holiday FROM `date` WHERE dateid = %s",
            (key, first),
        )
    return first


def deletes(s: EditSession) -> None:
    """Item 1: rows deleted after they reached Silver, and a row inserted and deleted in one round."""
    k = s.next_key(SALE, "salesid")
    with s.mariadb() as cur:
        template = sale_template(cur)
        for i in (k, k + 1, k + 2):
            insert_sale(cur, i, template)
    s.sync()
    with s.mariadb() as cur:
        for i in (k, k + 1):
            cur.execute("DELETE FROM sale WHERE salesid = %s", (i,))
        insert_sale(cur, k + 3, template)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 3,))
    s.delete(SALE, (k,), (k + 1,))
    s.delete(SALE, (k + 3,), ingested=False)
    s.touch(SALE, (k + 2,))
    s.sync()


def delete_reinsert(s: EditSession) -> None:
    """Item 2: delete and re-insert of one key in separate commits and in one transaction."""
    k = s.next_key(SALE, "salesid")
    with s.mariadb() as cur:
        template = sale_template(cur)
        insert_sale(cur, k, template, qtysold=1)
        insert_sale(cur, k + 1, template, qtysold=1)
    s.sync()
    with s.mariadb() as cur:
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))
        insert_sale(cur, k, template, qtysold=2)
        cur.execute("BEGIN")
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))
        insert_sale(cur, k, template, qtysold=3)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))
        insert_sale(cur, k + 1, template, qtysold=2)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))
        cur.execute("COMMIT")
    s.touch(SALE, (k,))
    s.delete(SALE, (k + 1,))
    s.sync()
    with s.mariadb() as cur:
        insert_sale(cur, k + 1, template, qtysold=4)
    s.undelete(SALE, (k + 1,))
    s.sync()


def rapid_updates(s: EditSession) -> None:
    """Item 3: eight updates of one row within a second (``source.ts_ms`` has 1-second resolution
    there): only the binlog position orders them; the last one wins."""
    k = s.next_key(SALE, "salesid")
    with s.mariadb() as cur:
        insert_sale(cur, k, sale_template(cur), qtysold=1, commission="0.00")
        for n in range(1, 6):
            cur.execute("UPDATE sale SET qtysold = %s, commission = %s WHERE salesid = %s", (n, f"{n}.00", k))
        cur.execute("BEGIN")
        for n in (6, 7, 8):
            cur.execute("UPDATE sale SET qtysold = %s, commission = %s WHERE salesid = %s", (n, f"{n}.00", k))
        cur.execute("COMMIT")
    s.touch(SALE, (k,))
    s.sync()


def partition_move(s: EditSession) -> None:
    """Item 5: a sale moves to another ``qtysold`` partition and back (with an update in the round)."""
    k = s.next_key(SALE_BY_QTY, "salesid")
    with s.mariadb() as cur:
        insert_sale(cur, k, sale_template(cur), qtysold=1)
    s.sync()
    with s.mariadb() as cur:
        cur.execute("UPDATE sale SET qtysold = 7 WHERE salesid = %s", (k,))
    s.touch(SALE_BY_QTY, (k,))
    s.sync()
    with s.mariadb() as cur:
        cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k,))
        cur.execute("UPDATE sale SET pricepaid = 10.00 WHERE salesid = %s", (k,))
    s.sync()


def add_column(s: EditSession) -> None:
    """Item 6: a nullable column added to ``date`` and another widened (``week`` from ``SMALLINT``
    to ``BIGINT``) while capture runs, then both set on one row (a week past ``SMALLINT``'s range)."""
    with s.mariadb() as cur:
        cur.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = DATABASE()"
            " AND table_name = 'date' AND column_name = 'note'"
        )
        row = cur.fetchone()
        if not row or not row[0]:
            cur.execute("ALTER TABLE `date` ADD COLUMN note varchar(50) NULL")
        cur.execute("ALTER TABLE `date` MODIFY week BIGINT NOT NULL")
        cur.execute("SELECT max(dateid) FROM `date`")
        top = cur.fetchone()
        k = int(top[0]) if top and top[0] is not None else 1
        note = f"scripted {time.time():.0f}"
        cur.execute("UPDATE `date` SET note = %s, week = 70000 WHERE dateid = %s", (note, k))
    s.touch(DATE, (k,))
    s.sync()


def exact_values(s: EditSession) -> None:
    """Item 8: the largest and smallest cents and second-resolution timestamps, inserted and updated."""
    k = s.next_key(SALE, "salesid")
    with s.mariadb() as cur:
        template = sale_template(cur)
        insert_sale(
            cur, k, template, pricepaid="999999.99", commission="0.01", saletime="2008-12-31 23:59:59"
        )
        insert_sale(
            cur, k + 1, template, pricepaid="0.01", commission="149999.99", saletime="2008-01-01 00:00:00"
        )
        cur.execute(
            "UPDATE sale SET pricepaid = %s, commission = %s, saletime = %s WHERE salesid = %s",
            ("123456.78", "18518.52", "2008-06-30 12:34:56", k),
        )
    s.touch(SALE, (k,), (k + 1,))
    s.sync()


def truncate(s: EditSession) -> None:
    """Day-2: ``TRUNCATE TABLE date`` and a reload without one row (a scripted copy of a day that
    Silver already holds), then a change after it. In MariaDB a TRUNCATE commits on its own: the
    reload is the transactions after it, and here it comes after a sync point, so Silver takes the
    marker in a round of its own (the PostgreSQL case takes the marker and the reload together)."""
    k = s.next_key(DATE, "dateid")
    with s.mariadb() as cur:
        first = copy_first_day(cur, [k], "truncate")
    s.sync()  # the copy is in Silver before the truncate
    with s.mariadb() as cur:
        cur.execute(
            "CREATE TEMPORARY TABLE wb_truncate_copy AS SELECT * FROM `date` WHERE dateid <> %s", (k,)
        )
        try:
            cur.execute("TRUNCATE TABLE `date`")
            s.sync()  # a round holding the marker only: Silver deletes every row
            cur.execute("INSERT INTO `date` SELECT * FROM wb_truncate_copy")
        finally:
            cur.execute("DROP TEMPORARY TABLE wb_truncate_copy")
        cur.execute("UPDATE `date` SET holiday = NOT holiday WHERE dateid = %s", (first,))
    s.delete(DATE, (k,))
    s.touch(DATE, (first,))
    s.sync()
