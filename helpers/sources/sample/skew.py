"""Who buys how much in the orders sample (:func:`helpers.sources.sample.orders.generate_orders`).

Real order books are skewed; the sample has three kinds of customer (:data:`TIERS`):

* **key accounts**, ranks 1-3 of a seeded ranking: each places a fixed share of all orders
  (:data:`KEY_ORDER_SHARES`) with bulk baskets (3-5 lines of 5-12 units), so the top three stand
  out in the revenue pie and to the right of the quantity/revenue scatter;
* **regular** customers: every other order, drawn with Zipf weights
  ``(rank + TAIL_OFFSET) ** -TAIL_EXPONENT`` over their ranks, so a few dozen customers hold most
  of the rest of the revenue and a long tail orders once, twice or never;
* **big-ticket buyers**: a handful of tail customers (:func:`big_ticket_count`), each with one or
  two orders of the most expensive products, high up in the scatter with small markers.

Everything is drawn from the caller's ``numpy.random.Generator``: the same seed gives the same mix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "BASKETS",
    "BIG_TICKET",
    "BIG_TICKET_PRODUCTS",
    "KEY_ACCOUNT",
    "KEY_ORDER_SHARES",
    "REGULAR",
    "TIERS",
    "TAIL_EXPONENT",
    "TAIL_OFFSET",
    "Basket",
    "CustomerMix",
    "big_ticket_count",
    "customer_mix",
    "draw_baskets",
    "draw_buyers",
]

REGULAR, KEY_ACCOUNT, BIG_TICKET = 0, 1, 2
TIERS: tuple[str, ...] = ("regular", "key account", "big-ticket buyer")
"""Names of the tiers, indexed by :data:`REGULAR`, :data:`KEY_ACCOUNT`, :data:`BIG_TICKET`."""

KEY_ORDER_SHARES: tuple[float, ...] = (0.06, 0.045, 0.035)
"""Share of all orders each key account places (ranks 1, 2, 3)."""

TAIL_EXPONENT = 1.2
"""Zipf exponent of the regular customers' order weights ``(rank + TAIL_OFFSET) ** -TAIL_EXPONENT``."""

TAIL_OFFSET = 4.0
"""Added to the regular customers' rank (0 for the first) before the power: flattens the head."""

BIG_TICKET_PRODUCTS = 3
"""Big-ticket orders choose among this many most expensive products."""


@dataclass(frozen=True)
class Basket:
    """Shape of one tier's orders: lines per order and units per line, both inclusive ranges."""

    lines: tuple[int, int]
    quantity: tuple[int, int]


BASKETS: tuple[Basket, ...] = (
    Basket(lines=(1, 5), quantity=(1, 5)),  # REGULAR
    Basket(lines=(3, 5), quantity=(5, 12)),  # KEY_ACCOUNT
    Basket(lines=(3, 5), quantity=(3, 6)),  # BIG_TICKET
)
"""Basket shape per tier (indexed like :data:`TIERS`); every order has a line, every line a unit."""


@dataclass(frozen=True)
class CustomerMix:
    """The tier of every customer, the orders placed apart and the weights of the drawn orders.

    Attributes:
        tier: per customer (0-based index), :data:`REGULAR`, :data:`KEY_ACCOUNT` or :data:`BIG_TICKET`.
        placed: per customer, the orders it places whatever the draw: its share of all orders for a
            key account, 1 or 2 for a big-ticket buyer, 0 for a regular customer.
        weight: per customer, the probability of buying one of the other (drawn) orders: Zipf
            over the regular customers' ranks, 0 for the others; sums to 1.
    """

    tier: npt.NDArray[np.int64]
    placed: npt.NDArray[np.int64]
    weight: npt.NDArray[np.float64]


