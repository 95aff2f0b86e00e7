"""Loading TICKIT and the orders outbox into the REAL local servers (helpers.local.stack.LocalStack).

The servers run in a temporary state directory on free ports and are stopped afterwards.
Scale 0.01 (4,616 TICKIT rows) keeps the module well under a minute.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from helpers.checks.at_position import source_snapshot, source_table
from helpers.errors import SourceError
from helpers.isolation import isolated_params
from helpers.local.stack import LocalStack
from helpers.params import WorkbookParams
from helpers.sources.edits import source_rows
from helpers.sources.sample import orders as outbox
from helpers.sources.sample.bulk import (
    bulk_load_mariadb,
    bulk_load_postgres,
    read_mariadb_table,
    read_postgres_table,
    rows_to_arrow,
)
from helpers.sources.sample.load import load_orders, load_tickit, tickit_sources
from helpers.sources.sample.tickit import generate_tickit
from helpers.sources.sample.tickit_tables import TABLE_NAMES, TABLES, arrow_schema, expected_row_counts

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def params() -> Iterator[WorkbookParams]:
    # its own ports, never the ci overlay's: a ci stack may be running
    with isolated_params("wbload-", {"tickit.scale": 0.01}) as params:
        yield params


@pytest.fixture(scope="module")
def stack(params: WorkbookParams) -> Iterator[LocalStack]:
    local = LocalStack(params)
    try:
        local.start()  # a server that fails to start must not leave the others running
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def generated(params: WorkbookParams) -> dict[str, pa.Table]:
    return generate_tickit(params.tickit.scale, params.tickit.seed)


def _assert_same(table: str, actual: pa.Table, expected: pa.Table) -> None:
    assert actual.schema == expected.schema, table
    assert actual.num_rows == expected.num_rows, table
    if not actual.equals(expected):
        for i, (a, e) in enumerate(zip(actual.to_pylist(), expected.to_pylist(), strict=True)):
            assert a == e, f"{table} row {i} differs"


def _read_back(params: WorkbookParams, table: str) -> pa.Table:
    """A loaded TICKIT table read through sources.connect, typed and ordered like the generator."""
    source = next(name for name, sp in tickit_sources(params).items() if table in sp.tables)
    schema = arrow_schema(table)
    rows = [[row[c] for c in schema.names] for row in source_rows(params, source, table)]
    return rows_to_arrow(rows, schema).sort_by([(key, "ascending") for key in TABLES[table].primary_key])


def _assert_source_equals_generator(params: WorkbookParams, generated: dict[str, pa.Table]) -> None:
    for table in TABLE_NAMES:
        _assert_same(table, _read_back(params, table), generated[table])


def test_load_then_every_row_equals_the_generator(
    stack: LocalStack, params: WorkbookParams, generated: dict[str, pa.Table]
) -> None:
    """After the first load every table holds exactly the generated rows (content, not counts)."""
    report = load_tickit(stack, params)
    assert report.rows == expected_row_counts(params.tickit.scale)
    assert sorted(report.loaded_tables) == sorted(TABLE_NAMES)
    _assert_source_equals_generator(params, generated)


def test_reload_idempotence(
    stack: LocalStack, params: WorkbookParams, generated: dict[str, pa.Table]
) -> None:
    """Second call loads nothing; reload=True reloads everything; the content stays equal."""
    load_tickit(stack, params)
    again = load_tickit(stack, params)
    assert again.loaded_tables == [] and again.rows_loaded == 0
    assert {t.reason for t in again.tables} == {"complete"}
    forced = load_tickit(stack, params, reload=True)
    assert sorted(forced.loaded_tables) == sorted(TABLE_NAMES)
    assert {t.reason for t in forced.tables} == {"reload requested"}
    from_params = load_tickit(
        stack, params.model_copy(update={"tickit": params.tickit.model_copy(update={"reload": True})})
    )
    assert sorted(from_params.loaded_tables) == sorted(TABLE_NAMES)
    _assert_source_equals_generator(params, generated)


def _forget_load_markers(stack: LocalStack) -> None:
    """Make the tables look as if something other than the workbook had loaded them."""
    with stack.connect_mariadb("ecomm") as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM `ecomm`.`workbook_loads`")
        conn.commit()
    for database in ("ems", "crm"):
        with stack.connect_postgres(database) as pg:
            pg.execute("DELETE FROM public.workbook_loads")
            pg.commit()


def test_changes_after_a_load_are_kept(
    stack: LocalStack, params: WorkbookParams, generated: dict[str, pa.Table]
) -> None:
    """Rows changed after the workbook loaded a table are data: a re-run keeps them as they are."""
    load_tickit(stack, params, reload=True)
    with stack.connect_mariadb("ecomm") as conn, conn.cursor() as cur:
        cur.execute("UPDATE `ecomm`.`sale` SET `qtysold` = 99 WHERE `salesid` = 7")
        cur.execute("DELETE FROM `ecomm`.`sale` WHERE `salesid` > 1000")
        conn.commit()
    with stack.connect_postgres("crm") as pg:
        pg.execute("DELETE FROM crm.users WHERE userid % 7 = 0")
        pg.commit()
    report = load_tickit(stack, params)
    assert report.loaded_tables == []
    reasons = {t.table: t.reason for t in report.tables}
    assert reasons["sale"].startswith("kept: loaded earlier, 1000 rows now")
    assert reasons["users"].startswith("kept: loaded earlier")
    assert report.rows["sale"] == 1000
    with stack.connect_mariadb("ecomm") as conn, conn.cursor() as cur:
        cur.execute("SELECT `qtysold` FROM `ecomm`.`sale` WHERE `salesid` = 7")
        assert cur.fetchone()[0] == 99
    forced = load_tickit(stack, params, reload=True)
    assert sorted(forced.loaded_tables) == sorted(TABLE_NAMES)
    _assert_source_equals_generator(params, generated)


def test_partial_and_stale_tables_are_reloaded(
    stack: LocalStack, params: WorkbookParams, generated: dict[str, pa.Table]
) -> None:
    """Without a load marker, a table with missing rows (either engine) or another seed's rows is
    reloaded and the others are kept."""
    load_tickit(stack, params)
    with stack.connect_mariadb("ecomm") as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM `ecomm`.`sale` WHERE `salesid` > 1000")
        conn.commit()
    with stack.connect_postgres("crm") as pg:
        pg.execute("DELETE FROM crm.users WHERE userid % 7 = 0")
        pg.commit()
    _forget_load_markers(stack)
    report = load_tickit(stack, params)
    assert sorted(report.loaded_tables) == ["sale", "users"]
    reasons = {t.table: t.reason for t in report.tables}
    assert reasons["sale"].startswith("partial or stale: 1000 of 1725")
    _assert_source_equals_generator(params, generated)

    other_seed = params.model_copy(
        update={"tickit": params.tickit.model_copy(update={"seed": params.tickit.seed + 1})}
    )
    stale = load_tickit(stack, other_seed)
    # same counts, other rows: detected from the first/last rows (category and date ignore the seed)
    assert sorted(stale.loaded_tables) == sorted(["venue", "users", "event", "listing", "sale"])
    back = load_tickit(stack, params)
    assert sorted(back.loaded_tables) == sorted(["venue", "users", "event", "listing", "sale"])
    _assert_source_equals_generator(params, generated)


def test_failed_load_leaves_the_previous_table(
    stack: LocalStack, params: WorkbookParams, generated: dict[str, pa.Table]
) -> None:
    """A load that fails half-way (duplicate key) rolls back: the old complete rows stay visible."""
    load_tickit(stack, params)
    broken = dict(generated)
    sale = generated["sale"]
    broken["sale"] = pa.concat_tables([sale, sale.slice(0, 1)])  # duplicate primary key at the end
    users = generated["users"]
    broken["users"] = pa.concat_tables([users, users.slice(0, 1)])
    with pytest.raises(SourceError, match="Failed to load"):
        load_tickit(stack, params, reload=True, tables=broken)
    _assert_source_equals_generator(params, generated)  # MariaDB tables failed before PostgreSQL
    only_users = {name: t for name, t in broken.items() if name != "sale"} | {"sale": sale}
    with pytest.raises(SourceError, match="users"):
        load_tickit(stack, params, reload=True, tables=only_users)
    _assert_same("users", _read_back(params, "users"), users)


def test_tricky_strings_and_nulls_round_trip(stack: LocalStack) -> None:
    """Tabs, newlines, backslashes, quotes, non-ASCII, empty strings and NULLs survive both bulk paths."""
    values = ["a\tb", "line1\nline2\r\n", "back\\slash \\N", "quote \" and ' ", "ünïcødé ✓", "", None, "NULL"]
    data = pa.table(
        {
            "id": pa.array(range(1, len(values) + 1), pa.int32()),
            "text": pa.array(values, pa.string()),
            "flag": pa.array([True, None, False, True, None, False, True, None]),
            "amount": pa.array(
                [Decimal("1.05"), None, Decimal("-999999.99"), Decimal("0.00")] * 2, pa.decimal128(8, 2)
            ),
            "at": pa.array([dt.datetime(2008, 2, 29, 23, 59, 59, 999999), None] * 4, pa.timestamp("us")),
        }
    )
    with stack.connect_postgres("ems") as pg:
        pg.execute("DROP TABLE IF EXISTS ems.load_probe")
        pg.execute(
            "CREATE TABLE ems.load_probe (id integer PRIMARY KEY, text varchar(50), flag boolean, "
            "amount decimal(8,2), at timestamp)"
        )
        bulk_load_postgres(pg, "ems", "load_probe", data)
        _assert_same("pg probe", read_postgres_table(pg, "ems", "load_probe", data.schema), data)
        pg.rollback()
    with stack.connect_mariadb("ecomm") as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS `ecomm`.`load_probe`")
        cur.execute(
            "CREATE TABLE `ecomm`.`load_probe` (id INT PRIMARY KEY, text VARCHAR(50), flag BOOLEAN, "
            "amount DECIMAL(8,2), at DATETIME(6)) CHARACTER SET utf8mb4"
        )
        for method in ("load_data", "insert"):
            cur.execute("DELETE FROM `ecomm`.`load_probe`")
            bulk_load_mariadb(conn, "ecomm", "load_probe", data, method=method)
            _assert_same(
                f"mariadb probe ({method})",
                read_mariadb_table(conn, "ecomm", "load_probe", data.schema),
                data,
            )
        cur.execute("DROP TABLE `ecomm`.`load_probe`")
        conn.commit()


# --------------------------------------------------------------------------------------------
# orders and outbox


def _assert_outbox_matches(conn: psycopg.Connection[Any]) -> dict[int, dict[str, Any]]:
    actual = outbox.read_outbox(conn)
    expected = outbox.payloads_from_tables(conn)
    assert actual == expected
    return actual


def test_orders_load_and_idempotence(stack: LocalStack, params: WorkbookParams) -> None:
    """The generated orders load once; the outbox then holds one payload per order, equal to the tables."""
    first = load_orders(stack, params)
    counts = outbox.expected_order_counts(params.orders.customers, params.orders.orders, params.orders.seed)
    assert first.rows == counts
    assert load_orders(stack, params).loaded_tables == []
    with stack.connect_postgres("orders") as conn:
        payloads = _assert_outbox_matches(conn)
    assert len(payloads) == params.orders.orders
    assert sorted(load_orders(stack, params, reload=True).loaded_tables) == sorted(
        [*outbox.ORDERS_TABLES, "outbox"]
    )


def test_outbox_follows_insert_update_and_delete(stack: LocalStack, params: WorkbookParams) -> None:
    """Expected final state: the outbox equals the payloads computed from orders/order_items after
    every step, and a deleted order has no outbox row."""
    load_orders(stack, params)
    with stack.connect_postgres("orders") as conn:
        lines = [
            outbox.OrderLine("Desk lamp", 2, Decimal("24.90")),
            outbox.OrderLine("Pen", 3, Decimal("0.10")),
        ]
        order_id = outbox.place_order(conn, 1, lines, ordered_at=dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC))
        assert order_id == params.orders.orders + 1  # identity continues after the loaded ids
        payload = _assert_outbox_matches(conn)[order_id]
        assert payload["total"] == "50.10" and payload["ordered_at"] == "2024-06-01T12:00:00.000000Z"
        assert [i["quantity"] for i in payload["items"]] == [2, 3]

        outbox.update_item_quantity(conn, order_id, 1, 5)
        assert _assert_outbox_matches(conn)[order_id]["total"] == "124.80"
        assert outbox.add_item(conn, order_id, outbox.OrderLine("Mug", 1, Decimal("7.25"))) == 3
        outbox.remove_item(conn, order_id, 2)
        items = _assert_outbox_matches(conn)[order_id]["items"]
        assert [i["line_no"] for i in items] == [1, 3]

        outbox.cancel_order(conn, order_id)
        assert _assert_outbox_matches(conn)[order_id]["status"] == "cancelled"

        outbox.delete_order(conn, order_id)
        remaining = _assert_outbox_matches(conn)
        assert order_id not in remaining and len(remaining) == params.orders.orders

        # plain SQL (not the helpers) also keeps the outbox: delete all items of one order, then the order
        conn.execute("DELETE FROM orders.order_items WHERE order_id = 2")
        conn.commit()
        assert _assert_outbox_matches(conn)[2]["items"] == []
        conn.execute("DELETE FROM orders.orders WHERE order_id IN (2, 3)")
        conn.commit()
        assert {2, 3}.isdisjoint(_assert_outbox_matches(conn))
        with pytest.raises(SourceError, match="Failed to delete order 2: no such row"):
            outbox.delete_order(conn, 2)
        with pytest.raises(SourceError, match="Failed to update the quantity"):
            outbox.update_item_quantity(conn, 1, 1, 0)  # CHECK (quantity > 0)
    # the changes are data: a re-run keeps them; a reload, or a missing load marker, restores
    kept = load_orders(stack, params)
    assert kept.loaded_tables == []
    assert {t.table: t.rows for t in kept.tables}["orders"] == params.orders.orders - 2
    assert {t.table: t.reason for t in kept.tables}["outbox"].startswith("kept: loaded earlier")
    with stack.connect_postgres("orders") as conn:
        conn.execute("DELETE FROM public.workbook_loads")
        conn.commit()
    restored = load_orders(stack, params)
    assert restored.loaded_tables and restored.tables[0].reason.startswith("orders:")
    with stack.connect_postgres("orders") as conn:
        assert len(_assert_outbox_matches(conn)) == params.orders.orders


def test_source_table_reads_mariadb_tables_as_the_consistent_snapshot_does(
    stack: LocalStack, params: WorkbookParams, caplog: pytest.LogCaptureFixture
) -> None:
    """``source_table`` (connectorx for the column types it reads exactly, else PyMySQL) returns
    the same values and types as ``source_snapshot`` (decimals at their declared precision, where
    the PyMySQL path infers it from the values): on every ecomm table and on a probe with NULLs,
    6-digit timestamps, decimals on both sides of connectorx's limits, FLOAT and TIME (which must
    take the PyMySQL path)."""
    load_tickit(stack, params)
    with stack.connect_mariadb("ecomm") as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS `ecomm`.`read_probe`")
        cur.execute(
            "CREATE TABLE `ecomm`.`read_probe` (id BIGINT PRIMARY KEY, small DECIMAL(12,4), "
            "wide DECIMAL(40,20), f FLOAT, t TIME, at DATETIME(6), note TEXT, flag BOOLEAN)"
        )
        cur.execute(
            "INSERT INTO `ecomm`.`read_probe` VALUES "
            "(1, 12345678.1234, 12345678901234567890.12345678901234567890, 1.1, '01:02:03', "
            "'2008-02-29 23:59:59.999999', 'ünï\\tcode', TRUE), "
            "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
            "(3, -0.0001, -0.00000000000000000001, -2.5, '-838:59:59', '1970-01-01 00:00:00', '', FALSE)"
        )
        conn.commit()
    caplog.set_level(logging.DEBUG, logger="helpers.checks.at_position")
    for table in ["date", "listing", "sale", "read_probe"]:
        caplog.clear()
        fast, json_columns = source_table(params, "ecomm", table)
        paths = [r.getMessage() for r in caplog.records]
        if table == "read_probe":
            assert paths == ["ecomm.read_probe takes the PyMySQL path: column wide is decimal"], paths
        else:
            assert paths == [], paths  # connectorx read it
        exact = source_snapshot(params, "ecomm", [table])
        for mine, theirs in zip(fast.schema, exact.tables[table].schema, strict=True):
            assert mine.name == theirs.name, table
            if pa.types.is_decimal(mine.type):
                assert pa.types.is_decimal(theirs.type) and mine.type.scale == theirs.type.scale, mine
            else:
                assert mine.type == theirs.type, (table, mine, theirs)
        assert fast.equals(exact.tables[table].cast(fast.schema)), table
        assert json_columns == exact.json_columns[table]
    assert fast.column("wide").to_pylist()[0] == Decimal("12345678901234567890.12345678901234567890")
    narrow = source_table(params, "ecomm", "listing")[0]
    assert narrow.schema.field("priceperticket").type == pa.decimal128(8, 2)
    assert narrow.num_rows == expected_row_counts(params.tickit.scale)["listing"]
    # key_from: the rows from a key on, filtered by MariaDB on connectorx's path, here on PyMySQL's
    sale = source_table(params, "ecomm", "sale")[0]
    middle = sorted(sale.column("salesid").to_pylist())[sale.num_rows // 2]
    caplog.clear()
    upper = source_table(params, "ecomm", "sale", key_from=("salesid", middle))[0]
    assert [r.getMessage() for r in caplog.records] == []  # connectorx read it
    assert upper.schema == sale.schema
    assert upper.sort_by("salesid").equals(
        sale.filter(pc.greater_equal(sale.column("salesid"), middle)).sort_by("salesid")
    )
    assert upper.num_rows == sale.num_rows - sale.num_rows // 2
    assert source_table(params, "ecomm", "sale", key_from=("salesid", 10**12))[0].num_rows == 0
    probe = source_table(params, "ecomm", "read_probe", key_from=("id", 2))[0]
    assert probe.column("id").to_pylist() == [2, 3]
