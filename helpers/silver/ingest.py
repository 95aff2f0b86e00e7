"""Bronze change events into Silver Hudi tables with the official Hudi writer (the DeltaStreamer
step), the same function locally and on EMR.

:func:`ingest_table` takes a table's new Bronze files, reads them with checks, prepares the rows
and writes them in one commit together with the checkpoint; :func:`ingest_all` does every
configured table. The steps and their guarantees: ``docs/architecture.md``, "Silver ingestion".
Continuous mode is :mod:`helpers.silver.job`.
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from helpers.errors import HudiError
from helpers.hudi.api import HudiCommit, write_hudi
from helpers.hudi.config import HudiTableConfig
from helpers.hudi.timeline import commit_metadata_newest_first, completed_instants
from helpers.lakefs import LakeStore, lake_uri
from helpers.naming import silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.checked import read_checked, stored_types
from helpers.silver.checkpoint import (
    CHECKPOINT_KEY,
    FILES_KEY,
    BronzeStore,
)
from helpers.silver.prepare import (
    fill_unavailable,
    latest_per_key,
    prepare_events,
    stored_rows_reader,
)
from helpers.silver.quarantine import quarantine_dir, write_quarantine
from helpers.silver.tables import (
    QUARANTINE_KEY,
    bronze_store,
    pending_bronze,
    position_fields,
    silver_store,
    silver_write_options,
    table_config,
    table_lock,
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
    "IngestResult",
    "ingest_all",
    "ingest_table",
    "ingest_tables",
    "lake_uri",
]

log = logging.getLogger(__name__)


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


# ------------------------------------------------------------------------------------------------
# reading Bronze (Arrow, in the driver)


# ------------------------------------------------------------------------------------------------
# preparing events


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


def file_groups(frame: Any, rows: int, config: HudiTableConfig, per_group: int) -> Any:
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
    """Ingest the table's new Bronze files (``docs/architecture.md``); a no-op when none are new.

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
            raw, bad, with_good = read_checked(store, objects, config, positions)
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
        events = prepare_events(raw, config, engine, positions)
        events, filled, unresolved = fill_unavailable(events, config, stored_rows_reader(spark, config))
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
        stored_columns = set(stored_types(config.base_path))
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
            frame = file_groups(frame, events.num_rows, config, params.silver.file_group_rows)
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
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="silver") as pool:
        futures = [pool.submit(ingest_table, params, t, spark=spark, s3=s3) for t in tables]
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


# ------------------------------------------------------------------------------------------------
# looking at Silver
