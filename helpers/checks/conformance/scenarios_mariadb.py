"""The scenario scripts on MariaDB (``ecomm``), one function per item of ``docs/cdc-edge-cases.md``
(none for item 7: TOAST is PostgreSQL-only)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from helpers.capture.resnapshot import resnapshot as resnapshot_table
from helpers.checks.conformance.drivers import (
    check_tombstones,
    redeliver,
    shuffled_delivery,
    snapshot_handover,
)
from helpers.checks.conformance.model import (
    DATE,
    SALE,
    SALE_BY_QTY,
    ScenarioContext,
    next_key,
    wait_for_bronze,
)
from helpers.checks.divergence import DIFFERS, EQUAL
from helpers.errors import SourceError
from helpers.local.stack import LocalStack

__all__ = [
    "add_column",
    "delete_reinsert",
    "deletes",
    "exact_values",
    "handover",
    "out_of_order",
    "partition_move",
    "rapid_updates",
    "redelivery",
    "redelivery_delete",
    "truncate",
    "resnapshot",
]


def _sale_template(cur: Any) -> dict[str, Any]:
    cur.execute("SELECT * FROM sale ORDER BY salesid LIMIT 1")
    row = cur.fetchone()
    if row is None:
        raise SourceError("Failed to script a sale: ecomm.sale is empty (run notebook 01)")
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def _insert_sale(cur: Any, salesid: int, template: Mapping[str, Any], **values: Any) -> None:
    row = {**template, **values, "salesid": salesid}
    cols = ", ".join(f"`{c}`" for c in row)
    marks = ", ".join(["%s"] * len(row))
    cur.execute(f"INSERT INTO sale ({cols}) VALUES ({marks})", tuple(row.values()))  # noqa: S608 - column names from the table


def deletes(ctx: ScenarioContext) -> None:
    """Item 1: rows deleted after they reached Silver, and a row inserted and deleted in one batch."""
    k = next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        template = _sale_template(cur)
        for i in (k, k + 1, k + 2):
            _insert_sale(cur, i, template)
    ctx.sync()
    with ctx.mariadb() as cur:
        for i in (k, k + 1):
            cur.execute("DELETE FROM sale WHERE salesid = %s", (i,))
        _insert_sale(cur, k + 3, template)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 3,))
    ctx.delete(SALE, (k,), (k + 1,))
    ctx.delete(SALE, (k + 3,), ingested=False)
    ctx.touch(SALE, (k + 2,))
    ctx.sync()
    check_tombstones(ctx, SALE, [(k,), (k + 1,), (k + 3,)])


def delete_reinsert(ctx: ScenarioContext) -> None:
    """Item 2: delete and re-insert of one key in separate commits and in one transaction."""
    k = next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        template = _sale_template(cur)
        _insert_sale(cur, k, template, qtysold=1)
        _insert_sale(cur, k + 1, template, qtysold=1)
    ctx.sync()
    with ctx.mariadb() as cur:
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))
        _insert_sale(cur, k, template, qtysold=2)
        cur.execute("BEGIN")
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))
        _insert_sale(cur, k, template, qtysold=3)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))
        _insert_sale(cur, k + 1, template, qtysold=2)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))
        cur.execute("COMMIT")
    ctx.touch(SALE, (k,))
    ctx.delete(SALE, (k + 1,))
    ctx.sync()
    with ctx.mariadb() as cur:
        _insert_sale(cur, k + 1, template, qtysold=4)
    ctx.deleted[SALE].remove((k + 1,))
    ctx.sync()


def rapid_updates(ctx: ScenarioContext) -> None:
    """Item 3: eight updates of one row within a second (``source.ts_ms`` has 1-second resolution)."""
    k = next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        _insert_sale(cur, k, _sale_template(cur), qtysold=1, commission="0.00")
        for n in range(1, 6):  # source.ts_ms has 1-second resolution: only the binlog orders these
            cur.execute("UPDATE sale SET qtysold = %s, commission = %s WHERE salesid = %s", (n, f"{n}.00", k))
        cur.execute("BEGIN")
        for n in (6, 7, 8):
            cur.execute("UPDATE sale SET qtysold = %s, commission = %s WHERE salesid = %s", (n, f"{n}.00", k))
        cur.execute("COMMIT")
    ctx.touch(SALE, (k,))
    ctx.sync()


def redelivery(ctx: ScenarioContext) -> None:
    """Item 4: the Bronze files of an older update delivered again after a newer one."""
    k = next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        _insert_sale(cur, k, _sale_template(cur), qtysold=1)
    ctx.sync()

    def update(value: str) -> None:
        with ctx.mariadb() as cur:
            cur.execute("UPDATE sale SET qtysold = %s WHERE salesid = %s", (2 if value == "old" else 3, k))

    redeliver(ctx, SALE, update, (k,))


def redelivery_delete(ctx: ScenarioContext) -> None:
    """Item 4: the Bronze files of an insert delivered again after the row's delete."""
    k = next_key(ctx, SALE, "salesid")

    def change(step: str) -> None:
        with ctx.mariadb() as cur:
            if step == "old":
                _insert_sale(cur, k, _sale_template(cur), qtysold=1)
            else:
                cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))

    ctx.delete(SALE, (k,))
    redeliver(ctx, SALE, change, (k,))


