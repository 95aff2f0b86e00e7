"""Bronze change events into Silver Hudi tables with the official Hudi writer (the DeltaStreamer
step), the same function locally and on EMR.

For each configured table (``params.silver.tables``) :func:`ingest_table`, holding the table's
writer lock,

1. lists the table's Bronze files (local folder or S3) and takes those its checkpoint has not:
   every commit records, atomically with the data, the files it took and the whole checkpoint
   after it (a watermark plus the names of recent files; :mod:`helpers.silver.checkpoint`), so a
   crash before the commit completes leaves them to the next round and a completed commit never
   takes them twice, whatever order or timestamps files arrive with;
2. reads the new files in the driver (Avro with its schema, or JSON lines of Connect envelopes
   whose Debezium encodings are converted with the schema each line carries) into one typed Arrow
   table: exact decimals, UTC timestamps, dates. Bad input (an unreadable file, an event whose
   types no longer fit the table, an unknown ``__op``, a missing key or position) is set aside
   with its reason (:mod:`helpers.silver.quarantine`), the rest goes on;
3. adds ``_cdc_position``, one sortable string made of the source's log position (PostgreSQL LSN;
   MySQL/MariaDB binlog file number, position, row; SQL Server commit LSN, change LSN, event
   serial number; each part zero-padded): the table's precombine field, so several changes of a
   key in one round keep the last and a redelivered older change never overwrites a newer one;
   turns Debezium's ``__deleted`` into Hudi's ``_hoodie_is_deleted`` (hard mode) or keeps the row
   flagged (soft mode); replaces PostgreSQL's TOAST placeholders with the value the column last
   had (:func:`fill_unavailable`); drops changes older than their key's remembered delete
   (:mod:`helpers.silver.tombstones`);
4. writes them with ``df.write.format("hudi")`` of the official Hudi Spark bundle
   (:func:`helpers.hudi.api.write_hudi`): upsert with ``DefaultHoodieRecordPayload``, table
   version 6, Hudi's CDC log on Copy-on-Write tables, inline compaction of Merge-on-Read tables,
   Hudi's Hive sync into the catalog (the local metastore, or Glue on EMR). The checkpoint, the
   tombstone state and the quarantine counts go into the same commit's ``extraMetadata``.

The rows reach Spark through a Parquet file staged next to the tables (``<silver>/.staging/``,
removed after the commit): exact types, no conversion through pandas.

Continuous mode is :mod:`helpers.silver.job`; the catalog view :func:`register_catalog`.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from helpers.bronze.read import (
    DEBEZIUM_FIELDS,
    RECORD_COLUMN,
    arrow_type,
    avro_table,
    jsonl_tables,
)
from helpers.capture.connectors import UNAVAILABLE_VALUE
from helpers.errors import HudiError, HudiLockError, UnreadableBronzeError
from helpers.hudi.api import COMMIT_META_PREFIX, HudiCommit, read_hudi_df, write_hudi
from helpers.hudi.config import DELETE_MARKER_FIELD, SOFT_DELETE_FIELD, HudiTableConfig
from helpers.hudi.keys import RECORD_KEY_COL, record_keys
from helpers.hudi.timeline import commit_metadata_newest_first, completed_instants
from helpers.lakefs import LakeStore, is_s3, join, lake_uri, open_store
from helpers.naming import silver_database, silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.checkpoint import (
    CHECKPOINT_KEY,
    FILES_KEY,
    BronzeCheckpoint,
    BronzeObject,
    BronzeStore,
    LocalBronze,
    S3Bronze,
    latest_checkpoint,
    plan_round,
)
from helpers.silver.tombstones import (
    TOMBSTONES_KEY,
    drop_late_events,
    next_tombstones,
    prune_tombstone_files,
    read_tombstones,
    tombstone_file_of,
    write_tombstones,
)
from helpers.spark import build_spark_session

__all__ = [
    "CHECKPOINT_KEY",
    "FILES_KEY",
    "POSITION_COLUMN",
    "QUARANTINE_KEY",
    "IngestResult",
    "bronze_status",
    "bronze_store",
    "checkpoint_of",
    "fill_unavailable",
    "ingest_all",
    "ingest_table",
    "lake_uri",
    "latest_per_key",
    "pending_bronze",
    "position_column",
    "register_catalog",
    "silver_tables_frame",
    "silver_vs_source",
    "silver_write_options",
    "start_continuous",
    "sync_catalog",
    "table_config",
    "table_lock",
    "wait_for_job_round",
]

log = logging.getLogger(__name__)

QUARANTINE_KEY = "workbook.quarantine"  # commit metadata: bad inputs set aside per Bronze file
POSITION_COLUMN = "_cdc_position"
_WORKBOOK_PREFIX = "workbook."  # every extraMetadata key of the workbook starts with it

#: The source's log position fields, in order (step 3 of the module docstring).
_POSITION_FIELDS = {
    "postgres": ("__lsn",),
    "mariadb": ("__file", "__pos", "__row"),
    "mysql": ("__file", "__pos", "__row"),
    "sqlserver": ("__commit_lsn", "__change_lsn", "__event_serial_no"),
}


@dataclass(frozen=True)
class IngestResult:
    """One ingestion round of one table."""

    table: str
    files: int
    events: int
    instant: str | None
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    unavailable_filled: int = 0
    unavailable_unresolved: int = 0
    quarantined: int = 0  # bad input set aside (:mod:`helpers.silver.quarantine`): events, or whole files
    late_dropped: int = 0  # changes not newer than their key's delete (:mod:`helpers.silver.tombstones`)
    seconds: float = 0.0  # wall time of the round
    write_seconds: float = 0.0  # of which the Hudi write (Spark job and commit)


# ------------------------------------------------------------------------------------------------
# tables, locations, options


def position_fields(params: WorkbookParams, table: SilverTableParams) -> tuple[str, ...]:
    """The source log position fields of a table's events (or its configured ordering field)."""
    if table.ordering:
        return table.ordering
    return _POSITION_FIELDS[params.source(table.source).engine]


