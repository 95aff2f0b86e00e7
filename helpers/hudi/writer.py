"""Local (in-process) Hudi v6 writer: commit protocol, tagging, planning, table services.

Design notes
------------
* **Commit protocol.** One writer per table: an ``fcntl`` lock on ``.hoodie/.pyhudi_writer.lock``
  (the kernel releases it when the holder dies, so a ``kill -9`` never leaves it stuck). Under the
  lock, pending instants (requested/inflight without completed) are rolled back first: files named
  by their markers or carrying their instant are removed and a ``rollback`` instant is recorded
  (Avro plan + metadata, shapes taken from the Spark rollback fixture). Then ``requested`` ->
  ``inflight`` (JSON workload profile) -> data files -> completed file written last by
  temp-file + fsync + ``os.replace``. Readers only see completed instants, so never half a commit.
* **Ordering.** Within a batch the greatest ordering tuple per key wins (ties: the later input row).
  Against the table, an incoming change whose tuple is lower than the stored row's is dropped
  before anything is written (CDC redelivery). Because stale records never reach storage, a later
  write is always the newest state; ``hoodie.table.precombine.field`` records only the first
  ordering field, and the MoR reader's merge (precombine value, then commit seqno) picks the later
  record: its first field is >= the stored one (tuples compare lexicographically) and on equality
  the later commit's seqno is greater. Deletes carry ordering value 0, which readers resolve by
  commit time (format notes E.7).
* **Global index.** The key index (record key -> partition, file group, ordering values) is the
  current snapshot: CoW reads the latest base files' key/ordering columns with pyarrow; MoR reads
  the merged snapshot through the official reader. A key whose partition value changed is
  deleted from its old file group and inserted into the new partition.
* **Inserts.** Go to small file groups of the partition first (CoW: base file below
  ``small_file_limit_bytes``, rewritten with the inserts; MoR: slice below the limit, inserts
  appended to its log), then to new file groups sized by ``target_file_size_bytes`` / the average
  record size of earlier commits (1 KiB when unknown, Hudi's default estimate).
* **MoR.** Updates/deletes of a file group go to a new log file version of its latest slice
  (one log file per delta commit: data block then delete block). Compaction (inline every N delta
  commits or on demand) writes ``compaction.requested`` (Avro plan), ``compaction.inflight``,
  merges each slice through the official reader's file-group reader and completes as ``commit``.
* **Cleaning.** KEEP_LATEST_COMMITS: a slice is deleted only when a newer slice of its group has a
  base instant <= the earliest retained commit, so as-of reads of the last N commits keep working.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from helpers.errors import HudiCommitError, HudiError, HudiLockError
from helpers.hudi.basefile import read_base_file, write_base_file
from helpers.hudi.config import DELETE_MARKER_FIELD, SOFT_DELETE_FIELD, HudiTableConfig, Operation
from helpers.hudi.filegroup import (
    OP_COL,
    OP_DELETE,
    OP_INSERT,
    OP_UPDATE,
    FileGroupTask,
    OldBaseFile,
    conform,
    read_old_base_file,
    write_file_group,
)
from helpers.hudi.format import (
    FILE_NAME_COL,
    META_COLUMNS,
    PARTITION_PATH_COL,
    RECORD_KEY_COL,
    avro_schema_for,
    base_file_name,
    file_id_of,
    format_properties,
    fsync_write,
    new_file_id,
    new_instant_time,
    normalize_data_table,
    parse_base_file_name,
    parse_log_file_name,
    parse_properties,
    partition_metadata_text,
    partition_paths,
    record_keys,
    table_properties,
)
from helpers.hudi.fsview import FileGroup, load_file_groups
from helpers.hudi.logfile import rollback_command_block
from helpers.hudi.timeline import (
    CLEAN_METADATA_SCHEMA,
    CLEANER_PLAN_SCHEMA,
    COMPACTION_PLAN_SCHEMA,
    ROLLBACK_METADATA_SCHEMA,
    ROLLBACK_PLAN_SCHEMA,
    WriteStat,
    avro_container_bytes,
    commit_metadata_json,
    completed_instants,
    delete_instant_files,
    hoodie_dir,
    latest_instant_time,
    pending_instants,
    read_commit_metadata,
    write_instant_file,
)

__all__ = [
    "CommitResult",
    "TableLock",
    "WriteTransaction",
    "write_arrow",
    "compact",
    "clean",
    "rollback_pending",
    "create_table",
    "read_table_properties",
    "prepare_batch",
    "load_key_index",
    "tag_batch",
    "plan_tasks",
    "run_tasks_locally",
    "table_data_schema",
    "resolve_schema",
    "HUDI_FID_COL",
    "ORDER_PREFIX",
]

HUDI_FID_COL = "_hudi_fid"
HUDI_ROW_COL = "_hudi_row"
IS_DELETE_COL = "_hudi_is_delete"
ORDER_PREFIX = "_hudi_stored_"
IDX_PARTITION_COL = "_hudi_stored_partition"
DEFAULT_RECORD_SIZE = 1024
LOCK_FILE = ".pyhudi_writer.lock"


@dataclass(frozen=True)
class CommitResult:
    """Outcome of one write (plus the table services it triggered)."""

    instant: str
    action: str
    operation: str
    num_inserts: int
    num_updates: int
    num_deletes: int
    num_files: int
    stats: tuple[WriteStat, ...] = field(default=(), repr=False)
    rolled_back: tuple[str, ...] = ()
    compaction_instant: str | None = None
    clean_instant: str | None = None
    executed_by: str = "driver"  # "driver" (this process) or "spark" (Spark tasks wrote the files)


# ----------------------------------------------------------------------------------------------
# Lock and transaction
# ----------------------------------------------------------------------------------------------


class TableLock:
    """Exclusive writer lock of a table (``fcntl.flock``; released by the kernel on process death)."""

    def __init__(self, base_path: str, timeout_seconds: float = 60.0):
        self.path = os.path.join(hoodie_dir(base_path), LOCK_FILE)
        self.timeout_seconds = timeout_seconds
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, waiting up to the timeout.

        Raises:
            HudiLockError: when another live writer keeps the lock beyond the timeout.
        """
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = ""
                    with contextlib.suppress(OSError):
                        holder = os.pread(fd, 200, 0).decode(errors="replace")
                    os.close(fd)
                    raise HudiLockError(
                        f"Failed to lock Hudi table {os.path.dirname(os.path.dirname(self.path))}: "
                        f"held by another live writer ({holder.strip() or 'unknown'}) for more than "
                        f"{self.timeout_seconds:.0f}s"
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(
            fd,
            json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode(),
            0,
        )
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> TableLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class WriteTransaction:
    """Driver side of one commit: requested -> inflight -> completed (completed written last)."""

    def __init__(self, config: HudiTableConfig, action: str):
        self.config = config
        self.action = action
        self.instant = new_instant_time(latest_instant_time(config.base_path))
        write_instant_file(config.base_path, self.instant, action, "REQUESTED")

    def mark_inflight(self, partitions: Sequence[str]) -> None:
        """Write the inflight file with a workload profile (readers ignore it).

        Args:
            partitions: partitions the commit will touch.
        """
        profile = {
            "partitionToWriteStats": {
                p: [
                    {
                        "fileId": "",
                        "path": None,
                        "prevCommit": "null",
                        "numWrites": 0,
                        "numDeletes": 0,
                        "numUpdateWrites": 0,
                        "numInserts": 0,
                        "partitionPath": None,
                    }
                ]
                for p in partitions
            },
            "compacted": False,
            "extraMetadata": {},
            "operationType": None,
        }
        write_instant_file(
            self.config.base_path,
            self.instant,
            self.action,
            "INFLIGHT",
            json.dumps(profile, indent=2, separators=(",", " : ")).encode(),
        )

    def complete(self, content: bytes) -> None:
        """Write the completed instant atomically and drop the markers.

        Args:
            content: commit metadata.
        """
        write_instant_file(self.config.base_path, self.instant, self.action, "COMPLETED", content)
        shutil.rmtree(
            os.path.join(hoodie_dir(self.config.base_path), ".temp", self.instant), ignore_errors=True
        )


# ----------------------------------------------------------------------------------------------
# Table creation and schema
# ----------------------------------------------------------------------------------------------


def read_table_properties(base_path: str) -> dict[str, str]:
    """Parse ``.hoodie/hoodie.properties``.

    Args:
        base_path: table base path.

    Returns:
        The properties (empty if the table does not exist).
    """
    path = os.path.join(hoodie_dir(base_path), "hoodie.properties")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="latin-1") as handle:
        return parse_properties(handle.read())


