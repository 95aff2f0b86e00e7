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
    "write_base_file",
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


def bloom_filter_bytes(keys: pa.Array | pa.ChunkedArray, spec: BloomFilterSpec = DEFAULT_BLOOM) -> bytes:
    """Serialized DYNAMIC_V0 bloom filter of ``keys`` (added in the given order).

    Args:
        keys: record keys in write order.
        spec: filter sizing.

    Returns:
        The bytes Java's ``InternalDynamicBloomFilter.write`` produces (before Base64).
    """
    n = len(keys)
    positions = murmur_hash_chain(keys, spec) if n else np.zeros((0, spec.num_hashes), np.int64)
    per_row = spec.entries
    grow_rows = max(1, math.ceil(spec.max_entries / per_row))
    rows_needed = max(1, min(grow_rows, math.ceil(n / per_row)))
    row_of = np.minimum(np.arange(n) // per_row, rows_needed - 1)
    if n > grow_rows * per_row:
        over = np.arange(n - grow_rows * per_row)
        row_of[grow_rows * per_row :] = over % rows_needed
    filter_header = struct.pack(">iibi", -1, spec.num_hashes, 1, spec.vector_size)
    current = n - (rows_needed - 1) * per_row if n <= grow_rows * per_row else n - (grow_rows - 1) * per_row
    parts = [filter_header, struct.pack(">iii", per_row, max(current, 0), rows_needed)]
    nbytes = (spec.vector_size + 7) // 8
    for row in range(rows_needed):
        bits = np.zeros(nbytes * 8, dtype=np.uint8)
        bits[positions[row_of == row].ravel()] = 1
        parts.append(filter_header)
        parts.append(np.packbits(bits, bitorder="little").tobytes())
    return b"".join(parts)


def write_base_file(
    path: str,
    table: pa.Table,
    avro_schema_with_meta: dict[str, Any],
    *,
    compression: str = "snappy",
    bloom_filter: bool = True,
) -> int:
    """Write one base file and fsync it.

    Args:
        path: destination (directory must exist).
        table: rows with the five meta columns first, then the data columns.
        avro_schema_with_meta: table Avro schema including meta fields (``parquet.avro.schema``).
        compression: Parquet codec.
        bloom_filter: add Hudi's bloom filter to the footer.

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
    if bloom_filter:
        metadata[b"org.apache.hudi.bloomfilter"] = base64.b64encode(bloom_filter_bytes(keys))
        metadata[b"hoodie_bloom_filter_type_code"] = b"DYNAMIC_V0"
    table = table.replace_schema_metadata(metadata)
    tmp = path + ".writing"
    with pq.ParquetWriter(
        tmp, table.schema, compression=compression, store_schema=False, write_statistics=True
    ) as writer:
        writer.write_table(table, row_group_size=1_000_000)
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
