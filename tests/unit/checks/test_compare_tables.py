"""compare_tables (vectorised) says exactly what compare_rows (row by row) says, on tables of every
column type the sources produce, for each kind of damage."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from helpers.checks.compare import SOFT_FLAG, compare_rows, compare_tables
from helpers.checks.conformance.harness import tamper_table

UTC = dt.UTC


def _source(n: int = 200) -> list[dict[str, Any]]:
    r = random.Random(7)
    return [
        {
            "id": i,
            "qty": r.randrange(1, 9),
            "price": Decimal(r.randrange(100_000)) / 100,
            "ratio": r.random(),
            "name": r.choice(["a", "b", "ü", "", None]),
            "at": dt.datetime(2008, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=r.randrange(10**12)),
            "day": dt.date(2008, 1, 1) + dt.timedelta(days=r.randrange(400)),
            "flag": r.choice([True, False]),
        }
        for i in range(n)
    ]


def _silver(rows: list[dict[str, Any]], soft: bool = False) -> list[dict[str, Any]]:
    out = [
        {**r, "_hoodie_commit_time": "20240101000000000", "_hoodie_partition_path": f"qty={r['qty']}"}
        for r in rows
    ]
    if soft:
        for r in out:
            r[SOFT_FLAG] = False
    return out


def _damage(kind: str, silver: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [dict(r) for r in silver]
    if kind == "value":
        rows[17]["price"] += Decimal("0.01")
    elif kind == "null":
        rows[23]["name"] = None if rows[23]["name"] is not None else "x"
    elif kind == "microsecond":
        rows[31]["at"] += dt.timedelta(microseconds=1)
    elif kind == "missing":
        del rows[40]
    elif kind == "extra":
        rows.append({**rows[0], "id": 10_000})
    elif kind == "duplicate":
        rows.append(dict(rows[5]))
    elif kind == "partition":
        rows[9]["_hoodie_partition_path"] = "qty=99"
    elif kind == "many":
        for r in rows[::3]:
            r["ratio"] += 1.0
    return rows


KINDS = ["none", "value", "null", "microsecond", "missing", "extra", "duplicate", "partition", "many"]


@pytest.mark.parametrize("kind", KINDS)
def test_compare_tables_says_what_compare_rows_says(kind: str) -> None:
    source = pa.Table.from_pylist(_source())
    silver = pa.Table.from_pylist(_damage(kind, _silver(_source())))
    expected = compare_rows(source.to_pylist(), silver.to_pylist(), ["id"], partition=["qty"])
    got = compare_tables(source, silver, ["id"], partition=["qty"])
    assert got == expected
    assert bool(got) == (kind != "none")


def test_compare_tables_soft_mode_matches_compare_rows() -> None:
    source = _source()
    silver = _silver(source, soft=True)
    gone = {**silver[3], SOFT_FLAG: True}
    live_source = [r for r in source if r["id"] != 3]
    cases = [
        ([*silver[:3], gone, *silver[4:]], [(3,)]),  # deleted and kept flagged: equal
        ([*silver[:3], *silver[4:]], [(3,)]),  # the flagged row is missing
        ([*silver[:3], {**gone, SOFT_FLAG: False}, *silver[4:]], [(3,)]),  # flag cleared
        ([*silver, {**silver[8], "id": 8, SOFT_FLAG: True}], []),  # a live key also flagged
    ]
    for rows, deleted in cases:
        expected = compare_rows(live_source, rows, ["id"], delete_mode="soft", deleted_keys=deleted)
        got = compare_tables(
            pa.Table.from_pylist(live_source),
            pa.Table.from_pylist(rows),
            ["id"],
            delete_mode="soft",
            deleted_keys=deleted,
        )
        assert got == expected
    assert (
        compare_tables(
            pa.Table.from_pylist(live_source),
            pa.Table.from_pylist([*silver[:3], gone, *silver[4:]]),
            ["id"],
            delete_mode="soft",
            deleted_keys=[(3,)],
        )
        == []
    )


def test_compare_tables_across_types_judges_values_not_types() -> None:
    """Silver's int32 keys, decimals of another scale and naive UTC timestamps equal the source's
    int64 keys, decimals and aware timestamps; a changed value is still found."""
    source = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "price": pa.array([Decimal("1.50"), Decimal("2.00"), Decimal("3.25")], pa.decimal128(8, 2)),
            "at": pa.array([dt.datetime(2024, 1, 1, 12, tzinfo=UTC)] * 3, pa.timestamp("us", tz="UTC")),
        }
    )
    silver = pa.table(
        {
            "id": pa.array([3, 2, 1], pa.int32()),
            "price": pa.array(
                [Decimal("3.2500"), Decimal("2.0000"), Decimal("1.5000")], pa.decimal128(12, 4)
            ),
            "at": pa.array([dt.datetime(2024, 1, 1, 12)] * 3, pa.timestamp("us")),
        }
    )
    assert compare_tables(source, silver, ["id"]) == []
    changed = silver.set_column(
        1, "price", pa.array([Decimal("3.2501"), Decimal(2), Decimal("1.5")], pa.decimal128(12, 4))
    )
    assert compare_tables(source, changed, ["id"]) == [
        "1 row(s) differ from the source: [(3,)] (first: price=Decimal('3.2501') != Decimal('3.25'))"
    ]


def test_compare_tables_composite_key_and_json_text() -> None:
    source = pa.table({"o": [1, 1, 2], "n": [1, 2, 1], "doc": ['{"a": 1, "b": 2}', '{"a": 2}', "[]"]})
    silver = pa.table({"o": [2, 1, 1], "n": [1, 2, 1], "doc": ["[]", '{"a":2}', '{"b":2,"a":1}']})
    assert compare_tables(source, silver, ["o", "n"], json_columns=frozenset({"doc"})) == []
    assert compare_tables(source, silver, ["o", "n"]) != []  # as plain text the documents differ
    missing = silver.slice(1)
    assert compare_tables(source, missing, ["o", "n"], json_columns=frozenset({"doc"})) == [
        "1 source key(s) missing in Silver: [(2, 1)]"
    ]


def test_compare_tables_names_each_kind_of_difference() -> None:
    source = pa.table({"id": [1, 2], "v": ["a", "b"], "p": [1, 2]})
    good = source.append_column("_hoodie_partition_path", pa.array(["p=1", "p=2"]))
    assert compare_tables(source, good, ["id"], partition=["p"]) == []
    changed = good.set_column(1, "v", pa.array(["a", "x"]))
    assert "differ" in compare_tables(source, changed, ["id"])[0]
    assert "missing" in compare_tables(source, good.slice(0, 1), ["id"])[0]
    assert "not in the source" in compare_tables(source.slice(0, 1), good, ["id"])[0]
    assert "more than once" in compare_tables(source, pa.concat_tables([good, good.slice(1)]), ["id"])[0]
    moved = good.set_column(3, "_hoodie_partition_path", pa.array(["p=1", "p=1"]))
    assert "another partition" in compare_tables(source, moved, ["id"], partition=["p"])[0]


@pytest.mark.parametrize(
    ("deleted", "mode"), [([(3,)], "soft"), ([(3,)], "hard"), ([], "hard"), ([], "soft")]
)
def test_a_tampered_copy_is_reported_and_the_input_untouched(deleted: list[Any], mode: str) -> None:
    source = pa.Table.from_pylist(_source(50))
    rows = _silver(source.to_pylist(), soft=mode == "soft")
    if mode == "soft":
        rows.append({**rows[0], "id": 3, SOFT_FLAG: True})
        source = source.filter(pa.compute.not_equal(source.column("id"), 3))
        rows = [r for r in rows if not (r["id"] == 3 and not r[SOFT_FLAG])]
    silver = pa.Table.from_pylist(rows)
    options: dict[str, Any] = {"delete_mode": mode, "deleted_keys": deleted if mode == "soft" else []}
    assert compare_tables(source, silver, ["id"], **options) == []
    tampered = tamper_table(silver, ["id"], [(7,)], deleted, mode)
    assert compare_tables(source, tampered, ["id"], **options)
    assert silver.equals(pa.Table.from_pylist(rows))


def test_tamper_changes_a_value_of_each_type() -> None:
    source = pa.Table.from_pylist(_source(5))
    for column in ["qty", "price", "ratio", "at", "day", "flag"]:
        narrowed = source.select(["id", column])
        tampered = tamper_table(narrowed, ["id"], [(2,)], [], "hard")
        problems = compare_tables(narrowed, tampered, ["id"])
        assert problems and "[(2,)]" in problems[0], column
