"""Silver ingestion as a Spark job with Hudi's datasource options: the path EMR runs.

:func:`ingest_table_spark` does what :func:`helpers.silver.ingest_table` does, as a Spark job:

1. reads the table's checkpoint from its newest commit (local timeline, or S3 with boto3) and
   lists Bronze (local folder, or S3), keeping the files not taken yet
   (:mod:`helpers.bronze_checkpoint`);
2. reads them with Spark (Avro, one read per writer schema, united by name so a column added at
   the source later is null in older events);
3. adds ``_cdc_position``, one sortable string made of the source's log position (the official
   datasource of Hudi 0.14/0.15 takes a single precombine field): PostgreSQL LSN; MySQL binlog
   file number, position, row; SQL Server commit LSN, change LSN, event serial number; each part
   zero-padded, so string order is log order;
4. writes with :func:`helpers.hudi.api.write_hudi`: on EMR (the official Hudi bundle on the
   classpath) through ``df.write.format("hudi")`` with ``DefaultHoodieRecordPayload`` (an older
   change never overwrites a newer one), Glue sync when asked; elsewhere the workbook's writer takes
   the same options. The files taken and the new checkpoint go into the commit's
   ``extraMetadata`` through ``hoodie.datasource.write.commitmeta.key.prefix``, atomically with
   the data, as with the in-process path.

Deletes: hard mode marks them with ``_hoodie_is_deleted``; soft mode keeps the row with a boolean
``__deleted``. One writer per table at a time (as one DeltaStreamer per table): the local
in-process path holds a table lock, the official datasource here relies on that.

PostgreSQL TOAST placeholders are replaced as on the in-process path
(:func:`fill_unavailable_spark`): the key's previous value in the batch by log position (a window),
else the stored row (read through the official datasource on EMR, the official reader here).
JSON-lines Bronze is read by the in-process path only.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

import fastavro
import pandas as pd

from helpers.bronze_checkpoint import (
    CHECKPOINT_KEY,
    FILES_KEY,
    BronzeObject,
    BronzeStore,
    LocalBronze,
    S3Bronze,
    latest_checkpoint,
    local_commit_metadata,
    plan_round,
    s3_commit_metadata,
)
from helpers.capture.connectors import UNAVAILABLE_VALUE
from helpers.errors import HudiError
from helpers.hudi.api import WriteEngine, write_hudi
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver import IngestResult, topic_of

__all__ = [
    "POSITION_COLUMN",
    "bronze_dataframe",
    "fill_unavailable_spark",
    "ingest_all_spark",
    "ingest_table_spark",
    "lake_uri",
    "prepare_events",
    "silver_write_options",
]

POSITION_COLUMN = "_cdc_position"
COMMIT_META_PREFIX = "workbook.bronze."


def lake_uri(params: WorkbookParams, value: str) -> str:
    """A lake location as a string: ``s3://`` URIs unchanged, local paths resolved."""
    return value.rstrip("/") if value.startswith(("s3://", "s3a://")) else str(params.path(value))


def _engine_of(params: WorkbookParams, table: SilverTableParams) -> str:
    return params.source(table.source).engine


def _writer_schema(store: BronzeStore, obj: BronzeObject) -> str:
    size = 65536
    while True:
        head = store.head(obj, size)
        try:
            schema = fastavro.reader(io.BytesIO(head)).writer_schema
            return json.dumps(schema, sort_keys=True)
        except Exception as exc:  # noqa: BLE001 - a header longer than what was read, or not Avro
            if len(head) < size:
                raise HudiError(f"Failed to read the Avro header of Bronze file {obj.uri}: {exc}") from None
            size *= 4


def bronze_dataframe(spark: Any, store: BronzeStore, objects: Sequence[BronzeObject]) -> Any:
    """The Bronze files as one Spark DataFrame (see the module docstring, step 2).

    Raises:
        HudiError: for a JSON-lines file or an unreadable Avro header (naming the file).
    """
    jsonl = [o.uri for o in objects if not o.name.endswith(".avro")]
    if jsonl:
        raise HudiError(
            f"Failed to read Bronze with Spark: {jsonl[0]} is JSON lines; the Spark path reads Avro "
            "Bronze (capture.bronze_format: avro, the S3 sink's format here)"
        )
    by_schema: dict[str, list[str]] = {}
    for obj in objects:
        by_schema.setdefault(_writer_schema(store, obj), []).append(obj.uri)
    from helpers.spark import avro_format_name

    avro_format = avro_format_name(spark)  # "avro" where registered (EMR), else the class name
    frames = [spark.read.format(avro_format).load(uris) for uris in by_schema.values()]
    if not frames:
        raise HudiError("Failed to read Bronze with Spark: no files given")
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other, allowMissingColumns=True)
    return df


