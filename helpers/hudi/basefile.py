"""Base files: Parquet with the five meta columns first and Hudi's footer keys.

Footer keys written (format notes C.3): ``parquet.avro.schema`` and ``writer.model.name=avro``,
``hoodie_min_record_key`` / ``hoodie_max_record_key``, and - unless disabled - the
``org.apache.hudi.bloomfilter`` with ``hoodie_bloom_filter_type_code=DYNAMIC_V0``.

The bloom filter is implemented here because no Python library produces Hudi's serialized
``HoodieDynamicBoundedBloomFilter`` (a Hadoop ``DynamicBloomFilter`` of Hadoop ``BloomFilter``
rows with Hadoop's MurmurHash). Layout (big-endian ``DataOutput``): Filter header (int -1
version, int hash count, byte hash type 1 = murmur, int vector size), int entries per row,
int records in the current row, int row count, then per row the Filter header again and the bit
vector as bytes, bit ``i`` in byte ``i // 8`` with mask ``1 << (i % 8)``. Sizing is Hudi's
default: 60,000 entries per row at false-positive rate 1e-9 (2,587,966 bits, 30 hashes), at most
100,000 entries before rows are reused round-robin. The hash chain is Hadoop's: ``h_0 = 0``,
``h_{i+1} = murmur2(key_utf8, seed=h_i)``, bit = ``abs(h % vector_size)`` (Java int semantics); the
1-3 tail bytes are mixed in as Hadoop does (``data[len-3] << 16 ^ data[len-2] << 8 ^ data[len-1]``).
Unit tests rebuild the filters of the Spark-written fixture files bit for bit.
"""

from __future__ import annotations

import base64
import json
import math
import os
import struct
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from helpers.hudi.format import META_COLUMNS, RECORD_KEY_COL

__all__ = [
    "BloomFilterSpec",
    "DEFAULT_BLOOM",
    "murmur_hash_chain",
    "bloom_filter_bytes",
    "HudiBloomFilter",
    "read_bloom_filter",
    "bloom_filter_count",
    "write_base_file",
    "dictionary_columns",
    "read_base_file",
]

BLOOM_ENTRIES = 60_000
BLOOM_FPP = 1e-9
BLOOM_MAX_ENTRIES = 100_000


class BloomFilterSpec:
    """Bit vector size and hash count for ``entries`` at false-positive rate ``fpp`` (Hudi sizing)."""

    def __init__(
        self, entries: int = BLOOM_ENTRIES, fpp: float = BLOOM_FPP, max_entries: int = BLOOM_MAX_ENTRIES
    ):
        self.entries = entries
        self.max_entries = max_entries
        self.vector_size = int(math.ceil(entries * (-math.log(fpp) / (math.log(2) ** 2))))
        self.num_hashes = int(math.ceil(math.log(2) * self.vector_size / entries))


DEFAULT_BLOOM = BloomFilterSpec()
_M = np.uint32(0x5BD1E995)


def _murmur2(
    blocks: npt.NDArray[np.uint32], tail: npt.NDArray[np.uint32], length: int, seeds: npt.NDArray[np.uint32]
) -> npt.NDArray[np.uint32]:
    """Hadoop MurmurHash (MurmurHash2, 32 bit) of equal-length keys, vectorised over rows."""
    with np.errstate(over="ignore"):
        h = seeds ^ np.uint32(length)
        for j in range(blocks.shape[1]):
            k = blocks[:, j] * _M
            k ^= k >> np.uint32(24)
            k *= _M
            h = h * _M
            h ^= k
        if tail.shape[1]:
            left = tail.shape[1]
            for j in range(left):  # Hadoop indexes the tail from the end: data[len-1-..]
                h ^= tail[:, j] << np.uint32(8 * (left - 1 - j))
            h = h * _M
        h ^= h >> np.uint32(13)
        h = h * _M
        h ^= h >> np.uint32(15)
    return h