def partition_move(ctx: ScenarioContext) -> None:
    """Item 5: a sale moves to another ``qtysold`` partition and back (with an update in the batch)."""
    k = next_key(ctx, SALE_BY_QTY, "salesid")
    with ctx.mariadb() as cur:
        _insert_sale(cur, k, _sale_template(cur), qtysold=1)
    ctx.sync()
    with ctx.mariadb() as cur:
        cur.execute("UPDATE sale SET qtysold = 7 WHERE salesid = %s", (k,))
    ctx.touch(SALE_BY_QTY, (k,))
    ctx.sync()
    with ctx.mariadb() as cur:
        cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k,))
        cur.execute("UPDATE sale SET pricepaid = 10.00 WHERE salesid = %s", (k,))
    ctx.sync()


def add_column(ctx: ScenarioContext) -> None:
    """Item 6: a nullable column added to ``date`` while capture runs, then set on one row."""
    with ctx.mariadb() as cur:
        cur.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = DATABASE()"
            " AND table_name = 'date' AND column_name = 'note'"
        )
        row = cur.fetchone()
        if not row or not row[0]:
            cur.execute("ALTER TABLE `date` ADD COLUMN note varchar(50) NULL")
        cur.execute("SELECT max(dateid) FROM `date`")
        top = cur.fetchone()
        k = int(top[0]) if top and top[0] is not None else 1
        cur.execute("UPDATE `date` SET note = %s WHERE dateid = %s", (f"scripted {time.time():.0f}", k))
    ctx.touch(DATE, (k,))
    ctx.sync()


def exact_values(ctx: ScenarioContext) -> None:
    """Item 8: the largest and smallest cents and second-resolution timestamps, inserted and updated."""
    k = next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        template = _sale_template(cur)
        _insert_sale(
            cur, k, template, pricepaid="999999.99", commission="0.01", saletime="2008-12-31 23:59:59"
        )
        _insert_sale(
            cur, k + 1, template, pricepaid="0.01", commission="149999.99", saletime="2008-01-01 00:00:00"
        )
        cur.execute(
            "UPDATE sale SET pricepaid = %s, commission = %s, saletime = %s WHERE salesid = %s",
            ("123456.78", "18518.52", "2008-06-30 12:34:56", k),
        )
    ctx.touch(SALE, (k,), (k + 1,))
    ctx.sync()


