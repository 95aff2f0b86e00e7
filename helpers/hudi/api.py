"""Write and read Hudi tables through the official Apache Hudi Spark datasource.

:func:`write_hudi` writes with ``df.write.format("hudi")``, adding the workbook's defaults
(:func:`write_options`: table version 6, UTC timeline, no metadata table,
``DefaultHoodieRecordPayload``), and returns the commit it made (:class:`HudiCommit`).
:func:`read_hudi_df` reads snapshot, time travel, incremental and read-optimized. The options and
why: ``docs/hudi.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from helpers.errors import HudiError, cause_line
from helpers.hudi.read import (
    BEGIN_INSTANT,
    END_INSTANT,
    QUERY_TYPE,
    parse_read_options,
    retry_transient,
)
from helpers.hudi.timeline import completed_instants, read_commit_metadata, write_stats

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "COMMIT_META_PREFIX",
    "DEFAULT_WRITE_OPTIONS",
    "HudiCommit",
    "INCREMENTAL_FORMAT",
    "OPERATIONS",
    "read_hudi_df",
    "write_hudi",
    "write_options",
]

TABLE_NAME = "hoodie.table.name"
RECORD_KEY = "hoodie.datasource.write.recordkey.field"
PRECOMBINE = "hoodie.datasource.write.precombine.field"
PARTITION_PATH = "hoodie.datasource.write.partitionpath.field"
OPERATION = "hoodie.datasource.write.operation"
PAYLOAD_CLASS = "hoodie.datasource.write.payload.class"
KEYGEN_CLASS = "hoodie.datasource.write.keygenerator.class"
#: Options whose key starts with this option's value go into the commit's ``extraMetadata``.
COMMIT_META_PREFIX = "hoodie.datasource.write.commitmeta.key.prefix"
#: Read option: ``latest_state`` (typed rows, the default) or ``cdc`` (Hudi's change feed).
INCREMENTAL_FORMAT = "hoodie.datasource.query.incremental.format"
OPERATIONS = ("upsert", "insert", "bulk_insert", "delete")
_DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"

#: Added to every write unless the caller gives the key (``docs/hudi.md``).
DEFAULT_WRITE_OPTIONS: Mapping[str, str] = {
    "hoodie.write.table.version": "6",
    "hoodie.write.auto.upgrade": "false",
    "hoodie.table.timeline.timezone": "UTC",
    "hoodie.metadata.enable": "false",
    "hoodie.datasource.write.hive_style_partitioning": "true",
    "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
    OPERATION: "upsert",
}


@dataclasses.dataclass(frozen=True)
class HudiCommit:
    """A completed commit, as its metadata on the timeline tells it.

    Attributes:
        instant: the instant time (17 digits, UTC).
        action: ``commit``, ``deltacommit`` or ``replacecommit``.
        inserts: records inserted (write stats ``numInserts``).
        updates: records updated (``numUpdateWrites``).
        deletes: records deleted (``numDeletes``).
        files: files written.
        extra_metadata: the commit's ``extraMetadata`` (the workbook's state among it).
    """

    instant: str
    action: str
    inserts: int
    updates: int
    deletes: int
    files: int
    extra_metadata: Mapping[str, str]


def _keygen(record_keys: list[str], partitions: list[str]) -> str:
    if not partitions:
        return "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if len(record_keys) > 1 or len(partitions) > 1:
        return "org.apache.hudi.keygen.ComplexKeyGenerator"
    return "org.apache.hudi.keygen.SimpleKeyGenerator"


def write_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The exact options :func:`write_hudi` passes to the datasource for the caller's ``options``.

    Raises:
        HudiError: when the table name or record key is missing, the operation is unknown, or
            several precombine fields are given (table version 6 takes one).
    """
    given = {str(k): str(v) for k, v in options.items()}
    name = given.get(TABLE_NAME, "")
    problems = []
    if not name:
        problems.append(f"{TABLE_NAME} is required")
    keys = [k.strip() for k in given.get(RECORD_KEY, "").split(",") if k.strip()]
    if not keys:
        problems.append(f"{RECORD_KEY} is required")
    operation = given.get(OPERATION, "upsert").strip().lower()
    if operation not in OPERATIONS:
        problems.append(f"{OPERATION}={operation!r} is not one of {OPERATIONS}")
    precombine = [f.strip() for f in given.get(PRECOMBINE, "").split(",") if f.strip()]
    if len(precombine) > 1:
        problems.append(
            f"{PRECOMBINE} names {precombine}: table version 6 takes one field; combine them into one "
            "sortable column"
        )
    if problems:
        raise HudiError(f"Failed to prepare the Hudi write of {name or '(unnamed)'}: " + "; ".join(problems))
    out = dict(DEFAULT_WRITE_OPTIONS)
    out.update(given)
    out[OPERATION] = operation
    partitions = [p.strip() for p in out.get(PARTITION_PATH, "").split(",") if p.strip()]
    out[PARTITION_PATH] = ",".join(partitions)
    out.setdefault(KEYGEN_CLASS, _keygen(keys, partitions))
    if precombine:
        out.setdefault(PAYLOAD_CLASS, _DEFAULT_PAYLOAD)
    return out


