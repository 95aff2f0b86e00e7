"""A Silver table's settings: Hudi config and write options, Bronze and lake stores, the writer lock,
the Bronze files a table has not yet taken."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import filelock

from helpers.bronze.store import BronzeObject, BronzeStore
from helpers.engines import quote_spark
from helpers.errors import BronzeError, HudiError, HudiLockError
from helpers.hudi.api import COMMIT_META_PREFIX
from helpers.hudi.config import HudiTableConfig
from helpers.lake_store import LakeStore, is_s3, join, lake_uri, open_store, s3_client, use_lake_s3
from helpers.local.spark_cluster import runs_on_this_machine
from helpers.naming import silver_database, silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.checkpoint import BronzeCheckpoint, plan_round
from helpers.silver.quarantine import settled_files
from helpers.silver.state import TableState, read_table_state

log = logging.getLogger(__name__)

__all__ = [
    "POSITION_COLUMN",
    "QUARANTINE_KEY",
    "bronze_lineage",
    "bronze_store",
    "pending_bronze",
    "position_fields",
    "position_sql",
    "silver_store",
    "silver_write_options",
    "table_config",
    "table_lock",
]


QUARANTINE_KEY = "workbook.quarantine"  # commit metadata: bad inputs set aside per Bronze file


POSITION_COLUMN = "_cdc_position"


_WORKBOOK_PREFIX = "workbook."  # every extraMetadata key of the workbook starts with it


#: The source's log position fields, in order (``docs/architecture.md``, "Ordering").
POSITION_FIELDS = {
    "postgres": ("__lsn",),
    "mariadb": ("__file", "__pos", "__row"),
    "mysql": ("__file", "__pos", "__row"),
    "sqlserver": ("__commit_lsn", "__change_lsn", "__event_serial_no"),
}


def position_sql(engine: str, fields: tuple[str, ...], field: Callable[[str], str] = quote_spark) -> str:
    """``_cdc_position`` as a Spark SQL expression: the source's log position as one sortable
    string (``docs/architecture.md``, "Ordering"), or a configured single ``ordering`` field as it
    is. The PySpark engine (:func:`helpers.silver.prepare.position_column`) and the streamer
    engine's SQL transform (:mod:`helpers.silver.streamer`) both use it.

    Args:
        engine: the source engine.
        fields: the position fields (or the configured ordering field).
        field: a field's value as SQL (default: its column; the set-aside events' positions are
            read from their JSON, :func:`helpers.silver.counts.count_files`).

    Raises:
        HudiError: for an unknown engine.
    """

    def text(name: str) -> str:
        return f"CAST({field(name)} AS STRING)"

    def padded(name: str, width: int) -> str:
        return f"lpad({text(name)}, {width}, '0')"

    if fields != POSITION_FIELDS.get(engine):
        return field(fields[0])
    if engine == "postgres":
        return padded("__lsn", 20)
    if engine in ("mysql", "mariadb"):
        number = f"lpad(substring_index({text('__file')}, '.', -1), 10, '0')"
        return f"concat_ws('.', {number}, {padded('__pos', 20)}, {padded('__row', 10)})"
    if engine == "sqlserver":
        serial = padded("__event_serial_no", 10)
        return f"concat_ws('.', {text('__commit_lsn')}, {text('__change_lsn')}, {serial})"
    raise HudiError(f"Failed to order change events: unknown source engine {engine!r}")


def position_fields(params: WorkbookParams, table: SilverTableParams) -> tuple[str, ...]:
    """The source log position fields of a table's events (or its configured ordering field)."""
    if table.ordering:
        return table.ordering
    return POSITION_FIELDS[params.source(table.source).engine]


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
    :func:`ingest_table` turns the sync on only for a commit that creates the table or changes its
    columns (a sync costs about a second, and nothing else changes what the catalog holds). A table
    without partitions uses Hudi's bloom index (one partition: it finds a key anywhere).
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
        "hoodie.embed.timeline.server": "false",
        "hoodie.write.markers.type": "DIRECT",
        "hoodie.cleaner.commits.retained": str(params.silver.commits_retained),
        "hoodie.keep.min.commits": str(params.silver.commits_retained + 10),
        "hoodie.keep.max.commits": str(params.silver.commits_retained + 20),
    }
    if runs_on_this_machine(params):
        # Hudi's shuffles in two partitions on two cores; on a cluster Hudi deduces them from the
        # round's own partitions (its default since 0.13), which grow with the data
        for op in ("upsert", "insert", "delete", "bulkinsert"):
            options[f"hoodie.{op}.shuffle.parallelism"] = "2"
    if table.partition:  # a key may move to another partition: find it anywhere, move it there
        options["hoodie.index.type"] = "GLOBAL_BLOOM"
        options["hoodie.bloom.index.update.partition.path"] = "true"
    else:
        # Hudi's bloom index, not Spark's default simple index: a round's keys are checked against
        # each file group's key range (:func:`helpers.silver.ingest.file_groups`) and bloom filter,
        # and only the candidates' keys are read, where the simple index joins the round with every
        # key of the table. A one-row round of the 172,456-row ``sale``, timed one round at a time:
        # Hudi's write 1.5-1.8 s against 2.2-2.3 s (MoR 1.1 against 1.8-1.9 s); the record-level
        # index gave 1.8-2.3 s. End to end: bench/bench_silver.py
        options["hoodie.index.type"] = "BLOOM"
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
                # hms: the metastore of the writer's session, its hive.metastore.uris (the local
                # service: helpers.local.metastore; on EMR the cluster's, Glue)
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
    """Where Bronze is listed: the local folder or S3 (``lake.bronze``)."""
    root = lake_uri(params, params.lake.bronze)
    if is_s3(root):
        use_lake_s3(params)
        if s3 is None:
            s3 = s3_client(params.aws.region if params.aws else None)
    return BronzeStore(root, s3)


