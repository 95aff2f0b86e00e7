"""The scenario scripts on PostgreSQL (``ems`` and ``orders``), one function per item of
``docs/cdc-edge-cases.md``; scripted edits :mod:`helpers.sources.edits` already has are reused."""

from __future__ import annotations

import datetime as dt
import decimal
import threading
import time
import uuid

from psycopg import sql

from helpers.capture.register import connector_specs, local_endpoints, open_backend, register_connectors
from helpers.capture.resnapshot import resnapshot as resnapshot_table
from helpers.checks.conformance.drivers import (
    check_tombstones,
    redeliver,
    shuffled_delivery,
    snapshot_handover,
)
from helpers.checks.conformance.model import (
    CATEGORY,
    CATEGORY_BY_GROUP,
    EVENT,
    ORDER_ITEMS,
    ORDERS,
    VENUE,
    ScenarioContext,
    Target,
    next_key,
    wait_for_bronze,
)
from helpers.checks.divergence import DIFFERS, EQUAL
from helpers.errors import SourceError
from helpers.local.stack import LocalStack
from helpers.naming import publication_name
from helpers.sources import edits

__all__ = [
    "add_column",
    "add_table",
    "delete_reinsert",
    "deletes",
    "exact_values",
    "handover",
    "out_of_order",
    "partition_move",
    "rapid_updates",
    "redelivery",
    "redelivery_delete",
    "resnapshot",
    "toast",
    "truncate",
]


def deletes(ctx: ScenarioContext) -> None:
    """Item 1: rows deleted after they reached Silver, and rows inserted and deleted in one batch."""
    k = next_key(ctx, CATEGORY, "catid")
    ids = [k, k + 1, k + 2]
    with ctx.postgres("ems") as c:
        for i in ids:
            c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', %s, 'to delete')", (i, f"del{i}"))
    ctx.sync()  # k and k+1 are in Silver before they are deleted
    with ctx.postgres("ems") as c:
        for i in ids[:2]:
            c.execute("DELETE FROM ems.category WHERE catid = %s", (i,))
    scripted = edits.delete_rows(LocalStack(ctx.params), ctx.params)  # inserted and deleted in one batch
    short_lived = [(i,) for i in scripted.keys]
    ctx.delete(CATEGORY, (k,), (k + 1,))
    ctx.delete(CATEGORY, *short_lived, ingested=False)
    ctx.touch(CATEGORY, (k + 2,))
    ctx.sync()
    check_tombstones(ctx, CATEGORY, [(k,), (k + 1,), *short_lived])


def delete_reinsert(ctx: ScenarioContext) -> None:
    """Item 2: delete and re-insert of one key in separate commits and in one transaction."""
    k = next_key(ctx, CATEGORY, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'first', 'v1')", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'gone', 'v1')", (k + 1,))
    ctx.sync()
    with ctx.postgres("ems") as c:  # separate commits, one ingestion batch
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'second', 'v2')", (k,))
    with ctx.postgres("ems", autocommit=False) as c, c.transaction():  # one transaction
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'third', 'v3')", (k,))
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 1,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'back', 'v2')", (k + 1,))
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 1,))
    ctx.touch(CATEGORY, (k,))
    ctx.delete(CATEGORY, (k + 1,))
    ctx.sync()
    with ctx.postgres("ems") as c:  # deleted in one batch, re-inserted in the next
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'again', 'v4')", (k + 1,))
    ctx.deleted[CATEGORY].remove((k + 1,))
    ctx.sync()


def rapid_updates(ctx: ScenarioContext) -> None:
    """Item 3: ten updates of one row within milliseconds, five of them in one transaction."""
    k = next_key(ctx, CATEGORY, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'rapid', 'u0')", (k,))
        for n in range(1, 6):  # five commits within a few milliseconds
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (f"u{n}", k))
    with ctx.postgres("ems", autocommit=False) as c, c.transaction():  # and five in one transaction
        for n in range(6, 11):
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (f"u{n}", k))
    ctx.touch(CATEGORY, (k,))
    ctx.sync()


def redelivery(ctx: ScenarioContext) -> None:
    """Item 4: the Bronze files of an older update delivered again after a newer one."""
    k = next_key(ctx, CATEGORY, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'redelivery', 'start')", (k,))
    ctx.sync()

    def update(value: str) -> None:
        with ctx.postgres("ems") as c:
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (value, k))

    redeliver(ctx, CATEGORY, update, (k,))