def _commit_of(path: str, instant: Any) -> HudiCommit:
    meta = read_commit_metadata(path, instant)
    stats = write_stats(meta)
    return HudiCommit(
        instant=instant.timestamp,
        action=instant.action,
        inserts=sum(int(s.get("numInserts") or 0) for s in stats),
        updates=sum(int(s.get("numUpdateWrites") or 0) for s in stats),
        deletes=sum(int(s.get("numDeletes") or 0) for s in stats),
        files=len(stats),
        extra_metadata={str(k): str(v) for k, v in (meta.get("extraMetadata") or {}).items()},
    )


def write_hudi(df: DataFrame, options: Mapping[str, Any], path: str) -> HudiCommit:
    """Write a Spark DataFrame to a Hudi table with the official datasource (append mode).

    Args:
        df: the rows (for ``delete``: at least the record key and partition fields).
        options: Hudi datasource options (:func:`write_options` adds the workbook's defaults).
        path: table base path or ``s3://`` URI.

    Returns:
        The data commit this write completed (the newest ``commit``/``deltacommit``; with inline
        compaction the delta commit, not the compaction).

    Raises:
        HudiError: naming the table and the cause when the write fails; the table then stays as of
            its last completed commit (Hudi rolls the failed one back on the next write).
    """
    opts = write_options(options)
    before = {i.timestamp for i in completed_instants(path, ("commit", "deltacommit"))}
    try:
        df.write.format("hudi").options(**opts).mode("append").save(str(path))
    except Exception as exc:  # noqa: BLE001 - Py4J / analysis errors
        cause = str(exc).strip().splitlines()
        first = next(
            (line for line in cause if "Exception" in line or "Error" in line), cause[0] if cause else ""
        )
        raise HudiError(f"Failed to write Hudi table {opts[TABLE_NAME]!r} at {path}: {first[:2000]}") from exc
    new = [i for i in completed_instants(path, ("commit", "deltacommit")) if i.timestamp not in before]
    if not new:
        raise HudiError(f"Failed to write Hudi table {opts[TABLE_NAME]!r} at {path}: no commit completed")
    data = [
        i
        for i in new
        if i.action
        == ("deltacommit" if opts.get("hoodie.datasource.write.table.type") == "MERGE_ON_READ" else "commit")
    ] or new
    return _commit_of(str(path), min(data, key=lambda i: i.timestamp))


def read_hudi_df(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None) -> DataFrame:
    """Read a Hudi table with the official datasource.

    Args:
        spark: the session (:func:`helpers.spark.build_spark_session`).
        path: table base path or URI.
        options: ``hoodie.datasource.query.type`` (``snapshot``, ``read_optimized``,
            ``incremental``), ``as.of.instant``, ``hoodie.datasource.read.begin.instanttime`` /
            ``end.instanttime`` (any form :func:`helpers.instants.to_instant` takes), and for
            incremental queries ``hoodie.datasource.query.incremental.format`` (``latest_state``,
            or ``cdc``: Hudi's change feed with ``op``, ``ts_ms``, ``before``, ``after``).

    Returns:
        A DataFrame (lazy).

    Raises:
        HudiError: for invalid options, or when the table cannot be read. A load that meets
            ``hoodie.properties`` half-rewritten by a concurrent writer (Hudi 0.14's streamer does
            that on every commit) is tried again: :func:`helpers.hudi.read.transient_read_error`.
    """
    opts = dict(options or {})
    incremental_format = str(opts.pop(INCREMENTAL_FORMAT, "latest_state")).strip().lower()
    if incremental_format not in ("latest_state", "cdc"):
        raise HudiError(f"Failed to read Hudi table {path}: {INCREMENTAL_FORMAT} must be latest_state or cdc")
    spec = parse_read_options(opts)
    ds = spec.to_datasource_options()
    if spec.query_type == "incremental":
        ds[INCREMENTAL_FORMAT] = incremental_format
        ds[BEGIN_INSTANT] = spec.begin if spec.begin and spec.begin.strip("0") else "000"
        if spec.end is not None:
            ds[END_INSTANT] = spec.end
    elif incremental_format == "cdc":
        raise HudiError(f"Failed to read Hudi table {path}: the cdc format needs {QUERY_TYPE}=incremental")
    try:  # again while a writer is rewriting hoodie.properties
        return retry_transient(lambda: spark.read.format("hudi").options(**ds).load(str(path)), str(path))
    except Exception as exc:  # noqa: BLE001
        raise HudiError(f"Failed to read Hudi table {path}: {cause_line(exc)}") from exc