def table_config(params: WorkbookParams, table: SilverTableParams) -> HudiTableConfig:
    """The workbook's view of a Silver table (precombine: ``_cdc_position`` unless configured).

    Raises:
        HudiError: when ``ordering`` names several fields (table version 6 takes one).
    """
    if len(table.ordering) > 1:
        raise HudiError(
            f"Failed to configure Silver table {table.name}: ordering {list(table.ordering)} names several "
            "fields; Hudi table version 6 takes one precombine field (leave ordering empty to order by "
            "the source's log position)"
        )
    return HudiTableConfig(
        table_name=table.name,
        base_path=join(lake_uri(params, params.lake.silver), table.name),
        table_type=table.table_type,
        record_key_fields=table.record_key,
        partition_fields=table.partition,
        ordering_fields=table.ordering or (POSITION_COLUMN,),
        delete_mode=table.delete_mode,
    )


def silver_write_options(params: WorkbookParams, table: SilverTableParams) -> dict[str, str]:
    """The Hudi datasource options of every ingestion commit of ``table``.

    Copy-on-Write tables keep Hudi's CDC log (``silver.cdc``); Merge-on-Read tables compact inline
    every ``silver.compaction_delta_commits`` delta commits and keep none (Hudi 1.0.2 cannot read
    the CDC feed of a version-6 Merge-on-Read table). The options include Hudi's Hive sync
    (``<name>_ro`` / ``<name>_rt`` for MoR) when ``silver.sync`` is on and there is a catalog. A
    partitioned table uses Hudi's global bloom index with partition-path updates, so a change that
    moves a key to another partition moves the row (a non-global index would keep both);
    :func:`ingest_table` turns it on only for a commit that creates the table or changes its
    columns (a sync costs about a second, and nothing else changes what the catalog holds).
    """
    config = table_config(params, table)
    options = {
        "hoodie.table.name": table.name,
        "hoodie.database.name": silver_database(params),
        "hoodie.datasource.write.recordkey.field": ",".join(table.record_key),
        "hoodie.datasource.write.partitionpath.field": ",".join(table.partition),
        "hoodie.datasource.write.precombine.field": config.precombine_field or POSITION_COLUMN,
        "hoodie.datasource.write.table.type": table.table_type,
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        COMMIT_META_PREFIX: _WORKBOOK_PREFIX,
        "hoodie.write.set.null.for.missing.columns": "true",
        # small, frequent commits in a long-lived session (bench/README.md measures each):
        "hoodie.upsert.shuffle.parallelism": "2",
        "hoodie.insert.shuffle.parallelism": "2",
        "hoodie.delete.shuffle.parallelism": "2",
        "hoodie.bulkinsert.shuffle.parallelism": "2",
        "hoodie.embed.timeline.server": "false",
        "hoodie.write.markers.type": "DIRECT",
        "hoodie.cleaner.commits.retained": str(params.silver.commits_retained),
        "hoodie.keep.min.commits": str(params.silver.commits_retained + 10),
        "hoodie.keep.max.commits": str(params.silver.commits_retained + 20),
    }
    if table.partition:  # a key may move to another partition: find it anywhere, move it there
        options["hoodie.index.type"] = "GLOBAL_BLOOM"
        options["hoodie.bloom.index.update.partition.path"] = "true"
    if config.is_mor:
        options["hoodie.compact.inline"] = "true"
        options["hoodie.compact.inline.max.delta.commits"] = str(params.silver.compaction_delta_commits)
    elif params.silver.cdc:
        options["hoodie.table.cdc.enabled"] = "true"
        options["hoodie.table.cdc.supplemental.logging.mode"] = "data_before_after"
    if params.silver.sync and params.spark.catalog != "none":
        options.update(
            {
                "hoodie.datasource.hive_sync.enable": "true",
                "hoodie.datasource.hive_sync.mode": "hms",
                "hoodie.datasource.hive_sync.database": silver_database(params),
                "hoodie.datasource.hive_sync.table": table.name,
                "hoodie.datasource.hive_sync.partition_fields": ",".join(table.partition),
                "hoodie.datasource.hive_sync.partition_extractor_class": (
                    "org.apache.hudi.hive.MultiPartKeysValueExtractor"
                    if table.partition
                    else "org.apache.hudi.hive.NonPartitionedExtractor"
                ),
                "hoodie.datasource.hive_sync.support_timestamp": "true",
            }
        )
    options.update(params.silver.hudi_options)
    return options


def bronze_store(params: WorkbookParams, s3: Any = None) -> BronzeStore:
    """Where Bronze is listed and read: the local folder or S3 (``lake.bronze``)."""
    root = lake_uri(params, params.lake.bronze)
    if is_s3(root):
        if s3 is None:
            import boto3

            s3 = boto3.client("s3", region_name=params.aws.region if params.aws else None)
        return S3Bronze(s3, root)
    return LocalBronze(root)


