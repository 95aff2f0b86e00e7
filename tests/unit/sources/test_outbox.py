"""Outbox DDL text, payload shape and the orders generator (pure: no servers)."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal

import psycopg
import pyarrow as pa
import pytest

from helpers.sources.sample.orders import (
    ORDER_STATUSES,
    expected_order_counts,
    generate_orders,
    order_payload,
    outbox_ddl,
)


def _ddl_text(schema: str = "orders") -> str:
    # as_string needs a connection only for literal quoting; identifiers quote without one
    return outbox_ddl(schema).as_string(None)


def test_triggers_cover_insert_update_delete_of_orders_and_items() -> None:
    text = _ddl_text()
    for table in ("orders", "order_items"):
        for event in ("INSERT", "UPDATE", "DELETE"):
            pattern = rf'CREATE OR REPLACE TRIGGER \w+ AFTER {event} ON "orders"\.{table}\b'
            assert re.search(pattern, text), (table, event)
    assert re.search(r'AFTER TRUNCATE ON "orders"\.orders\b', text)
    # every table has a primary key (Debezium needs one)
    for table in ("customers", "orders", "order_items", "outbox"):
        block = text.split(f'CREATE TABLE IF NOT EXISTS "orders".{table} (')[1].split(");")[0]
        assert "PRIMARY KEY" in block, table
    # a deleted order deletes its outbox row (no 'deleted' status rows)
    assert 'DELETE FROM "orders".outbox' in text
    assert "'deleted'" not in text


def test_schema_name_is_quoted() -> None:
    text = _ddl_text('we"ird')
    assert 'CREATE TABLE IF NOT EXISTS "we""ird".outbox (' in text
    assert "{schema}" not in text


def test_payload_shape_and_exact_money() -> None:
    order = {
        "order_id": 7,
        "customer_id": 3,
        "status": "paid",
        "ordered_at": dt.datetime(2024, 3, 1, 11, 15, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    }
    items = [
        {"line_no": 2, "product": "Pen", "quantity": 3, "unit_price": Decimal("0.10")},
        {"line_no": 1, "product": "Desk lamp", "quantity": 2, "unit_price": Decimal("24.9")},
    ]
    payload = order_payload(order, items)
    assert payload == {
        "order_id": 7,
        "customer_id": 3,
        "status": "paid",
        "ordered_at": "2024-03-01T10:15:00.000000Z",
        "items": [
            {"line_no": 1, "product": "Desk lamp", "quantity": 2, "unit_price": "24.90"},
            {"line_no": 2, "product": "Pen", "quantity": 3, "unit_price": "0.10"},
        ],
        "total": "50.10",
    }
    assert json.loads(json.dumps(payload)) == payload  # plain JSON, no Decimal or datetime
    empty = order_payload(order, [])
    assert empty["items"] == [] and empty["total"] == "0.00"


def test_payload_rejects_naive_time() -> None:
    with pytest.raises(ValueError, match="Failed to build the order payload"):
        order_payload(
            {"order_id": 1, "customer_id": 1, "status": "paid", "ordered_at": dt.datetime(2024, 1, 1)}, []
        )


def test_generator_is_deterministic_and_consistent() -> None:
    a = generate_orders(50, 200, seed=7)
    b = generate_orders(50, 200, seed=7)
    c = generate_orders(50, 200, seed=8)
    assert all(a[name].equals(b[name]) for name in a)
    assert not a["order_items"].equals(c["order_items"])
    customers, orders, items = a["customers"], a["orders"], a["order_items"]
    assert customers.num_rows == 50 and orders.num_rows == 200
    assert set(orders.column("customer_id").to_pylist()) <= set(range(1, 51))
    assert set(orders.column("status").to_pylist()) <= set(ORDER_STATUSES)
    per_order: dict[int, list[int]] = {}
    for row in items.select(["order_id", "line_no"]).to_pylist():
        per_order.setdefault(row["order_id"], []).append(row["line_no"])
    assert sorted(per_order) == list(range(1, 201))  # every order has items
    assert all(lines == list(range(1, len(lines) + 1)) and len(lines) <= 5 for lines in per_order.values())
    assert items.schema.field("unit_price").type == pa.decimal128(10, 2)
    assert all(isinstance(p, Decimal) and p > 0 for p in items.column("unit_price").to_pylist())
    assert orders.schema.field("ordered_at").type == pa.timestamp("us", tz="UTC")
    created = dict(
        zip(
            customers.column("customer_id").to_pylist(),
            customers.column("created_at").to_pylist(),
            strict=True,
        )
    )
    for row in orders.to_pylist():
        assert row["ordered_at"] >= created[row["customer_id"]]
        assert row["updated_at"] >= row["ordered_at"]
    counts = expected_order_counts(50, 200, 7)
    assert counts == {"customers": 50, "orders": 200, "order_items": items.num_rows, "outbox": 200}


def test_generator_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="Failed to generate orders"):
        generate_orders(0, 10, seed=1)


def test_ddl_is_composable_sql() -> None:
    assert isinstance(outbox_ddl("orders"), psycopg.sql.Composed)
