"""Orders with a transactional outbox, in the PostgreSQL database ``orders``.

:func:`generate_orders` makes the data, :func:`create_orders_schema` the tables and the outbox
triggers (``orders_outbox.sql``), :func:`place_order` and its siblings change orders as an
application would, and :func:`order_payload` mirrors the payload the database builds. One cohesive
module: the orders data, its outbox contract and every change to it must stay in step. Tables,
triggers and payload: ``docs/architecture.md``, "Sources".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
from psycopg import sql

from helpers.errors import SourceError
from helpers.sources.sample.skew import customer_mix, draw_baskets, draw_buyers
from helpers.sources.sample.tickit import decimal_from_cents

__all__ = [
    "ORDER_STATUSES",
    "ORDERS_TABLES",
    "GENERATOR_VERSION",
    "OrderLine",
    "outbox_ddl",
    "create_orders_schema",
    "expected_order_counts",
    "generate_orders",
    "order_payload",
    "place_order",
    "add_item",
    "update_item_quantity",
    "remove_item",
    "set_order_status",
    "cancel_order",
    "delete_order",
    "read_outbox",
    "payloads_from_tables",
]

ORDER_STATUSES: tuple[str, ...] = ("placed", "paid", "shipped", "cancelled")
"""Allowed values of ``orders.status``."""

ORDERS_TABLES: tuple[str, ...] = ("customers", "orders", "order_items")
"""Tables the generator fills, in load order; ``outbox`` is derived by the triggers."""

GENERATOR_VERSION = 2
"""Version of :func:`generate_orders`'s rows: raised when the same settings give other rows (2: the
skewed customer mix), so the loader's marker no longer matches a database an older version filled."""

_PRODUCTS: tuple[tuple[str, str], ...] = (
    ("Desk lamp", "24.90"), ("Office chair", "189.00"), ("Notebook A5", "3.49"),
    ("Fountain pen", "42.50"), ("Monitor 27in", "279.99"), ("USB-C cable", "9.95"),
    ("Keyboard", "59.00"), ("Mouse", "19.99"), ("Headphones", "89.90"), ("Webcam", "64.00"),
    ("Standing desk", "449.00"), ("Coffee mug", "7.25"), ("Backpack", "74.99"),
    ("Water bottle", "14.50"), ("Plant pot", "11.00"), ("Whiteboard", "38.75"),
    ("Sticky notes", "2.99"), ("Stapler", "12.40"), ("Desk mat", "22.00"), ("Cable tray", "17.60"),
)  # fmt: skip
_FIRST = ("Ada", "Ben", "Chen", "Dana", "Elif", "Femi", "Grace", "Hugo", "Ines", "Jon", "Kai",
          "Lena", "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara")  # fmt: skip
_LAST = ("Adams", "Becker", "Costa", "Dubois", "Evans", "Fischer", "Garcia", "Horvat", "Ito",
         "Jensen", "Kowalski", "Lopez", "Moreau", "Novak", "O'Brien", "Patel", "Rossi", "Silva")  # fmt: skip
_CITIES = ("Berlin", "Lisbon", "Dublin", "Seattle", "Austin", "Osaka", "Lyon", "Turin", "Porto", "Oslo")
_STATUS_WEIGHTS = np.array([0.3, 0.4, 0.25, 0.05])
_YEAR_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
_TS_UTC = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class OrderLine:
    """One item of an order to place.

    Attributes:
        product: product name (at most 100 characters).
        quantity: positive number of units.
        unit_price: exact price per unit (``Decimal``, two decimal places).
    """

    product: str
    quantity: int
    unit_price: Decimal


# --------------------------------------------------------------------------------------------
# DDL


def outbox_ddl(schema: str = "orders") -> sql.Composed:
    """Return the DDL of the orders schema: tables, outbox refresh function and triggers.

    Idempotent (``IF NOT EXISTS``, ``CREATE OR REPLACE``); the schema name is quoted with
    :class:`psycopg.sql.Identifier`.

    Args:
        schema: the PostgreSQL schema to create the tables in.

    Returns:
        A composed SQL statement list, ready for ``cursor.execute``.
    """
    text = resources.files("helpers.sources.sample").joinpath("orders_outbox.sql").read_text(encoding="utf-8")
    return sql.SQL(text).format(schema=sql.Identifier(schema))


