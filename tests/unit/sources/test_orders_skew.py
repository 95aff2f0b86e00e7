"""The orders generator's customer skew (pure: no servers), at the sizes of params/base.yaml (local)
and params/ci.yaml: a few key accounts, most revenue in the top 20, a long tail, and a handful of
infrequent buyers of expensive items; same seed, same tables.

Measured with seed 7 (both overlays' seed): default sizes (1,000 customers, 5,000 orders) top 3
39 %, top 10 57 %, top 20 65 %, the third 2.35 times the fourth, 74 % of the customers with at most
two orders; CI sizes (50, 200) top 3 32 %, top 10 67 %, top 20 88 %, 56 % with at most two orders.
The uniform generator before gave 1.4 % / 3.6 % / 6.4 % (default) and 16 % / 44 % / 70 % (CI).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from helpers.params import load_params
from helpers.sources.sample.orders import expected_order_counts, generate_orders
from helpers.sources.sample.skew import (
    BIG_TICKET,
    KEY_ACCOUNT,
    REGULAR,
    big_ticket_count,
    customer_mix,
    draw_buyers,
)


@dataclass(frozen=True)
class Shape:
    """The skew of one generated sample, computed like ``sql/order_revenue_by_customer.sql``."""

    customers: int
    per_customer: pd.DataFrame  # index customer_id; order_count, revenue, avg_revenue (buyers only)

    def share(self, top: int) -> float:
        revenue = self.per_customer["revenue"].sort_values(ascending=False)
        return float(revenue.iloc[:top].sum() / revenue.sum())

    def ranked(self) -> list[float]:
        return sorted(self.per_customer["revenue"], reverse=True)

    def few_orders(self, at_most: int = 2) -> float:
        """Share of all customers (buyers or not) with at most ``at_most`` orders."""
        buyers_with_few = int((self.per_customer["order_count"] <= at_most).sum())
        return (buyers_with_few + self.customers - len(self.per_customer)) / self.customers

    def big_tickets(self) -> pd.DataFrame:
        """Customers with at most two orders whose average order is above the buyers' 95th percentile."""
        frame = self.per_customer
        p95 = float(np.percentile(frame["avg_revenue"], 95))
        return frame[(frame["order_count"] <= 2) & (frame["avg_revenue"] > p95)]


def _shape(customers: int, orders: int, seed: int) -> Shape:
    tables = generate_orders(customers, orders, seed)
    items = tables["order_items"].to_pandas()
    items["revenue"] = items["quantity"] * items["unit_price"].map(float)
    per_order = items.groupby("order_id")["revenue"].sum()
    frame = tables["orders"].to_pandas().set_index("order_id")
    frame["revenue"] = per_order
    per_customer = frame.groupby("customer_id").agg(
        order_count=("revenue", "size"), revenue=("revenue", "sum"), avg_revenue=("revenue", "mean")
    )
    return Shape(customers, per_customer)


@pytest.fixture(scope="module", params=["local", "ci"])
def sizes(request: pytest.FixtureRequest) -> tuple[str, int, int, int]:
    params = load_params(request.param)
    return request.param, params.orders.customers, params.orders.orders, params.orders.seed


def test_the_sizes_are_those_of_the_params_files(sizes: tuple[str, int, int, int]) -> None:
    env, customers, orders, seed = sizes
    assert (customers, orders, seed) == {"local": (1000, 5000, 7), "ci": (50, 200, 7)}[env]


def test_a_few_key_accounts_hold_a_large_share(sizes: tuple[str, int, int, int]) -> None:
    """Top 3 at least 30 % (default) / 25 % (CI) of the revenue; at the default size each of them
    at least 1.5 times the fourth customer, so the pie shows three large slices."""
    env, customers, orders, seed = sizes
    shape = _shape(customers, orders, seed)
    assert shape.share(3) >= (0.30 if env == "local" else 0.25)
    if env == "local":
        ranked = shape.ranked()
        assert ranked[2] >= 1.5 * ranked[3]
        assert shape.share(3) <= 0.60  # big, not everything