def prepare_events(df: Any, engine: str, delete_mode: str) -> Any:
    """Add ``_cdc_position`` and the delete marker (module docstring, steps 3 and 4).

    Raises:
        HudiError: when the events lack the engine's position fields.
    """
    from pyspark.sql import functions as F

    def pad(name: str, width: int) -> Any:
        return F.lpad(F.col(name).cast("string"), width, "0")

    if engine == "postgres":
        needed, position = ["__lsn"], pad("__lsn", 20)
    elif engine in ("mysql", "mariadb"):
        needed = ["__file", "__pos", "__row"]
        number = F.lpad(F.substring_index(F.col("__file"), ".", -1), 10, "0")
        position = F.concat_ws(".", number, pad("__pos", 20), pad("__row", 10))
    elif engine == "sqlserver":
        needed = ["__commit_lsn", "__change_lsn", "__event_serial_no"]
        position = F.concat_ws(
            ".", F.col("__commit_lsn"), F.col("__change_lsn"), pad("__event_serial_no", 10)
        )
    else:
        raise HudiError(f"Failed to order change events: unknown source engine {engine!r}")
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise HudiError(f"Failed to order change events: they lack {missing} (the {engine} position)")
    df = df.withColumn(POSITION_COLUMN, position)
    deleted = F.coalesce(F.col("__deleted") == F.lit("true"), F.lit(False))
    if delete_mode == "soft":
        return df.withColumn("__deleted", deleted)
    return df.withColumn("_hoodie_is_deleted", deleted).drop("__deleted")