def create_table(config: HudiTableConfig, data_schema: pa.Schema) -> None:
    """Create the ``.hoodie`` layout and ``hoodie.properties`` if the table does not exist.

    Args:
        config: table configuration.
        data_schema: Arrow schema of the data columns (create schema).

    Raises:
        HudiError: when an existing table disagrees with ``config`` (type, keys, partitioning)
            or does not populate meta fields.
    """
    existing = read_table_properties(config.base_path)
    if existing:
        _check_compatible(config, existing)
        return
    base = hoodie_dir(config.base_path)
    for sub in (".aux/.bootstrap/.partitions", ".aux/.bootstrap/.fileids", ".schema", ".temp", "archived"):
        os.makedirs(os.path.join(base, sub), exist_ok=True)
    create_schema = json.dumps(
        avro_schema_for(data_schema, config.table_name, null_first=False), separators=(",", ":")
    )
    props = table_properties(config, create_schema)
    fsync_write(os.path.join(base, "hoodie.properties"), format_properties(props).encode("latin-1"))


def _check_compatible(config: HudiTableConfig, props: dict[str, str]) -> None:
    problems = []
    if props.get("hoodie.table.type", config.table_type) != config.table_type:
        problems.append(f"table type is {props.get('hoodie.table.type')}")
    keys = props.get("hoodie.table.recordkey.fields")
    if keys is not None and tuple(keys.split(",")) != config.record_key_fields:
        problems.append(f"record key fields are {keys}")
    parts = props.get("hoodie.table.partition.fields", "")
    if tuple(p for p in parts.split(",") if p) != config.partition_fields:
        problems.append(f"partition fields are {parts or '(none)'}")
    hive = props.get("hoodie.datasource.write.hive_style_partitioning", "false") == "true"
    if config.partition_fields and hive != config.hive_style_partitioning:
        problems.append(f"hive_style_partitioning is {hive}")
    if props.get("hoodie.populate.meta.fields", "true") == "false":
        problems.append("hoodie.populate.meta.fields=false is not supported by this writer")
    if props.get("hoodie.table.version") != "6":
        problems.append(f"table version is {props.get('hoodie.table.version')}, only 6 is supported")
    if problems:
        raise HudiError(f"Failed to open Hudi table {config.base_path}: " + "; ".join(problems))


def table_data_schema(base_path: str, groups: Sequence[FileGroup] | None = None) -> pa.Schema | None:
    """Arrow schema of the data columns, from the newest base file of the table.

    Args:
        base_path: table base path.
        groups: file groups if already loaded.

    Returns:
        The schema, or None if the table has no base file yet.
    """
    groups = load_file_groups(base_path) if groups is None else groups
    newest: tuple[str, str] | None = None
    for group in groups:
        for sl in group.slices:
            if sl.base_file and (newest is None or sl.base_instant > newest[0]):
                newest = (sl.base_instant, os.path.join(base_path, sl.rel(sl.base_file)))
    if newest is None:
        return None
    import pyarrow.parquet as pq

    schema = pq.read_schema(newest[1])
    return pa.schema([pa.field(f.name, f.type) for f in schema if f.name not in META_COLUMNS])


def resolve_schema(existing: pa.Schema | None, incoming: pa.Schema, config: HudiTableConfig) -> pa.Schema:
    """Table schema after this write: existing columns in order, then new ones (nullable).

    Args:
        existing: current data schema (None for a new table).
        incoming: normalized schema of the batch.
        config: table configuration (soft deletes add ``__deleted``).

    Returns:
        The data schema to write.
    """
    fields = list(existing) if existing is not None else []
    names = {f.name for f in fields}
    for fld in incoming:
        if fld.name in names or fld.name.startswith("_hudi_") or fld.name == DELETE_MARKER_FIELD:
            continue
        if fld.name in META_COLUMNS:
            continue
        fields.append(pa.field(fld.name, fld.type))
        names.add(fld.name)
    if config.delete_mode == "soft" and SOFT_DELETE_FIELD not in names:
        fields.append(pa.field(SOFT_DELETE_FIELD, pa.bool_()))
    return pa.schema(fields)


# ----------------------------------------------------------------------------------------------
# Batch preparation, index and tagging
# ----------------------------------------------------------------------------------------------


def prepare_batch(table: pa.Table, config: HudiTableConfig, operation: Operation) -> pa.Table:
    """Normalize types, add record key / partition path / delete flag, keep one change per key.

    Args:
        table: input rows.
        config: table configuration.
        operation: write operation (``delete`` marks every row as a delete).

    Returns:
        Deduplicated batch with ``_hoodie_record_key``, ``_hoodie_partition_path`` and
        ``_hudi_is_delete`` columns.

    Raises:
        HudiError: on missing key/partition/ordering columns.
    """
    table = table.drop_columns([c for c in table.column_names if c in META_COLUMNS])
    table = normalize_data_table(table)
    missing = [f for f in config.ordering_fields if f not in table.column_names]
    if missing and operation != "delete":
        raise HudiError(f"Failed to prepare Hudi write batch: input lacks ordering field(s) {missing}")
    keys = record_keys(table, config)
    parts = (
        partition_paths(table, config)
        if operation != "delete" or all(f in table.column_names for f in config.partition_fields)
        else pa.chunked_array([pa.nulls(table.num_rows, pa.string())])
    )
    if operation == "delete":
        is_delete = pa.array(np.ones(table.num_rows, dtype=bool))
    elif DELETE_MARKER_FIELD in table.column_names:
        is_delete = pc.fill_null(table.column(DELETE_MARKER_FIELD), False).combine_chunks()
        table = table.drop_columns([DELETE_MARKER_FIELD])
    else:
        is_delete = pa.array(np.zeros(table.num_rows, dtype=bool))
    table = table.append_column(RECORD_KEY_COL, keys).append_column(PARTITION_PATH_COL, parts)
    table = table.append_column(IS_DELETE_COL, is_delete)
    return dedup_batch(table, config)