def silver_store(params: WorkbookParams, s3: Any = None) -> LakeStore:
    """The Silver zone's files (tables' timelines, staging, tombstones, quarantine)."""
    return open_store(lake_uri(params, params.lake.silver), s3)


@contextlib.contextmanager
def table_lock(params: WorkbookParams, table: SilverTableParams, timeout_s: float = 300.0) -> Iterator[None]:
    """One writer per table: a file lock beside the local table (``<silver>/.locks/<name>.lock``).

    On S3 there is no lock: run one ingestion job per table (as one DeltaStreamer per table).

    Raises:
        HudiLockError: when another writer holds the lock for ``timeout_s``.
    """
    root = lake_uri(params, params.lake.silver)
    if is_s3(root):
        yield
        return
    folder = Path(root, ".locks")
    folder.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(folder / f"{table.name}.lock"), timeout=timeout_s)
    try:
        with lock:
            yield
    except filelock.Timeout:
        raise HudiLockError(
            f"Failed to lock Silver table {table.name}: another writer holds {folder / table.name}.lock "
            f"for more than {timeout_s:.0f} s"
        ) from None


def checkpoint_of(base_path: str) -> BronzeCheckpoint:
    """The table's Bronze checkpoint (:mod:`helpers.silver.checkpoint`): from its newest commit
    that carries one; empty for a table not written yet."""
    return latest_checkpoint(commit_metadata_newest_first(base_path))


def pending_bronze(
    params: WorkbookParams, table: SilverTableParams, store: BronzeStore | None = None
) -> tuple[list[BronzeObject], BronzeCheckpoint]:
    """The table's Bronze files not taken yet (at most ``silver.max_files_per_round``), and the
    checkpoint to commit after taking them."""
    from helpers.silver.quarantine import settled_files

    state = checkpoint_of(table_config(params, table).base_path)
    settled = settled_files(params, table.name)  # quarantined with nothing to apply: taken
    listed_at = time.time()
    listing = [
        o for o in (store or bronze_store(params)).list(silver_topic(params, table)) if o.name not in settled
    ]
    return plan_round(
        listing, state, listed_at, params.silver.checkpoint_margin_s, params.silver.max_files_per_round
    )


# ------------------------------------------------------------------------------------------------
# reading Bronze (Arrow, in the driver)


def _compatible(incoming: pa.DataType, stored: pa.DataType) -> bool:
    """Whether values of ``incoming`` can go into a column of ``stored`` without loss of meaning:
    the same type, or the same kind (integers, floats, decimals of the same scale, timestamps,
    dates, times, text, bytes); a column that is all null fits anything."""
    if incoming == stored or pa.types.is_null(incoming) or pa.types.is_null(stored):
        return True
    if pa.types.is_decimal(incoming) and pa.types.is_decimal(stored):
        return bool(incoming.scale == stored.scale)
    kinds = (
        pa.types.is_integer,
        pa.types.is_floating,
        pa.types.is_timestamp,
        pa.types.is_date,
        pa.types.is_time,
        lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t),
        pa.types.is_boolean,
    )
    return any(kind(incoming) and kind(stored) for kind in kinds)


def _stored_types(base_path: str) -> dict[str, pa.DataType]:
    """The Silver table's column types, from the writer schema of its newest commit (empty for a
    table not written yet)."""
    for meta in commit_metadata_newest_first(base_path):
        schema = (meta.get("extraMetadata") or {}).get("schema")
        if not schema:
            continue
        out = {}
        for f in json.loads(schema).get("fields", []):
            try:
                out[f["name"]] = arrow_type(f["type"])
            except (KeyError, StopIteration, TypeError):
                continue  # a type the events never carry (fixed without a logical type, ...)
        return out
    return {}


def _check_events(
    table: pa.Table, config: HudiTableConfig, positions: tuple[str, ...], reference: dict[str, pa.DataType]
) -> tuple[pa.Table, list[Any]]:
    """Split one file's events (with ``_bronze_record``) into those to apply and bad ones."""
    from helpers.silver.quarantine import VALID_OPS, BadRecord

    required = (*DEBEZIUM_FIELDS, *config.record_key_fields, *positions)

    def all_bad(reason: str) -> tuple[pa.Table, list[Any]]:
        rows = table.to_pylist()
        return table.slice(0, 0), [BadRecord(r.pop(RECORD_COLUMN), reason, r) for r in rows]

    missing = [f for f in dict.fromkeys(required) if f not in table.column_names]
    if missing:
        return all_bad(
            f"event lacks field(s) {missing} (record key, log position and Debezium fields of table "
            f"{config.table_name})"
        )
    mismatched = [
        f"column {f.name!r} is {f.type} in this event but {reference[f.name]} in table {config.table_name}"
        for f in table.schema
        if f.name in reference
        and not f.name.startswith("_hoodie")
        and f.name not in DEBEZIUM_FIELDS
        and not _compatible(f.type, reference[f.name])
    ]
    if mismatched:
        return all_bad("schema no longer matches the table: " + "; ".join(mismatched))
    ops = table.column("__op")
    valid = pc.fill_null(pc.is_in(ops, value_set=pa.array(sorted(VALID_OPS))), False)
    for name in dict.fromkeys((*config.record_key_fields, *positions)):
        valid = pc.and_(valid, pc.is_valid(table.column(name)))
    if pc.all(valid).as_py():
        good = table
        bad: list[Any] = []
    else:
        good = table.filter(valid)
        bad = []
        for row in table.filter(pc.invert(valid)).to_pylist():
            number = row.pop(RECORD_COLUMN)
            op = row.get("__op")
            if op not in VALID_OPS:
                reason = (
                    f"unknown __op {op!r}: only c, u, d, r are applied (t = truncate: re-snapshot the "
                    "table; m = logical decoding message: not a row)"
                )
            else:
                nulls = [n for n in (*config.record_key_fields, *positions) if row.get(n) is None]
                reason = f"null record key / log position field(s) {nulls}"
            bad.append(BadRecord(number, reason, row))
    for f in good.schema:  # the first good type of a new column is the reference for the rest
        if f.name != RECORD_COLUMN and not pa.types.is_null(f.type):
            reference.setdefault(f.name, f.type)
    return good, bad