def bronze_lineage(store: BronzeStore, state: TableState, table: str, base_path: str) -> str | None:
    """The owner id of the Bronze zone a round reads, to record with its commit
    (:data:`helpers.silver.state.BRONZE_OWNER_KEY`), once checked against the one the table was
    built from; None for a zone with no owner record (nothing to record or check).

    A zone of another owner was written by the capture of another state directory: other source
    servers, whose log positions start again (a state directory and its Bronze zone deleted and
    made again while Silver was kept). Its events ordered by position against the stored rows would
    lose to them, so Silver would keep the old rows without a sign.

    Raises:
        BronzeError: naming the table, both owners and the ways out, before anything is read; or
            when the owner record cannot be read.
    """
    zone = store.owner()
    if zone is None:
        return None
    if state.bronze_owner and state.bronze_owner != zone.state_id:
        raise BronzeError(
            f"Failed to ingest Bronze zone {store.root} into Silver table {table} at {base_path}: the "
            f"table was built from the Bronze of another capture state (id {state.bronze_owner}), and "
            f"this zone now holds the events of state {zone.state_id} ({zone.state_dir}), from other "
            "source servers whose log positions start again; applied to the stored rows they would lose "
            "to them. Start this Silver zone over from this Bronze (delete lake.silver, or point it at "
            "a new folder), or go back to the Bronze zone and state directory the table was built from"
        )
    return zone.state_id


def silver_store(params: WorkbookParams, s3: Any = None) -> LakeStore:
    """The Silver zone's files (tables' timelines, staging, tombstones, quarantine)."""
    use_lake_s3(params)
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


def pending_bronze(
    params: WorkbookParams,
    table: SilverTableParams,
    store: BronzeStore | None = None,
    state: TableState | None = None,
    listing: Sequence[BronzeObject] | None = None,
) -> tuple[list[BronzeObject], BronzeCheckpoint]:
    """The table's Bronze files not taken yet (at most ``silver.max_files_per_round``), and the
    checkpoint to commit after taking them. Whichever engine wrote the table last: a streamer
    checkpoint is read as the watermark at its millisecond (:mod:`helpers.silver.state`).

    Args:
        params: workbook parameters.
        table: the Silver table.
        store: where Bronze is listed (default :func:`bronze_store`).
        state: the table's state, when the caller has read it (default: read here).
        listing: the table's Bronze files, when the caller has listed them (default: listed here).
    """

    state = state or read_table_state(table_config(params, table).base_path)
    settled = settled_files(params, table.name)  # quarantined with nothing to apply: taken
    listed_at = time.time()
    if listing is None:
        listing = (store or bronze_store(params)).list(silver_topic(params, table))
    return plan_round(
        [o for o in listing if o.name not in settled],
        state.checkpoint,
        listed_at,
        params.silver.checkpoint_margin_s,
        params.silver.max_files_per_round,
    )