def redelivery_delete(ctx: ScenarioContext) -> None:
    """Item 4: the Bronze files of an insert delivered again after the row's delete."""
    k = next_key(ctx, CATEGORY, "catid")

    def change(step: str) -> None:
        with ctx.postgres("ems") as c:
            if step == "old":
                c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'redelivery', 'doomed')", (k,))
            else:
                c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))

    ctx.delete(CATEGORY, (k,))
    redeliver(ctx, CATEGORY, change, (k,))


def partition_move(ctx: ScenarioContext) -> None:
    """Item 5: a row moves to another partition and back (with an update in the same batch)."""
    k = next_key(ctx, CATEGORY_BY_GROUP, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'mover', 'before')", (k,))
    ctx.sync()
    with ctx.postgres("ems") as c:
        c.execute("UPDATE ems.category SET catgroup = 'Moved', catdesc = 'after' WHERE catid = %s", (k,))
    ctx.touch(CATEGORY_BY_GROUP, (k,))
    ctx.sync()
    with ctx.postgres("ems") as c:  # and back again, with a move and an update in one batch
        c.execute("UPDATE ems.category SET catgroup = 'Scripted' WHERE catid = %s", (k,))
        c.execute("UPDATE ems.category SET catdesc = 'back' WHERE catid = %s", (k,))
    ctx.sync()


def add_column(ctx: ScenarioContext) -> None:
    """Item 6: a column added while capture runs (:func:`helpers.sources.edits.add_column`)."""
    result = edits.add_column(LocalStack(ctx.params), ctx.params)
    ctx.touch(VENUE, *((k,) for k in result.keys))
    ctx.sync()


def toast(ctx: ScenarioContext) -> None:
    """Item 7: TOAST placeholders (:func:`helpers.sources.edits.toast_default_identity`)."""
    result = edits.toast_default_identity(LocalStack(ctx.params), ctx.params)
    ctx.touch(EVENT, *((k,) for k in result.keys))
    ctx.sync()
    filled = sum(r.unavailable_filled for results in ctx.ingested.values() for r in results)
    unresolved = sum(r.unavailable_unresolved for results in ctx.ingested.values() for r in results)
    ctx.notes.append(f"TOAST placeholders filled {filled}, unresolved {unresolved}")


def exact_values(ctx: ScenarioContext) -> None:
    """Item 8: extreme decimals, and timestamps with microseconds and an offset, in one transaction."""
    with ctx.postgres("orders") as c:
        row = c.execute(
            "SELECT order_id, line_no FROM orders.order_items ORDER BY order_id, line_no LIMIT 2"
        ).fetchall()
    if len(row) < 2:
        raise SourceError(
            "Failed to script exact values: orders.order_items has fewer than 2 rows (run notebook 01)"
        )
    (o1, l1), (o2, l2) = row
    with ctx.postgres("orders", autocommit=False) as c, c.transaction():
        c.execute(
            "UPDATE orders.order_items SET unit_price = %s WHERE order_id = %s AND line_no = %s",
            (decimal.Decimal("99999999.99"), o1, l1),
        )
        c.execute(
            "UPDATE orders.order_items SET unit_price = %s WHERE order_id = %s AND line_no = %s",
            (decimal.Decimal("0.01"), o2, l2),
        )
        c.execute(
            "UPDATE orders.orders SET updated_at = %s WHERE order_id = %s",
            (
                dt.datetime(
                    2024, 2, 29, 23, 59, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))
                ),
                o1,
            ),
        )
        c.execute(
            "UPDATE orders.orders SET ordered_at = %s WHERE order_id = %s",
            (dt.datetime(1999, 12, 31, 23, 59, 59, 1, tzinfo=dt.UTC), o1),
        )
    ctx.touch(ORDER_ITEMS, (o1, l1), (o2, l2))
    ctx.touch(ORDERS, (o1,))
    ctx.sync()