def _read_checked(
    store: BronzeStore, objects: Sequence[BronzeObject], config: HudiTableConfig, positions: tuple[str, ...]
) -> tuple[pa.Table, dict[BronzeObject, tuple[list[Any], bool]], set[BronzeObject]]:
    """Bronze files read like :func:`read_bronze_arrow`, bad input separated instead of raising.

    Returns:
        The events to apply (``_bronze_record`` removed), the bad input per file as
        ``(records, whole file unreadable)``, and the files that have events to apply.

    Raises:
        OSError: when a file cannot be read at all (permissions, S3 errors: not bad input).
    """
    from helpers.silver.quarantine import BadRecord

    reference = _stored_types(config.base_path)
    tables: list[pa.Table] = []
    bad: dict[BronzeObject, tuple[list[Any], bool]] = {}
    with_good: set[BronzeObject] = set()
    for obj in objects:
        data = store.read(obj)
        records: list[Any] = []
        if obj.name.endswith(".jsonl"):
            bad_lines: list[tuple[int, str]] = []
            parts = jsonl_tables(obj.name, data, bad_lines)
            records += [BadRecord(number, reason) for number, reason in bad_lines]
        else:
            try:
                parts = [avro_table(data, numbered=True)]
            except UnreadableBronzeError as exc:
                reason = (
                    f"unreadable Avro file ({exc}); Bronze files are written atomically, so this is "
                    "corruption after the write: the whole file is set aside, no block of it is applied"
                )
                bad[obj] = ([BadRecord(None, reason)], True)
                continue
        for part in parts:
            good, wrong = _check_events(part, config, positions, reference)
            records += wrong
            if good.num_rows:
                tables.append(good.drop_columns([RECORD_COLUMN]))
                with_good.add(obj)
        if records:
            bad[obj] = (sorted(records, key=lambda r: r.record or 0), False)
    if not tables:
        return pa.table({}), bad, with_good
    return pa.concat_tables(tables, promote_options="permissive"), bad, with_good


# ------------------------------------------------------------------------------------------------
# preparing events


def _padded(column: pa.ChunkedArray, width: int) -> pa.ChunkedArray:
    return pc.utf8_lpad(column.cast(pa.string()), width=width, padding="0")


def position_column(events: pa.Table, engine: str, fields: tuple[str, ...]) -> pa.ChunkedArray:
    """``_cdc_position`` of each event: the source's log position as one sortable string (module
    docstring, step 3); a configured single ``ordering`` field is used as it is.

    Raises:
        HudiError: for an unknown engine.
    """
    if fields != _POSITION_FIELDS.get(engine):
        return events.column(fields[0])
    if engine == "postgres":
        return _padded(events.column("__lsn"), 20)
    if engine in ("mysql", "mariadb"):
        files = events.column("__file").cast(pa.string())
        number = pc.utf8_lpad(
            pc.replace_substring_regex(files, pattern=r"^.*\.", replacement=""), width=10, padding="0"
        )
        return pc.binary_join_element_wise(
            number, _padded(events.column("__pos"), 20), _padded(events.column("__row"), 10), "."
        )
    if engine == "sqlserver":
        return pc.binary_join_element_wise(
            events.column("__commit_lsn").cast(pa.string()),
            events.column("__change_lsn").cast(pa.string()),
            _padded(events.column("__event_serial_no"), 10),
            ".",
        )
    raise HudiError(f"Failed to order change events: unknown source engine {engine!r}")


def _prepare(events: pa.Table, config: HudiTableConfig, engine: str, positions: tuple[str, ...]) -> pa.Table:
    """Add ``_cdc_position`` and the delete marker (hard: ``_hoodie_is_deleted``; soft: boolean
    ``__deleted``)."""
    if config.precombine_field == POSITION_COLUMN:
        events = events.append_column(POSITION_COLUMN, position_column(events, engine, positions))
    deleted = pc.fill_null(pc.equal(events.column("__deleted").cast(pa.string()), "true"), False)
    events = events.drop_columns(["__deleted"])
    if config.delete_mode == "soft":
        return events.append_column(SOFT_DELETE_FIELD, deleted)
    return events.append_column(DELETE_MARKER_FIELD, deleted)


StoredRows = Callable[[Sequence[str], Sequence[str]], dict[str, dict[str, Any]]]