def create_orders_schema(conn: psycopg.Connection[Any], schema: str = "orders") -> None:
    """Create the orders tables, the outbox and its triggers (idempotent) and commit.

    Args:
        conn: a connection to the ``orders`` database.
        schema: the schema to create.

    Raises:
        SourceError: if the DDL fails.
    """
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(outbox_ddl(schema))
    except psycopg.Error as exc:
        raise SourceError(f"Failed to create the orders schema {schema!r}: {exc}") from exc


# --------------------------------------------------------------------------------------------
# generator


def expected_order_counts(customers: int, orders: int, seed: int) -> dict[str, int]:
    """Return the rows :func:`generate_orders` produces per table (outbox = one per order).

    Args:
        customers: number of customers.
        orders: number of orders.
        seed: generator seed (the number of items depends on it).

    Returns:
        ``{"customers": ..., "orders": ..., "order_items": ..., "outbox": ...}``.
    """
    tables = generate_orders(customers, orders, seed)
    counts = {name: table.num_rows for name, table in tables.items()}
    counts["outbox"] = counts["orders"]
    return counts


def generate_orders(customers: int, orders: int, seed: int) -> dict[str, pa.Table]:
    """Generate customers, orders and order items, deterministically, with a realistic skew.

    Who buys what follows :mod:`helpers.sources.sample.skew`: three key accounts with bulk
    baskets, a Zipf long tail of regular customers (1-5 items of 1-5 units an order; many order
    once, twice or never) and a handful of big-ticket buyers with one or two orders of the most
    expensive products. The number of order items depends on the seed (see
    :func:`expected_order_counts`).

    Args:
        customers: number of customers (>= 1).
        orders: number of orders (>= 0).
        seed: seed of the ``numpy.random.Generator``.

    Returns:
        ``customers``, ``orders`` and ``order_items`` as Arrow tables (timestamps UTC,
        ``unit_price`` ``decimal128(10, 2)``), sorted by primary key.

    Raises:
        ValueError: if ``customers`` < 1 or ``orders`` < 0.
    """
    if customers < 1 or orders < 0:
        raise ValueError(
            f"Failed to generate orders: need customers >= 1 and orders >= 0, got {customers}, {orders}"
        )
    rng = np.random.default_rng([seed, 1])
    year_us = 366 * 86_400 * 1_000_000
    start_us = int(_YEAR_START.timestamp()) * 1_000_000
    customer_id = np.arange(1, customers + 1)
    first = np.asarray(_FIRST, dtype=object)[rng.integers(0, len(_FIRST), customers)]
    last = np.asarray(_LAST, dtype=object)[rng.integers(0, len(_LAST), customers)]
    names = [f"{f} {surname}" for f, surname in zip(first, last, strict=True)]
    emails = [
        f"{f.lower()}.{surname.lower().replace(chr(39), '')}{i}@example.com"
        for f, surname, i in zip(first, last, customer_id, strict=True)
    ]
    created = start_us + (rng.random(customers) * year_us / 4).astype(np.int64) // 1_000_000 * 1_000_000
    customer_table = pa.table(
        {
            "customer_id": pa.array(customer_id, pa.int32()),
            "name": pa.array(names, pa.string()),
            "email": pa.array(emails, pa.string()),
            "city": pa.array(np.asarray(_CITIES, dtype=object)[rng.integers(0, len(_CITIES), customers)]),
            "created_at": pa.array(created, _TS_UTC),
        }
    )
    order_id = np.arange(1, orders + 1)
    mix = customer_mix(rng, customers, orders)  # key accounts, a Zipf tail, big-ticket buyers
    buyer = draw_buyers(rng, mix, orders)
    # ordered after the customer was created, microsecond precision, in order_id order
    ordered = created[buyer] + (rng.random(orders) * year_us / 2).astype(np.int64)
    by_time = np.argsort(ordered, kind="stable")  # order ids grow with order time
    buyer, ordered = buyer[by_time], ordered[by_time]
    updated = ordered + (rng.random(orders) * 3 * 86_400 * 1_000_000).astype(np.int64)
    status = np.asarray(ORDER_STATUSES, dtype=object)[
        rng.choice(len(ORDER_STATUSES), size=orders, p=_STATUS_WEIGHTS)
    ]
    order_table = pa.table(
        {
            "order_id": pa.array(order_id, pa.int32()),
            "customer_id": pa.array(buyer + 1, pa.int32()),
            "status": pa.array(status, pa.string()),
            "ordered_at": pa.array(ordered, _TS_UTC),
            "updated_at": pa.array(updated, _TS_UTC),
        }
    )
    cents = np.array([int(Decimal(p[1]) * 100) for p in _PRODUCTS], dtype=np.int64)
    lines, product_idx, quantity = draw_baskets(rng, mix.tier[buyer], cents)
    item_order = np.repeat(order_id, lines)
    starts = np.cumsum(lines) - lines
    line_no = np.arange(item_order.size) - np.repeat(starts, lines) + 1
    item_table = pa.table(
        {
            "order_id": pa.array(item_order, pa.int32()),
            "line_no": pa.array(line_no, pa.int16()),
            "product": pa.array(np.asarray([p[0] for p in _PRODUCTS], dtype=object)[product_idx]),
            "quantity": pa.array(quantity, pa.int32()),
            "unit_price": decimal_from_cents(cents[product_idx], precision=10, scale=2),
        }
    )
    return {"customers": customer_table, "orders": order_table, "order_items": item_table}


