"""The one row comparator: every check compares source rows with Bronze, Silver or query results here."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from helpers.checks.digests import canonical_column

SOFT_FLAG = "__deleted"
"""The soft-delete flag column of Silver rows (Debezium's ``__deleted``)."""

__all__ = [
    "SOFT_FLAG",
    "compare_frames",
    "compare_rows",
    "compare_tables",
    "is_flagged",
    "rows_equal",
    "split_soft_deleted",
]


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


def split_soft_deleted(silver: pa.Table, delete_mode: str) -> tuple[pa.Table, pa.Table]:
    """Silver's live rows and, in soft mode, the rows flagged ``__deleted=true`` (hard mode: none)."""
    if delete_mode != "soft" or SOFT_FLAG not in silver.column_names:
        return silver, silver.slice(0, 0)
    flag = silver.column(SOFT_FLAG)
    if pa.types.is_boolean(flag.type):
        mask = pc.fill_null(flag, False)
    else:
        mask = pc.fill_null(pc.equal(pc.cast(flag, pa.string()), "true"), False)
    return silver.filter(pc.invert(mask)), silver.filter(mask)


_SOURCE_INDEX, _SILVER_INDEX = "__compare_source_row", "__compare_silver_row"


def _key_column(values: pa.ChunkedArray | pa.Array, other: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """A key column cast so that both sides join: integers as int64, anything else of another type
    than the other side's as canonical text."""
    kind = values.type
    if pa.types.is_integer(kind) and pa.types.is_integer(other):
        return pc.cast(values, pa.int64())
    if kind == other:
        return values
    return canonical_column(values)


def _common(left: pa.Array, right: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """Both columns cast to one type that keeps every value (None: no such type here)."""
    a, b = left.type, right.type
    try:
        if pa.types.is_integer(a) and pa.types.is_integer(b):
            return pc.cast(left, pa.int64()), pc.cast(right, pa.int64())
        if pa.types.is_floating(a) and pa.types.is_floating(b):
            return pc.cast(left, pa.float64()), pc.cast(right, pa.float64())
        if pa.types.is_decimal(a) and pa.types.is_decimal(b):
            scale = max(a.scale, b.scale)
            digits = max(a.precision - a.scale, b.precision - b.scale)
            if digits + scale > 38:
                return None
            kind = pa.decimal128(digits + scale, scale)
            return pc.cast(left, kind), pc.cast(right, kind)
        if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):  # naive counts as UTC
            kind = pa.timestamp("us", tz="UTC")
            return pc.cast(left, kind, safe=False), pc.cast(right, kind, safe=False)
        if pa.types.is_date(a) and pa.types.is_date(b):
            return pc.cast(left, pa.date32()), pc.cast(right, pa.date32())
        text = (pa.types.is_string(a) or pa.types.is_large_string(a)) and (
            pa.types.is_string(b) or pa.types.is_large_string(b)
        )
        if text:
            return pc.cast(left, pa.string()), pc.cast(right, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return None


def _same_cells(left: pa.Array, right: pa.Array, json_text: bool) -> pa.Array:
    """Whether each pair of cells is equal (both null counts as equal): typed equality where the
    two sides share a type (or widen to one), canonical text (:mod:`helpers.checks.digests`)
    otherwise."""
    common = None if json_text else (left, right) if left.type == right.type else _common(left, right)
    if common is None:
        left = canonical_column(left, json_text=json_text)
        right = canonical_column(right, json_text=json_text)
    else:
        left, right = common
    if pa.types.is_null(left.type):
        return pc.is_null(right)
    if pa.types.is_null(right.type):
        return pc.is_null(left)
    equal = pc.fill_null(pc.equal(left, right), False)
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    return pc.or_(equal, both_null)


def _suspect_rows(
    source: pa.Table, live: pa.Table, key: Sequence[str], json_columns: frozenset[str]
) -> tuple[list[int], list[int]]:
    """Row numbers (source, Silver) of the keys that are missing, extra, duplicated or whose
    values differ, found with one hash join and a vectorised comparison per column."""
    left = pa.table(
        {
            **{k: _key_column(source.column(k), live.column(k).type) for k in key},
            _SOURCE_INDEX: pa.array(range(source.num_rows), pa.int64()),
        }
    )
    right = pa.table(
        {
            **{k: _key_column(live.column(k), source.column(k).type) for k in key},
            _SILVER_INDEX: pa.array(range(live.num_rows), pa.int64()),
        }
    )
    joined = left.join(right, keys=list(key), join_type="full outer", use_threads=False)
    src_i, live_i = joined.column(_SOURCE_INDEX), joined.column(_SILVER_INDEX)
    matched = joined.filter(pc.and_(pc.is_valid(src_i), pc.is_valid(live_i)))
    bad = pc.or_(pc.is_null(src_i), pc.is_null(live_i))  # missing or extra
    suspect_src = set(pc.drop_null(pc.filter(src_i, bad)).to_pylist())
    suspect_live = set(pc.drop_null(pc.filter(live_i, bad)).to_pylist())
    counts = right.group_by(list(key)).aggregate([(_SILVER_INDEX, "count")])
    duplicated = counts.filter(pc.greater(counts.column(f"{_SILVER_INDEX}_count"), 1))
    if duplicated.num_rows:
        dup = joined.join(duplicated.select(list(key)), keys=list(key), join_type="inner", use_threads=False)
        suspect_src.update(pc.drop_null(dup.column(_SOURCE_INDEX)).to_pylist())
        suspect_live.update(pc.drop_null(dup.column(_SILVER_INDEX)).to_pylist())
    if matched.num_rows:
        src_rows = source.take(matched.column(_SOURCE_INDEX))
        live_rows = live.take(matched.column(_SILVER_INDEX))
        differ = pa.array([False] * matched.num_rows)
        for column in source.column_names:
            ours = src_rows.column(column).combine_chunks()
            if column in live_rows.column_names:
                theirs = live_rows.column(column).combine_chunks()
            else:
                theirs = pa.nulls(live_rows.num_rows)
            differ = pc.or_(differ, pc.invert(_same_cells(ours, theirs, column in json_columns)))
        if pc.any(differ).as_py():
            suspect_src.update(pc.filter(matched.column(_SOURCE_INDEX), differ).to_pylist())
            suspect_live.update(pc.filter(matched.column(_SILVER_INDEX), differ).to_pylist())
    return sorted(suspect_src), sorted(suspect_live)


def compare_tables(
    source: pa.Table,
    silver: pa.Table,
    key: Sequence[str],
    *,
    delete_mode: str = "hard",
    deleted_keys: Sequence[tuple[Any, ...]] = (),
    partition: Sequence[str] = (),
    cap: int = 5,
    json_columns: frozenset[str] = frozenset(),
) -> list[str]:
    """:func:`compare_rows` for Arrow tables, vectorised: the same checks and sentences.

    Every row is reduced to a digest of its canonical text (:mod:`helpers.checks.digests`); only
    the keys whose digests disagree (or that are missing, extra or duplicated) are then compared
    cell by cell by :func:`compare_rows`, over the same canonical text, so a difference is judged
    exactly as the digests judge it and the sentences name the keys and the first differing value.

    Args:
        source: the source table's rows (source column order); its columns are the compared ones.
        silver: Silver's rows (or a replay of Bronze); columns the source lacks are ignored.
        key: primary-key columns.
        delete_mode: ``hard`` or ``soft`` (see :func:`compare_rows`).
        deleted_keys: keys the scenario deleted for good.
        partition: partition fields of the Silver table.
        cap: how many keys each problem lists at most.
        json_columns: source columns holding JSON (compared parsed, as canonical JSON text).

    Returns:
        One sentence per kind of problem, naming up to ``cap`` keys (empty: equal).
    """
    soft = delete_mode == "soft"
    live, flagged = split_soft_deleted(silver, delete_mode)
    missing_keys = [k for k in key if k not in live.column_names]
    if missing_keys:
        return [f"Silver lacks the key column(s) {missing_keys}"]
    src_rows, live_rows = _suspect_rows(source, live, key, json_columns)
    problems: list[str] = []
    if src_rows or live_rows:
        problems = compare_rows(
            source.take(pa.array(src_rows, pa.int64())).to_pylist(),
            live.take(pa.array(live_rows, pa.int64())).to_pylist(),
            key,
            cap=cap,
        )
    if partition:
        wanted = [*key, *partition, "_hoodie_partition_path"]
        view = live.select([c for c in wanted if c in live.column_names]).to_pylist()
        wrong = [
            tuple(r.get(c) for c in key)
            for r in view
            if r.get("_hoodie_partition_path") != "/".join(f"{p}={r.get(p)}" for p in partition)
        ]
        if wrong:
            problems.append(
                f"{len(wrong)} row(s) stored under another partition: {sorted(wrong, key=repr)[:cap]}"
            )
    if soft:
        flagged_keys = set(zip(*(flagged.column(k).to_pylist() for k in key), strict=True))
        both = pa.table({k: _key_column(flagged.column(k), source.column(k).type) for k in key}).join(
            pa.table({k: _key_column(source.column(k), flagged.column(k).type) for k in key}),
            keys=list(key),
            join_type="inner",
            use_threads=False,
        )
        alive = sorted(set(zip(*(both.column(k).to_pylist() for k in key), strict=True)), key=repr)
        if alive:
            problems.append(f"{len(alive)} key(s) flagged deleted but present in the source: {alive[:cap]}")
        unflagged = sorted((tuple(k) for k in deleted_keys if tuple(k) not in flagged_keys), key=repr)
        if unflagged:
            problems.append(
                f"{len(unflagged)} deleted key(s) not kept with {SOFT_FLAG}=true: {unflagged[:cap]}"
            )
    return problems
