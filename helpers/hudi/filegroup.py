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

from helpers.hudi.basefile import HudiBloomFilter, read_bloom_filter, write_base_file
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


def _meta_columns(task: FileGroupTask, rows: pa.Table, file_name_value: str) -> list[pa.Array]:
    n = rows.num_rows
    seq = pa.array(np.arange(n, dtype=np.int64)).cast(pa.string())
    return [
        pa.repeat(pa.scalar(task.instant, pa.string()), n),
        pc.binary_join_element_wise(f"{task.instant}_{task.task_index}_", seq, ""),
        rows.column(RECORD_KEY_COL).combine_chunks(),
        rows.column(PARTITION_PATH_COL).combine_chunks(),
        pa.repeat(pa.scalar(file_name_value, pa.string()), n),
    ]


def _with_meta(task: FileGroupTask, rows: pa.Table, file_name_value: str) -> pa.Table:
    data = conform(rows, task.table_schema)
    meta = _meta_columns(task, rows, file_name_value)
    fields = [pa.field(m, pa.string()) for m in META_COLUMNS] + list(task.table_schema)
    return pa.Table.from_arrays(meta + list(data.columns), schema=pa.schema(fields))


def _extended_bloom(
    old_file: pq.ParquetFile, upserts: pa.Table, upsert_present: np.ndarray, out_rows: int
) -> bool | HudiBloomFilter:
    """The old base file's bloom filter plus the keys this merge inserts, or ``True`` (build anew)
    when the old filter is missing, not DYNAMIC_V0, or would hold more than 25% stale keys."""
    bloom = read_bloom_filter(old_file.metadata.metadata)
    if bloom is None:
        return True
    inserted = upserts.column(RECORD_KEY_COL).combine_chunks().filter(pa.array(~upsert_present))
    if bloom.count + len(inserted) > _MAX_STALE_RATIO * out_rows:
        return True
    bloom.add(inserted)
    return bloom


def _touch_marker(task: FileGroupTask, io_type: str) -> None:
    path = marker_path(task.base_path, task.instant, task.rel_path, io_type)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb"):
        pass


def write_file_group(task: FileGroupTask, rows: pa.Table) -> WriteStat:
    """Write the one data file of a planned file-group task.

    Args:
        task: the plan for this file group.
        rows: rows routed to the group (data columns, key, partition path, ``_hudi_op``).

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
    bloom: bool | HudiBloomFilter = task.bloom_filter
    if task.kind == "merge":
        _touch_marker(task, "MERGE")
        assert task.prev_base_file is not None
        # The old file's name column is replaced, so it is not read; the repetitive meta columns
        # are read as dictionaries (half the decoding work) and written back as strings.
        old_file = pq.ParquetFile(
            os.path.join(task.base_path, task.prev_base_file), read_dictionary=_DICTIONARY_META
        )
        old = old_file.read(
            columns=[c for c in old_file.schema_arrow.names if c != META_COLUMNS[4]]
        ).replace_schema_metadata(None)
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
        file_names = pa.repeat(pa.scalar(task.file_name, pa.string()), kept.num_rows)
        kept_meta = [kept.column(c) for c in META_COLUMNS[:4]] + [file_names]
        kept_full = pa.Table.from_arrays(
            [c.cast(pa.string()) for c in kept_meta] + list(kept_data.columns), schema=new_rows.schema
        )
        out = pa.concat_tables([kept_full, new_rows])
        if task.bloom_filter:
            bloom = _extended_bloom(old_file, upserts, present[ops != OP_DELETE], out.num_rows)
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