def murmur_hash_chain(
    keys: pa.Array | pa.ChunkedArray, spec: BloomFilterSpec = DEFAULT_BLOOM
) -> npt.NDArray[np.int64]:
    """Bit positions of every key: array of shape (len(keys), num_hashes).

    Args:
        keys: record keys (strings).
        spec: filter sizing.

    Returns:
        int64 positions in ``[0, vector_size)``.
    """
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    arr = arr.cast(pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    out = np.empty((len(arr), spec.num_hashes), dtype=np.int64)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        length = int(length)
        starts = offsets[rows]
        mat = (
            data[starts[:, None] + np.arange(length)[None, :]]
            if length
            else np.zeros((len(rows), 0), np.uint8)
        )
        n4 = length // 4
        blocks = mat[:, : n4 * 4].copy().view("<u4").reshape(len(rows), n4).astype(np.uint32)
        # Java sign-extends the tail bytes (byte -> int) before shifting.
        tail = mat[:, n4 * 4 :].view(np.int8).astype(np.int32).view(np.uint32)
        seeds = np.zeros(len(rows), dtype=np.uint32)
        for i in range(spec.num_hashes):
            seeds = _murmur2(blocks, tail, length, seeds)
            out[rows, i] = np.abs(seeds.view(np.int32).astype(np.int64)) % spec.vector_size
    return out


def _row_of(indexes: npt.NDArray[np.int64], per_row: int, grow_rows: int) -> npt.NDArray[np.int64]:
    """Filter row a key goes to, from its 0-based insertion index (Java's growth, then round robin)."""
    full = grow_rows * per_row
    growing = np.minimum(indexes // per_row, grow_rows - 1)
    return np.where(indexes < full, growing, (indexes - full) % grow_rows)


class HudiBloomFilter:
    """A DYNAMIC_V0 bloom filter that can be parsed, extended with more keys and serialized.

    Building a filter from scratch hashes every key 30 times (Hudi's default sizing), which is
    the dearest part of rewriting a Copy-on-Write file. A rewritten file holds the keys of the old
    one plus the inserted keys (minus deletes), so the merge path extends the old file's filter
    with the inserted keys only. Keys deleted since stay in the filter as false positives, which a
    bloom filter allows (the Java bloom index then checks that file's keys, and finds nothing);
    :meth:`count` lets the caller rebuild when too many stale keys accumulate.
    """

    def __init__(self, spec: BloomFilterSpec, rows: list[npt.NDArray[np.uint8]], count: int):
        self.spec = spec
        self.rows = rows  # packed bit vectors, little bit order
        self.count = count  # keys added so far (stale ones included)

    @classmethod
    def empty(cls, spec: BloomFilterSpec = DEFAULT_BLOOM) -> HudiBloomFilter:
        """A filter with no keys."""
        return cls(spec, [np.zeros((spec.vector_size + 7) // 8, np.uint8)], 0)

    @classmethod
    def from_bytes(cls, data: bytes) -> HudiBloomFilter:
        """Parse Java's serialized DYNAMIC_V0 filter (the Base64-decoded footer value).

        Raises:
            ValueError: when the bytes are not a DYNAMIC_V0 filter with murmur hashing.
        """
        version, num_hashes, hash_type, vector_size = struct.unpack_from(">iibi", data, 0)
        if version != -1 or hash_type != 1:
            raise ValueError(
                f"not a murmur DYNAMIC_V0 bloom filter (version {version}, hash type {hash_type})"
            )
        per_row, current, nrows = struct.unpack_from(">iii", data, 13)
        nbytes = (vector_size + 7) // 8
        spec = BloomFilterSpec.__new__(BloomFilterSpec)
        spec.entries, spec.max_entries = per_row, DEFAULT_BLOOM.max_entries
        spec.vector_size, spec.num_hashes = vector_size, num_hashes
        offset, rows = 25, []
        for _ in range(nrows):
            if struct.unpack_from(">iibi", data, offset) != (version, num_hashes, hash_type, vector_size):
                raise ValueError("bloom filter rows disagree with the filter header")
            offset += 13
            rows.append(np.frombuffer(data, np.uint8, nbytes, offset).copy())
            offset += nbytes
        if offset != len(data) or nrows < 1:
            raise ValueError(f"bloom filter has {len(data)} bytes, its header describes {offset}")
        return cls(spec, rows, (nrows - 1) * per_row + current)

    def add(self, keys: pa.Array | pa.ChunkedArray) -> None:
        """Add keys in order, as Java's ``InternalDynamicBloomFilter.add`` would."""
        n = len(keys)
        if not n:
            return
        spec = self.spec
        grow_rows = max(1, math.ceil(spec.max_entries / spec.entries))
        positions = murmur_hash_chain(keys, spec)
        row_of = _row_of(np.arange(self.count, self.count + n, dtype=np.int64), spec.entries, grow_rows)
        nbytes = (spec.vector_size + 7) // 8
        for row in np.unique(row_of):
            while len(self.rows) <= row:
                self.rows.append(np.zeros(nbytes, np.uint8))
            bits = np.unpackbits(self.rows[row], bitorder="little")
            bits[positions[row_of == row].ravel()] = 1
            self.rows[row] = np.packbits(bits, bitorder="little")
        self.count += n

    def might_contain(self, keys: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
        """Per key: ``True`` when some row of the filter has all its bits (no false negatives)."""
        if not len(keys):
            return np.zeros(0, dtype=bool)
        positions = murmur_hash_chain(keys, self.spec)
        found = np.zeros(len(keys), dtype=bool)
        for row in self.rows:
            bits = np.unpackbits(row, bitorder="little").astype(bool)
            found |= bits[positions].all(axis=1)
        return found

    def to_bytes(self) -> bytes:
        """Serialized filter (what Java's ``write`` produces, before Base64)."""
        spec = self.spec
        header = struct.pack(">iibi", -1, spec.num_hashes, 1, spec.vector_size)
        current = self.count - (len(self.rows) - 1) * spec.entries
        parts = [header, struct.pack(">iii", spec.entries, max(current, 0), len(self.rows))]
        for row in self.rows:
            parts.append(header)
            parts.append(row.tobytes())
        return b"".join(parts)


def bloom_filter_bytes(keys: pa.Array | pa.ChunkedArray, spec: BloomFilterSpec = DEFAULT_BLOOM) -> bytes:
    """Serialized DYNAMIC_V0 bloom filter of ``keys`` (added in the given order).

    Args:
        keys: record keys in write order.
        spec: filter sizing.

    Returns:
        The bytes Java's ``InternalDynamicBloomFilter.write`` produces (before Base64).
    """
    bloom = HudiBloomFilter.empty(spec)
    bloom.add(keys)
    return bloom.to_bytes()


def bloom_filter_count(encoded: bytes) -> int | None:
    """Keys added to a footer's DYNAMIC_V0 filter, from its header alone (no full decode).

    Args:
        encoded: the Base64 footer value.

    Returns:
        The count, or ``None`` when the header is not a murmur DYNAMIC_V0 one.
    """
    try:
        head = base64.b64decode(encoded[:36])  # 27 bytes: filter header + row header
        version, _, hash_type, _ = struct.unpack_from(">iibi", head, 0)
        per_row, current, nrows = struct.unpack_from(">iii", head, 13)
    except (ValueError, struct.error):
        return None
    if version != -1 or hash_type != 1 or nrows < 1:
        return None
    return int((nrows - 1) * per_row + current)


def read_bloom_filter(footer: dict[bytes, bytes] | None) -> HudiBloomFilter | None:
    """The DYNAMIC_V0 filter of a base file's footer metadata, or ``None`` when absent/other type.

    Args:
        footer: the Parquet key-value metadata of a base file.

    Returns:
        The parsed filter, or ``None``.
    """
    footer = footer or {}
    raw = footer.get(b"org.apache.hudi.bloomfilter")
    if raw is None or footer.get(b"hoodie_bloom_filter_type_code", b"DYNAMIC_V0") != b"DYNAMIC_V0":
        return None
    try:
        return HudiBloomFilter.from_bytes(base64.b64decode(raw))
    except (ValueError, struct.error):
        return None


_DICTIONARY_SAMPLE = 4096
_DICTIONARY_MAX_RATIO = 0.2
_ALWAYS_DICTIONARY = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name")


def dictionary_columns(table: pa.Table) -> list[str]:
    """Columns worth dictionary encoding: the repetitive meta columns and every data column whose
    first rows hold few distinct values (at most 20% of a 4,096-row sample).

    Args:
        table: the rows about to be written.

    Returns:
        Column names for ``ParquetWriter(use_dictionary=...)``.
    """
    chosen = [c for c in _ALWAYS_DICTIONARY if c in table.column_names]
    sample = table.slice(0, _DICTIONARY_SAMPLE)
    for name in table.column_names:
        if name in META_COLUMNS:
            continue
        column = sample.column(name)
        if pa.types.is_nested(column.type) or not len(column):
            continue
        if pc.count_distinct(column).as_py() <= _DICTIONARY_MAX_RATIO * len(column):
            chosen.append(name)
    return chosen


def write_base_file(
    path: str,
    table: pa.Table,
    avro_schema_with_meta: dict[str, Any],
    *,
    compression: str = "snappy",
    bloom_filter: bool | HudiBloomFilter | bytes = True,
) -> int:
    """Write one base file and fsync it.

    Dictionary encoding is chosen per column (:func:`dictionary_columns`): Arrow's writer would
    otherwise try it on every column and fall back on the unique ones (record keys, sequence
    numbers, timestamps), which costs about 40% of the write for no gain.

    Args:
        path: destination (directory must exist).
        table: rows with the five meta columns first, then the data columns.
        avro_schema_with_meta: table Avro schema including meta fields (``parquet.avro.schema``).
        compression: Parquet codec.
        bloom_filter: add Hudi's bloom filter of the keys to the footer (``True``), or write this
            already-filled filter (the merge path extends the old file's filter), or this
            Base64 footer value unchanged (a merge that inserts no key), or none (``False``).

    Returns:
        Size of the written file in bytes.
    """
    assert tuple(table.column_names[:5]) == META_COLUMNS, table.column_names[:5]
    keys = table.column(RECORD_KEY_COL)
    metadata: dict[bytes, bytes] = {
        b"parquet.avro.schema": json.dumps(avro_schema_with_meta, separators=(",", ":")).encode(),
        b"writer.model.name": b"avro",
    }
    if table.num_rows:
        min_max = pc.min_max(keys)
        metadata[b"hoodie_min_record_key"] = min_max["min"].as_py().encode()
        metadata[b"hoodie_max_record_key"] = min_max["max"].as_py().encode()
    if bloom_filter is not False:
        if isinstance(bloom_filter, bytes):
            encoded = bloom_filter
        elif isinstance(bloom_filter, HudiBloomFilter):
            encoded = base64.b64encode(bloom_filter.to_bytes())
        else:
            encoded = base64.b64encode(bloom_filter_bytes(keys))
        metadata[b"org.apache.hudi.bloomfilter"] = encoded
        metadata[b"hoodie_bloom_filter_type_code"] = b"DYNAMIC_V0"
    table = table.replace_schema_metadata(None)
    tmp = path + ".writing"
    # store_schema=False (no ARROW:schema, as Java writes) also drops the schema's metadata, so
    # the footer keys are added to the writer explicitly.
    with pq.ParquetWriter(
        tmp,
        table.schema,
        compression=compression,
        store_schema=False,
        write_statistics=True,
        use_dictionary=dictionary_columns(table),
    ) as writer:
        writer.write_table(table, row_group_size=1_000_000)
        writer.add_key_value_metadata(metadata)
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return os.path.getsize(path)


def read_base_file(path: str, columns: list[str] | None = None) -> pa.Table:
    """Read one base file without Hive-partition discovery from its directory name.

    Args:
        path: base file path.
        columns: optional projection.

    Returns:
        The rows (schema metadata dropped).
    """
    table = pq.ParquetFile(path).read(columns=columns)
    return table.replace_schema_metadata(None)