def dedup_batch(table: pa.Table, config: HudiTableConfig) -> pa.Table:
    """Keep, per record key, the row with the greatest ordering tuple (ties: the later row).

    Args:
        table: batch with ``_hoodie_record_key``.
        config: table configuration.

    Returns:
        One row per key.
    """
    if table.num_rows <= 1:
        return table
    table = table.append_column(HUDI_ROW_COL, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    order = [(RECORD_KEY_COL, "ascending")]
    order += [(f, "descending") for f in config.ordering_fields if f in table.column_names]
    order += [(HUDI_ROW_COL, "descending")]
    idx = pc.sort_indices(table, sort_keys=order, null_placement="at_end")
    sorted_keys = table.column(RECORD_KEY_COL).take(idx).combine_chunks()
    if len(sorted_keys) > 1:
        diff = pc.not_equal(sorted_keys.slice(1), sorted_keys.slice(0, len(sorted_keys) - 1))
        first = pa.concat_arrays([pa.array([True]), diff])
    else:
        first = pa.array([True])
    keep = pc.filter(idx, first)
    if len(keep) == table.num_rows:
        return table.drop_columns([HUDI_ROW_COL])
    return table.take(keep).drop_columns([HUDI_ROW_COL])


#: Copy-on-Write writes in this process read the base files they will rewrite once, before
#: tagging, when those files total at most this many bytes on disk (else keys are read first).
PRELOAD_MAX_BYTES = 512 * 1024 * 1024


def candidate_groups(
    config: HudiTableConfig, groups: Sequence[FileGroup], batch_keys: pa.Array | pa.ChunkedArray
) -> list[FileGroup]:
    """Groups whose latest base file may hold one of ``batch_keys`` (Hudi's bloom index first
    step: the min/max record keys of the footer). Files without usable bounds always qualify.

    Args:
        config: table configuration.
        groups: visible file groups.
        batch_keys: record keys of the batch.

    Returns:
        The groups to look keys up in.
    """
    import pyarrow.parquet as pq

    out = []
    for group in groups:
        sl = group.latest
        if not sl.base_file:
            continue
        footer = pq.read_metadata(os.path.join(config.base_path, sl.rel(sl.base_file))).metadata or {}
        low = footer.get(b"hoodie_min_record_key", b"").decode("utf-8", "replace")
        high = footer.get(b"hoodie_max_record_key", b"").decode("utf-8", "replace")
        # Java orders strings by UTF-16 code units, Arrow by UTF-8 bytes: same for ASCII only.
        if not low or not high or not (low.isascii() and high.isascii()):
            out.append(group)
            continue
        inside = pc.and_(pc.greater_equal(batch_keys, low), pc.less_equal(batch_keys, high))
        if pc.any(inside).as_py():
            out.append(group)
    return out


def preload_base_files(config: HudiTableConfig, groups: Sequence[FileGroup]) -> dict[str, OldBaseFile]:
    """Read the latest base files of ``groups`` in parallel threads, if they total at most
    :data:`PRELOAD_MAX_BYTES` (else nothing is read and ``{}`` returned).

    Args:
        config: table configuration.
        groups: the groups (with base files) a write will look keys up in.

    Returns:
        File id to the read file.
    """
    with_base = [g for g in groups if g.latest.base_file]
    if not with_base or sum(g.latest.base_size for g in with_base) > PRELOAD_MAX_BYTES:
        return {}
    from concurrent.futures import ThreadPoolExecutor

    paths = [os.path.join(config.base_path, g.latest.rel(g.latest.base_file or "")) for g in with_base]
    with ThreadPoolExecutor(max_workers=min(len(paths), os.cpu_count() or 2)) as pool:
        files = list(pool.map(read_old_base_file, paths))
    return {g.file_id: f for g, f in zip(with_base, files, strict=True)}


def fill_soft_deletes(config: HudiTableConfig, batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """Soft-delete mode: a delete given by its key alone keeps the stored row's values.

    Deletes carrying full rows (Debezium with full before-images) keep their own values; columns
    a delete lacks, or holds null, are taken from the row as stored (read through the official
    reader), so the row stays whole with ``__deleted=true``.

    Args:
        config: table configuration.
        batch: output of :func:`prepare_batch`.
        schema: the table's data schema.

    Returns:
        The batch with the delete rows completed.
    """
    if config.delete_mode != "soft" or not batch.num_rows:
        return batch
    is_delete = batch.column(IS_DELETE_COL).combine_chunks()
    if not pc.any(is_delete).as_py():
        return batch
    skip = {SOFT_DELETE_FIELD, *config.record_key_fields}
    need = [
        f.name
        for f in schema
        if f.name not in skip
        and (f.name not in batch.column_names or batch.column(f.name).filter(is_delete).null_count > 0)
    ]
    if not need or not completed_instants(config.base_path):
        return batch
    from helpers.hudi.read import read_snapshot

    stored = read_snapshot(config.base_path, columns=[RECORD_KEY_COL, *need])
    keys = batch.column(RECORD_KEY_COL).combine_chunks()
    stored = stored.filter(pc.is_in(stored.column(RECORD_KEY_COL), value_set=keys.filter(is_delete)))
    position = pc.index_in(keys, value_set=stored.column(RECORD_KEY_COL).combine_chunks())
    for name in need:
        from_store = stored.column(name).combine_chunks().take(position)
        if name in batch.column_names:
            given = batch.column(name).combine_chunks()
            filled = pc.if_else(is_delete, pc.coalesce(given, from_store.cast(given.type)), given)
            batch = batch.set_column(batch.schema.get_field_index(name), name, filled)
        else:
            batch = batch.append_column(
                name, pc.if_else(is_delete, from_store, pa.nulls(len(from_store), from_store.type))
            )
    return batch


def load_key_index(
    config: HudiTableConfig,
    groups: Sequence[FileGroup],
    *,
    loaded: Mapping[str, OldBaseFile] | None = None,
) -> pa.Table:
    """Current record key index: key -> stored partition, file group and ordering values.

    Args:
        config: table configuration.
        groups: visible file groups (or the candidates of :func:`candidate_groups`).
        loaded: base files already read (:func:`preload_base_files`), used instead of reading.

    Returns:
        Table with ``_hoodie_record_key``, ``_hudi_stored_partition``, ``_hudi_fid`` and
        ``_hudi_stored_<ordering field>`` columns.
    """
    wanted = [RECORD_KEY_COL, PARTITION_PATH_COL]
    pieces: list[pa.Table] = []
    if not config.is_mor:
        for group in groups:
            sl = group.latest
            if not sl.base_file:
                continue
            if loaded is not None and group.file_id in loaded:
                rows = loaded[group.file_id].rows
                part = rows.select(
                    [c for c in wanted + list(config.ordering_fields) if c in rows.column_names]
                )
                part = part.set_column(1, PARTITION_PATH_COL, part.column(1).cast(pa.string()))
            else:
                import pyarrow.parquet as pq

                path = os.path.join(config.base_path, sl.rel(sl.base_file))
                names = set(pq.read_schema(path).names)
                cols = wanted + [f for f in config.ordering_fields if f in names]
                part = read_base_file(path, cols)
            part = part.append_column(
                HUDI_FID_COL, pa.repeat(pa.scalar(group.file_id, pa.string()), part.num_rows)
            )
            pieces.append(_index_shape(part, config))
    elif any(g.latest.base_file or g.latest.log_files for g in groups):
        import hudi

        hudi_table = hudi.HudiTableBuilder.from_base_uri(config.base_path).build()
        batches = hudi_table.read()
        if batches:
            snap = pa.Table.from_batches(batches)
            part = snap.select([c for c in wanted + list(config.ordering_fields) if c in snap.column_names])
            part = part.append_column(HUDI_FID_COL, file_id_of(snap.column(FILE_NAME_COL)))
            pieces.append(_index_shape(part, config))
    if not pieces:
        return _index_shape(None, config)
    return pa.concat_tables(pieces, promote_options="permissive")


def _index_shape(part: pa.Table | None, config: HudiTableConfig) -> pa.Table:
    if part is None:
        cols = {
            RECORD_KEY_COL: pa.array([], pa.string()),
            IDX_PARTITION_COL: pa.array([], pa.string()),
            HUDI_FID_COL: pa.array([], pa.string()),
        }
        return pa.table(cols)
    out = {
        RECORD_KEY_COL: part.column(RECORD_KEY_COL),
        IDX_PARTITION_COL: part.column(PARTITION_PATH_COL),
        HUDI_FID_COL: part.column(HUDI_FID_COL),
    }
    for f in config.ordering_fields:
        if f in part.column_names:
            out[ORDER_PREFIX + f] = part.column(f)
    return pa.table(out)


def _tuple_less(new: list[Any], old: list[Any]) -> Any:
    """Vectorised lexicographic ``new < old`` with nulls smallest; null result means equal."""
    result = pa.array(np.zeros(len(new[0]) if new else 0, dtype=bool))
    equal_so_far = pa.array(np.ones(len(new[0]) if new else 0, dtype=bool))
    for a, b in zip(new, old, strict=True):
        a_null, b_null = pc.is_null(a), pc.is_null(b)
        less = pc.fill_null(pc.less(a, b), False)
        less = pc.or_(less, pc.and_(a_null, pc.invert(b_null)))
        eq = pc.fill_null(pc.equal(a, b), False)
        eq = pc.or_(eq, pc.and_(a_null, b_null))
        result = pc.or_(result, pc.and_(equal_so_far, less))
        equal_so_far = pc.and_(equal_so_far, eq)
    return result


def tag_batch(batch: pa.Table, index: pa.Table, config: HudiTableConfig) -> pa.Table:
    """Decide insert / update / delete per row against the index; drop stale and no-op rows.

    A key whose partition changed yields an update-free insert into the new partition plus a
    delete row for its old file group.

    Args:
        batch: output of :func:`prepare_batch`.
        index: output of :func:`load_key_index`.
        config: table configuration.

    Returns:
        Rows with ``_hudi_op`` and ``_hudi_fid`` (null for inserts).
    """
    n = batch.num_rows
    keys_tbl = pa.table(
        {RECORD_KEY_COL: batch.column(RECORD_KEY_COL), HUDI_ROW_COL: pa.array(np.arange(n, dtype=np.int64))}
    )
    if index.num_rows:
        # Acero builds its hash table on the right side: the (small) batch goes there.
        joined = index.join(keys_tbl, keys=RECORD_KEY_COL, join_type="right outer", use_threads=True)
        joined = joined.sort_by(HUDI_ROW_COL)
        if joined.num_rows != n:
            raise HudiError("Failed to tag Hudi write batch: the table holds duplicate record keys")
    else:
        joined = keys_tbl.append_column(IDX_PARTITION_COL, pa.nulls(n, pa.string())).append_column(
            HUDI_FID_COL, pa.nulls(n, pa.string())
        )
    stored_fid = joined.column(HUDI_FID_COL).combine_chunks()
    exists = pc.is_valid(stored_fid)
    stored_part = joined.column(IDX_PARTITION_COL).combine_chunks()
    news, olds = [], []
    for f in config.ordering_fields:
        col = ORDER_PREFIX + f
        if col in joined.column_names and f in batch.column_names:
            news.append(batch.column(f).combine_chunks())
            olds.append(joined.column(col).combine_chunks().cast(batch.column(f).type))
    stale = pc.and_(exists, _tuple_less(news, olds)) if news else pa.array(np.zeros(n, dtype=bool))
    is_delete = batch.column(IS_DELETE_COL).combine_chunks()
    new_part = batch.column(PARTITION_PATH_COL).combine_chunks()
    new_part = pc.if_else(pc.is_null(new_part), stored_part, new_part)
    moved = pc.and_(exists, pc.fill_null(pc.not_equal(new_part, stored_part), False))
    soft = config.delete_mode == "soft"

    ex = exists.to_numpy(zero_copy_only=False)
    st = stale.to_numpy(zero_copy_only=False)
    de = is_delete.to_numpy(zero_copy_only=False)
    mv = moved.to_numpy(zero_copy_only=False)
    # drop stale rows; a delete of a key the table does not hold is dropped in hard mode and kept
    # as a flagged row in soft mode (its ordering values then stop an older change of the key
    # arriving later from bringing the row back)
    placed = pc.is_valid(new_part).to_numpy(zero_copy_only=False)  # key-only deletes have no partition
    keep = ~st & (ex | ~de | (soft & placed))
    if soft:
        op = np.where(ex & ~mv, OP_UPDATE, OP_INSERT).astype(np.int8)
    else:
        op = np.where(de, OP_DELETE, np.where(ex & ~mv, OP_UPDATE, OP_INSERT)).astype(np.int8)
    fid = pc.if_else(pa.array(ex & ~mv), stored_fid, pa.nulls(n, pa.string()))
    if not soft:
        fid = pc.if_else(pa.array(de), stored_fid, fid)

    out = batch.set_column(batch.schema.get_field_index(PARTITION_PATH_COL), PARTITION_PATH_COL, new_part)
    if soft:
        out = (
            out.append_column(SOFT_DELETE_FIELD, is_delete)
            if SOFT_DELETE_FIELD not in out.column_names
            else out
        )
    out = out.append_column(OP_COL, pa.array(op)).append_column(HUDI_FID_COL, fid)
    # moved keys: delete from the old file group (hard) - or the old row disappears either way
    move_rows = ex & mv & ~st
    extra = None
    if move_rows.any():
        mask = pa.array(move_rows)
        extra = out.filter(mask)
        extra = extra.set_column(
            extra.schema.get_field_index(PARTITION_PATH_COL), PARTITION_PATH_COL, stored_part.filter(mask)
        )
        extra = extra.set_column(
            extra.schema.get_field_index(OP_COL),
            OP_COL,
            pa.array(np.full(extra.num_rows, OP_DELETE, np.int8)),
        )
        extra = extra.set_column(
            extra.schema.get_field_index(HUDI_FID_COL), HUDI_FID_COL, stored_fid.filter(mask)
        )
    if not soft:
        keep &= ~(de & mv)  # a delete of a moved key deletes it where it is stored (row above)
        delete_moved = de & mv & ex & ~st
        if delete_moved.any():
            # handled by the delete branch: op=DELETE with stored fid, stored partition
            keep |= delete_moved
            out = out.set_column(
                out.schema.get_field_index(PARTITION_PATH_COL),
                PARTITION_PATH_COL,
                pc.if_else(pa.array(delete_moved), stored_part, out.column(PARTITION_PATH_COL)),
            )
            if extra is not None:
                extra = extra.filter(pa.array(~de[move_rows]))
    out = out.filter(pa.array(keep)).drop_columns([IS_DELETE_COL])
    if extra is not None and extra.num_rows:
        out = pa.concat_tables([out, extra.drop_columns([IS_DELETE_COL])])
    return out


# ----------------------------------------------------------------------------------------------
# Planning
# ----------------------------------------------------------------------------------------------


def _avg_record_size(base_path: str) -> int:
    total_bytes = total_rows = 0
    for inst in reversed(completed_instants(base_path)):
        meta = read_commit_metadata(base_path, inst)
        for stats in (meta.get("partitionToWriteStats") or {}).values():
            for s in stats:
                if str(s.get("path") or "").endswith(".parquet") and s.get("numWrites"):
                    total_bytes += int(s.get("fileSizeInBytes") or 0)
                    total_rows += int(s["numWrites"])
        if total_rows >= 1000:
            break
    if total_rows == 0:
        return DEFAULT_RECORD_SIZE
    return max(16, total_bytes // total_rows)


@dataclass
class InsertBucket:
    """Capacity for inserts in one file group (existing small group or a new one)."""

    partition_path: str
    file_id: str
    capacity: int
    existing: bool


def plan_insert_buckets(
    insert_counts: dict[str, int],
    groups: Sequence[FileGroup],
    config: HudiTableConfig,
    record_size: int,
    allow_small_files: bool = True,
) -> list[InsertBucket]:
    """Where inserts go: small file groups first, then new groups bounded by the target size.

    Args:
        insert_counts: number of inserts per partition path.
        groups: visible file groups.
        config: table configuration.
        record_size: estimated bytes per record.
        allow_small_files: False for bulk insert (new groups only).

    Returns:
        Buckets whose capacities sum to the insert counts; new groups hold at most the target
        size's worth of records, and equal shares of the rest (differing by at most one).
    """
    per_file = max(1, config.target_file_size_bytes // max(1, record_size))
    by_partition: dict[str, list[FileGroup]] = {}
    for g in groups:
        by_partition.setdefault(g.partition_path, []).append(g)
    buckets: list[InsertBucket] = []
    for partition, count in sorted(insert_counts.items()):
        remaining = count
        if allow_small_files:
            for g in by_partition.get(partition, []):
                size = g.latest.total_size if config.is_mor else g.latest.base_size
                if remaining <= 0 or not g.latest.base_file or size >= config.small_file_limit_bytes:
                    continue
                cap = min(remaining, max(0, (config.target_file_size_bytes - size) // max(1, record_size)))
                if cap > 0:
                    buckets.append(InsertBucket(partition, g.file_id, cap, True))
                    remaining -= cap
        # New groups share the rest evenly (as Java's UpsertPartitioner weighs its insert
        # buckets), so the groups are rewritten in parallel at equal cost later on.
        new_groups = -(-remaining // per_file) if remaining > 0 else 0
        for i in range(new_groups):
            cap = remaining // (new_groups - i) + (1 if remaining % (new_groups - i) else 0)
            buckets.append(InsertBucket(partition, new_file_id(), cap, False))
            remaining -= cap
    return buckets


def make_task(
    config: HudiTableConfig,
    group: FileGroup | None,
    partition: str,
    file_id: str,
    instant: str,
    index: int,
    schema: pa.Schema,
    avro_schema: dict[str, Any],
) -> FileGroupTask:
    """Plan the task of one file group.

    Args:
        config: table configuration.
        group: the existing group, or None for a new one.
        partition: partition path.
        file_id: file group id.
        instant: writing instant.
        index: task index (write token and seqno prefix).
        schema: data schema to write.
        avro_schema: Avro schema with meta fields.

    Returns:
        The task.
    """
    token = f"{index}-1-0"
    common: dict[str, Any] = dict(
        base_path=config.base_path,
        partition_path=partition,
        file_id=file_id,
        instant=instant,
        write_token=token,
        task_index=index,
        table_schema=schema,
        avro_schema=avro_schema,
        compression=config.parquet_compression,
        bloom_filter=config.bloom_filter,
    )
    if group is None:
        return FileGroupTask(kind="create", **common)
    sl = group.latest
    prev_base = sl.rel(sl.base_file) if sl.base_file else None
    if config.is_mor:
        return FileGroupTask(
            kind="append",
            prev_base_file=prev_base,
            prev_commit=sl.base_instant,
            base_instant=sl.base_instant,
            log_version=sl.next_log_version,
            **common,
        )
    return FileGroupTask(kind="merge", prev_base_file=prev_base, prev_commit=sl.base_instant, **common)


def plan_tasks(
    tagged: pa.Table,
    config: HudiTableConfig,
    groups: Sequence[FileGroup],
    instant: str,
    schema: pa.Schema,
    *,
    allow_small_files: bool = True,
) -> tuple[list[FileGroupTask], np.ndarray]:
    """Assign every tagged row to a file-group task.

    Args:
        tagged: output of :func:`tag_batch`.
        config: table configuration.
        groups: visible file groups.
        instant: writing instant.
        schema: data schema to write.
        allow_small_files: route inserts to small groups first.

    Returns:
        (tasks, task index of every row).
    """
    avro_schema = avro_schema_for(schema, config.table_name, with_meta=True)
    by_id = {g.file_id: g for g in groups}
    n = tagged.num_rows
    task_of_row = np.full(n, -1, dtype=np.int64)
    tasks: list[FileGroupTask] = []
    task_by_fid: dict[str, int] = {}
    fids = tagged.column(HUDI_FID_COL).combine_chunks()
    if fids.null_count < n:
        enc = pc.dictionary_encode(fids.filter(pc.is_valid(fids)))
        valid_pos = np.nonzero(pc.is_valid(fids).to_numpy(zero_copy_only=False))[0]
        codes = enc.indices.to_numpy(zero_copy_only=False)
        for fid in enc.dictionary.to_pylist():
            group = by_id[fid]
            task_by_fid[fid] = len(tasks)
            tasks.append(
                make_task(config, group, group.partition_path, fid, instant, len(tasks), schema, avro_schema)
            )
        mapping = np.array([task_by_fid[f] for f in enc.dictionary.to_pylist()], dtype=np.int64)
        task_of_row[valid_pos] = mapping[codes]
    insert_pos = np.nonzero(task_of_row < 0)[0]
    if len(insert_pos):
        parts = tagged.column(PARTITION_PATH_COL).combine_chunks().take(pa.array(insert_pos))
        enc = pc.dictionary_encode(parts)
        codes = enc.indices.to_numpy(zero_copy_only=False)
        names = enc.dictionary.to_pylist()
        counts = {names[i]: int(c) for i, c in enumerate(np.bincount(codes, minlength=len(names)))}
        record_size = _avg_record_size(config.base_path)
        buckets = plan_insert_buckets(counts, groups, config, record_size, allow_small_files)
        order = np.argsort(codes, kind="stable")
        sorted_pos = insert_pos[order]
        starts = {
            names[i]: int(s) for i, s in enumerate(np.searchsorted(codes[order], np.arange(len(names))))
        }
        for bucket in buckets:
            if bucket.file_id in task_by_fid:
                t = task_by_fid[bucket.file_id]
            else:
                existing_group = by_id.get(bucket.file_id) if bucket.existing else None
                t = len(tasks)
                task_by_fid[bucket.file_id] = t
                tasks.append(
                    make_task(
                        config,
                        existing_group,
                        bucket.partition_path,
                        bucket.file_id,
                        instant,
                        t,
                        schema,
                        avro_schema,
                    )
                )
            s = starts[bucket.partition_path]
            task_of_row[sorted_pos[s : s + bucket.capacity]] = t
            starts[bucket.partition_path] = s + bucket.capacity
    return tasks, task_of_row


def split_by_task(tagged: pa.Table, task_of_row: np.ndarray, num_tasks: int) -> list[pa.Table]:
    """Rows of each task, in task order.

    Args:
        tagged: tagged rows.
        task_of_row: task index per row.
        num_tasks: number of tasks.

    Returns:
        One table per task.
    """
    order = np.argsort(task_of_row, kind="stable")
    ordered = tagged.take(pa.array(order))
    bounds = np.searchsorted(task_of_row[order], np.arange(num_tasks + 1))
    return [ordered.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])) for i in range(num_tasks)]


def run_tasks_locally(
    tasks: Sequence[FileGroupTask],
    rows: Sequence[pa.Table],
    loaded: Mapping[str, OldBaseFile] | None = None,
) -> list[WriteStat]:
    """Execute file-group tasks in this process (a small thread pool: Parquet, numpy and Arrow
    compute release the GIL).

    Args:
        tasks: planned tasks.
        rows: rows per task.
        loaded: base files already read, by file id (merge tasks use them instead of reading).

    Returns:
        Write stats in task order.
    """
    loaded = loaded or {}
    olds = [loaded.get(t.file_id) if t.kind == "merge" else None for t in tasks]
    if len(tasks) <= 1:
        return [write_file_group(t, r, o) for t, r, o in zip(tasks, rows, olds, strict=True)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(len(tasks), os.cpu_count() or 2)) as pool:
        return list(pool.map(write_file_group, tasks, rows, olds))


def ensure_partition_metadata(base_path: str, partitions: Sequence[str], instant: str) -> None:
    """Write ``.hoodie_partition_metadata`` into every partition that lacks it.

    Args:
        base_path: table base path.
        partitions: partition paths written by the commit.
        instant: the writing instant.
    """
    for partition in set(partitions):
        directory = os.path.join(base_path, partition) if partition else base_path
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, ".hoodie_partition_metadata")
        if not os.path.exists(path):  # several tasks may race here: same content, atomic rename
            depth = len([p for p in partition.split("/") if p]) if partition else 0
            fsync_write(path, partition_metadata_text(instant, depth).encode())


_OPERATION_TYPES = {"bulk_insert": "BULK_INSERT", "insert": "INSERT", "upsert": "UPSERT", "delete": "DELETE"}


# ----------------------------------------------------------------------------------------------
# Rollback, compaction, clean
# ----------------------------------------------------------------------------------------------


def _files_of_instant(base_path: str, instant: str) -> tuple[list[str], list[str]]:
    """(data files to delete, log files appended in place) of a pending instant, relative paths."""
    marker_root = os.path.join(hoodie_dir(base_path), ".temp", instant)
    from_markers: set[str] = set()
    appended: set[str] = set()
    for root, _dirs, files in os.walk(marker_root):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), marker_root).replace(os.sep, "/")
            data_rel, _, io_type = rel.rpartition(".marker.")
            (appended if io_type == "APPEND" else from_markers).add(data_rel)
    # base files named with the instant (also catches files written before a marker existed)
    for group_dir in _data_dirs(base_path):
        for entry in os.scandir(group_dir):
            name = entry.name
            parsed = parse_base_file_name(name.removesuffix(".writing"))
            if parsed is not None and parsed.instant == instant:
                from_markers.add(os.path.relpath(entry.path, base_path).replace(os.sep, "/"))
    return sorted(from_markers), sorted(appended)


def _data_dirs(base_path: str) -> list[str]:
    out = []
    for root, dirs, _files in os.walk(base_path):
        if os.path.abspath(root) == os.path.abspath(base_path):
            dirs[:] = [d for d in dirs if d != ".hoodie" and not d.startswith("__MACOSX")]
        out.append(root)
    return out


def rollback_pending(config: HudiTableConfig) -> list[str]:
    """Roll back every interrupted instant (caller holds the lock).

    Data files of the instant are deleted; a log file appended to by the instant is deleted when
    every block in it belongs to the instant (this writer always starts a new log file), otherwise
    a rollback COMMAND block is appended as a new log version. A ``rollback`` instant is recorded
    and the pending instant's files are removed. Pending clean instants are simply discarded.

    Args:
        config: table configuration.

    Returns:
        Instants rolled back.
    """
    base_path = config.base_path
    rolled: list[str] = []
    for pending in pending_instants(base_path):
        if pending.action in ("rollback", "clean"):
            delete_instant_files(base_path, pending.timestamp, pending.action)
            continue
        started = time.monotonic()
        rollback_instant = new_instant_time(latest_instant_time(base_path))
        to_delete, appended = _files_of_instant(base_path, pending.timestamp)
        command_blocks: dict[str, int] = {}
        for rel in appended:
            path = os.path.join(base_path, rel)
            if os.path.exists(path):
                to_delete.append(rel)  # a log file this writer created for the instant
        requests = [
            {
                "partitionPath": os.path.dirname(r),
                "fileId": "",
                "latestBaseInstant": "",
                "filesToBeDeleted": [os.path.join(base_path, r)],
                "logBlocksToBeDeleted": {},
            }
            for r in to_delete
        ]
        plan = {
            "instantToRollback": {"commitTime": pending.timestamp, "action": pending.action},
            "RollbackRequests": requests,
            "version": 1,
        }
        write_instant_file(
            base_path,
            rollback_instant,
            "rollback",
            "REQUESTED",
            avro_container_bytes(ROLLBACK_PLAN_SCHEMA, plan),
        )
        write_instant_file(base_path, rollback_instant, "rollback", "INFLIGHT")
        partition_meta: dict[str, dict[str, Any]] = {}
        deleted = 0
        for rel in sorted(set(to_delete)):
            path = os.path.join(base_path, rel)
            partition = os.path.dirname(rel)
            entry = partition_meta.setdefault(
                partition,
                {
                    "partitionPath": partition,
                    "successDeleteFiles": [],
                    "failedDeleteFiles": [],
                    "rollbackLogFiles": command_blocks or None,
                    "logFilesFromFailedCommit": None,
                },
            )
            for candidate in (path, path + ".writing"):
                if os.path.exists(candidate):
                    os.remove(candidate)
                    deleted += 1
                    entry["successDeleteFiles"].append(candidate)
        metadata = {
            "startRollbackTime": rollback_instant,
            "timeTakenInMillis": int((time.monotonic() - started) * 1000),
            "totalFilesDeleted": deleted,
            "commitsRollback": [pending.timestamp],
            "partitionMetadata": partition_meta,
            "version": 1,
            "instantsRollback": [{"commitTime": pending.timestamp, "action": pending.action}],
        }
        write_instant_file(
            base_path,
            rollback_instant,
            "rollback",
            "COMPLETED",
            avro_container_bytes(ROLLBACK_METADATA_SCHEMA, metadata),
        )
        delete_instant_files(base_path, pending.timestamp, pending.action)
        shutil.rmtree(os.path.join(hoodie_dir(base_path), ".temp", pending.timestamp), ignore_errors=True)
        rolled.append(pending.timestamp)
    return rolled


def _rollback_command_for(
    path: str, rollback_instant: str, target: str, version: int
) -> int:  # pragma: no cover
    """Append a rollback command block as a new log version (kept for Java-appended logs)."""
    parsed = parse_log_file_name(os.path.basename(path))
    assert parsed is not None
    name = f".{parsed.file_id}_{parsed.base_instant}.log.{version}_{parsed.write_token}"
    out = os.path.join(os.path.dirname(path), name)
    data = rollback_command_block(rollback_instant, target)
    fsync_write(out, data)
    return len(data)


def _delta_commits_since_compaction(base_path: str) -> int:
    count = 0
    for inst in reversed(completed_instants(base_path)):
        if inst.action == "commit":
            break
        if inst.action == "deltacommit":
            count += 1
    return count


def compact(config: HudiTableConfig, *, _locked: bool = False) -> str | None:
    """Compact every MoR file group whose latest slice has log files (on demand or inline).

    Writes ``<t>.compaction.requested`` (Avro ``HoodieCompactionPlan``), ``<t>.compaction.inflight``,
    one new base file per group (slice merged by the official reader's file-group reader, records
    keep their commit time and seqno) and completes as ``<t>.commit`` (``compacted: true``).

    Args:
        config: a Merge-on-Read table configuration.

    Returns:
        The compaction instant, or None when there was nothing to compact.

    Raises:
        HudiError: for a Copy-on-Write table.
        HudiCommitError: when the compaction could not be completed.
    """
    if not config.is_mor:
        raise HudiError(
            f"Failed to compact Hudi table {config.table_name}: only MERGE_ON_READ tables have log files"
        )
    lock = contextlib.nullcontext() if _locked else TableLock(config.base_path, config.lock_timeout_seconds)
    with lock:
        if not _locked:
            rollback_pending(config)
        groups = [g for g in load_file_groups(config.base_path) if g.latest.log_files]
        if not groups:
            return None
        instant = new_instant_time(latest_instant_time(config.base_path))
        operations = [
            {
                "baseInstantTime": g.latest.base_instant,
                "deltaFilePaths": list(g.latest.log_files),
                "dataFilePath": g.latest.base_file,
                "fileId": g.file_id,
                "partitionPath": g.partition_path,
                "metrics": {
                    "TOTAL_LOG_FILES": float(len(g.latest.log_files)),
                    "TOTAL_LOG_FILES_SIZE": float(sum(g.latest.log_sizes)),
                },
                "externalDataFilePath": None,
            }
            for g in groups
        ]
        plan = avro_container_bytes(
            COMPACTION_PLAN_SCHEMA, {"operations": operations, "extraMetadata": None, "version": 2}
        )
        write_instant_file(config.base_path, instant, "compaction", "REQUESTED", plan)
        write_instant_file(config.base_path, instant, "compaction", "INFLIGHT", plan)
        try:
            import hudi

            reader = hudi.HudiFileGroupReader(config.base_path)
            schema = table_data_schema(config.base_path) or pa.schema([])
            avro_schema = avro_schema_for(schema, config.table_name, with_meta=True)
            stats = []
            for i, g in enumerate(groups):
                sl = g.latest
                started = time.monotonic()
                base_rel = sl.rel(sl.base_file) if sl.base_file else ""
                merged = reader.read_file_slice_from_paths(base_rel, [sl.rel(n) for n in sl.log_files])
                merged_tbl = pa.Table.from_batches([merged]) if merged.num_rows else pa.table({})
                name = base_file_name(g.file_id, f"{i}-1-0", instant)
                rel = f"{g.partition_path}/{name}" if g.partition_path else name
                if merged_tbl.num_rows:
                    data = conform(merged_tbl, schema)
                    meta = [merged_tbl.column(c).cast(pa.string()) for c in META_COLUMNS[:4]]
                    meta.append(pa.repeat(pa.scalar(name, pa.string()), merged_tbl.num_rows))
                    out = pa.Table.from_arrays(
                        meta + list(data.columns), names=list(META_COLUMNS) + schema.names
                    )
                else:
                    out = pa.Table.from_arrays(
                        [pa.array([], pa.string())] * 5 + [pa.array([], f.type) for f in schema],
                        names=list(META_COLUMNS) + schema.names,
                    )
                marker = os.path.join(hoodie_dir(config.base_path), ".temp", instant, rel + ".marker.CREATE")
                os.makedirs(os.path.dirname(marker), exist_ok=True)
                open(marker, "wb").close()
                size = write_base_file(
                    os.path.join(config.base_path, rel),
                    out,
                    avro_schema,
                    compression=config.parquet_compression,
                    bloom_filter=config.bloom_filter,
                )
                stats.append(
                    WriteStat(
                        fileId=g.file_id,
                        path=rel,
                        partitionPath=g.partition_path,
                        prevCommit=sl.base_instant,
                        numWrites=out.num_rows,
                        numUpdateWrites=0,
                        totalWriteBytes=size,
                        fileSizeInBytes=size,
                        totalLogFilesCompacted=len(sl.log_files),
                        totalLogSizeCompacted=sum(sl.log_sizes),
                        totalLogRecords=0,
                        createTimeMs=int((time.monotonic() - started) * 1000),
                    )
                )
            schema_json = json.dumps(avro_schema_for(schema, config.table_name), separators=(",", ":"))
            content = commit_metadata_json(
                stats, schema_json=schema_json, operation_type="COMPACT", compacted=True
            )
            write_instant_file(config.base_path, instant, "commit", "COMPLETED", content)
            shutil.rmtree(os.path.join(hoodie_dir(config.base_path), ".temp", instant), ignore_errors=True)
        except Exception as exc:
            raise HudiCommitError(
                f"Failed to compact Hudi table {config.table_name} at {instant}: {exc}"
            ) from exc
        return instant


def clean(config: HudiTableConfig, *, _locked: bool = False) -> str | None:
    """Delete file slices no longer needed by the last ``cleaner_commits_retained`` commits.

    Records ``<t>.clean.requested`` (Avro ``HoodieCleanerPlan``), ``.clean.inflight`` and
    ``<t>.clean`` (Avro ``HoodieCleanMetadata``), policy KEEP_LATEST_COMMITS.

    Args:
        config: table configuration.

    Returns:
        The clean instant, or None when nothing had to be deleted.
    """
    retain = config.cleaner_commits_retained
    if retain <= 0:
        return None
    lock = contextlib.nullcontext() if _locked else TableLock(config.base_path, config.lock_timeout_seconds)
    with lock:
        commits = completed_instants(config.base_path)
        if len(commits) <= retain:
            return None
        earliest = commits[-retain]
        doomed: dict[str, list[str]] = {}
        for g in load_file_groups(config.base_path):
            slices = g.slices
            for older, newer in zip(slices, slices[1:], strict=False):
                if newer.base_instant <= earliest.timestamp and newer.base_file:
                    files = ([older.base_file] if older.base_file else []) + list(older.log_files)
                    doomed.setdefault(g.partition_path, []).extend(older.rel(f) for f in files)
        if not doomed:
            return None
        started = time.monotonic()
        instant = new_instant_time(latest_instant_time(config.base_path))
        earliest_info = {"timestamp": earliest.timestamp, "action": earliest.action, "state": "COMPLETED"}
        plan: dict[str, Any] = {
            "earliestInstantToRetain": earliest_info,
            "lastCompletedCommitTimestamp": commits[-1].timestamp,
            "policy": "KEEP_LATEST_COMMITS",
            "filesToBeDeletedPerPartition": None,
            "version": 2,
            "filePathsToBeDeletedPerPartition": {
                p: [
                    {"filePath": os.path.join(config.base_path, f), "isBootstrapBaseFile": False}
                    for f in files
                ]
                for p, files in doomed.items()
            },
            "partitionsToBeDeleted": [],
        }
        write_instant_file(
            config.base_path, instant, "clean", "REQUESTED", avro_container_bytes(CLEANER_PLAN_SCHEMA, plan)
        )
        write_instant_file(
            config.base_path, instant, "clean", "INFLIGHT", avro_container_bytes(CLEANER_PLAN_SCHEMA, plan)
        )
        partition_meta = {}
        total = 0
        for partition, files in doomed.items():
            ok, failed = [], []
            for rel in files:
                try:
                    os.remove(os.path.join(config.base_path, rel))
                    ok.append(os.path.basename(rel))
                    total += 1
                except OSError:
                    failed.append(os.path.basename(rel))
            partition_meta[partition] = {
                "partitionPath": partition,
                "policy": "KEEP_LATEST_COMMITS",
                "deletePathPatterns": [os.path.basename(f) for f in files],
                "successDeleteFiles": ok,
                "failedDeleteFiles": failed,
                "isPartitionDeleted": None,
            }
        metadata = {
            "policy": "KEEP_LATEST_COMMITS",
            "startCleanTime": instant,
            "timeTakenInMillis": int((time.monotonic() - started) * 1000),
            "totalFilesDeleted": total,
            "earliestCommitToRetain": earliest.timestamp,
            "lastCompletedCommitTimestamp": commits[-1].timestamp,
            "partitionMetadata": partition_meta,
            "version": 2,
            "bootstrapPartitionMetadata": None,
        }
        write_instant_file(
            config.base_path,
            instant,
            "clean",
            "COMPLETED",
            avro_container_bytes(CLEAN_METADATA_SCHEMA, metadata),
        )
        return instant


# ----------------------------------------------------------------------------------------------
# Front door (local)
# ----------------------------------------------------------------------------------------------


def begin_write(
    config: HudiTableConfig, incoming_schema: pa.Schema
) -> tuple[list[str], list[FileGroup], pa.Schema]:
    """Under the lock: create the table if needed, roll back pending instants, load the view.

    Args:
        config: table configuration.
        incoming_schema: normalized data schema of the batch.

    Returns:
        (rolled back instants, visible file groups, data schema to write).
    """
    data_cols = pa.schema(
        [
            f
            for f in incoming_schema
            if not f.name.startswith("_hudi_")
            and f.name not in META_COLUMNS
            and f.name != DELETE_MARKER_FIELD
        ]
    )
    existing_props = read_table_properties(config.base_path)
    groups_before = load_file_groups(config.base_path) if existing_props else []
    existing_schema = table_data_schema(config.base_path, groups_before) if existing_props else None
    schema = resolve_schema(existing_schema, data_cols, config)
    create_table(config, schema)
    rolled = rollback_pending(config)
    groups = load_file_groups(config.base_path)
    return rolled, groups, schema


def finish_write(
    config: HudiTableConfig,
    txn: WriteTransaction,
    stats: Sequence[WriteStat],
    schema: pa.Schema,
    operation: Operation,
    rolled: Sequence[str],
    executed_by: str = "driver",
    extra_metadata: Mapping[str, str] | None = None,
) -> CommitResult:
    """Complete the commit and run inline table services.

    Args:
        config: table configuration.
        txn: the open transaction.
        stats: write stats of all tasks.
        schema: data schema written.
        operation: write operation.
        rolled: instants rolled back before the write.
        executed_by: ``driver`` or ``spark`` (who wrote the data files).
        extra_metadata: more ``extraMetadata`` entries, committed atomically with the data (e.g.
            an ingestion checkpoint, as DeltaStreamer keeps its own there).

    Returns:
        The commit result.
    """
    schema_json = json.dumps(avro_schema_for(schema, config.table_name), separators=(",", ":"))
    content = commit_metadata_json(
        stats,
        schema_json=schema_json,
        operation_type=_OPERATION_TYPES[operation],
        extra=dict(extra_metadata or {}),
    )
    txn.complete(content)
    compaction_instant = None
    if config.is_mor and config.inline_compaction_delta_commits > 0:
        if _delta_commits_since_compaction(config.base_path) >= config.inline_compaction_delta_commits:
            compaction_instant = compact(config, _locked=True)
    clean_instant = clean(config, _locked=True)
    return CommitResult(
        instant=txn.instant,
        action=txn.action,
        operation=operation,
        num_inserts=sum(s.numInserts for s in stats),
        num_updates=sum(s.numUpdateWrites for s in stats),
        num_deletes=sum(s.numDeletes for s in stats),
        num_files=len(stats),
        stats=tuple(stats),
        rolled_back=tuple(rolled),
        compaction_instant=compaction_instant,
        clean_instant=clean_instant,
        executed_by=executed_by,
    )


@contextlib.contextmanager
def _locked(config: HudiTableConfig) -> Iterator[None]:
    os.makedirs(hoodie_dir(config.base_path), exist_ok=True)
    with TableLock(config.base_path, config.lock_timeout_seconds):
        yield


def table_lock(config: HudiTableConfig) -> contextlib.AbstractContextManager[None]:
    """The table's writer lock, for callers that must decide what to write under it (e.g. an
    ingestion reading its checkpoint); pass ``locked=True`` to :func:`write_arrow` inside."""
    return _locked(config)


def write_arrow(
    table: pa.Table,
    config: HudiTableConfig,
    operation: Operation = "upsert",
    *,
    extra_metadata: Mapping[str, str] | None = None,
    locked: bool = False,
) -> CommitResult:
    """Write an Arrow table to a Hudi v6 table in this process (no Spark).

    Args:
        table: rows to write; for ``delete`` only the key (and partition) columns are needed.
            An ``_hoodie_is_deleted`` boolean column marks deletes inside an upsert.
        config: table configuration.
        operation: ``bulk_insert``, ``insert``, ``upsert`` or ``delete``.
        extra_metadata: entries added to the commit's ``extraMetadata`` (atomic with the data).
        locked: the caller already holds :func:`table_lock`.

    Returns:
        The commit result.

    Raises:
        HudiError: on invalid input or an incompatible existing table.
        HudiLockError: when another writer holds the table.
        HudiCommitError: when writing data files or committing failed (the instant stays pending
            and is rolled back by the next write).

    Example:
        >>> write_arrow(pa.table({"id": [1], "v": ["a"], "ts": [1]}), cfg, "upsert")  # doctest: +SKIP
    """
    if operation not in _OPERATION_TYPES:
        raise HudiError(f"Failed to write Hudi table {config.table_name}: unknown operation {operation!r}")
    batch = prepare_batch(table, config, operation)
    with contextlib.nullcontext() if locked else _locked(config):
        rolled, groups, schema = begin_write(config, batch.schema)
        txn = WriteTransaction(config, "deltacommit" if config.is_mor else "commit")
        try:
            batch = fill_soft_deletes(config, batch, schema)
            loaded: dict[str, OldBaseFile] = {}
            if operation == "bulk_insert":
                index = _index_shape(None, config)
            elif config.is_mor:
                index = load_key_index(config, groups)
            else:
                candidates = candidate_groups(config, groups, batch.column(RECORD_KEY_COL))
                loaded = preload_base_files(config, candidates)
                index = load_key_index(config, candidates, loaded=loaded)
            tagged = tag_batch(batch, index, config)
            tasks, task_of_row = plan_tasks(
                tagged, config, groups, txn.instant, schema, allow_small_files=operation != "bulk_insert"
            )
            partitions = sorted({t.partition_path for t in tasks})
            txn.mark_inflight(partitions)
            ensure_partition_metadata(config.base_path, partitions, txn.instant)
            stats = run_tasks_locally(tasks, split_by_task(tagged, task_of_row, len(tasks)), loaded)
        except HudiError:
            raise
        except Exception as exc:
            raise HudiCommitError(
                f"Failed to write Hudi table {config.table_name} at {txn.instant}: {exc}"
            ) from exc
        return finish_write(config, txn, stats, schema, operation, rolled, extra_metadata=extra_metadata)