def out_of_order(ctx: ScenarioContext) -> None:
    """Item 9: an insert, then an update and a delete, ingested from shuffled Bronze files."""
    k = next_key(ctx, CATEGORY, "catid")

    def change() -> None:
        with ctx.postgres("ems") as c:
            c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'order', 'o1')", (k,))
            c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'order', 'o1')", (k + 1,))
        wait_for_bronze(ctx.params, CATEGORY)  # the inserts in older files than the changes below
        with ctx.postgres("ems") as c:
            c.execute("UPDATE ems.category SET catdesc = 'o2' WHERE catid = %s", (k,))
            c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 1,))

    ctx.touch(CATEGORY, (k,))
    ctx.delete(CATEGORY, (k + 1,))
    shuffled_delivery(ctx, CATEGORY, change)


def handover(ctx: ScenarioContext) -> None:
    """Item 11: inserts, updates and deletes while a fresh connector snapshots ``ems``."""
    base = next_key(ctx, CATEGORY, "catid")

    def writer(n: int) -> None:
        with ctx.postgres("ems") as c:
            k = base + n
            c.execute("INSERT INTO ems.category VALUES (%s, 'Handover', %s, 'h0')", (k, f"h{k}"))
            if n % 3 == 1:
                c.execute("UPDATE ems.category SET catdesc = 'h1' WHERE catid = %s", (k - 1,))
            if n % 5 == 4:
                c.execute("DELETE FROM ems.category WHERE catid = %s", (k - 2,))
                ctx.delete(CATEGORY, (k - 2,), ingested=False)

    snapshot_handover(ctx, "ems", CATEGORY, writer)


def truncate(ctx: ScenarioContext) -> None:
    """Day-2: ``TRUNCATE`` and a reload in one transaction (one row left out), then changes after it
    in the same batch: Silver deletes every row as of the truncate and applies what follows."""
    k = next_key(ctx, CATEGORY, "catid")
    insert = "INSERT INTO ems.category VALUES (%s, 'Scripted', %s, %s)"
    with ctx.postgres("ems") as c:
        for i in (k, k + 1):
            c.execute(insert, (i, f"tr{i}", "before truncate"))
    ctx.sync()  # both are in Silver before the truncate
    with ctx.postgres("ems", autocommit=False) as c, c.transaction():
        rows = c.execute(
            "SELECT catid, catgroup, catname, catdesc FROM ems.category WHERE catid <> %s", (k,)
        ).fetchall()
        c.execute("TRUNCATE ems.category")
        with c.cursor() as cur:
            cur.executemany("INSERT INTO ems.category VALUES (%s, %s, %s, %s)", rows)
    with ctx.postgres("ems") as c:  # after the truncate, same ingestion batch
        c.execute("UPDATE ems.category SET catdesc = 'after truncate' WHERE catid = %s", (k + 1,))
        c.execute(insert, (k + 2, f"tr{k + 2}", "after truncate"))
    ctx.delete(CATEGORY, (k,))
    ctx.touch(CATEGORY, (k + 1,), (k + 2,))
    ctx.sync()