def test_most_revenue_is_in_the_top_20_and_a_long_tail_remains(sizes: tuple[str, int, int, int]) -> None:
    """Top 20 at least 55 % of the revenue (CI, where 20 is 40 % of the customers: top 10 at least
    55 %), and at least half of the customers have at most two orders."""
    env, customers, orders, seed = sizes
    shape = _shape(customers, orders, seed)
    if env == "local":
        assert 0.55 <= shape.share(20) <= 0.85
        assert shape.few_orders() >= 0.6
        assert len(shape.per_customer) >= customers // 2  # the scatter still has a crowd
    else:
        assert shape.share(10) >= 0.55 and shape.share(20) >= 0.75
        assert shape.few_orders() >= 0.5


def test_a_handful_of_infrequent_buyers_of_expensive_items_stand_out(
    sizes: tuple[str, int, int, int],
) -> None:
    """At least as many customers as there are big-ticket buyers (5 default, 2 CI) have at most two
    orders and an average order above the 95th percentile; the highest average order is one of
    them, at least twice that percentile (high up in the scatter, with a small marker)."""
    _, customers, orders, seed = sizes
    shape = _shape(customers, orders, seed)
    assert big_ticket_count(customers, orders) == (5 if customers == 1000 else 2)
    assert len(shape.big_tickets()) >= big_ticket_count(customers, orders)
    highest = shape.per_customer.sort_values("avg_revenue", ascending=False).iloc[0]
    p95 = float(np.percentile(shape.per_customer["avg_revenue"], 95))
    assert highest["order_count"] <= 2 and highest["avg_revenue"] >= 2 * p95


def test_values_stay_valid_and_counts_exact(sizes: tuple[str, int, int, int]) -> None:
    _, customers, orders, seed = sizes
    tables = generate_orders(customers, orders, seed)
    items = tables["order_items"]
    quantity = items.column("quantity").to_numpy()
    assert quantity.min() >= 1
    assert items.schema.field("unit_price").type == pa.decimal128(10, 2)
    prices = set(items.column("unit_price").to_pylist())
    assert all(p > 0 and p == p.quantize(Decimal("0.01")) for p in prices)
    lines = items.group_by("order_id").aggregate([("line_no", "max"), ("line_no", "count")])
    assert lines.num_rows == orders  # every order has items, numbered 1..n
    assert lines.column("line_no_max").equals(lines.column("line_no_count").cast(pa.int16()))
    assert expected_order_counts(customers, orders, seed) == {
        "customers": customers,
        "orders": orders,
        "order_items": items.num_rows,
        "outbox": orders,
    }


def test_same_seed_same_tables_other_seed_other_tables(sizes: tuple[str, int, int, int]) -> None:
    _, customers, orders, seed = sizes
    first, again, other = (generate_orders(customers, orders, s) for s in (seed, seed, seed + 1))
    assert all(first[name].equals(again[name]) for name in first)
    assert not first["orders"].column("customer_id").equals(other["orders"].column("customer_id"))
    assert not first["order_items"].equals(other["order_items"])


def test_the_mix_places_key_account_and_big_ticket_orders_exactly() -> None:
    rng = np.random.default_rng(3)
    mix = customer_mix(rng, 1000, 5000)
    assert (mix.tier == KEY_ACCOUNT).sum() == 3 and (mix.tier == BIG_TICKET).sum() == 5
    assert sorted(mix.placed[mix.tier == KEY_ACCOUNT]) == [175, 225, 300]
    assert set(mix.placed[mix.tier == BIG_TICKET]) <= {1, 2}
    assert mix.weight[mix.tier != REGULAR].sum() == 0 and mix.weight.sum() == pytest.approx(1.0)
    buyers = draw_buyers(rng, mix, 5000)
    counts = np.bincount(buyers, minlength=1000)
    assert buyers.size == 5000
    assert (counts[mix.tier != REGULAR] == mix.placed[mix.tier != REGULAR]).all()


@pytest.mark.parametrize(("customers", "orders"), [(1, 0), (1, 7), (3, 5), (4, 3), (12, 25)])
def test_tiny_samples_stay_valid(customers: int, orders: int) -> None:
    tables = generate_orders(customers, orders, seed=5)
    assert tables["customers"].num_rows == customers and tables["orders"].num_rows == orders
    ids = tables["orders"].column("customer_id").to_pylist()
    assert all(1 <= cid <= customers for cid in ids)
    assert tables["order_items"].column("order_id").unique().to_pylist() == list(range(1, orders + 1))
