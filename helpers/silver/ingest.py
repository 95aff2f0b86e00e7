"""Bronze change events into Silver Hudi tables: a Spark pipeline whose executors do the data work
(the DeltaStreamer step), the same function locally, on a Spark cluster and on EMR.

:func:`ingest_table` is one round of one table, as a short sequence of named steps. The driver
holds only metadata (the file listing, the table's state, per-file counts); every Bronze row is
read, checked, prepared and written by the executors:

1. read the table's state once (:func:`helpers.silver.state.read_table_state`) and plan the round
   (:func:`helpers.silver.tables.pending_bronze`), under the table's lock once a first look
   without it found new files (an idle round takes no lock); check that the Bronze zone is the
   history the table was built from (:func:`helpers.silver.tables.bronze_lineage`);
2. inspect the new files on the executors (:func:`helpers.bronze.frames.inspect_files`) and judge
   their writer schemas (:func:`helpers.silver.checked.schema_verdicts`);
3. read, check and prepare the events (Spark's Avro source, :mod:`helpers.silver.checked`,
   :mod:`helpers.silver.prepare`), flag changes older than their key's delete
   (:mod:`helpers.silver.tombstones`), flag the events outside a sliced table's keys
   (``min_key``, :func:`helpers.silver.prepare.slice_column`), and count per file (one
   aggregation, :mod:`helpers.silver.counts`);
4. set bad input aside (:mod:`helpers.silver.quarantine`, written by the executors);
5. apply a TRUNCATE (:mod:`helpers.silver.truncate`), fill TOAST placeholders, compute the next
   tombstones, and write with the official Hudi datasource in one commit that carries the checkpoint.

:func:`ingest_all` does every configured table. The guarantees: ``docs/architecture.md``,
"Silver ingestion". Continuous mode is :mod:`helpers.silver.job`. The module is one cohesive round:
its steps share the round's state, lock and checkpoint, and read best side by side.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from helpers.bronze.frames import inspect_files, read_events
from helpers.bronze.layout import (
    BAD_EVENT,
    BAD_REASON,
    FILE_COLUMN,
    ROW_COLUMN,
    FileLayout,
    record_numbers,
)
from helpers.bronze.store import BronzeObject, BronzeStore
from helpers.engines import quote_spark, spark_string
from helpers.errors import BronzeError, HudiError
from helpers.hudi.api import HudiCommit, write_hudi
from helpers.hudi.config import HudiTableConfig
from helpers.lake_store import lake_uri, open_store
from helpers.naming import silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.checked import GOOD_SQL, catalog_holds, check_events, data_columns, schema_verdicts
from helpers.silver.checkpoint import CHECKPOINT_KEY, FILES_KEY
from helpers.silver.counts import FileCounts, count_files
from helpers.silver.prepare import (
    DELETED,
    KEY,
    OUTSIDE,
    fill_unavailable,
    latest_per_key,
    position_column,
    prepare_events,
    slice_column,
    toast_columns,
)
from helpers.silver.quarantine import (
    BadRecord,
    newest_type_mismatch,
    note_type_mismatch,
    quarantine_dir,
    quarantine_events,
    write_quarantine,
)
from helpers.silver.state import (
    BRONZE_OWNER_KEY,
    POSITION_KEY,
    TOMBSTONES_KEY,
    TOMBSTONES_OLDEST_KEY,
    TableState,
    read_table_state,
)
from helpers.silver.tables import (
    POSITION_FIELDS,
    QUARANTINE_KEY,
    bronze_lineage,
    bronze_store,
    pending_bronze,
    position_fields,
    position_sql,
    silver_write_options,
    table_config,
    table_lock,
)
from helpers.silver.tombstones import (
    LATE,
    STONE_HIT,
    flag_late,
    next_tombstones,
    prune_tombstone_files,
    read_tombstones,
    write_tombstones,
)
from helpers.silver.truncate import (
    LOG_POSITION,
    MARKER_SQL,
    TRUNCATE,
    after_truncate,
    is_marker,
    truncated_rows,
)
from helpers.spark import build_spark_session

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "CHECKPOINT_KEY",
    "FILES_KEY",
    "IngestResult",
    "file_groups",
    "ingest_all",
    "ingest_table",
    "ingest_tables",
    "lake_uri",
]

log = logging.getLogger(__name__)

#: A round of at most this many Bronze bytes keeps its prepared events (memory, then disk) from the
#: count to the write: 0.1-0.3 s less per single-change round of ``sale`` or ``category``; keeping
#: 450,000 events cost 7.1 s against 0.8 s for reading them again.
KEEP_ROUND_BYTES = 16 * 1024 * 1024

#: Columns of the round that Hudi does not write.
_ROUND_COLUMNS = (
    FILE_COLUMN,
    ROW_COLUMN,
    BAD_REASON,
    BAD_EVENT,
    KEY,
    DELETED,
    LATE,
    STONE_HIT,
    TRUNCATE,
    LOG_POSITION,
    OUTSIDE,
)


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
    truncated_at: str | None = None  # the round's newest TRUNCATE's position (:mod:`helpers.silver.truncate`)
    quarantined: int = 0  # bad input set aside (:mod:`helpers.silver.quarantine`): events, or whole files
    late_dropped: int = 0  # changes not newer than their key's delete (:mod:`helpers.silver.tombstones`)
    seconds: float = 0.0  # wall time of the round
    write_seconds: float = 0.0  # of which the Hudi write (Spark job and commit)


def file_groups(frame: Any, rows: int, config: HudiTableConfig, per_group: int) -> Any:
    """A new table's rows spread over ``ceil(rows / per_group)`` partitions by key range: Hudi's
    bulk insert writes one file group per partition, so a later single-row upsert rewrites (CoW)
    or merges (MoR) one small file group, and the bloom index's key ranges prune the others."""
    groups = max(1, -(-rows // per_group))
    if groups == 1:
        return frame.coalesce(1)
    return frame.repartitionByRange(groups, *config.record_key_fields)


def _quarantine(
    params: WorkbookParams,
    table: SilverTableParams,
    store: BronzeStore,
    layouts: Sequence[FileLayout],
    events: DataFrame,
    counts: dict[str, FileCounts],
) -> tuple[int, dict[str, int]]:
    """Set the round's bad input aside: whole unreadable files by the driver (a copy and a record,
    no event is read), bad events by the executors. Every record is durable before the commit.

    Returns:
        The number of bad inputs, and per Bronze file name the number set aside.
    """
    from pyspark.sql import functions as F

    topic = silver_topic(params, table)
    directory = quarantine_dir(params, table.name)
    per_file: dict[str, int] = {}
    for lay in layouts:
        if lay.error is None:
            continue
        reason = (
            f"unreadable Avro file ({lay.error}); Bronze files are written atomically, so this is "
            "corruption after the write: the whole file is set aside, no block of it is applied"
            if not lay.file.is_jsonl
            else f"unreadable file ({lay.error}): the whole file is set aside"
        )
        store.copy(lay.file, open_store(directory), f"files/{lay.file.name}")
        write_quarantine(
            directory,
            table=table.name,
            topic=topic,
            bronze_file=lay.file.uri,
            records=[BadRecord(None, reason)],
            whole_file=True,
            settled=True,
        )
        per_file[lay.file.name] = 1
    bad_files = {name: c for name, c in counts.items() if c.bad}
    if bad_files:
        uris = {lay.file.name: lay.file for lay in layouts}
        plan = {
            name: (
                uris[name].uri,
                record_numbers(c.min_row, c.max_row, c.events, uris[name].is_jsonl),
                c.bad == c.events,
            )
            for name, c in bad_files.items()
        }
        bad = events.where(F.col(BAD_REASON).isNotNull())
        per_file.update(quarantine_events(bad, params, table=table.name, topic=topic, files=plan))
    total = sum(per_file.values())
    if total:
        log.warning(
            "%s: set aside %d bad input(s) from %d of %d Bronze file(s) of %s in %s (reasons there;"
            " helpers.silver.quarantine.quarantine_frame lists them); the rest is ingested",
            table.name,
            total,
            len(per_file),
            len(layouts),
            topic,
            directory,
        )
    return total, per_file


def _tombstones(
    params: WorkbookParams,
    config: HudiTableConfig,
    state: TableState,
    stones: DataFrame | None,
    applied: DataFrame,
    counts: dict[str, FileCounts],
    *,
    truncated: bool = False,
) -> dict[str, str]:
    """The tombstone state to commit (its name and oldest tombstone), written only when the
    batch can change it: a delete, a truncate, a change of a tombstoned key, or a tombstone past
    retention."""
    now = time.time()
    retention = params.silver.tombstone_retention_s
    expired = stones is not None and (
        state.tombstones_oldest is None or now - state.tombstones_oldest > retention
    )
    changes = truncated or any(c.deletes or c.stone_hits for c in counts.values())
    if not changes and not expired:
        out = {TOMBSTONES_KEY: state.tombstones}
        if state.tombstones_oldest is not None:
            out[TOMBSTONES_OLDEST_KEY] = repr(state.tombstones_oldest)
        return out
    name, oldest = write_tombstones(
        next_tombstones(applied, stones, config, now, retention), config.base_path
    )
    out = {TOMBSTONES_KEY: name}
    if oldest is not None:
        out[TOMBSTONES_OLDEST_KEY] = repr(oldest)
    return out


def _write_frame(events: DataFrame) -> DataFrame:
    """The columns Hudi writes: the event's own, the ordering position and the delete marker."""
    return events.drop(*[c for c in _ROUND_COLUMNS if c in events.columns])


def ingest_table(
    params: WorkbookParams,
    table: SilverTableParams,
    *,
    spark: Any = None,
    store: BronzeStore | None = None,
    s3: Any = None,
) -> IngestResult:
    """Ingest the table's new Bronze files (module docstring); a no-op when none are new.

    Bad input is set aside under ``<lake.silver>/_errors/<table>/`` with the reason
    (:mod:`helpers.silver.quarantine`), counted in ``quarantined`` and logged as a warning; the rest is
    ingested. The record of a file is written before the commit that takes the file, and named by
    it, so a crash in between rewrites the same record on the next run.

    Args:
        params: workbook parameters.
        table: the Silver table.
        spark: the session (default :func:`helpers.spark.build_spark_session` of ``params``).
        store: where Bronze is listed (default :func:`helpers.silver.tables.bronze_store`).
        s3: a boto3 S3 client for S3 locations (default: a new one).

    Raises:
        BronzeError: when a Bronze file cannot be opened (missing, permissions, S3 errors: not bad
            input, nothing is set aside).
        HudiError: when the write fails (nothing is committed then).
        HudiLockError: when another writer holds the table for too long.
    """

    started = time.monotonic()
    topic = silver_topic(params, table)
    config = table_config(params, table)
    positions = position_fields(params, table)
    store = store or bronze_store(params, s3)
    if not pending_bronze(params, table, store)[0]:
        # nothing new, seen without the lock: a writer holding it can only take files, never add
        # any, so the locked look would find nothing either (an idle round takes no lock)
        return IngestResult(table.name, 0, 0, None, seconds=time.monotonic() - started)
    with table_lock(params, table):  # state read and commit under one lock: two runs never overlap
        state = read_table_state(config.base_path)
        files, checkpoint = pending_bronze(params, table, store, state)
        if not files:
            return IngestResult(table.name, 0, 0, None, seconds=time.monotonic() - started)
        owner = bronze_lineage(store, state, table.name, config.base_path)
        spark = spark or build_spark_session(params)
        try:
            layouts = inspect_files(spark, files)
        except BronzeError as exc:
            raise BronzeError(f"Failed to read Bronze of {topic} for {table.name}: {exc}") from exc
        rejected = schema_verdicts(layouts, config, positions, state.stored_types)
        stones = (
            read_tombstones(spark, config.base_path, state.tombstones, config)
            if config.delete_mode == "hard"
            else None
        )
        events = _prepared(spark, params, table, config, layouts, rejected, positions, stones)
        kept = sum(f.size for f in files) <= KEEP_ROUND_BYTES
        if kept:
            from pyspark import StorageLevel

            events = events.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            return _ingest_prepared(
                spark,
                params,
                table,
                config,
                state,
                store,
                files,
                checkpoint,
                layouts,
                events,
                stones,
                started,
                owner,
            )
        finally:
            if kept:
                events.unpersist()


def _prepared(
    spark: SparkSession,
    params: WorkbookParams,
    table: SilverTableParams,
    config: HudiTableConfig,
    layouts: Sequence[FileLayout],
    rejected: dict[str, str],
    positions: tuple[str, ...],
    stones: DataFrame | None,
) -> DataFrame:
    """Read, check and prepare the round's events (lazy: nothing runs yet)."""
    from pyspark.sql import functions as F

    events = check_events(read_events(spark, layouts, rejected), config, positions)
    columns = data_columns(events)
    engine = params.source(table.source).engine
    good = F.expr(GOOD_SQL)
    if "__op" not in columns or any(k not in columns for k in config.record_key_fields):
        # every event is bad input, or the round holds only truncate markers: nothing to prepare
        marker = F.lit(False)
        position: Any = F.lit(None).cast("string")
        if "__op" in columns and all(p in columns for p in positions):
            marker = good & is_marker()
            position = position_column(engine, positions)
        return events.withColumns(
            {
                DELETED: F.lit(False),
                KEY: F.lit(None).cast("string"),
                LATE: F.lit(False),
                OUTSIDE: F.lit(False),
                STONE_HIT: F.lit(False),
                TRUNCATE: marker,
                LOG_POSITION: position,
            }
        )
    prepared = prepare_events(events, config, engine, positions)
    flagged = flag_late(prepared, stones, config)
    return flagged.withColumns(
        {
            LATE: F.expr(f"{GOOD_SQL} AND {quote_spark(LATE)}"),
            OUTSIDE: good & slice_column(events, table),
            STONE_HIT: F.expr(f"{GOOD_SQL} AND {quote_spark(STONE_HIT)}"),
            TRUNCATE: F.expr(f"{GOOD_SQL} AND {MARKER_SQL}"),
            LOG_POSITION: position_column(engine, positions),
        }
    )


def _ingest_prepared(
    spark: SparkSession,
    params: WorkbookParams,
    table: SilverTableParams,
    config: HudiTableConfig,
    state: TableState,
    store: BronzeStore,
    files: list[BronzeObject],
    checkpoint: Any,
    layouts: Sequence[FileLayout],
    events: DataFrame,
    stones: DataFrame | None,
    started: float,
    owner: str | None,
) -> IngestResult:
    from pyspark.sql import functions as F

    topic = silver_topic(params, table)
    engine = params.source(table.source).engine
    toast = toast_columns(events)
    set_aside = position_sql(engine, position_fields(params, table), _in_bad_event)
    counts, keys = count_files(events, toast, new_table=state.is_new, set_aside_position=set_aside)
    truncate_at = max((c.truncate_at for c in counts.values() if c.truncate_at), default=None)
    _guard_marker(params, table, config, counts, truncate_at if not state.is_new else None)
    quarantined, per_file = _quarantine(params, table, store, layouts, events, counts)
    good_events = sum(c.events - c.bad for c in counts.values())
    late = sum(c.late for c in counts.values())
    if good_events == 0:  # only bad input: the records mark those files taken
        return IngestResult(
            table.name, len(files), 0, None, quarantined=quarantined, seconds=time.monotonic() - started
        )
    applied = events.where(F.col(BAD_REASON).isNull() & ~F.col(LATE) & ~F.col(OUTSIDE))
    if truncate_at is not None and not state.is_new:
        position = position_column(engine, position_fields(params, table))
        deletes = truncated_rows(spark, applied, config, truncate_at, position)
        applied = after_truncate(applied, truncate_at).unionByName(deletes, allowMissingColumns=True)
        log.info("%s: marker (TRUNCATE or re-snapshot) at %s: older rows deleted", table.name, truncate_at)
    else:
        applied = after_truncate(applied, truncate_at)
    placeholders = [name for name in toast if any(c.placeholders.get(name) for c in counts.values())]
    filled = unresolved = 0
    if placeholders:  # rare (PostgreSQL under REPLICA IDENTITY DEFAULT): one more job to count
        applied = fill_unavailable(spark, applied, config, placeholders, stored=not state.is_new)
        totals = applied.agg(
            F.sum("_toast_filled").alias("f"), F.sum("_toast_unresolved").alias("u")
        ).collect()[0]
        filled, unresolved = int(totals["f"] or 0), int(totals["u"] or 0)
        if unresolved:
            log.warning(
                "%s: %d TOAST placeholder value(s) for keys not in the table or this batch were left null;"
                " set REPLICA IDENTITY FULL on the source table to carry full values",
                config.table_name,
                unresolved,
            )
        applied = applied.drop("_toast_filled", "_toast_unresolved")
    metadata = {
        FILES_KEY: json.dumps(sorted(o.name for o in files)),
        CHECKPOINT_KEY: checkpoint.to_json(),
    }
    newest = max((c.max_position for c in counts.values() if c.max_position), default=None)
    if newest is not None and position_fields(params, table) == POSITION_FIELDS.get(engine):
        metadata[POSITION_KEY] = max(newest, state.position or "")
    if owner is not None:
        metadata[BRONZE_OWNER_KEY] = owner
    if per_file:
        metadata[QUARANTINE_KEY] = json.dumps(dict(sorted(per_file.items())))
    if config.delete_mode == "hard":
        metadata.update(
            _tombstones(params, config, state, stones, applied, counts, truncated=truncate_at is not None)
        )
        if late:
            log.info("%s: dropped %d change(s) older than their key's delete", table.name, late)
    frame = _write_frame(applied)
    options = {**silver_write_options(params, table), **metadata}
    if state.stored_types and catalog_holds(_arrow_types(frame), state.stored_types):
        options["hoodie.datasource.hive_sync.enable"] = "false"  # the catalog holds this schema
    if state.is_new:
        # a new table: what the upsert would leave, written by Hudi's bulk insert (row writer) into
        # file groups split by key range (the range shuffle also places each key's events together)
        frame = _write_frame(
            latest_per_key(file_groups(applied, keys, config, params.silver.file_group_rows), config)
        )
        options["hoodie.datasource.write.operation"] = "bulk_insert"
        options.setdefault("hoodie.bulkinsert.sort.mode", "NONE")
    commit, write_seconds = _write(frame, options, config, files, topic, table)
    if config.delete_mode == "hard":
        prune_tombstone_files(config.base_path, keep=metadata[TOMBSTONES_KEY])
    return IngestResult(
        table.name,
        len(files),
        good_events,
        commit.instant,
        commit.inserts,
        commit.updates,
        commit.deletes,
        filled,
        unresolved,
        truncate_at,
        quarantined,
        late,
        seconds=time.monotonic() - started,
        write_seconds=write_seconds,
    )


def _arrow_types(frame: DataFrame) -> dict[str, Any]:
    """The frame's columns as Arrow types (pyspark's own mapping, no call into the JVM beyond the
    schema); None for a type it does not map."""
    from pyspark.sql.pandas.types import to_arrow_type

    out: dict[str, Any] = {}
    for field in frame.schema.fields:
        try:
            out[field.name] = to_arrow_type(field.dataType)
        except TypeError:  # pyspark's PySparkTypeError: a type Arrow does not take
            out[field.name] = None
    return out


def _in_bad_event(name: str) -> str:
    """A field of an event set aside whole, as SQL: read from its JSON (``_bad_event``)."""
    return f"get_json_object({quote_spark(BAD_EVENT)}, {spark_string('$.' + name)})"


def _guard_marker(
    params: WorkbookParams,
    table: SilverTableParams,
    config: HudiTableConfig,
    counts: dict[str, FileCounts],
    truncate_at: str | None,
) -> None:
    """Remember the round's events set aside for column types that no longer match the table
    (:func:`helpers.silver.quarantine.note_type_mismatch`, before their records settle their
    files), and stop a round that would apply a marker (a TRUNCATE or a finished re-snapshot;
    ``truncate_at``, None: none to apply) older than any such event of this round or an earlier
    one. The marker deletes every stored row that no event after it applies, so Silver would lose
    rows the source still has: measured, a re-snapshot after a source column was made text emptied
    the table. Nothing is committed and no record is written; the round's files stay pending.

    Raises:
        HudiError: naming the table, the marker, the set-aside events and the way out.
    """
    errors = quarantine_dir(params, table.name)
    here = max((c.mismatched_at for c in counts.values() if c.mismatched_at), default=None)
    newest = note_type_mismatch(errors, table.name, here) if here else None
    if truncate_at is None:
        return
    newest = newest or newest_type_mismatch(errors)
    if newest is None or newest <= truncate_at:
        return
    raise HudiError(
        f"Failed to apply the TRUNCATE / re-snapshot marker at {truncate_at} to Silver table "
        f"{table.name} at {config.base_path}: events after it (the newest at {newest}) were set aside "
        f"because their column types no longer match the table ({errors}), so applying the marker "
        "would delete rows the source still has. Nothing was committed. A source column was changed "
        "to another kind of type: change it back at the source, then re-snapshot the table "
        f"(./workbook resnapshot {table.name}); docs/operations.md, 'A column changed at the source'"
    )


def _write(
    frame: DataFrame,
    options: dict[str, str],
    config: HudiTableConfig,
    files: Sequence[BronzeObject],
    topic: str,
    table: SilverTableParams,
) -> tuple[HudiCommit, float]:
    write_started = time.monotonic()
    try:
        commit = write_hudi(frame, options, config.base_path)
    except HudiError as exc:
        raise HudiError(
            f"Failed to ingest {len(files)} Bronze file(s) of {topic} into {table.name} at "
            f"{config.base_path}: {exc}"
        ) from exc
    return commit, time.monotonic() - write_started


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's pool of ``workers`` table threads, kept between rounds: the continuous job
    runs a round every ``silver.min_interval_s`` and would otherwise start its threads anew each
    time (a sixth of an idle round's CPU)."""
    with _POOLS_LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="silver")
        return _POOLS[workers]


def ingest_tables(
    params: WorkbookParams, tables: Sequence[SilverTableParams], *, spark: Any = None, s3: Any = None
) -> list[IngestResult]:
    """:func:`ingest_table` for each of ``tables``, ``silver.parallel_tables`` at a time (each
    holds its own table's lock; Spark runs their jobs side by side); results in the given order.

    Raises:
        HudiError: the first table's error, after the other tables' rounds finished.
    """
    if spark is None and tables:
        spark = build_spark_session(params)
    workers = max(1, min(params.silver.parallel_tables, len(tables)))
    if workers == 1:
        return [ingest_table(params, t, spark=spark, s3=s3) for t in tables]
    futures = [_pool(workers).submit(ingest_table, params, t, spark=spark, s3=s3) for t in tables]
    results = []
    first_error: BaseException | None = None
    for future in futures:
        try:
            results.append(future.result())
        except BaseException as exc:  # noqa: BLE001 - re-raised once every table finished
            first_error = first_error or exc
    if first_error is not None:
        raise first_error
    return results


def ingest_all(
    params: WorkbookParams, names: Sequence[str] | None = None, *, spark: Any = None, s3: Any = None
) -> pd.DataFrame:
    """:func:`ingest_tables` for every configured table (or those named); one row per table, in
    the configured order.

    Raises:
        HudiError: the first table's error, after the other tables' rounds finished.
    """
    tables = [t for t in params.silver.tables if names is None or t.name in names]
    return pd.DataFrame([r.__dict__ for r in ingest_tables(params, tables, spark=spark, s3=s3)])