def resnapshot(ctx: ScenarioContext) -> None:
    """Day-2: Silver diverges (changes made while ``ems`` was out of the publication, which
    capture never sees), then ``./workbook resnapshot category`` while venues keep being inserted:
    both tables end equal to the source, the row deleted unseen is gone."""
    k = next_key(ctx, CATEGORY, "catid")
    insert = "INSERT INTO ems.category VALUES (%s, 'Scripted', %s, %s)"
    with ctx.postgres("ems") as c:
        for i in (k, k + 1, k + 3):
            c.execute(insert, (i, f"rs{i}", "before"))
    ctx.sync()
    ctx.expect_check(CATEGORY, EQUAL)
    stack = LocalStack(ctx.params)
    schema = sql.Identifier(ctx.params.source("ems").schema_name or "public")
    publication = sql.Identifier(publication_name(ctx.params, "ems"))
    with stack.connect_postgres_admin(ctx.params.source("ems").database) as admin:
        admin.execute(sql.SQL("ALTER PUBLICATION {} DROP TABLES IN SCHEMA {}").format(publication, schema))
        try:
            with ctx.postgres("ems") as c:  # decoded while the table is out of the publication: skipped
                c.execute("DELETE FROM ems.category WHERE catid IN (%s, %s)", (k, k + 3))
                c.execute("UPDATE ems.category SET catdesc = 'unseen update' WHERE catid = %s", (k + 1,))
                c.execute(insert, (k + 2, f"rs{k + 2}", "unseen insert"))
        finally:
            admin.execute(sql.SQL("ALTER PUBLICATION {} ADD TABLES IN SCHEMA {}").format(publication, schema))
    ctx.expect_check(CATEGORY, DIFFERS)  # one row fewer at the source: the status names the table
    v = next_key(ctx, VENUE, "venueid")
    inserted: list[int] = []
    stop = threading.Event()

    def keep_inserting() -> None:  # another table's changes flow during the re-snapshot
        with ctx.postgres("ems") as c:
            while not stop.is_set() and len(inserted) < 200:
                key = v + len(inserted)
                c.execute(
                    "INSERT INTO ems.venue (venueid, venuename, venuecity, venuestate, venueseats)"
                    " VALUES (%s, %s, 'c', 'ST', 1)",
                    (key, f"rs{key}"),
                )
                inserted.append(key)
                time.sleep(0.05)

    flow = threading.Thread(target=keep_inserting)
    flow.start()
    try:
        result = resnapshot_table(ctx.params, "category")
    finally:
        stop.set()
        flow.join()
    ctx.notes.append(f"re-snapshot in {result.seconds:.1f} s while {len(inserted)} venues were inserted")
    ctx.delete(CATEGORY, (k,), (k + 3,))
    ctx.touch(CATEGORY, (k + 1,), (k + 2,))
    ctx.touch(VENUE, *((key,) for key in inserted))
    ctx.sync()
    ctx.expect_check(CATEGORY, EQUAL)


def add_table(ctx: ScenarioContext) -> None:
    """Day-2: a table created at the source while capture runs, then added to the parameters.
    Registration updates the ``ems`` connector's include list (it restarts from its offsets) and
    signals an incremental snapshot of the new table alone; its rows change during that snapshot
    and venues are inserted meanwhile. Earlier runs' tables (no longer captured) are dropped."""
    ems = ctx.params.source("ems")
    name = f"wb_added_{uuid.uuid4().hex[:8]}"
    table = sql.Identifier(ems.namespace, name)
    with ctx.postgres("ems") as c:
        earlier = c.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE 'wb\\_added\\_%%'",
            (ems.namespace,),
        ).fetchall()
        for (old,) in earlier:
            c.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(ems.namespace, old)))
        c.execute(
            sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, name text NOT NULL, qty integer)").format(table)
        )
        c.execute(
            sql.SQL("INSERT INTO {} SELECT g, 'n' || g, g FROM generate_series(1, 300) g").format(table)
        )
    added = Target("ems", name, ("id",))
    ctx.targets = (added, VENUE)
    sources = {**ctx.params.sources, "ems": ems.model_copy(update={"tables": (*ems.tables, name)})}
    grown = ctx.params.model_copy(update={"sources": sources})
    v = next_key(ctx, VENUE, "venueid")
    try:
        register_connectors(
            open_backend(grown), connector_specs(grown, local_endpoints(grown)), timeout_s=180
        )
        with ctx.postgres("ems") as c:  # while the new table's snapshot runs
            c.execute(sql.SQL("UPDATE {} SET qty = -qty WHERE id % 7 = 0").format(table))
            c.execute(sql.SQL("DELETE FROM {} WHERE id BETWEEN 100 AND 109").format(table))
            c.execute(
                sql.SQL("INSERT INTO {} SELECT g, 'late' || g, g FROM generate_series(301, 340) g").format(
                    table
                )
            )
            for key in range(v, v + 5):
                c.execute(
                    "INSERT INTO ems.venue (venueid, venuename, venuecity, venuestate, venueseats)"
                    " VALUES (%s, %s, 'c', 'ST', 1)",
                    (key, f"add{key}"),
                )
        # deleted while the snapshot ran: a row the snapshot had not read yet never reaches Silver
        ctx.delete(added, *((k,) for k in range(100, 110)), ingested=False)
        ctx.touch(added, (7,), (301,))
        ctx.touch(VENUE, *((k,) for k in range(v, v + 5)))
        ctx.sync()
        ctx.notes.append(f"{name} added")
    finally:  # the pipeline captures what it did before
        register_connectors(
            open_backend(ctx.params), connector_specs(ctx.params, local_endpoints(ctx.params)), timeout_s=180
        )