def fill_unavailable(
    events: pa.Table,
    config: HudiTableConfig,
    stored_rows: StoredRows | None = None,
    placeholder: str = UNAVAILABLE_VALUE,
) -> tuple[pa.Table, int, int]:
    """Replace PostgreSQL's TOAST placeholders with the value the column last had.

    Under ``REPLICA IDENTITY DEFAULT`` an update that leaves a large (TOASTed) value untouched
    carries ``placeholder`` instead of it (bytes columns: its UTF-8). Like Hudi's
    ``PostgresDebeziumAvroPayload``, the column keeps its previous value: the latest earlier event
    of the same key in this batch (by the ordering field), else the row stored in the table.

    Args:
        events: one batch of prepared change events (record key and ordering field present).
        config: the Silver table's configuration.
        stored_rows: ``(record keys, columns) -> {record key: row}`` of the stored table; called
            only when the batch alone cannot resolve a placeholder (None: nothing stored).
        placeholder: Debezium's ``unavailable.value.placeholder``.

    Returns:
        The batch, the number of values filled and the number left null because neither the
        batch nor the table held the key (logged as a warning; the source still has them).
    """
    masks: dict[str, Any] = {}
    for field in events.schema:
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            value: Any = placeholder
        elif pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
            value = placeholder.encode()
        else:
            continue
        mask = pc.fill_null(pc.equal(events.column(field.name), pa.scalar(value, field.type)), False)
        if pc.any(mask).as_py():
            masks[field.name] = mask.to_numpy(zero_copy_only=False)
    if not masks:
        return events, 0, 0
    keys = record_keys(events, config).to_pylist()
    order_cols = [events.column(f).to_pylist() for f in config.ordering_fields if f in events.column_names]
    order = sorted(range(events.num_rows), key=lambda i: (keys[i], *(c[i] for c in order_cols), i))
    earlier: dict[str, set[str]] = {name: set() for name in masks}
    lookup: set[str] = set()
    for i in order:  # keys whose first placeholder has no full value before it in this batch
        for name, mask in masks.items():
            if mask[i] and keys[i] not in earlier[name]:
                lookup.add(keys[i])
            elif not mask[i]:
                earlier[name].add(keys[i])
    stored = stored_rows(sorted(lookup), list(masks)) if lookup and stored_rows is not None else {}
    filled = unresolved = 0
    for name, mask in masks.items():
        values = events.column(name).to_pylist()
        last: dict[str, Any] = {k: r[name] for k, r in stored.items()}
        for i in order:
            if not mask[i]:
                last[keys[i]] = values[i]
            elif keys[i] in last:
                values[i] = last[keys[i]]
                filled += 1
            else:
                values[i] = None
                unresolved += 1
        index = events.schema.get_field_index(name)
        field = events.schema.field(index)
        events = events.set_column(index, field, pa.array(values, field.type))
    if unresolved:
        log.warning(
            "%s: %d TOAST placeholder value(s) for keys not in the table or this batch were left null;"
            " set REPLICA IDENTITY FULL on the source table to carry full values",
            config.table_name,
            unresolved,
        )
    return events, filled, unresolved


def latest_per_key(events: pa.Table, config: HudiTableConfig) -> pa.Table:
    """The newest event of each record key (by the ordering field; the later row on a tie), and
    in hard-delete mode without the keys whose newest event is a delete: what an upsert of
    ``events`` into an empty table leaves."""
    if events.num_rows == 0:
        return events
    keys = record_keys(events, config).combine_chunks()
    order_field = config.precombine_field
    sort_keys = [("__key", "ascending")]
    work = pa.table({"__key": keys, "__row": pa.array(range(events.num_rows), pa.int64())})
    if order_field is not None:
        work = work.append_column("__order", events.column(order_field))
        sort_keys.append(("__order", "ascending"))
    sort_keys.append(("__row", "ascending"))
    ordered = work.take(pc.sort_indices(work, sort_keys=sort_keys))
    sorted_keys = ordered.column("__key").combine_chunks()
    last = pc.not_equal(sorted_keys.slice(0, len(sorted_keys) - 1), sorted_keys.slice(1))
    last = pa.concat_arrays([last, pa.array([True])])
    rows = ordered.column("__row").combine_chunks().filter(last)
    latest = events.take(pc.take(rows, pc.sort_indices(rows)))
    if config.delete_mode == "hard" and DELETE_MARKER_FIELD in latest.column_names:
        latest = latest.filter(pc.invert(pc.fill_null(latest.column(DELETE_MARKER_FIELD), False)))
    return latest


