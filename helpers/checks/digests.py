"""Row digests for reconciliation: whole tables compared by count and an order-independent checksum.

One canonical text per value type makes driver values and Silver's Arrow values agree exactly and
keeps the comparison in vectorised Arrow code; the rows whose keys differ are then described by
:func:`helpers.checks.compare.compare_rows`. The canonical forms: ``docs/architecture.md`` (Checks).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from helpers.errors import ReconcileError

__all__ = [
    "TableSide",
    "canonical_column",
    "canonical_records",
    "compare_sides",
    "row_digests",
    "rows_to_arrow",
    "side_from_arrow",
    "side_from_rows",
    "table_checksum",
]

_NULL = "\\N"
_ROW_SEPARATOR = "|"


def _json_text(value: Any, *, parsed: bool) -> str:
    data = value if parsed else json.loads(value)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rows_to_arrow(names: Sequence[str], rows: Sequence[Sequence[Any]], json_columns: set[str]) -> pa.Table:
    """Driver rows (tuples in ``names`` order) as an Arrow table.

    Columns holding dicts or lists are JSON: they are added to ``json_columns`` and their values
    become canonical JSON text; a column Arrow cannot type becomes text.
    """
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    arrays = []
    for name, values in zip(names, columns, strict=True):
        if name in json_columns or any(isinstance(v, dict | list) for v in values):
            json_columns.add(name)
            values = tuple(None if v is None else _json_text(v, parsed=True) for v in values)
        try:
            arrays.append(pa.array(values) if values else pa.array([], pa.null()))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
    return pa.table(arrays, names=list(names))


def canonical_column(values: pa.Array | pa.ChunkedArray, *, json_text: bool = False) -> pa.Array:
    """Canonical text of every value of a column (see the module docstring); nulls stay null.

    Args:
        values: the column.
        json_text: the column holds JSON (text is parsed and re-serialised with sorted keys).

    Returns:
        A string array of the same length.

    Raises:
        ReconcileError: when a JSON value does not parse.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    kind = values.type
    if pa.types.is_null(kind):
        return pa.array([None] * len(values), pa.string())
    if pa.types.is_dictionary(kind):
        values = values.cast(kind.value_type)
        kind = values.type
    if json_text and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        try:
            texts = [None if v is None else _json_text(v, parsed=False) for v in values.to_pylist()]
            return pa.array(texts, pa.string())
        except ValueError as exc:
            raise ReconcileError(f"Failed to canonicalise a JSON column: {exc}") from None
    if pa.types.is_decimal(kind):
        text = values.cast(pa.string())
        text = pc.replace_substring_regex(text, r"^(-?[0-9]*\.[0-9]*?)0+$", r"\1")
        text = pc.replace_substring_regex(text, r"\.$", "")
        return pc.replace_substring_regex(text, r"^-0$", "0")
    if pa.types.is_timestamp(kind):
        utc = values.cast(pa.timestamp("us", tz="UTC"), safe=False)
        return pc.strftime(utc, format="%Y-%m-%dT%H:%M:%S", locale="C")
    if pa.types.is_date(kind):
        return values.cast(pa.date32()).cast(pa.string())
    if pa.types.is_time(kind):
        return values.cast(pa.time64("us")).cast(pa.string())
    if pa.types.is_floating(kind):
        return values.cast(pa.float64()).cast(pa.string())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return pa.array([None if v is None else v.hex() for v in values.to_pylist()], pa.string())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return values.cast(pa.string())
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return values.cast(pa.string())
    return pa.array(
        [None if v is None else _json_text(v, parsed=True) for v in values.to_pylist()], pa.string()
    )


def canonical_records(
    table: pa.Table, columns: Sequence[str], json_columns: frozenset[str] = frozenset()
) -> list[dict[str, str | None]]:
    """The rows as ``{column: canonical text}`` dicts (a missing column is null in every row)."""
    texts = {
        name: (
            canonical_column(table.column(name), json_text=name in json_columns).to_pylist()
            if name in table.column_names
            else [None] * table.num_rows
        )
        for name in columns
    }
    return [{name: texts[name][i] for name in columns} for i in range(table.num_rows)]


def _canonical_rows(table: pa.Table, columns: Sequence[str], json_columns: frozenset[str]) -> pa.Array:
    parts = []
    for name in columns:
        text = canonical_column(table.column(name), json_text=name in json_columns)
        field = pc.binary_join_element_wise(pc.cast(pc.utf8_length(text), pa.string()), text, ":")
        parts.append(pc.fill_null(field, _NULL))
    if not parts:
        return pa.array([""] * table.num_rows, pa.string())
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, _ROW_SEPARATOR)