def big_ticket_count(customers: int, orders: int) -> int:
    """How many big-ticket buyers a sample of this size has: about one in 200 customers, at least 2.

    None when there are fewer than 10 customers or 20 orders; never more than one per 20 orders.
    """
    if customers < 10 or orders < 20:
        return 0
    return min(max(2, customers // 200), orders // 20)


def customer_mix(rng: np.random.Generator, customers: int, orders: int) -> CustomerMix:
    """Rank the customers at random and give each a tier, its placed orders and an order weight.

    Args:
        rng: the generator (draws a permutation of the customers and the big-ticket order counts).
        customers: number of customers (>= 1).
        orders: number of orders (>= 0).

    Returns:
        The mix: ranks 1-3 are key accounts (none when there are fewer than 4 customers), the
        big-ticket buyers are the first ranks of the lower half, the others are regular; the
        placed orders sum to at most a fifth of ``orders``.
    """
    ranking = rng.permutation(customers)  # ranking[r]: the customer at rank r + 1
    keys = len(KEY_ORDER_SHARES) if customers > len(KEY_ORDER_SHARES) else 0
    big = big_ticket_count(customers, orders)
    tier = np.full(customers, REGULAR, dtype=np.int64)
    placed = np.zeros(customers, dtype=np.int64)
    tier[ranking[:keys]] = KEY_ACCOUNT
    placed[ranking[:keys]] = [round(share * orders) for share in KEY_ORDER_SHARES[:keys]]
    big_ids = ranking[customers // 2 : customers // 2 + big]
    tier[big_ids] = BIG_TICKET
    placed[big_ids] = rng.integers(1, 3, big)
    rank = np.empty(customers, dtype=np.float64)
    rank[ranking] = np.arange(customers, dtype=np.float64)
    regular_rank = np.maximum(rank - keys, 0.0)  # 0 for the first regular customer
    weight = np.where(tier == REGULAR, (regular_rank + TAIL_OFFSET) ** -TAIL_EXPONENT, 0.0)
    return CustomerMix(tier=tier, placed=placed, weight=weight / weight.sum())


def draw_buyers(rng: np.random.Generator, mix: CustomerMix, orders: int) -> npt.NDArray[np.int64]:
    """The buyer (0-based customer index) of every order: the placed orders first, then drawn ones.

    Args:
        rng: the generator.
        mix: :func:`customer_mix`'s result for the same ``orders``.
        orders: number of orders.

    Returns:
        ``orders`` customer indexes (the caller orders them by time).
    """
    placed = np.repeat(np.arange(mix.tier.size), mix.placed)
    drawn = rng.choice(mix.tier.size, size=orders - placed.size, p=mix.weight)
    return np.concatenate([placed, drawn]).astype(np.int64)


def draw_baskets(
    rng: np.random.Generator, order_tier: npt.NDArray[np.int64], cents: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Lines per order, then product and quantity per line, by the tier of each order's buyer.

    Args:
        rng: the generator.
        order_tier: the buyer's tier of every order.
        cents: unit price of every product, in cents (big-ticket lines pick among the
            :data:`BIG_TICKET_PRODUCTS` most expensive).

    Returns:
        ``(lines, product_index, quantity)``: lines per order (>= 1), and per line (in order,
        line by line) the product index into ``cents`` and the quantity (>= 1).
    """
    low = np.array([basket.lines[0] for basket in BASKETS])
    high = np.array([basket.lines[1] for basket in BASKETS])
    lines = rng.integers(low[order_tier], high[order_tier] + 1)
    line_tier = np.repeat(order_tier, lines)
    expensive = np.argsort(-cents, kind="stable")[:BIG_TICKET_PRODUCTS]
    any_product = rng.integers(0, cents.size, line_tier.size)
    big_product = expensive[rng.integers(0, expensive.size, line_tier.size)]
    product = np.where(line_tier == BIG_TICKET, big_product, any_product)
    q_low = np.array([basket.quantity[0] for basket in BASKETS])
    q_high = np.array([basket.quantity[1] for basket in BASKETS])
    quantity = rng.integers(q_low[line_tier], q_high[line_tier] + 1)
    return lines.astype(np.int64), product.astype(np.int64), quantity.astype(np.int64)
