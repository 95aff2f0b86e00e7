"""The conformance scenarios on MariaDB (``ecomm``) that are more than a change at the source:
delivery faults (redelivered and shuffled Bronze files, a snapshot hand-over), a re-snapshot, and
the checks some edge cases add to their script. The changes themselves are scripted once, in
:mod:`helpers.sources.edge_cases.mariadb`."""

from __future__ import annotations

from helpers.capture.resnapshot import resnapshot as resnapshot_table
from helpers.checks.conformance.drivers import (
    check_tombstones,
    redeliver,
    shuffled_delivery,
    snapshot_handover,
)
from helpers.checks.conformance.model import ScenarioContext, wait_for_bronze
from helpers.checks.divergence import DIFFERS, EQUAL
from helpers.local.stack import LocalStack
from helpers.sources.edge_cases import mariadb as edits
from helpers.sources.edge_cases.mariadb import copy_first_day, insert_sale, sale_template
from helpers.sources.edge_cases.session import DATE, SALE

__all__ = [
    "deletes",
    "handover",
    "out_of_order",
    "redelivery",
    "redelivery_delete",
    "resnapshot",
]


def deletes(ctx: ScenarioContext) -> None:
    """Item 1 (:func:`helpers.sources.edge_cases.mariadb.deletes`), and what Bronze holds for the
    deleted keys: a delete event each, no tombstone."""
    edits.deletes(ctx)
    check_tombstones(ctx, SALE, [*ctx.deleted[SALE], *ctx.gone[SALE]])


def redelivery(ctx: ScenarioContext) -> None:
    """Item 4: the Bronze files of an older update delivered again after a newer one."""
    k = ctx.next_key(SALE, "salesid")
    with ctx.mariadb() as cur:
        insert_sale(cur, k, sale_template(cur), qtysold=1)
    ctx.sync()

    def update(value: str) -> None:
        with ctx.mariadb() as cur:
            cur.execute("UPDATE sale SET qtysold = %s WHERE salesid = %s", (2 if value == "old" else 3, k))

    redeliver(ctx, SALE, update, (k,), old_round=False)


def redelivery_delete(ctx: ScenarioContext) -> None:
    """Item 4: the Bronze files of an insert delivered again after the row's delete."""
    k = ctx.next_key(SALE, "salesid")

    def change(step: str) -> None:
        with ctx.mariadb() as cur:
            if step == "old":
                insert_sale(cur, k, sale_template(cur), qtysold=1)
            else:
                cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))

    ctx.delete(SALE, (k,))
    redeliver(ctx, SALE, change, (k,))


def out_of_order(ctx: ScenarioContext) -> None:
    """Item 9: an insert, then an update and a delete, ingested from shuffled Bronze files."""
    k = ctx.next_key(SALE, "salesid")

    def change() -> None:
        with ctx.mariadb() as cur:
            insert_sale(cur, k, sale_template(cur), qtysold=1)
            insert_sale(cur, k + 1, sale_template(cur), qtysold=1)
        wait_for_bronze(ctx.params, SALE)
        with ctx.mariadb() as cur:
            cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k,))
            cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))

    ctx.touch(SALE, (k,))
    ctx.delete(SALE, (k + 1,))
    shuffled_delivery(ctx, SALE, change)


def handover(ctx: ScenarioContext) -> None:
    """Item 11: inserts, updates and deletes while a fresh connector snapshots ``ecomm``."""
    base = ctx.next_key(SALE, "salesid")
    with ctx.mariadb() as cur:
        template = sale_template(cur)

    def writer(n: int) -> None:
        with ctx.mariadb() as cur:
            k = base + n
            insert_sale(cur, k, template, qtysold=1)
            if n % 3 == 1:
                cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k - 1,))
            if n % 5 == 4:
                cur.execute("DELETE FROM sale WHERE salesid = %s", (k - 2,))
                ctx.delete(SALE, (k - 2,), ingested=False)

    snapshot_handover(ctx, "ecomm", SALE, writer)


def resnapshot(ctx: ScenarioContext) -> None:
    """Day-2: Silver diverges (changes made with ``sql_log_bin = 0``, which the binlog and so
    capture never see), then ``./workbook resnapshot date``: Silver ends equal to the source, the
    row deleted unseen is gone."""
    k = ctx.next_key(DATE, "dateid")
    with ctx.mariadb() as cur:
        copy_first_day(cur, [k, k + 1, k + 3], "re-snapshot")
    ctx.sync()
    ctx.expect_check(DATE, EQUAL)
    admin = LocalStack(ctx.params).connect_mariadb_admin(ctx.params.source("ecomm").database)
    try:
        with admin.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")  # these changes never reach the binlog
            cur.execute("DELETE FROM `date` WHERE dateid IN (%s, %s)", (k, k + 3))
            cur.execute("UPDATE `date` SET holiday = NOT holiday WHERE dateid = %s", (k + 1,))
            copy_first_day(cur, [k + 2], "re-snapshot")
    finally:
        admin.close()
    ctx.expect_check(DATE, DIFFERS)  # one row fewer at the source: the status names the table
    result = resnapshot_table(ctx.params, "date")
    ctx.notes.append(f"re-snapshot in {result.seconds:.1f} s")
    ctx.delete(DATE, (k,), (k + 3,))
    ctx.touch(DATE, (k + 1,), (k + 2,))
    ctx.sync()
    ctx.expect_check(DATE, EQUAL)