def _stored_rows_reader(spark: Any, config: HudiTableConfig) -> StoredRows:
    """Stored rows of some keys, read through the official datasource."""

    def read(keys: Sequence[str], columns: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not completed_instants(config.base_path):
            return {}
        from pyspark.sql import functions as F

        frame = (
            read_hudi_df(spark, config.base_path)
            .where(F.col(RECORD_KEY_COL).isin(list(keys)))
            .select(RECORD_KEY_COL, *columns)
        )
        return {row[RECORD_KEY_COL]: row.asDict() for row in frame.collect()}

    return read


# ------------------------------------------------------------------------------------------------
# the write


def _staged_frame(spark: Any, store: LakeStore, table: str, events: pa.Table) -> tuple[Any, str]:
    """The events as a Spark DataFrame, through a Parquet file staged in ``<silver>/.staging/``."""
    buffer = io.BytesIO()
    pq.write_table(events, buffer, compression="snappy")
    location = store.write(f".staging/{table}/{uuid.uuid4().hex}.parquet", buffer.getvalue())
    spark_location = (
        "s3a://" + location[len("s3://") :]
        if location.startswith("s3://") and _is_local_spark(spark)
        else location
    )
    return spark.read.parquet(spark_location), location


def _file_groups(frame: Any, rows: int, config: HudiTableConfig, per_group: int) -> Any:
    """A new table's rows spread over ``ceil(rows / per_group)`` partitions by key range: Hudi's
    bulk insert writes one file group per partition, so a later single-row upsert rewrites (CoW)
    or merges (MoR) one small file group, and the bloom index's key ranges prune the others."""
    groups = max(1, -(-rows // per_group))
    if groups == 1:
        return frame.coalesce(1)
    return frame.repartitionByRange(groups, *config.record_key_fields)


def _is_local_spark(spark: Any) -> bool:
    return str(spark.sparkContext.master).startswith("local")


def ingest_table(
    params: WorkbookParams,
    table: SilverTableParams,
    *,
    spark: Any = None,
    store: BronzeStore | None = None,
    s3: Any = None,
) -> IngestResult:
    """Ingest the table's new Bronze files (see the module docstring); a no-op when none are new.

    Bad input is set aside under ``<lake.silver>/_errors/<table>/`` with the reason
    (:mod:`helpers.silver.quarantine`), counted in ``quarantined`` and logged as a warning; the rest is
    ingested. The record of a file is written before the commit that takes the file, and named by
    it, so a crash in between rewrites the same record on the next run.

    Args:
        params: workbook parameters.
        table: the Silver table.
        spark: the session (default :func:`helpers.spark.build_spark_session` of ``params``).
        store: where Bronze is listed and read (default :func:`bronze_store`).
        s3: a boto3 S3 client for S3 locations (default: a new one).

    Raises:
        HudiError: when Bronze cannot be opened (e.g. permissions: not bad input, nothing is set
            aside) or the write fails (nothing is committed then).
        HudiLockError: when another writer holds the table for too long.
    """
    from helpers.silver.quarantine import quarantine_dir, write_quarantine

    started = time.monotonic()
    topic = silver_topic(params, table)
    config = table_config(params, table)
    engine = params.source(table.source).engine
    positions = position_fields(params, table)
    store = store or bronze_store(params, s3)
    with table_lock(params, table):  # checkpoint read and commit under one lock: two runs never overlap
        objects, state = pending_bronze(params, table, store)
        if not objects:
            return IngestResult(table.name, 0, 0, None, seconds=time.monotonic() - started)
        try:
            raw, bad, with_good = _read_checked(store, objects, config, positions)
        except OSError as exc:
            raise HudiError(f"Failed to read Bronze of {topic} for {table.name}: {exc}") from exc
        quarantined = 0
        if bad:
            directory = quarantine_dir(params, table.name)
            for obj, (records, whole) in bad.items():
                write_quarantine(
                    directory,
                    table=table.name,
                    topic=topic,
                    bronze_file=obj,
                    data=store.read(obj) if whole else None,
                    records=records,
                    whole_file=whole,
                    settled=obj not in with_good,
                )
                quarantined += len(records)
            log.warning(
                "%s: set aside %d bad input(s) from %d of %d Bronze file(s) of %s in %s (reasons there;"
                " helpers.silver.quarantine.quarantine_frame lists them); the rest is ingested",
                table.name,
                quarantined,
                len(bad),
                len(objects),
                topic,
                directory,
            )
        if raw.num_rows == 0:  # only bad input: the records mark those files taken
            return IngestResult(
                table.name, len(objects), 0, None, quarantined=quarantined, seconds=time.monotonic() - started
            )
        spark = spark or build_spark_session(params)
        events = _prepare(raw, config, engine, positions)
        events, filled, unresolved = fill_unavailable(events, config, _stored_rows_reader(spark, config))
        metadata = {
            FILES_KEY: json.dumps(sorted(o.name for o in objects)),
            CHECKPOINT_KEY: state.to_json(),
        }
        if bad:
            metadata[QUARANTINE_KEY] = json.dumps(
                {o.name: len(r) for o, (r, _) in sorted(bad.items(), key=lambda i: i[0].name)}
            )
        late, read_events = 0, events.num_rows
        silver = silver_store(params, s3)
        if config.delete_mode == "hard":  # deleted keys remembered: a late older change is dropped
            stones_file = tombstone_file_of(commit_metadata_newest_first(config.base_path))
            stones = read_tombstones(config.base_path, stones_file, config)
            events, late = drop_late_events(events, config, stones)
            after = next_tombstones(events, config, stones, time.time(), params.silver.tombstone_retention_s)
            if not after.equals(stones):
                stones_file = write_tombstones(config.base_path, after) if after.num_rows else ""
            metadata[TOMBSTONES_KEY] = stones_file
            if late:
                log.info("%s: dropped %d change(s) older than their key's delete", table.name, late)
        options = {**silver_write_options(params, table), **metadata}
        stored_columns = set(_stored_types(config.base_path))
        if stored_columns and set(events.column_names) <= stored_columns:
            options["hoodie.datasource.hive_sync.enable"] = "false"  # the catalog holds this schema
        new_table = not completed_instants(config.base_path)
        if new_table:
            # a new table: what the upsert would leave, written by Hudi's bulk insert (row writer)
            events = latest_per_key(events, config)
            options["hoodie.datasource.write.operation"] = "bulk_insert"
            options.setdefault("hoodie.bulkinsert.sort.mode", "NONE")
        frame, staged = _staged_frame(spark, silver, table.name, events)
        if new_table:
            frame = _file_groups(frame, events.num_rows, config, params.silver.file_group_rows)
        write_started = time.monotonic()
        try:
            commit: HudiCommit = write_hudi(frame, options, config.base_path)
        except HudiError as exc:
            raise HudiError(
                f"Failed to ingest {len(objects)} Bronze file(s) of {topic} into {table.name} at "
                f"{config.base_path}: {exc}"
            ) from exc
        finally:
            silver.delete(staged)
        write_seconds = time.monotonic() - write_started
        if config.delete_mode == "hard":
            prune_tombstone_files(config.base_path, keep=metadata[TOMBSTONES_KEY])
    return IngestResult(
        table.name,
        len(objects),
        read_events,
        commit.instant,
        commit.inserts,
        commit.updates,
        commit.deletes,
        filled,
        unresolved,
        quarantined,
        late,
        seconds=time.monotonic() - started,
        write_seconds=write_seconds,
    )


def ingest_all(
    params: WorkbookParams, names: Sequence[str] | None = None, *, spark: Any = None, s3: Any = None
) -> pd.DataFrame:
    """:func:`ingest_table` for every configured table (or those named), ``silver.parallel_tables``
    at a time (each holds its own table's lock; Spark runs their jobs side by side); one row per
    table, in the configured order.

    Raises:
        HudiError: the first table's error, after the other tables' rounds finished.
    """
    from concurrent.futures import ThreadPoolExecutor

    tables = [t for t in params.silver.tables if names is None or t.name in names]
    if spark is None and tables:
        spark = build_spark_session(params)
    workers = max(1, min(params.silver.parallel_tables, len(tables)))
    if workers == 1:
        return pd.DataFrame([ingest_table(params, t, spark=spark, s3=s3).__dict__ for t in tables])
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="silver") as pool:
        futures = [pool.submit(ingest_table, params, t, spark=spark, s3=s3) for t in tables]
        results = []
        first_error: BaseException | None = None
        for future in futures:
            try:
                results.append(future.result().__dict__)
            except BaseException as exc:  # noqa: BLE001 - re-raised once every table finished
                first_error = first_error or exc
    if first_error is not None:
        raise first_error
    return pd.DataFrame(results)


# ------------------------------------------------------------------------------------------------
# looking at Silver


def silver_vs_source(
    params: WorkbookParams, names: Sequence[str] | None = None, *, spark: Any = None
) -> pd.DataFrame:
    """Each Silver table against its source table, row by row (locally the official Rust reader;
    on S3 the official Spark datasource).

    Returns:
        One row per table: ``source_rows``, ``silver_rows`` (live rows: a soft-delete table's
        flagged rows are not counted), ``equal`` (same keys, every source column equal; JSON
        compared parsed). A SQL Server source is not compared (``equal`` None): read it with
        notebook 07's reconciliation.
    """
    from helpers.capture.register import _source_table, rows_equal_source
    from helpers.hudi.read import read_snapshot
    from helpers.sources.api import open_sources

    connections = open_sources(params)
    out = []
    for table in params.silver.tables:
        if names is not None and table.name not in names:
            continue
        sp = params.source(table.source)
        base = table_config(params, table).base_path
        if not completed_instants(base):
            silver: list[dict[str, Any]] = []
        elif is_s3(base):
            spark = spark or build_spark_session(params)
            silver = [r.asDict() for r in read_hudi_df(spark, base).collect()]
        else:
            silver = read_snapshot(base).to_pylist()
        if table.delete_mode == "soft":
            silver = [r for r in silver if not r.get(SOFT_DELETE_FIELD)]
        if sp.engine == "sqlserver":
            out.append({"table": table.name, "source_rows": None, "silver_rows": len(silver), "equal": None})
            continue
        engine = "postgres" if sp.engine == "postgres" else "mysql"
        source = _source_table(connections, engine, sp.database, sp.namespace, table.table)
        out.append(
            {
                "table": table.name,
                "source_rows": len(source),
                "silver_rows": len(silver),
                "equal": rows_equal_source(source, silver, table.record_key),
            }
        )
    return pd.DataFrame(out, columns=["table", "source_rows", "silver_rows", "equal"])


def bronze_status(params: WorkbookParams, wait_s: float = 0.0) -> pd.DataFrame:
    """Whether Bronze holds what the sources hold, before ingesting.

    Locally the embedded connectors' Bronze is replayed and compared with each source table
    (:func:`helpers.capture.register.bronze_vs_source`, waiting up to ``wait_s`` for capture to catch
    up). On AWS the S3 sink lands Bronze all the time: the Bronze files of each Silver table's
    topic are listed with the number its checkpoint has not taken yet.

    Returns:
        Local: ``topic``, ``source_rows``, ``bronze_rows``, ``events``, ``equal``. AWS: ``table``,
        ``topic``, ``bronze_files``, ``pending_files``.
    """
    if params.environment != "aws" and params.capture.backend == "embedded":
        from helpers.capture.register import bronze_vs_source, connector_specs, local_endpoints

        specs = connector_specs(params, local_endpoints(params))
        frame = bronze_vs_source(params, specs, wait_s=wait_s)
        return frame[["topic", "source_rows", "bronze_rows", "events", "equal"]]
    store = bronze_store(params)
    rows = []
    for table in params.silver.tables:
        listing = store.list(silver_topic(params, table))
        pending, _ = pending_bronze(params, table, store)
        rows.append(
            {
                "table": table.name,
                "topic": silver_topic(params, table),
                "bronze_files": len(listing),
                "pending_files": len(pending),
            }
        )
    return pd.DataFrame(rows)


def silver_tables_frame(params: WorkbookParams) -> pd.DataFrame:
    """Per Silver table: type, commits, rows and the latest file slices (file groups, bytes), as
    the official Rust reader plans them (local paths and S3 alike)."""
    from helpers.hudi.inspect import table_file_groups

    rows = []
    for table in params.silver.tables:
        base = table_config(params, table).base_path
        commits = completed_instants(base)
        if not commits:
            rows.append({"table": table.name, "type": table.table_type, "commits": 0, "rows": 0})
            continue
        groups = table_file_groups(base)
        rows.append(
            {
                "table": table.name,
                "type": table.table_type,
                "commits": len(commits),
                "rows": int(groups["records"].sum()) if table.table_type == "COPY_ON_WRITE" else None,
                "file_groups": len(groups),
                "data_bytes": int((groups["base_bytes"] + groups["log_bytes"]).sum()),
            }
        )
    frame = pd.DataFrame(rows)
    if (frame["type"] == "MERGE_ON_READ").any():  # log files hold changes: count the merged rows
        from helpers.hudi.read import read_snapshot

        for i, row in frame.iterrows():
            if row["type"] == "MERGE_ON_READ" and row["commits"]:
                spec = next(t for t in params.silver.tables if t.name == row["table"])
                frame.loc[i, "rows"] = read_snapshot(
                    table_config(params, spec).base_path, columns=[RECORD_KEY_COL]
                ).num_rows
    return frame


def wait_for_job_round(job: Any, timeout_s: float = 180.0) -> dict[str, Any]:
    """Wait until the continuous job (this start of it) has finished a round after now.

    Raises:
        HudiError: when the job dies or does not finish a round in time.
    """
    first = job.status()
    run, start = first.get("run_id"), first.get("loops", 0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status: dict[str, Any] = job.status()
        if status.get("state") == "DEAD":
            raise HudiError(
                f"Failed to run the continuous Silver job: it died; see {job.directory / 'job.log'}"
            )
        if status.get("run_id") != run:  # the job that was starting has written its first status
            run, start = status.get("run_id"), -1
        if status.get("state") == "RUNNING" and status.get("loops", 0) > start:
            return status
        time.sleep(0.2)
    raise HudiError(
        f"Failed to run the continuous Silver job: no round finished in {timeout_s:.0f} s; see "
        f"{job.directory / 'job.log'}"
    )


def sync_catalog(
    params: WorkbookParams, names: Sequence[str] | None = None, *, spark: Any = None
) -> list[str]:
    """Run Hudi's Hive sync (``org.apache.hudi.hive.HiveSyncTool``) for Silver tables that have a
    commit, without writing: what every commit that creates a table or changes its columns does.

    Returns:
        The tables synced.

    Raises:
        HudiError: naming the table when the sync fails.
    """
    spark = spark or build_spark_session(params)
    jvm = spark.sparkContext._jvm
    done = []
    for table in params.silver.tables:
        base = table_config(params, table).base_path
        if (names is not None and table.name not in names) or not completed_instants(base):
            continue
        props = jvm.java.util.Properties()
        for key, value in silver_write_options(params, table).items():
            if key.startswith(("hoodie.datasource.hive_sync.", "hoodie.datasource.meta.sync.")):
                props.setProperty(key, value)
        props.setProperty("hoodie.datasource.hive_sync.enable", "true")
        props.setProperty("hoodie.datasource.meta.sync.base.path", base)
        try:
            tool = jvm.org.apache.hudi.hive.HiveSyncTool(props, spark.sparkContext._jsc.hadoopConfiguration())
            try:
                tool.syncHoodieTable()
            finally:
                tool.close()
        except Exception as exc:  # noqa: BLE001 - Py4J errors
            raise HudiError(
                f"Failed to sync Silver table {table.name} to the catalog: {str(exc)[:1000]}"
            ) from exc
        done.append(table.name)
    return done


def start_continuous(params: WorkbookParams, timeout_s: float = 180.0) -> dict[str, Any]:
    """Start the continuous ingestion (DeltaStreamer's ``--continuous``) and wait for its first
    round: locally the background job :class:`helpers.silver.job.SilverJob` (stopped by
    ``./workbook stack stop``). On AWS the same ingestion runs as a scheduled EMR step or notebook
    execution of this notebook, so nothing is started here.

    Returns:
        The job's ``state``, ``loops``, ``error`` (AWS: ``state`` ``SCHEDULED_ON_EMR``).

    Raises:
        HudiError: when the job dies or finishes no round in time.
    """
    if params.environment == "aws":
        return {"state": "SCHEDULED_ON_EMR", "loops": None, "error": None}
    from helpers.silver.job import SilverJob

    job = SilverJob(params)
    job.start()
    status = wait_for_job_round(job, timeout_s)
    return {k: status.get(k) for k in ("state", "loops", "error")}


def register_catalog(params: WorkbookParams, *, spark: Any = None) -> pd.DataFrame:
    """The Silver tables in the catalog (the local metastore, or Glue on EMR), one row per catalog
    table, ``_ro`` / ``_rt`` for Merge-on-Read.

    The commits register their tables through Hudi's Hive sync already; a table that has commits
    but is missing from the catalog (a catalog reset, ``silver.sync`` switched on later) is synced
    here with Hudi's own sync tool.

    Returns:
        Columns ``database``, ``name``, ``hudi_table``, ``query_type``, ``table_type``, ``location``.

    Raises:
        HudiError: when a table is still missing after the sync.
    """
    from helpers.silver.catalog import catalog_frame, catalog_tables, missing_from_catalog

    spark = spark or build_spark_session(params)
    present = catalog_tables(params, spark)
    missing = missing_from_catalog(params, present)
    if not missing:
        return catalog_frame(params, spark, tables=present)
    sync_catalog(params, list(missing), spark=spark)
    return catalog_frame(params, spark)
