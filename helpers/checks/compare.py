"""The one row comparator: every check compares source rows with Bronze, Silver or query results here."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pandas as pd

SOFT_FLAG = "__deleted"
"""The soft-delete flag column of Silver rows (Debezium's ``__deleted``)."""

__all__ = ["SOFT_FLAG", "compare_frames", "compare_rows", "is_flagged", "rows_equal"]


def _comparable(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def is_flagged(row: Mapping[str, Any]) -> bool:
    """Whether a Silver row carries the soft-delete flag."""
    return row.get(SOFT_FLAG) in (True, "true")


def compare_rows(
    source: Sequence[Mapping[str, Any]],
    silver: Sequence[Mapping[str, Any]],
    key: Sequence[str],
    *,
    delete_mode: str = "hard",
    deleted_keys: Sequence[tuple[Any, ...]] = (),
    partition: Sequence[str] = (),
    cap: int = 5,
) -> list[str]:
    """Compare Silver rows with the source table's rows; the problems found (empty: equal).

    Hard mode: Silver holds exactly the source's keys, once each, every source column equal
    (aware timestamps compared as UTC; JSON text compared parsed). Soft mode: the rows without
    ``__deleted=true`` are compared that way, every flagged key is absent from the source, and
    every key in ``deleted_keys`` is present and flagged. With ``partition`` each row's
    ``_hoodie_partition_path`` must name the row's own values.

    Args:
        source: the source table's rows (as the database driver returns them).
        silver: Silver's rows (official reader, ``to_pylist()``).
        key: primary-key columns.
        delete_mode: ``hard`` or ``soft``.
        deleted_keys: keys the scenario deleted for good (as tuples of key values).
        partition: partition fields of the Silver table.
        cap: how many keys each problem lists at most.

    Returns:
        One sentence per kind of problem, naming up to ``cap`` keys.

    Example:
        >>> compare_rows([{"id": 1, "v": "a"}], [{"id": 1, "v": "b"}], ["id"])
        ['1 row(s) differ from the source: [(1,)] (first: v=\\'b\\' != \\'a\\')']
    """
    columns = list(source[0]) if source else []
    parsed = {c for c in columns if any(isinstance(r[c], dict | list) for r in source)}

    def cell(row: Mapping[str, Any], c: str) -> Any:
        value = row.get(c)
        return json.loads(value) if c in parsed and isinstance(value, str) else _comparable(value)

    problems: list[str] = []
    soft = delete_mode == "soft"
    live = [r for r in silver if not (soft and is_flagged(r))]
    flagged = [r for r in silver if soft and is_flagged(r)]
    want = {tuple(r[k] for k in key): r for r in source}
    have: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    duplicates = []
    for r in live:
        k = tuple(r.get(c) for c in key)
        if k in have:
            duplicates.append(k)
        have[k] = r
    if duplicates:
        problems.append(f"{len(duplicates)} key(s) appear more than once in Silver: {duplicates[:cap]}")
    missing = sorted((k for k in want if k not in have), key=repr)
    extra = sorted((k for k in have if k not in want), key=repr)
    if missing:
        problems.append(f"{len(missing)} source key(s) missing in Silver: {missing[:cap]}")
    if extra:
        problems.append(f"{len(extra)} key(s) in Silver but not in the source: {extra[:cap]}")
    differing = []
    first = ""
    for k, src in want.items():
        got = have.get(k)
        if got is None:
            continue
        for c in columns:
            if cell(got, c) != _comparable(src[c]):
                if not first:
                    first = f"{c}={got.get(c)!r} != {src[c]!r}"
                differing.append(k)
                break
    if differing:
        differing.sort(key=repr)
        problems.append(f"{len(differing)} row(s) differ from the source: {differing[:cap]} (first: {first})")
    if partition:
        wrong = [
            k
            for k, r in have.items()
            if r.get("_hoodie_partition_path") != "/".join(f"{p}={r.get(p)}" for p in partition)
        ]
        if wrong:
            problems.append(
                f"{len(wrong)} row(s) stored under another partition: {sorted(wrong, key=repr)[:cap]}"
            )
    if soft:
        flagged_keys = {tuple(r.get(c) for c in key) for r in flagged}
        alive = sorted((k for k in flagged_keys if k in want), key=repr)
        if alive:
            problems.append(f"{len(alive)} key(s) flagged deleted but present in the source: {alive[:cap]}")
        unflagged = sorted((tuple(k) for k in deleted_keys if tuple(k) not in flagged_keys), key=repr)
        if unflagged:
            problems.append(
                f"{len(unflagged)} deleted key(s) not kept with {SOFT_FLAG}=true: {unflagged[:cap]}"
            )
    return problems


def compare_frames(
    left: pd.DataFrame,
    right: pd.DataFrame,
    key: Sequence[str],
    *,
    approx: Sequence[str] = (),
    rel_tol: float = 1e-9,
) -> pd.DataFrame:
    """Compare two results column by column, rows matched on ``key``.

    Exact equality for every column (decimals compared as decimals) except those in ``approx``
    (floating point averages: relative tolerance ``rel_tol``).

    Returns:
        One row per column of ``left``: ``column``, ``left_rows``, ``right_rows``, ``differing``
        (rows whose values differ or that one side lacks), ``equal``.
    """
    keys = list(key)
    merged = left.merge(right, on=keys, how="outer", suffixes=("_left", "_right"), indicator=True)
    unmatched = int((merged["_merge"] != "both").sum())
    rows = []
    for column in left.columns:
        if column in keys:
            differing = unmatched
        else:
            a, b = merged[f"{column}_left"], merged[f"{column}_right"]
            if column in approx:
                same = [
                    x is not None and y is not None and math.isclose(float(x), float(y), rel_tol=rel_tol)
                    for x, y in zip(a, b, strict=True)
                ]
            else:
                same = [_same(x, y) for x, y in zip(a, b, strict=True)]
            differing = sum(1 for s in same if not s)
        rows.append(
            {
                "column": column,
                "left_rows": len(left),
                "right_rows": len(right),
                "differing": differing,
                "equal": differing == 0 and len(left) == len(right),
            }
        )
    return pd.DataFrame(rows)


def _same(x: object, y: object) -> bool:
    if x is None or y is None or (isinstance(x, float) and math.isnan(x)):
        return x is y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
    if isinstance(x, Decimal) or isinstance(y, Decimal):
        return Decimal(str(x)) == Decimal(str(y))
    return bool(x == y)


def rows_equal(
    source: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], key: Sequence[str]
) -> bool:
    """Whether ``rows`` hold exactly the source rows (:func:`compare_rows` finds no problem)."""
    return not compare_rows(source, rows, key)