def fill_unavailable_spark(
    df: Any, table: SilverTableParams, stored: Any, placeholder: str = UNAVAILABLE_VALUE
) -> tuple[Any, int]:
    """Replace TOAST placeholders in string and binary columns (see the module docstring).

    Args:
        df: output of :func:`prepare_events`.
        table: the Silver table (its record key).
        stored: ``() -> DataFrame | None`` of the stored table (None: no table yet); called only
            when the batch alone cannot resolve a placeholder, which then stays null.
        placeholder: Debezium's ``unavailable.value.placeholder``.

    Returns:
        The events and the number of placeholder values found (0: ``df`` unchanged).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    columns = [
        f.name
        for f in df.schema.fields
        if isinstance(f.dataType, T.StringType | T.BinaryType) and f.name not in table.record_key
    ]
    if not columns:
        return df, 0

    def is_placeholder(name: str) -> Any:
        value = placeholder.encode() if isinstance(df.schema[name].dataType, T.BinaryType) else placeholder
        return F.coalesce(F.col(name) == F.lit(value), F.lit(False))

    found = df.select(*[F.sum(is_placeholder(c).cast("long")).alias(c) for c in columns]).first()
    affected = [c for c in columns if found is not None and (found[c] or 0) > 0]
    if not affected:
        return df, 0
    earlier = (
        Window.partitionBy(*table.record_key)
        .orderBy(POSITION_COLUMN)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    for name in affected:
        previous = F.last(F.when(~is_placeholder(name), F.col(name)), ignorenulls=True).over(earlier)
        df = df.withColumn(f"_toast_{name}", is_placeholder(name)).withColumn(
            name, F.when(is_placeholder(name), previous).otherwise(F.col(name))
        )
    unresolved = F.lit(False)
    for name in affected:
        unresolved = unresolved | (F.col(f"_toast_{name}") & F.col(name).isNull())
    table_now = stored() if df.filter(unresolved).limit(1).count() else None
    if table_now is not None:
        old = table_now.select(*table.record_key, *[F.col(c).alias(f"_stored_{c}") for c in affected])
        df = df.join(old, list(table.record_key), "left")
        for name in affected:
            df = df.withColumn(
                name,
                F.when(F.col(f"_toast_{name}") & F.col(name).isNull(), F.col(f"_stored_{name}")).otherwise(
                    F.col(name)
                ),
            ).drop(f"_stored_{name}")
    return df.drop(*[f"_toast_{name}" for name in affected]), int(sum(found[c] or 0 for c in affected))


def _stored_reader(spark: Any, base: str, engine: WriteEngine | None) -> Any:
    def read() -> Any:
        from helpers.hudi.api import choose_write_engine

        if (engine or choose_write_engine(spark)) == "official":
            return spark.read.format("hudi").load(base)
        from helpers.hudi.read import read_snapshot
        from helpers.hudi.timeline import completed_instants

        return spark.createDataFrame(read_snapshot(base)) if completed_instants(base) else None

    return read


def silver_write_options(
    params: WorkbookParams,
    table: SilverTableParams,
    files: Sequence[str],
    checkpoint_json: str,
    *,
    sync: bool = False,
) -> dict[str, str]:
    """Hudi datasource options of one ingestion commit (both engines take them).

    Args:
        params: workbook parameters.
        table: the Silver table.
        files: Bronze file names this commit takes.
        checkpoint_json: the checkpoint after it.
        sync: register in the Glue Data Catalog through Hudi's Hive sync (EMR's metastore is Glue);
            a Merge-on-Read table appears as ``<name>_ro`` and ``<name>_rt``.

    Returns:
        Option name to value.
    """
    options = {
        "hoodie.table.name": table.name,
        "hoodie.database.name": f"{params.project}_silver",
        "hoodie.datasource.write.recordkey.field": ",".join(table.record_key),
        "hoodie.datasource.write.partitionpath.field": ",".join(table.partition),
        "hoodie.datasource.write.precombine.field": POSITION_COLUMN,
        "hoodie.datasource.write.table.type": table.table_type,
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
        "hoodie.datasource.write.commitmeta.key.prefix": COMMIT_META_PREFIX,
        "workbook.hudi.delete.mode": table.delete_mode,
        FILES_KEY: json.dumps(sorted(files)),
        CHECKPOINT_KEY: checkpoint_json,
    }
    if sync:
        options.update(
            {
                "hoodie.datasource.hive_sync.enable": "true",
                "hoodie.datasource.hive_sync.mode": "hms",
                "hoodie.datasource.hive_sync.database": f"{params.project}_silver",
                "hoodie.datasource.hive_sync.table": table.name,
                "hoodie.datasource.hive_sync.partition_fields": ",".join(table.partition),
                "hoodie.datasource.hive_sync.partition_extractor_class": (
                    "org.apache.hudi.hive.MultiPartKeysValueExtractor"
                    if table.partition
                    else "org.apache.hudi.hive.NonPartitionedExtractor"
                ),
            }
        )
    return options


def _s3_client(params: WorkbookParams) -> Any:
    import boto3

    region = params.aws.region if params.aws is not None else None
    return boto3.client("s3", region_name=region)


def ingest_table_spark(
    spark: Any,
    params: WorkbookParams,
    table: SilverTableParams,
    *,
    store: BronzeStore | None = None,
    commits: Iterable[dict[str, Any]] | None = None,
    s3: Any = None,
    engine: WriteEngine | None = None,
    sync: bool = False,
) -> IngestResult:
    """Ingest a table's new Bronze files with Spark (module docstring).

    Args:
        spark: the SparkSession (EMR's, with the Hudi bundle; or a local one).
        params: workbook parameters (``lake.bronze`` / ``lake.silver`` local paths or S3 URIs).
        table: the Silver table.
        store: where Bronze is listed; default from ``lake.bronze``.
        commits: the table's commit metadata, newest first; default from its timeline.
        s3: boto3 S3 client for S3 locations (default: a new one).
        engine: force ``official`` or ``workbook`` (default: official when its classes load).
        sync: Glue sync through the official datasource (:func:`silver_write_options`).

    Returns:
        What was ingested (``instant`` is the workbook writer's; None from the official one).

    Raises:
        HudiError: naming the table, when Bronze cannot be listed or read or the write fails.
    """
    bronze = lake_uri(params, params.lake.bronze)
    base = f"{lake_uri(params, params.lake.silver)}/{table.name}"
    if bronze.startswith("s3") or base.startswith("s3"):
        s3 = s3 if s3 is not None else _s3_client(params)
    if store is None:
        store = S3Bronze(s3, bronze) if bronze.startswith("s3") else LocalBronze(bronze)
    if commits is None:
        commits = s3_commit_metadata(s3, base) if base.startswith("s3") else local_commit_metadata(base)
    state = latest_checkpoint(commits)
    listed_at = time.time()
    new, after = plan_round(
        store.list(topic_of(params, table)), state, listed_at, params.silver.checkpoint_margin_s
    )
    if not new:
        return IngestResult(table.name, 0, 0, None)
    events = prepare_events(bronze_dataframe(spark, store, new), _engine_of(params, table), table.delete_mode)
    events, _ = fill_unavailable_spark(events, table, _stored_reader(spark, base, engine))
    options = silver_write_options(params, table, [o.name for o in new], after.to_json(), sync=sync)
    try:
        result = write_hudi(events, options, base, engine=engine)
    except HudiError as exc:
        raise HudiError(
            f"Failed to ingest {len(new)} Bronze file(s) into {table.name} at {base}: {exc}"
        ) from exc
    commit = result.commit
    if commit is None:
        return IngestResult(table.name, len(new), int(events.count()), None)
    return IngestResult(
        table.name,
        len(new),
        int(events.count()),
        commit.instant,
        commit.num_inserts,
        commit.num_updates,
        commit.num_deletes,
    )


def ingest_all_spark(
    spark: Any,
    params: WorkbookParams,
    names: Sequence[str] | None = None,
    *,
    engine: WriteEngine | None = None,
    sync: bool = False,
) -> pd.DataFrame:
    """:func:`ingest_table_spark` for every configured table (or those named); one row per table."""
    s3 = None
    if any(lake_uri(params, v).startswith("s3") for v in (params.lake.bronze, params.lake.silver)):
        s3 = _s3_client(params)
    rows = [
        ingest_table_spark(spark, params, t, s3=s3, engine=engine, sync=sync).__dict__
        for t in params.silver.tables
        if names is None or t.name in names
    ]
    return pd.DataFrame(rows)
