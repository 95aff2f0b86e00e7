"""Invariants of the TICKIT generator (pure: no servers)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.sources.sample.tickit import decimal_from_cents, generate_tickit
from helpers.sources.sample.tickit_tables import (
    DOCUMENTED_ROW_COUNTS,
    TABLE_NAMES,
    TABLES,
    arrow_schema,
    expected_row_counts,
)


@pytest.fixture(scope="module")
def full() -> dict[str, pa.Table]:
    return generate_tickit(1.0, seed=20080101)


@pytest.fixture(scope="module")
def small() -> dict[str, pa.Table]:
    return generate_tickit(0.01, seed=42)


def _col(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy()


def test_documented_counts_at_full_scale(full: dict[str, pa.Table]) -> None:
    """Scale 1.0 has the documented TICKIT row counts, 424,319 rows in total."""
    counts = {name: t.num_rows for name, t in full.items()}
    assert counts == DOCUMENTED_ROW_COUNTS
    assert sum(counts.values()) == 424_319
    assert expected_row_counts(1.0) == DOCUMENTED_ROW_COUNTS


@pytest.mark.parametrize("scale", [0.0001, 0.001, 0.01, 0.05, 0.3333, 1.0])
def test_counts_match_expected(scale: float) -> None:
    """Every table has exactly the rows expected_row_counts announces."""
    tables = generate_tickit(scale, seed=1)
    expected = expected_row_counts(scale)
    assert {name: t.num_rows for name, t in tables.items()} == expected
    assert expected["category"] == 11 and expected["date"] == 365
    assert all(n >= 1 for n in expected.values()) and expected["users"] >= 2


def test_scaled_counts_are_proportional() -> None:
    counts = expected_row_counts(0.01)
    assert counts == {
        "category": 11,
        "date": 365,
        "venue": 2,
        "users": 500,
        "event": 88,
        "listing": 1925,
        "sale": 1725,
    }
    assert expected_row_counts(2.0)["listing"] == 384_994


@given(st.floats(min_value=1e-6, max_value=10.0, allow_nan=False))
@settings(max_examples=200, deadline=None)
def test_expected_counts_are_monotonic_and_sales_fit_listings(scale: float) -> None:
    counts = expected_row_counts(scale)
    assert counts["sale"] <= counts["listing"]
    assert counts["venue"] <= 32767  # smallint key
    bigger = expected_row_counts(scale * 1.5)
    assert all(bigger[name] >= counts[name] for name in TABLE_NAMES)


@pytest.mark.parametrize("scale", [0, -1.0, float("nan")])
def test_bad_scale_is_rejected(scale: float) -> None:
    with pytest.raises(ValueError, match="Failed to compute TICKIT row counts"):
        expected_row_counts(scale)


def test_schemas_are_exact(full: dict[str, pa.Table]) -> None:
    for name, table in full.items():
        assert table.schema == arrow_schema(name), name
    assert full["sale"].schema.field("pricepaid").type == pa.decimal128(8, 2)
    assert full["listing"].schema.field("listtime").type == pa.timestamp("us")
    assert full["date"].schema.field("caldate").type == pa.date32()
    assert full["event"].schema.field("venueid").type == pa.int16()
    assert full["users"].schema.field("likebroadway").type == pa.bool_()


def test_deterministic_for_a_seed_and_different_across_seeds(small: dict[str, pa.Table]) -> None:
    again = generate_tickit(0.01, seed=42)
    other = generate_tickit(0.01, seed=43)
    for name in TABLE_NAMES:
        assert again[name].equals(small[name]), name
    for name in ("users", "venue", "event", "listing", "sale"):
        assert not other[name].equals(small[name]), name
    # fixed reference tables do not depend on the seed
    assert other["category"].equals(small["category"])
    assert other["date"].equals(small["date"])


def test_primary_keys_are_dense_and_unique(full: dict[str, pa.Table]) -> None:
    keys = {"category": "catid", "venue": "venueid", "users": "userid", "event": "eventid",
            "listing": "listid", "sale": "salesid"}  # fmt: skip
    for name, key in keys.items():
        values = _col(full[name], key)
        assert np.array_equal(values, np.arange(1, values.size + 1)), name
    assert np.array_equal(_col(full["date"], "dateid"), np.arange(1827, 1827 + 365))


@pytest.mark.parametrize("fixture", ["full", "small"])
def test_referential_integrity(fixture: str, request: pytest.FixtureRequest) -> None:
    """Every foreign key exists; a sale agrees with its listing; buyer != seller."""
    t: dict[str, pa.Table] = request.getfixturevalue(fixture)
    users = t["users"].num_rows
    event, listing, sale = t["event"], t["listing"], t["sale"]
    dateids = set(_col(t["date"], "dateid").tolist())
    assert set(_col(event, "venueid").tolist()) <= set(range(1, t["venue"].num_rows + 1))
    assert set(_col(event, "catid").tolist()) <= set(range(1, 12))
    for table in (event, listing, sale):
        assert set(_col(table, "dateid").tolist()) <= dateids
    assert _col(listing, "eventid").min() >= 1 and _col(listing, "eventid").max() <= event.num_rows
    for table, column in ((listing, "sellerid"), (sale, "sellerid"), (sale, "buyerid")):
        values = _col(table, column)
        assert values.min() >= 1 and values.max() <= users
    listidx = _col(sale, "listid") - 1
    assert listidx.min() >= 0 and listidx.max() < listing.num_rows
    assert np.array_equal(_col(sale, "sellerid"), _col(listing, "sellerid")[listidx])
    assert np.array_equal(_col(sale, "eventid"), _col(listing, "eventid")[listidx])
    assert not np.any(_col(sale, "buyerid") == _col(sale, "sellerid"))


@pytest.mark.parametrize("fixture", ["full", "small"])
def test_quantities_and_times(fixture: str, request: pytest.FixtureRequest) -> None:
    """Sold tickets fit the listing; list time < sale time < event start; dateids match times."""
    t: dict[str, pa.Table] = request.getfixturevalue(fixture)
    event, listing, sale = t["event"], t["listing"], t["sale"]
    listidx = _col(sale, "listid") - 1
    qty = _col(sale, "qtysold")
    assert qty.min() >= 1
    sold = np.bincount(listidx, weights=qty, minlength=listing.num_rows)
    assert np.all(sold <= _col(listing, "numtickets"))
    numtickets = _col(listing, "numtickets")
    assert numtickets.min() >= 1 and numtickets.max() <= 30

    def seconds(table: pa.Table, column: str) -> np.ndarray:
        return table.column(column).cast(pa.int64()).to_numpy() // 1_000_000

    starttime, listtime, saletime = (
        seconds(event, "starttime"),
        seconds(listing, "listtime"),
        seconds(sale, "saletime"),
    )
    assert np.all(saletime > listtime[listidx])
    assert np.all(saletime < starttime[_col(sale, "eventid") - 1])
    assert np.all(listtime < starttime[_col(listing, "eventid") - 1])
    begin = int(dt.datetime(2008, 1, 1, tzinfo=dt.UTC).timestamp())
    end = int(dt.datetime(2008, 12, 31, tzinfo=dt.UTC).timestamp())
    for values in (starttime, listtime, saletime):
        assert values.min() >= begin and values.max() < end
    for table, values in ((event, starttime), (listing, listtime), (sale, saletime)):
        days = values // 86_400 - (begin // 86_400)
        assert np.array_equal(_col(table, "dateid"), days + 1827)
    # ids grow with time
    assert np.all(np.diff(listtime) >= 0) and np.all(np.diff(saletime) >= 0)


def test_money_is_exact_decimal(full: dict[str, pa.Table]) -> None:
    """Prices are whole dollars; totals and commission (15 %) are exact decimals."""
    listing, sale = full["listing"], full["sale"]
    price = listing.column("priceperticket")
    assert pc.min(price).as_py() >= Decimal("20.00") and pc.max(price).as_py() <= Decimal("2500.00")
    sample = listing.slice(0, 5000).to_pylist()
    for row in sample:
        assert isinstance(row["priceperticket"], Decimal)
        assert row["priceperticket"] == row["priceperticket"].to_integral_value()
        assert row["totalprice"] == row["priceperticket"] * row["numtickets"]
        assert row["totalprice"].as_tuple().exponent == -2
    prices = {row["listid"]: row["priceperticket"] for row in listing.to_pylist()}
    for row in sale.to_pylist():
        assert row["pricepaid"] == prices[row["listid"]] * row["qtysold"]
        assert row["commission"] == row["pricepaid"] * Decimal("0.15")
        assert row["commission"].as_tuple().exponent == -2


def test_realistic_distributions(full: dict[str, pa.Table]) -> None:
    listing, sale, event = full["listing"], full["sale"], full["event"]
    median_price = float(np.median(listing.column("priceperticket").cast(pa.float64()).to_numpy()))
    assert 50 <= median_price <= 250
    qty = _col(sale, "qtysold")
    assert np.mean(qty <= 4) > 0.5  # small purchases dominate
    per_event = np.bincount(_col(listing, "eventid"))
    assert per_event.max() > 5 * np.median(per_event[1:])  # some events are popular
    assert len(set(_col(event, "catid").tolist())) == 11
    nulls = full["users"].column("likesports").null_count
    assert 0.2 < nulls / full["users"].num_rows < 0.4
    assert full["date"].column("holiday").to_pylist().count(True) == 10


def test_reference_tables(full: dict[str, pa.Table]) -> None:
    date = full["date"].to_pylist()
    assert date[0]["caldate"] == dt.date(2008, 1, 1) and date[0]["day"] == "TU"
    assert date[-1]["caldate"] == dt.date(2008, 12, 30)
    assert {r["year"] for r in date} == {2008}
    assert {r["qtr"] for r in date} == {"1", "2", "3", "4"}
    assert date[0]["week"] == 1 and max(r["week"] for r in date) == 53
    cats = full["category"].to_pylist()
    assert [c["catname"] for c in cats][:5] == ["MLB", "NHL", "NFL", "NBA", "MLS"]
    users = full["users"]
    for column, width in (("username", 8), ("state", 2), ("phone", 14)):
        lengths = pc.utf8_length(users.column(column)).to_numpy()
        assert np.all(lengths == width), column  # char(n) columns are filled exactly


def test_string_lengths_fit_declared_varchar(full: dict[str, pa.Table]) -> None:
    for name, spec in TABLES.items():
        for column in spec.columns:
            if column.sql_type.startswith(("varchar(", "char(")):
                width = int(column.sql_type.split("(")[1].rstrip(")"))
                lengths = pc.utf8_length(full[name].column(column.name))
                assert (pc.max(lengths).as_py() or 0) <= width, (name, column.name)


@given(st.lists(st.integers(min_value=-(10**8) + 1, max_value=10**8 - 1), max_size=50))
def test_decimal_from_cents_is_exact(cents: list[int]) -> None:
    array = decimal_from_cents(cents)
    assert array.type == pa.decimal128(8, 2)
    assert array.to_pylist() == [Decimal(c).scaleb(-2) for c in cents]


def test_decimal_from_cents_rejects_overflow() -> None:
    with pytest.raises(ValueError, match="Failed to build decimal"):
        decimal_from_cents([10**8])