def out_of_order(ctx: ScenarioContext) -> None:
    """Item 9: an insert, then an update and a delete, ingested from shuffled Bronze files."""
    k = next_key(ctx, SALE, "salesid")

    def change() -> None:
        with ctx.mariadb() as cur:
            _insert_sale(cur, k, _sale_template(cur), qtysold=1)
            _insert_sale(cur, k + 1, _sale_template(cur), qtysold=1)
        wait_for_bronze(ctx.params, SALE)
        with ctx.mariadb() as cur:
            cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k,))
            cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))

    ctx.touch(SALE, (k,))
    ctx.delete(SALE, (k + 1,))
    shuffled_delivery(ctx, SALE, change)


def handover(ctx: ScenarioContext) -> None:
    """Item 11: inserts, updates and deletes while a fresh connector snapshots ``ecomm``."""
    base = next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        template = _sale_template(cur)

    def writer(n: int) -> None:
        with ctx.mariadb() as cur:
            k = base + n
            _insert_sale(cur, k, template, qtysold=1)
            if n % 3 == 1:
                cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k - 1,))
            if n % 5 == 4:
                cur.execute("DELETE FROM sale WHERE salesid = %s", (k - 2,))
                ctx.delete(SALE, (k - 2,), ingested=False)

    snapshot_handover(ctx, "ecomm", SALE, writer)


def _copy_first_day(cur: Any, keys: Sequence[int], scenario: str) -> int:
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


def truncate(ctx: ScenarioContext) -> None:
    """Day-2: ``TRUNCATE TABLE date`` and a reload without one row (a scripted copy of a day that
    Silver already holds), then a change after it. In MariaDB a TRUNCATE commits on its own: the
    reload is the transactions after it."""
    k = next_key(ctx, DATE, "dateid")
    with ctx.mariadb() as cur:
        first = _copy_first_day(cur, [k], "truncate")
    ctx.sync()  # the copy is in Silver before the truncate
    with ctx.mariadb() as cur:
        cur.execute(
            "CREATE TEMPORARY TABLE wb_truncate_copy AS SELECT * FROM `date` WHERE dateid <> %s", (k,)
        )
        try:
            cur.execute("TRUNCATE TABLE `date`")
            cur.execute("INSERT INTO `date` SELECT * FROM wb_truncate_copy")
        finally:
            cur.execute("DROP TEMPORARY TABLE wb_truncate_copy")
        cur.execute("UPDATE `date` SET holiday = NOT holiday WHERE dateid = %s", (first,))
    ctx.delete(DATE, (k,))
    ctx.touch(DATE, (first,))
    ctx.sync()


def resnapshot(ctx: ScenarioContext) -> None:
    """Day-2: Silver diverges (changes made with ``sql_log_bin = 0``, which the binlog and so
    capture never see), then ``./workbook resnapshot date``: Silver ends equal to the source, the
    row deleted unseen is gone."""
    k = next_key(ctx, DATE, "dateid")
    with ctx.mariadb() as cur:
        _copy_first_day(cur, [k, k + 1, k + 3], "re-snapshot")
    ctx.sync()
    ctx.expect_check(DATE, EQUAL)
    admin = LocalStack(ctx.params).connect_mariadb_admin(ctx.params.source("ecomm").database)
    try:
        with admin.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")  # these changes never reach the binlog
            cur.execute("DELETE FROM `date` WHERE dateid IN (%s, %s)", (k, k + 3))
            cur.execute("UPDATE `date` SET holiday = NOT holiday WHERE dateid = %s", (k + 1,))
            _copy_first_day(cur, [k + 2], "re-snapshot")
    finally:
        admin.close()
    ctx.expect_check(DATE, DIFFERS)  # one row fewer at the source: the status names the table
    result = resnapshot_table(ctx.params, "date")
    ctx.notes.append(f"re-snapshot in {result.seconds:.1f} s")
    ctx.delete(DATE, (k,), (k + 3,))
    ctx.touch(DATE, (k + 1,), (k + 2,))
    ctx.sync()
    ctx.expect_check(DATE, EQUAL)