def order_payload(order: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return the outbox payload of an order, as the database triggers build it.

    Args:
        order: the order row (``order_id``, ``customer_id``, ``status``, ``ordered_at`` as an
            aware ``datetime``).
        items: the order's item rows (``line_no``, ``product``, ``quantity``, ``unit_price`` as
            ``Decimal``), in any order.

    Returns:
        The JSON-shaped dictionary (money as strings with two decimals, UTC ISO-8601 times).

    Raises:
        ValueError: if ``ordered_at`` is a naive datetime.
    """
    ordered_at: dt.datetime = order["ordered_at"]
    if ordered_at.tzinfo is None:
        raise ValueError("Failed to build the order payload: ordered_at must be timezone-aware")
    sorted_items = sorted(items, key=lambda item: int(item["line_no"]))
    total = sum(
        (Decimal(item["quantity"]) * Decimal(item["unit_price"]) for item in sorted_items), Decimal(0)
    )
    return {
        "order_id": int(order["order_id"]),
        "customer_id": int(order["customer_id"]),
        "status": str(order["status"]),
        "ordered_at": ordered_at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "items": [
            {
                "line_no": int(item["line_no"]),
                "product": str(item["product"]),
                "quantity": int(item["quantity"]),
                "unit_price": f"{Decimal(item['unit_price']):.2f}",
            }
            for item in sorted_items
        ],
        "total": f"{total.quantize(Decimal('0.01')):.2f}",
    }


# --------------------------------------------------------------------------------------------
# scripted changes


def _table(schema: str, name: str) -> sql.Identifier:
    return sql.Identifier(schema, name)


def place_order(
    conn: psycopg.Connection[Any],
    customer_id: int,
    lines: Sequence[OrderLine],
    *,
    status: str = "placed",
    ordered_at: dt.datetime | None = None,
    schema: str = "orders",
) -> int:
    """Insert an order and its items in one transaction; the outbox row follows.

    Args:
        conn: connection to the ``orders`` database.
        customer_id: an existing customer.
        lines: the items (line numbers 1, 2, ... in this order).
        status: one of :data:`ORDER_STATUSES`.
        ordered_at: aware timestamp (default: the database's ``now()``).
        schema: schema of the orders tables.

    Returns:
        The new ``order_id``.

    Raises:
        SourceError: if the insert fails (unknown customer, bad quantity, ...).
    """
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(
                sql.SQL(
                    "INSERT INTO {} (customer_id, status, ordered_at, updated_at) "
                    "VALUES (%s, %s, coalesce(%s, now()), coalesce(%s, now())) RETURNING order_id"
                ).format(_table(schema, "orders")),
                (customer_id, status, ordered_at, ordered_at),
            )
            row = cur.fetchone()
            assert row is not None
            order_id = int(row[0])
            if lines:
                cur.executemany(
                    sql.SQL(
                        "INSERT INTO {} (order_id, line_no, product, quantity, unit_price) "
                        "VALUES (%s, %s, %s, %s, %s)"
                    ).format(_table(schema, "order_items")),
                    [(order_id, n, ln.product, ln.quantity, ln.unit_price) for n, ln in enumerate(lines, 1)],
                )
    except psycopg.Error as exc:
        raise SourceError(f"Failed to place an order for customer {customer_id}: {exc}") from exc
    return order_id


def add_item(conn: psycopg.Connection[Any], order_id: int, line: OrderLine, *, schema: str = "orders") -> int:
    """Append an item to an existing order.

    Args:
        conn: connection to the ``orders`` database.
        order_id: the order.
        line: the item to add.
        schema: schema of the orders tables.

    Returns:
        The new item's ``line_no``.

    Raises:
        SourceError: if the order does not exist or the insert fails.
    """
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(
                sql.SQL("SELECT 1 FROM {} WHERE order_id = %s FOR UPDATE").format(_table(schema, "orders")),
                (order_id,),
            )
            if cur.fetchone() is None:
                raise SourceError(f"Failed to add an item to order {order_id}: no such order")
            cur.execute(
                sql.SQL(
                    "INSERT INTO {} (order_id, line_no, product, quantity, unit_price) "
                    "SELECT %s, coalesce(max(line_no), 0) + 1, %s, %s, %s FROM {} WHERE order_id = %s "
                    "RETURNING line_no"
                ).format(_table(schema, "order_items"), _table(schema, "order_items")),
                (order_id, line.product, line.quantity, line.unit_price, order_id),
            )
            row = cur.fetchone()
            assert row is not None
            return int(row[0])
    except psycopg.Error as exc:
        raise SourceError(f"Failed to add an item to order {order_id}: {exc}") from exc


def _change_one(conn: psycopg.Connection[Any], what: str, query: sql.Composed, args: Sequence[Any]) -> None:
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(query, args)
            if cur.rowcount != 1:
                raise SourceError(f"Failed to {what}: no such row")
    except psycopg.Error as exc:
        raise SourceError(f"Failed to {what}: {exc}") from exc


def update_item_quantity(
    conn: psycopg.Connection[Any], order_id: int, line_no: int, quantity: int, *, schema: str = "orders"
) -> None:
    """Set the quantity of one order item.

    Args:
        conn: connection to the ``orders`` database.
        order_id: the order.
        line_no: the item's line number.
        quantity: the new, positive quantity.
        schema: schema of the orders tables.

    Raises:
        SourceError: if the item does not exist or the quantity is rejected.
    """
    _change_one(
        conn,
        f"update the quantity of item {line_no} of order {order_id}",
        sql.SQL("UPDATE {} SET quantity = %s WHERE order_id = %s AND line_no = %s").format(
            _table(schema, "order_items")
        ),
        (quantity, order_id, line_no),
    )


def remove_item(
    conn: psycopg.Connection[Any], order_id: int, line_no: int, *, schema: str = "orders"
) -> None:
    """Delete one item of an order; the order's outbox row is recomputed without it.

    Args:
        conn: connection to the ``orders`` database.
        order_id: the order.
        line_no: the item's line number.
        schema: schema of the orders tables.

    Raises:
        SourceError: if the item does not exist.
    """
    _change_one(
        conn,
        f"remove item {line_no} of order {order_id}",
        sql.SQL("DELETE FROM {} WHERE order_id = %s AND line_no = %s").format(_table(schema, "order_items")),
        (order_id, line_no),
    )


def set_order_status(
    conn: psycopg.Connection[Any], order_id: int, status: str, *, schema: str = "orders"
) -> None:
    """Change an order's status (and ``updated_at``).

    Args:
        conn: connection to the ``orders`` database.
        order_id: the order.
        status: one of :data:`ORDER_STATUSES`.
        schema: schema of the orders tables.

    Raises:
        SourceError: if the order does not exist or the status is not allowed.
    """
    _change_one(
        conn,
        f"set the status of order {order_id} to {status!r}",
        sql.SQL("UPDATE {} SET status = %s, updated_at = now() WHERE order_id = %s").format(
            _table(schema, "orders")
        ),
        (status, order_id),
    )


def cancel_order(conn: psycopg.Connection[Any], order_id: int, *, schema: str = "orders") -> None:
    """Cancel an order: status ``cancelled``; the order and its outbox row stay.

    Args:
        conn: connection to the ``orders`` database.
        order_id: the order.
        schema: schema of the orders tables.

    Raises:
        SourceError: if the order does not exist.
    """
    set_order_status(conn, order_id, "cancelled", schema=schema)


def delete_order(conn: psycopg.Connection[Any], order_id: int, *, schema: str = "orders") -> None:
    """Delete an order; its items cascade and its outbox row is deleted.

    Args:
        conn: connection to the ``orders`` database.
        order_id: the order.
        schema: schema of the orders tables.

    Raises:
        SourceError: if the order does not exist.
    """
    _change_one(
        conn,
        f"delete order {order_id}",
        sql.SQL("DELETE FROM {} WHERE order_id = %s").format(_table(schema, "orders")),
        (order_id,),
    )


# --------------------------------------------------------------------------------------------
# reading


def read_outbox(conn: psycopg.Connection[Any], *, schema: str = "orders") -> dict[int, dict[str, Any]]:
    """Return the outbox payloads by ``order_id``.

    Args:
        conn: connection to the ``orders`` database.
        schema: schema of the orders tables.

    Returns:
        ``order_id`` -> payload (decoded JSON).

    Raises:
        SourceError: if the query fails.
    """
    try:
        with conn.cursor() as cur:
            cur.execute(
                sql.SQL("SELECT order_id, payload FROM {} ORDER BY order_id").format(_table(schema, "outbox"))
            )
            return {int(order_id): payload for order_id, payload in cur.fetchall()}
    except psycopg.Error as exc:
        raise SourceError(f"Failed to read the outbox of schema {schema!r}: {exc}") from exc


def payloads_from_tables(
    conn: psycopg.Connection[Any], *, schema: str = "orders"
) -> dict[int, dict[str, Any]]:
    """Compute, in Python, the payload every order should have from ``orders`` and ``order_items``.

    Compare with :func:`read_outbox` to check the triggers.

    Args:
        conn: connection to the ``orders`` database.
        schema: schema of the orders tables.

    Returns:
        ``order_id`` -> expected payload (see :func:`order_payload`).

    Raises:
        SourceError: if the queries fail.
    """
    try:
        with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
            cur.execute(
                sql.SQL("SELECT order_id, customer_id, status, ordered_at FROM {}").format(
                    _table(schema, "orders")
                )
            )
            orders = cur.fetchall()
            cur.execute(
                sql.SQL("SELECT order_id, line_no, product, quantity, unit_price FROM {}").format(
                    _table(schema, "order_items")
                )
            )
            items: dict[int, list[dict[str, Any]]] = {}
            for item in cur.fetchall():
                items.setdefault(int(item["order_id"]), []).append(item)
    except psycopg.Error as exc:
        raise SourceError(f"Failed to read the orders of schema {schema!r}: {exc}") from exc
    return {int(o["order_id"]): order_payload(o, items.get(int(o["order_id"]), [])) for o in orders}
