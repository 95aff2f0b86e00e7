"""The conformance scenarios on PostgreSQL (``ems`` and ``orders``) that are more than a change at
the source: delivery faults (redelivered and shuffled Bronze files, a snapshot hand-over), a
re-snapshot, a table added to capture, and the checks some edge cases add to their script. The
changes themselves are scripted once, in :mod:`helpers.sources.edge_cases.postgres`."""

from __future__ import annotations

import threading
import time
import uuid

from psycopg import sql

from helpers.capture.register import connector_specs, open_backend, register_connectors
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
from helpers.naming import publication_name
from helpers.sources.api import LocalSources
from helpers.sources.edge_cases import postgres as edits
from helpers.sources.edge_cases.session import CATEGORY, VENUE, Target

__all__ = [
    "add_table",
    "deletes",
    "handover",
    "out_of_order",
    "redelivery",
    "redelivery_delete",
    "resnapshot",
    "toast",
]


def deletes(ctx: ScenarioContext) -> None:
    """Item 1 (:func:`helpers.sources.edge_cases.postgres.deletes`), and what Bronze holds for the
    deleted keys: a delete event each, no tombstone."""
    edits.deletes(ctx)
    check_tombstones(ctx, CATEGORY, [*ctx.deleted[CATEGORY], *ctx.gone[CATEGORY]])


def redelivery(ctx: ScenarioContext) -> None:
    """Item 4: the Bronze files of an older update delivered again after a newer one."""
    k = ctx.next_key(CATEGORY, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'redelivery', 'start')", (k,))
    ctx.sync()

    def update(value: str) -> None:
        with ctx.postgres("ems") as c:
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (value, k))

    redeliver(ctx, CATEGORY, update, (k,), old_round=False)


def redelivery_delete(ctx: ScenarioContext) -> None:
    """Item 4: the Bronze files of an insert delivered again after the row's delete."""
    k = ctx.next_key(CATEGORY, "catid")

    def change(step: str) -> None:
        with ctx.postgres("ems") as c:
            if step == "old":
                c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'redelivery', 'doomed')", (k,))
            else:
                c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))

    ctx.delete(CATEGORY, (k,))
    redeliver(ctx, CATEGORY, change, (k,))


def toast(ctx: ScenarioContext) -> None:
    """Item 7 (:func:`helpers.sources.edge_cases.postgres.toast`), and how many placeholders
    ingestion filled."""
    edits.toast(ctx)
    filled = sum(r.unavailable_filled for results in ctx.ingested.values() for r in results)
    unresolved = sum(r.unavailable_unresolved for results in ctx.ingested.values() for r in results)
    ctx.notes.append(f"TOAST placeholders filled {filled}, unresolved {unresolved}")


def out_of_order(ctx: ScenarioContext) -> None:
    """Item 9: an insert, then an update and a delete, ingested from shuffled Bronze files."""
    k = ctx.next_key(CATEGORY, "catid")

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
    base = ctx.next_key(CATEGORY, "catid")

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


def resnapshot(ctx: ScenarioContext) -> None:
    """Day-2: Silver diverges (changes made while ``ems`` was out of the publication, which
    capture never sees), then ``./workbook resnapshot category`` while venues keep being inserted:
    both tables end equal to the source, the row deleted unseen is gone."""
    k = ctx.next_key(CATEGORY, "catid")
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
    v = ctx.next_key(VENUE, "venueid")
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
    v = ctx.next_key(VENUE, "venueid")
    try:
        register_connectors(
            open_backend(grown), connector_specs(grown, LocalSources(grown).endpoints()), timeout_s=180
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
            open_backend(ctx.params),
            connector_specs(ctx.params, LocalSources(ctx.params).endpoints()),
            timeout_s=180,
        )
