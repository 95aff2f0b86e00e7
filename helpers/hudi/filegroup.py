"""The per-file-group write: one pure, picklable function shared by Spark tasks and local writes.

:func:`write_file_group` receives a :class:`FileGroupTask` (planned by the driver) and the rows
routed to that file group, writes exactly one data file (a base file or a log file), and returns
its :class:`~helpers.hudi.timeline.WriteStat`. Before writing it drops a Java-style marker file
(``.hoodie/.temp/<instant>/<partition>/<file>.marker.<IOType>``) so an interrupted commit can be
rolled back precisely. File names are fixed by the plan, so a retried task attempt replaces the
same file (no second file with the same file id and instant, which would break every read).

Input row columns: the table's data columns, ``_hoodie_record_key``, ``_hoodie_partition_path``
and ``_hudi_op`` (int8: 0 insert, 1 update, 2 delete).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from helpers.hudi.basefile import HudiBloomFilter, bloom_filter_count, read_bloom_filter, write_base_file
from helpers.hudi.format import (
    META_COLUMNS,
    PARTITION_PATH_COL,
    RECORD_KEY_COL,
    base_file_name,
    log_file_name,
)
from helpers.hudi.logfile import avro_data_block, delete_block
from helpers.hudi.timeline import WriteStat

__all__ = [
    "OP_COL",
    "OP_INSERT",
    "OP_UPDATE",
    "OP_DELETE",
    "FileGroupTask",
    "OldBaseFile",
    "read_old_base_file",
    "write_file_group",
    "conform",
    "marker_path",
]

OP_COL = "_hudi_op"
OP_INSERT = 0
OP_UPDATE = 1
OP_DELETE = 2
_DICTIONARY_META = [META_COLUMNS[0], META_COLUMNS[3]]  # commit time, partition path
_MAX_STALE_RATIO = 1.25  # rebuild a merged file's bloom filter beyond 25% keys no longer in it


@dataclass(frozen=True)
class FileGroupTask:
    """What to write for one file group in one commit (planned on the driver)."""

    kind: str  # "create" (new base file), "merge" (CoW rewrite), "append" (MoR log file)
    base_path: str
    partition_path: str
    file_id: str
    instant: str
    write_token: str
    task_index: int
    table_schema: pa.Schema
    avro_schema: dict[str, Any]
    prev_base_file: str | None = None
    prev_commit: str = "null"
    base_instant: str | None = None
    log_version: int = 1
    compression: str = "snappy"
    bloom_filter: bool = True

    @property
    def file_name(self) -> str:
        """Name of the data file this task writes."""
        if self.kind == "append":
            assert self.base_instant is not None
            return log_file_name(self.file_id, self.base_instant, self.log_version, self.write_token)
        return base_file_name(self.file_id, self.write_token, self.instant)

    @property
    def rel_path(self) -> str:
        """Path of the written file relative to the base path."""
        return f"{self.partition_path}/{self.file_name}" if self.partition_path else self.file_name


def marker_path(base_path: str, instant: str, rel_path: str, io_type: str) -> str:
    """Java-style marker file path for a data file.

    Args:
        base_path: table base path.
        instant: the writing instant.
        rel_path: data file path relative to the base path.
        io_type: ``CREATE``, ``MERGE`` or ``APPEND``.

    Returns:
        Absolute marker path.
    """
    return os.path.join(base_path, ".hoodie", ".temp", instant, f"{rel_path}.marker.{io_type}")


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select/cast ``table`` to ``schema``; missing columns become nulls.

    Args:
        table: data.
        schema: wanted schema.

    Returns:
        The conformed table.
    """
    columns = []
    for fld in schema:
        if fld.name in table.column_names:
            col = table.column(fld.name)
            columns.append(col if col.type == fld.type else col.cast(fld.type))
        else:
            columns.append(pa.nulls(table.num_rows, fld.type))
    return pa.Table.from_arrays(columns, schema=schema)


_STRING_DICT = pa.dictionary(pa.int32(), pa.string())
#: Arrow types of the meta columns as handed to the Parquet writer: the repetitive ones (commit
#: time, partition path, file name) as dictionaries, which the writer encodes without hashing
#: every string (a fifth of the write time); the file schema is plain strings either way.
META_WRITE_TYPES = (_STRING_DICT, pa.string(), pa.string(), _STRING_DICT, _STRING_DICT)


