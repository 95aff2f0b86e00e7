"""Row digests for reconciliation: whole tables compared by count and an order-independent checksum.

One canonical text per value type makes driver values and Silver's Arrow values agree exactly and
keeps the comparison in vectorised Arrow code; the rows whose keys differ are then described by
:func:`helpers.checks.compare.compare_rows`. The canonical forms: ``docs/architecture.md`` (Checks).
"""

from __future__ import annotations

import decimal
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from helpers.errors import ReconcileError

__all__ = [
    "BUCKETS",
    "BucketDigests",
    "TableSide",
    "bucket_digests",
    "canonical_column",
    "canonical_records",
    "compare_sides",
    "key_buckets",
    "row_digests",
    "rows_to_arrow",
    "side_from_arrow",
    "side_from_rows",
    "spark_bucket_digests",
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


#: How many buckets a whole-table comparison splits the keys into (:func:`bucket_digests`).
BUCKETS = 1024
_MOD = 2**64


@dataclass(frozen=True)
class BucketDigests:
    """A table reduced to, per key bucket, its row count and two order-independent sums (modulo
    2**64) of its rows' digests: two sides are equal when every bucket is."""

    buckets: dict[int, tuple[int, int, int]]

    @property
    def rows(self) -> int:
        """Rows in all."""
        return sum(b[0] for b in self.buckets.values())

    def merged(self, other: BucketDigests) -> BucketDigests:
        """Both tables' rows together."""
        out = dict(self.buckets)
        for bucket, (n, a, b) in other.buckets.items():
            m, c, d = out.get(bucket, (0, 0, 0))
            out[bucket] = (m + n, (c + a) % _MOD, (d + b) % _MOD)
        return BucketDigests(out)

    def differing(self, other: BucketDigests) -> list[int]:
        """The buckets whose counts or sums differ, in order."""
        every = set(self.buckets) | set(other.buckets)
        return sorted(b for b in every if self.buckets.get(b, (0, 0, 0)) != other.buckets.get(b, (0, 0, 0)))


def key_buckets(table: pa.Table, key: Sequence[str], buckets: int = BUCKETS) -> np.ndarray:
    """The bucket of each row: the first four bytes of the SHA-256 of its key's canonical text,
    modulo ``buckets`` (the same for a key whatever the type its side holds it in)."""
    text = _canonical_rows(table, key, frozenset()).to_pylist()
    blob = b"".join(hashlib.sha256(s.encode("utf-8")).digest()[:4] for s in text)
    return (np.frombuffer(blob, dtype=">u4").astype(np.uint64) % buckets).astype(np.int64)


def bucket_digests(
    table: pa.Table,
    columns: Sequence[str],
    key: Sequence[str],
    json_columns: frozenset[str] = frozenset(),
    buckets: int = BUCKETS,
) -> BucketDigests:
    """:class:`BucketDigests` of an Arrow table (a column missing from it counts as null): the
    row digests of :func:`row_digests` summed per :func:`key_buckets` bucket."""
    if not table.num_rows:
        return BucketDigests({})
    for name in columns:
        if name not in table.column_names:
            table = table.append_column(name, pa.array([None] * table.num_rows, pa.string()))
    words = (
        np.ascontiguousarray(row_digests(table, columns, json_columns)[:, :16]).view(">u8").astype(np.uint64)
    )
    where = key_buckets(table, key, buckets)
    order = np.argsort(where, kind="stable")
    sorted_buckets = where[order]
    starts = np.flatnonzero(np.r_[True, sorted_buckets[1:] != sorted_buckets[:-1]])
    counts = np.diff(np.r_[starts, len(order)])
    with np.errstate(over="ignore"):
        first = np.add.reduceat(words[order, 0], starts)
        second = np.add.reduceat(words[order, 1], starts)
    return BucketDigests(
        {
            int(sorted_buckets[s]): (int(n), int(a), int(b))
            for s, n, a, b in zip(starts, counts, first, second, strict=True)
        }
    )


def spark_bucket_digests(
    frame: Any,
    columns: Sequence[str],
    key: Sequence[str],
    json_columns: frozenset[str] = frozenset(),
    buckets: int = BUCKETS,
) -> BucketDigests:
    """:func:`bucket_digests` of a Spark DataFrame, computed by the executors with the same Arrow
    code (``mapInArrow``) and summed per bucket by Spark; only the buckets reach the driver."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, IntegerType, LongType, StructField, StructType

    present = [c for c in dict.fromkeys((*key, *columns)) if c in frame.columns]
    names = list(columns)
    schema = StructType(
        [
            StructField("bucket", IntegerType()),
            StructField("n", LongType()),
            StructField("a", DecimalType(38, 0)),
            StructField("b", DecimalType(38, 0)),
        ]
    )
    out_schema = pa.schema(
        [("bucket", pa.int32()), ("n", pa.int64()), ("a", pa.decimal128(38, 0)), ("b", pa.decimal128(38, 0))]
    )

    def digest(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        for batch in batches:
            found = bucket_digests(pa.Table.from_batches([batch]), names, key, json_columns, buckets)
            rows = sorted(found.buckets.items())
            yield pa.RecordBatch.from_pydict(
                {
                    "bucket": [r[0] for r in rows],
                    "n": [r[1][0] for r in rows],
                    "a": [decimal.Decimal(r[1][1]) for r in rows],
                    "b": [decimal.Decimal(r[1][2]) for r in rows],
                },
                schema=out_schema,
            )

    sums = (
        frame.select(*present)
        .mapInArrow(digest, schema)
        .groupBy("bucket")
        .agg(F.sum("n").alias("n"), F.sum("a").alias("a"), F.sum("b").alias("b"))
        .collect()
    )
    return BucketDigests(
        {int(r["bucket"]): (int(r["n"]), int(r["a"]) % _MOD, int(r["b"]) % _MOD) for r in sums}
    )