def row_digests(
    table: pa.Table, columns: Sequence[str], json_columns: frozenset[str] = frozenset()
) -> np.ndarray:
    """SHA-256 of each row's canonical text, as an ``(n, 32)`` uint8 array."""
    text = _canonical_rows(table, columns, json_columns)
    blob = b"".join(hashlib.sha256(s.encode("utf-8")).digest() for s in text.to_pylist())
    return np.frombuffer(blob, dtype=np.uint8).reshape(-1, 32)


def table_checksum(digests: np.ndarray) -> str:
    """Order-independent checksum of row digests (sums modulo 2**64 of two 8-byte words)."""
    if not len(digests):
        return "0" * 32
    words = np.ascontiguousarray(digests[:, :16]).view(">u8").astype(np.uint64)
    with np.errstate(over="ignore"):
        first = int(words[:, 0].sum(dtype=np.uint64))
        second = int(words[:, 1].sum(dtype=np.uint64))
    return f"{first:016x}{second:016x}"


@dataclass(frozen=True)
class TableSide:
    """One side of a comparison: key texts, key values and row digests, aligned."""

    keys: list[str]
    key_values: list[Any]
    digests: np.ndarray

    @property
    def rows(self) -> int:
        """Number of rows."""
        return len(self.keys)

    @property
    def checksum(self) -> str:
        """:func:`table_checksum` of the digests."""
        return table_checksum(self.digests)


def side_from_arrow(
    table: pa.Table, columns: Sequence[str], key: Sequence[str], json_columns: frozenset[str] = frozenset()
) -> TableSide:
    """A :class:`TableSide` from an Arrow table (missing columns count as null).

    Raises:
        ReconcileError: when a key column is missing.
    """
    missing_keys = [k for k in key if k not in table.column_names]
    if missing_keys:
        raise ReconcileError(f"Failed to compare: key column(s) {missing_keys} missing")
    for name in columns:
        if name not in table.column_names:
            table = table.append_column(name, pa.array([None] * table.num_rows, pa.string()))
    key_text = _canonical_rows(table, key, frozenset()).to_pylist()
    if len(key) == 1:
        values: list[Any] = table.column(key[0]).to_pylist()
    else:
        values = [tuple(r) for r in zip(*(table.column(k).to_pylist() for k in key), strict=True)]
    return TableSide(key_text, values, row_digests(table, columns, json_columns))


def side_from_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], key: Sequence[str]) -> TableSide:
    """A :class:`TableSide` from row dicts (as database drivers return them)."""
    found: set[str] = set()
    table = rows_to_arrow(list(columns), [tuple(r.get(c) for c in columns) for r in rows], found)
    return side_from_arrow(table, columns, key, frozenset(found))


def compare_sides(
    source: TableSide, silver: TableSide, key: Sequence[str], *, max_keys: int = 20
) -> dict[str, Any]:
    """Compare two sides: counts, checksums and (when they differ) the differing keys.

    Returns:
        ``source_rows``, ``silver_rows``, ``source_checksum``, ``silver_checksum``, ``equal``,
        ``missing_in_silver``, ``extra_in_silver``, ``different``, ``duplicate_in_silver``,
        ``diff_count`` and ``differing_keys``: up to ``max_keys`` dicts ``{<key column>: value,
        ..., "difference": "missing_in_silver" | "extra_in_silver" | "different" |
        "duplicate_in_silver"}``, in key order.
    """
    out: dict[str, Any] = {
        "source_rows": source.rows,
        "silver_rows": silver.rows,
        "source_checksum": source.checksum,
        "silver_checksum": silver.checksum,
    }
    equal = source.rows == silver.rows and out["source_checksum"] == out["silver_checksum"]
    found: list[tuple[str, Any, str]] = []
    counts = {"missing_in_silver": 0, "extra_in_silver": 0, "different": 0, "duplicate_in_silver": 0}
    if not equal:
        want = {k: (i, bytes(source.digests[i])) for i, k in enumerate(source.keys)}
        have: dict[str, tuple[int, bytes]] = {}
        for i, k in enumerate(silver.keys):
            if k in have:
                counts["duplicate_in_silver"] += 1
                found.append((k, silver.key_values[i], "duplicate_in_silver"))
            have[k] = (i, bytes(silver.digests[i]))
        for k, (i, digest) in want.items():
            other = have.get(k)
            if other is None:
                counts["missing_in_silver"] += 1
                found.append((k, source.key_values[i], "missing_in_silver"))
            elif other[1] != digest:
                counts["different"] += 1
                found.append((k, source.key_values[i], "different"))
        for k, (i, _digest) in have.items():
            if k not in want:
                counts["extra_in_silver"] += 1
                found.append((k, silver.key_values[i], "extra_in_silver"))
    found.sort(key=lambda f: f[0])
    listed = []
    for _text, value, difference in found[:max_keys]:
        values = value if len(key) > 1 else (value,)
        listed.append({**dict(zip(key, values, strict=True)), "difference": difference})
    out.update(counts)
    out["equal"] = equal
    out["diff_count"] = sum(counts.values())
    out["differing_keys"] = listed
    return out