def _constant(value: str, n: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


def _meta_columns(task: FileGroupTask, rows: pa.Table, file_name_value: str) -> list[pa.Array]:
    n = rows.num_rows
    seq = pa.array(np.arange(n, dtype=np.int64)).cast(pa.string())
    return [
        _constant(task.instant, n),
        pc.binary_join_element_wise(f"{task.instant}_{task.task_index}_", seq, ""),
        rows.column(RECORD_KEY_COL).combine_chunks().cast(pa.string()),
        rows.column(PARTITION_PATH_COL).combine_chunks().cast(pa.string()).dictionary_encode(),
        _constant(file_name_value, n),
    ]


def _with_meta(task: FileGroupTask, rows: pa.Table, file_name_value: str) -> pa.Table:
    data = conform(rows, task.table_schema)
    meta = _meta_columns(task, rows, file_name_value)
    fields = [pa.field(m, t) for m, t in zip(META_COLUMNS, META_WRITE_TYPES, strict=True)]
    return pa.Table.from_arrays(meta + list(data.columns), schema=pa.schema(fields + list(task.table_schema)))


@dataclass(frozen=True)
class OldBaseFile:
    """A base file about to be merged, read once: its rows (without ``_hoodie_file_name``, which
    the merge replaces; commit time and partition path as dictionaries) and its footer."""

    rows: pa.Table
    footer: dict[bytes, bytes]


def read_old_base_file(path: str) -> OldBaseFile:
    """Read a base file for a merge (see :class:`OldBaseFile`).

    Args:
        path: absolute path of the base file.

    Returns:
        Its rows and footer key-value metadata.
    """
    handle = pq.ParquetFile(path, read_dictionary=_DICTIONARY_META)
    rows = handle.read(columns=[c for c in handle.schema_arrow.names if c != META_COLUMNS[4]])
    return OldBaseFile(rows.replace_schema_metadata(None), dict(handle.metadata.metadata or {}))


def _extended_bloom(
    footer: dict[bytes, bytes], upserts: pa.Table, upsert_present: np.ndarray, out_rows: int
) -> bool | HudiBloomFilter | bytes:
    """The old base file's bloom filter plus the keys this merge inserts, or ``True`` (build anew)
    when the old filter is missing, not DYNAMIC_V0, or would hold more than 25% stale keys."""
    encoded = footer.get(b"org.apache.hudi.bloomfilter")
    if encoded is None or footer.get(b"hoodie_bloom_filter_type_code", b"DYNAMIC_V0") != b"DYNAMIC_V0":
        return True
    inserted = upserts.column(RECORD_KEY_COL).combine_chunks().filter(pa.array(~upsert_present))
    count = bloom_filter_count(encoded)
    if count is None or count + len(inserted) > _MAX_STALE_RATIO * out_rows:
        return True
    if not len(inserted):
        return encoded  # same keys (or fewer): the old filter, bytes unchanged
    bloom = read_bloom_filter(footer)
    if bloom is None:
        return True
    bloom.add(inserted)
    return bloom


def _touch_marker(task: FileGroupTask, io_type: str) -> None:
    path = marker_path(task.base_path, task.instant, task.rel_path, io_type)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb"):
        pass


def write_file_group(task: FileGroupTask, rows: pa.Table, loaded: OldBaseFile | None = None) -> WriteStat:
    """Write the one data file of a planned file-group task.

    Args:
        task: the plan for this file group.
        rows: rows routed to the group (data columns, key, partition path, ``_hudi_op``).
        loaded: the merge's old base file when the caller has already read it.

    Returns:
        Truthful write statistics of the written file.
    """
    started = time.monotonic()
    directory = os.path.join(task.base_path, task.partition_path) if task.partition_path else task.base_path
    os.makedirs(directory, exist_ok=True)
    ops = (
        rows.column(OP_COL).combine_chunks().to_numpy(zero_copy_only=False)
        if rows.num_rows
        else np.zeros(0, np.int8)
    )
    n_insert = int((ops == OP_INSERT).sum())
    n_update = int((ops == OP_UPDATE).sum())
    n_delete = int((ops == OP_DELETE).sum())
    upserts = rows.filter(pa.array(ops != OP_DELETE)) if n_delete else rows
    path = os.path.join(directory, task.file_name)
    stat = WriteStat(
        fileId=task.file_id,
        path=task.rel_path,
        partitionPath=task.partition_path,
        prevCommit=task.prev_commit,
    )

    if task.kind == "append":
        _touch_marker(task, "APPEND")
        blocks: list[bytes] = []
        if upserts.num_rows:
            blocks.append(
                avro_data_block(task.instant, task.avro_schema, _with_meta(task, upserts, task.file_id))
            )
        if n_delete:
            deletes = rows.filter(pa.array(ops == OP_DELETE))
            blocks.append(
                delete_block(
                    task.instant,
                    task.avro_schema,
                    deletes.column(RECORD_KEY_COL).to_pylist(),
                    deletes.column(PARTITION_PATH_COL).to_pylist(),
                )
            )
        tmp = path + ".writing"
        with open(tmp, "wb") as handle:
            handle.write(b"".join(blocks))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        size = os.path.getsize(path)
        stat.numWrites = upserts.num_rows
        stat.numInserts, stat.numUpdateWrites, stat.numDeletes = n_insert, n_update, n_delete
        stat.totalWriteBytes = stat.fileSizeInBytes = size
        stat.totalLogBlocks = len(blocks)
        stat.totalLogRecords = rows.num_rows
        stat.logVersion = task.log_version
        stat.baseFile = os.path.basename(task.prev_base_file) if task.prev_base_file else ""
        stat.logFiles = [task.file_name]
        stat.upsertTimeMs = int((time.monotonic() - started) * 1000)
        return stat

    new_rows = _with_meta(task, upserts, task.file_name)
    bloom: bool | HudiBloomFilter | bytes = task.bloom_filter
    if task.kind == "merge":
        _touch_marker(task, "MERGE")
        assert task.prev_base_file is not None
        # The old file's name column is replaced, so it is not read; the repetitive meta columns
        # are read as dictionaries (half the decoding work) and written back as strings.
        if loaded is None:
            loaded = read_old_base_file(os.path.join(task.base_path, task.prev_base_file))
        old = loaded.rows
        old_keys = old.column(RECORD_KEY_COL).combine_chunks()
        touched = rows.column(RECORD_KEY_COL).combine_chunks()
        keep = pc.invert(pc.is_in(old_keys, value_set=touched))
        kept = old.filter(keep)
        # The driver tagged updates and deletes from this file's keys, inserts from their absence:
        # the file must agree, or the index was stale and the commit must not complete.
        present = ops != OP_INSERT
        if old.num_rows - kept.num_rows != int(present.sum()):
            raise RuntimeError(
                f"Failed to merge file group {task.file_id} at {task.instant}: "
                f"{int(present.sum())} rows were tagged as stored in {task.prev_base_file}, "
                f"{old.num_rows - kept.num_rows} of them are"
            )
        kept_data = conform(kept, task.table_schema)
        kept_meta = [kept.column(c) for c in META_COLUMNS[:4]] + [_constant(task.file_name, kept.num_rows)]
        kept_full = pa.Table.from_arrays(
            [c.cast(t) for c, t in zip(kept_meta, META_WRITE_TYPES, strict=True)] + list(kept_data.columns),
            schema=new_rows.schema,
        )
        out = pa.concat_tables([kept_full, new_rows])
        if task.bloom_filter:
            bloom = _extended_bloom(loaded.footer, upserts, present[ops != OP_DELETE], out.num_rows)
        io_stat_time = "upsert"
    else:
        _touch_marker(task, "CREATE")
        out = new_rows
        io_stat_time = "create"
    size = write_base_file(path, out, task.avro_schema, compression=task.compression, bloom_filter=bloom)
    stat.numWrites = out.num_rows
    stat.numInserts, stat.numUpdateWrites, stat.numDeletes = n_insert, n_update, n_delete
    stat.totalWriteBytes = stat.fileSizeInBytes = size
    elapsed = int((time.monotonic() - started) * 1000)
    if io_stat_time == "upsert":
        stat.upsertTimeMs = elapsed
    else:
        stat.createTimeMs = elapsed
    return stat
