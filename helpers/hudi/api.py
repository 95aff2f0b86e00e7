"""One write API for Hudi tables, with the option names of Hudi's Spark datasource.

:func:`write_hudi` takes the options the original DeltaStreamer / Spark jobs passed to
``df.write.format("hudi")`` and either

* hands them to the official Hudi Spark datasource when its classes are on the Spark classpath
  (EMR), or
* maps them onto :class:`helpers.hudi.config.HudiTableConfig` and calls the workbook's own
  table-version-6 writer (:mod:`helpers.hudi.spark_writer`) everywhere else.

Options understood (values are strings, as for Spark):

=================================================  ===========================================
option                                             meaning / default
=================================================  ===========================================
``hoodie.table.name``                              table name (required)
``hoodie.datasource.write.recordkey.field``        record key field(s), comma separated
                                                   (required)
``hoodie.datasource.write.precombine.field``       ordering field(s), comma separated
``hoodie.datasource.write.partitionpath.field``    partition field(s), comma separated;
                                                   empty/absent = not partitioned
``hoodie.datasource.write.table.type``             ``COPY_ON_WRITE`` (default) /
                                                   ``MERGE_ON_READ``
``hoodie.datasource.write.operation``              ``upsert`` (default), ``insert``,
                                                   ``bulk_insert``, ``delete``
``hoodie.datasource.write.hive_style_partitioning`` ``false`` (Hudi's default) / ``true``
``hoodie.datasource.write.keygenerator.class``     Simple / Complex / Nonpartitioned key
                                                   generator; must agree with the key and
                                                   partition fields (derived when absent)
``hoodie.datasource.hive_sync.*``,                 catalog sync: passed to the official
``hoodie.datasource.meta.sync.*``,                 datasource; the workbook writer cannot
``hoodie.meta.sync.*``                             sync and reports them in ``sync_skipped``
``hoodie.datasource.write.commitmeta.key.prefix``  options whose key starts with it are saved in
                                                   the commit's ``extraMetadata`` (default ``_``)
``workbook.hudi.delete.mode``                      ``hard`` (default) / ``soft`` (keep deleted
                                                   rows with ``__deleted=true``)
``workbook.hudi.write.driver.max.bytes``           inputs whose Spark size estimate is at most
                                                   this are written by the driver (default
                                                   67108864; 0: always Spark tasks)
=================================================  ===========================================

plus the tuning options listed in :data:`MAPPED_OPTIONS` (mapped onto the config) and
:data:`PASS_THROUGH_PATTERNS` (given to the official datasource, ignored by the workbook writer).
Any other key, or a contradictory combination, raises :class:`helpers.errors.HudiError` before
anything is written.

On the official branch the options given are passed unchanged, plus the derived key generator
class and two defaults that keep both engines' results the same (each only when not given):
``hoodie.metadata.enable=false`` (the workbook writer keeps no metadata table, see the format
notes F.4) and, with a precombine field, ``DefaultHoodieRecordPayload`` (a change with a lower
ordering value never overwrites the stored row, which is what the workbook writer does).

Example:
    >>> result = write_hudi(df, {                                    # doctest: +SKIP
    ...     "hoodie.table.name": "sales",
    ...     "hoodie.datasource.write.recordkey.field": "salesid",
    ...     "hoodie.datasource.write.precombine.field": "saletime",
    ...     "hoodie.datasource.write.operation": "upsert",
    ... }, "/data/hudi/sales")
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

import pyarrow as pa

from helpers.errors import HudiError
from helpers.hudi.config import COPY_ON_WRITE, MERGE_ON_READ, HudiTableConfig, Operation

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from helpers.hudi.writer import CommitResult

__all__ = [
    "DELETE_MODE_OPTION",
    "DRIVER_MAX_BYTES_OPTION",
    "KEYGEN_CLASSES",
    "MAPPED_OPTIONS",
    "PASS_THROUGH_PATTERNS",
    "SYNC_PATTERNS",
    "HudiWriteOptions",
    "HudiWriteResult",
    "WriteEngine",
    "choose_write_engine",
    "official_write_options",
    "parse_write_options",
    "to_table_config",
    "write_hudi",
]

_log = logging.getLogger(__name__)

WriteEngine = Literal["official", "workbook"]

TABLE_NAME = "hoodie.table.name"
TABLE_NAME_ALIAS = "hoodie.datasource.write.table.name"
RECORD_KEY = "hoodie.datasource.write.recordkey.field"
PRECOMBINE = "hoodie.datasource.write.precombine.field"
PARTITION_PATH = "hoodie.datasource.write.partitionpath.field"
TABLE_TYPE = "hoodie.datasource.write.table.type"
OPERATION = "hoodie.datasource.write.operation"
HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
KEYGEN_CLASS = "hoodie.datasource.write.keygenerator.class"
KEYGEN_TYPE = "hoodie.datasource.write.keygenerator.type"
PAYLOAD_CLASS = "hoodie.datasource.write.payload.class"
METADATA_ENABLE = "hoodie.metadata.enable"
DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"
#: Options whose key starts with this option's value are saved in the commit's ``extraMetadata``
#: (Hudi's ``commitmeta.key.prefix``; Hudi's default ``_``), by both engines.
COMMIT_META_PREFIX = "hoodie.datasource.write.commitmeta.key.prefix"
#: Workbook option (not a Hudi one; never passed to the official datasource).
DELETE_MODE_OPTION = "workbook.hudi.delete.mode"
#: Workbook option: the driver-path threshold of :func:`helpers.hudi.spark_writer.write_dataframe`.
DRIVER_MAX_BYTES_OPTION = "workbook.hudi.write.driver.max.bytes"
_DEFAULT_DRIVER_MAX_BYTES = 64 * 1024 * 1024
_WORKBOOK_KEYS = (DELETE_MODE_OPTION, DRIVER_MAX_BYTES_OPTION)

_OPERATIONS = ("upsert", "insert", "bulk_insert", "delete")
_KEYGEN_PACKAGE = "org.apache.hudi.keygen."
#: Key generators the workbook writer reproduces, by class and by ``keygenerator.type``.
KEYGEN_CLASSES: Mapping[str, str] = {
    "SIMPLE": _KEYGEN_PACKAGE + "SimpleKeyGenerator",
    "COMPLEX": _KEYGEN_PACKAGE + "ComplexKeyGenerator",
    "NON_PARTITION": _KEYGEN_PACKAGE + "NonpartitionedKeyGenerator",
}
_DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
_ACCEPTED_PAYLOADS = (
    _DEFAULT_PAYLOAD,
    "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
)

#: Options mapped onto :class:`HudiTableConfig` fields (and passed to the official datasource).
MAPPED_OPTIONS: Mapping[str, str] = {
    "hoodie.database.name": "database_name",
    "hoodie.parquet.max.file.size": "target_file_size_bytes",
    "hoodie.parquet.small.file.limit": "small_file_limit_bytes",
    "hoodie.compact.inline.max.delta.commits": "inline_compaction_delta_commits",
    "hoodie.cleaner.commits.retained": "cleaner_commits_retained",
    "hoodie.parquet.compression.codec": "parquet_compression",
    "hoodie.compact.inline": "inline_compaction_delta_commits",
    "hoodie.clean.automatic": "cleaner_commits_retained",
}

#: Catalog sync options (fnmatch patterns): official datasource only.
SYNC_PATTERNS: tuple[str, ...] = (
    "hoodie.datasource.hive_sync.*",
    "hoodie.datasource.meta.sync.*",
    "hoodie.meta.sync.*",
    "hoodie.meta_sync.*",
)

#: Tuning options (fnmatch patterns) given to the official datasource and ignored by the
#: workbook writer, whose behaviour they do not change.
PASS_THROUGH_PATTERNS: tuple[str, ...] = (
    "hoodie.*.shuffle.parallelism",
    "hoodie.index.*",
    "hoodie.bloom.*",
    "hoodie.simple.index.*",
    "hoodie.combine.before.*",
    "hoodie.datasource.write.row.writer.enable",
    "hoodie.datasource.write.reconcile.schema",
    "hoodie.datasource.write.schema.allow.auto.evolution.column.drop",
    "hoodie.write.markers.type",
    "hoodie.embed.timeline.server",
    "hoodie.bulkinsert.sort.mode",
    "hoodie.parquet.block.size",
    "hoodie.parquet.page.size",
    "hoodie.logfile.max.size",
    "hoodie.keep.min.commits",
    "hoodie.keep.max.commits",
    "hoodie.cleaner.policy",
    "hoodie.cleaner.parallelism",
    "hoodie.clustering.inline",
    "hoodie.table.timeline.timezone",
)
_SYNC_ENABLE_KEYS = (
    "hoodie.datasource.hive_sync.enable",
    "hoodie.datasource.meta.sync.enable",
    "hoodie.datasource.meta_sync.condition.sync",
)
_CORE_KEYS = (
    COMMIT_META_PREFIX,
    TABLE_NAME,
    TABLE_NAME_ALIAS,
    RECORD_KEY,
    PRECOMBINE,
    PARTITION_PATH,
    TABLE_TYPE,
    OPERATION,
    HIVE_STYLE,
    KEYGEN_CLASS,
    KEYGEN_TYPE,
    PAYLOAD_CLASS,
    METADATA_ENABLE,
    DROP_PARTITION_COLUMNS,
    URL_ENCODE,
    DELETE_MODE_OPTION,
    DRIVER_MAX_BYTES_OPTION,
)


def _fail(cause: str) -> HudiError:
    return HudiError(f"Failed to parse Hudi write options: {cause}")


def _fields(raw: str | None) -> tuple[str, ...]:
    if raw is None:
        return ()
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _bool(key: str, raw: str | None, default: bool) -> bool:
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise _fail(f"{key}={raw!r} must be 'true' or 'false'")
    return value == "true"


def _int(key: str, raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise _fail(f"{key}={raw!r} must be an integer") from None
    if value < 0:
        raise _fail(f"{key}={raw!r} must not be negative")
    return value


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


@dataclasses.dataclass(frozen=True)
class HudiWriteOptions:
    """Validated write options, engine independent.

    Attributes:
        table_name: ``hoodie.table.name``.
        record_key_fields: Record key fields.
        ordering_fields: Precombine / ordering fields (may be empty).
        partition_fields: Partition fields (empty: not partitioned).
        table_type: ``COPY_ON_WRITE`` or ``MERGE_ON_READ``.
        operation: ``upsert``, ``insert``, ``bulk_insert`` or ``delete``.
        hive_style_partitioning: ``field=value`` directories.
        keygen_class: The key generator class the key format follows.
        delete_mode: ``hard`` or ``soft``.
        driver_max_bytes: Spark inputs up to this estimated size are written by the driver.
        config_overrides: :class:`HudiTableConfig` fields set from :data:`MAPPED_OPTIONS`.
        sync_options: Catalog sync options (official datasource only).
        pass_through: Options for the official datasource only (tuning, payload, ...).
        given: The options as given (strings), for the official datasource.
        commit_metadata: Options saved in the commit's ``extraMetadata`` (keys starting with
            ``commitmeta.key.prefix``).
    """

    table_name: str
    record_key_fields: tuple[str, ...]
    ordering_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    table_type: str
    operation: Operation
    hive_style_partitioning: bool
    keygen_class: str
    delete_mode: str
    config_overrides: tuple[tuple[str, Any], ...]
    sync_options: tuple[tuple[str, str], ...]
    pass_through: tuple[tuple[str, str], ...]
    given: tuple[tuple[str, str], ...]
    driver_max_bytes: int = _DEFAULT_DRIVER_MAX_BYTES
    commit_metadata: tuple[tuple[str, str], ...] = ()

    @property
    def sync_enabled(self) -> bool:
        """Whether any catalog sync (Hive metastore / Glue) is switched on."""
        opts = dict(self.sync_options)
        return any(opts.get(k, "false").strip().lower() == "true" for k in _SYNC_ENABLE_KEYS)


def _derive_keygen(record_keys: tuple[str, ...], partitions: tuple[str, ...]) -> str:
    if not partitions:
        return KEYGEN_CLASSES["NON_PARTITION"]
    if len(record_keys) > 1 or len(partitions) > 1:
        return KEYGEN_CLASSES["COMPLEX"]
    return KEYGEN_CLASSES["SIMPLE"]


def _requested_keygen(opts: Mapping[str, str]) -> str | None:
    by_class = opts.get(KEYGEN_CLASS)
    by_type = opts.get(KEYGEN_TYPE)
    resolved_class: str | None = None
    if by_class is not None:
        name = by_class.strip()
        resolved_class = name if "." in name else _KEYGEN_PACKAGE + name
    if by_type is not None:
        from_type = KEYGEN_CLASSES.get(by_type.strip().upper())
        if from_type is None:
            raise _fail(f"{KEYGEN_TYPE}={by_type!r} is not one of {sorted(KEYGEN_CLASSES)}")
        if resolved_class is not None and resolved_class != from_type:
            raise _fail(f"{KEYGEN_CLASS}={by_class!r} contradicts {KEYGEN_TYPE}={by_type!r}")
        resolved_class = from_type
    return resolved_class


def parse_write_options(options: Mapping[str, Any]) -> HudiWriteOptions:
    """Validate Spark-datasource write options (see the module docstring).

    Args:
        options: Option name to value (values are converted with ``str``).

    Returns:
        The validated options.

    Raises:
        HudiError: naming the key, for a missing required option, an unknown option, an invalid
            value, or a contradiction (e.g. SimpleKeyGenerator with two record key fields).
    """
    opts = {str(k): str(v) for k, v in options.items()}
    meta_prefix = opts.get(COMMIT_META_PREFIX, "_")
    if not meta_prefix or meta_prefix.startswith("hoodie."):
        raise _fail(f"{COMMIT_META_PREFIX}={meta_prefix!r} must be a non-empty prefix outside hoodie.*")
    commit_metadata = tuple(
        sorted((k, v) for k, v in opts.items() if k.startswith(meta_prefix) and k not in _WORKBOOK_KEYS)
    )
    unknown = sorted(
        k
        for k in opts
        if k not in _CORE_KEYS
        and k not in dict(commit_metadata)
        and k not in MAPPED_OPTIONS
        and not _matches(k, SYNC_PATTERNS)
        and not _matches(k, PASS_THROUGH_PATTERNS)
    )
    if unknown:
        raise _fail(
            f"unknown option(s) {unknown}. Known: {sorted(_CORE_KEYS)}, {sorted(MAPPED_OPTIONS)}, "
            f"patterns {list(SYNC_PATTERNS + PASS_THROUGH_PATTERNS)}"
        )
    table_name = opts.get(TABLE_NAME, "").strip()
    alias = opts.get(TABLE_NAME_ALIAS, "").strip()
    if not table_name and not alias:
        raise _fail(f"{TABLE_NAME} is required")
    if table_name and alias and table_name != alias:
        raise _fail(f"{TABLE_NAME}={table_name!r} contradicts {TABLE_NAME_ALIAS}={alias!r}")
    table_name = table_name or alias
    record_keys = _fields(opts.get(RECORD_KEY))
    if not record_keys:
        raise _fail(f"{RECORD_KEY} is required (comma-separated field names)")
    ordering = _fields(opts.get(PRECOMBINE))
    partitions = _fields(opts.get(PARTITION_PATH))
    table_type = opts.get(TABLE_TYPE, COPY_ON_WRITE).strip().upper()
    if table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise _fail(f"{TABLE_TYPE}={opts[TABLE_TYPE]!r} must be {COPY_ON_WRITE} or {MERGE_ON_READ}")
    operation = opts.get(OPERATION, "upsert").strip().lower()
    if operation not in _OPERATIONS:
        raise _fail(f"{OPERATION}={opts[OPERATION]!r} is not one of {_OPERATIONS}")
    hive_style = _bool(HIVE_STYLE, opts.get(HIVE_STYLE), False)
    derived = _derive_keygen(record_keys, partitions)
    requested = _requested_keygen(opts)
    if requested is not None and requested != derived:
        raise _fail(
            f"key generator {requested} contradicts record key {list(record_keys)} and partition "
            f"fields {list(partitions)} (they need {derived.rsplit('.', 1)[-1]}); timestamp-based and "
            "custom key generators are not supported"
        )
    if _bool(DROP_PARTITION_COLUMNS, opts.get(DROP_PARTITION_COLUMNS), False):
        raise _fail(
            f"{DROP_PARTITION_COLUMNS}=true is not supported (the official reader hudi-rs refuses it)"
        )
    if _bool(URL_ENCODE, opts.get(URL_ENCODE), False):
        raise _fail(f"{URL_ENCODE}=true is not supported by the workbook's tables")
    payload = opts.get(PAYLOAD_CLASS)
    if payload is not None and payload.strip() not in _ACCEPTED_PAYLOADS:
        raise _fail(f"{PAYLOAD_CLASS}={payload!r} is not one of {list(_ACCEPTED_PAYLOADS)}")
    delete_mode = opts.get(DELETE_MODE_OPTION, "hard").strip().lower()
    if delete_mode not in ("hard", "soft"):
        raise _fail(f"{DELETE_MODE_OPTION}={opts[DELETE_MODE_OPTION]!r} must be 'hard' or 'soft'")
    driver_max_bytes = _DEFAULT_DRIVER_MAX_BYTES
    if DRIVER_MAX_BYTES_OPTION in opts:
        driver_max_bytes = _int(DRIVER_MAX_BYTES_OPTION, opts[DRIVER_MAX_BYTES_OPTION])
    overrides = _config_overrides(opts, table_type)
    sync = tuple(sorted((k, v) for k, v in opts.items() if _matches(k, SYNC_PATTERNS)))
    passed = tuple(
        sorted(
            (k, v)
            for k, v in opts.items()
            if _matches(k, PASS_THROUGH_PATTERNS) or k in (PAYLOAD_CLASS, METADATA_ENABLE)
        )
    )
    return HudiWriteOptions(
        table_name=table_name,
        record_key_fields=record_keys,
        ordering_fields=ordering,
        partition_fields=partitions,
        table_type=table_type,
        operation=cast(Operation, operation),
        hive_style_partitioning=hive_style,
        keygen_class=derived,
        delete_mode=delete_mode,
        config_overrides=overrides,
        sync_options=sync,
        pass_through=passed,
        given=tuple(sorted(opts.items())),
        driver_max_bytes=driver_max_bytes,
        commit_metadata=commit_metadata,
    )


def _config_overrides(opts: Mapping[str, str], table_type: str) -> tuple[tuple[str, Any], ...]:
    out: dict[str, Any] = {}
    for key in ("hoodie.database.name", "hoodie.parquet.compression.codec"):
        if key in opts:
            out[MAPPED_OPTIONS[key]] = opts[key].strip()
    for key in (
        "hoodie.parquet.max.file.size",
        "hoodie.parquet.small.file.limit",
        "hoodie.compact.inline.max.delta.commits",
        "hoodie.cleaner.commits.retained",
    ):
        if key in opts:
            out[MAPPED_OPTIONS[key]] = _int(key, opts[key])
    if not _bool("hoodie.compact.inline", opts.get("hoodie.compact.inline"), True):
        if (
            int(out.get("inline_compaction_delta_commits", 0)) > 0
            and "hoodie.compact.inline.max.delta.commits" in opts
        ):
            raise _fail("hoodie.compact.inline=false contradicts hoodie.compact.inline.max.delta.commits")
        out["inline_compaction_delta_commits"] = 0
    if not _bool("hoodie.clean.automatic", opts.get("hoodie.clean.automatic"), True):
        if "hoodie.cleaner.commits.retained" in opts:
            raise _fail("hoodie.clean.automatic=false contradicts hoodie.cleaner.commits.retained")
        out["cleaner_commits_retained"] = 0
    if table_type == COPY_ON_WRITE and "hoodie.compact.inline.max.delta.commits" in opts:
        raise _fail("hoodie.compact.inline.max.delta.commits applies to MERGE_ON_READ tables only")
    return tuple(sorted(out.items()))


def to_table_config(options: HudiWriteOptions, path: str) -> HudiTableConfig:
    """Map validated options onto the workbook writer's :class:`HudiTableConfig`.

    Args:
        options: From :func:`parse_write_options`.
        path: Table base path.

    Returns:
        The table configuration.

    Raises:
        HudiError: if the metadata table is requested (the workbook writer keeps none) or the
            configuration is invalid.
    """
    if dict(options.pass_through).get(METADATA_ENABLE, "false").strip().lower() == "true":
        raise HudiError(
            f"Failed to configure Hudi table {options.table_name!r} at {path}: {METADATA_ENABLE}=true "
            "needs the official Hudi datasource; the workbook writer keeps no metadata table"
        )
    return HudiTableConfig(
        table_name=options.table_name,
        base_path=str(path),
        table_type=options.table_type,  # type: ignore[arg-type]
        record_key_fields=options.record_key_fields,
        partition_fields=options.partition_fields,
        hive_style_partitioning=options.hive_style_partitioning,
        ordering_fields=options.ordering_fields,
        delete_mode=options.delete_mode,  # type: ignore[arg-type]
        **dict(options.config_overrides),
    )


def official_write_options(options: HudiWriteOptions) -> dict[str, str]:
    """Return the exact options to pass to ``df.write.format("hudi")``.

    The given options (minus workbook-only ones), with the normalised core values, the derived
    key generator class, and - only when not given - ``hoodie.metadata.enable=false`` and, with a
    precombine field, ``DefaultHoodieRecordPayload``.

    Args:
        options: From :func:`parse_write_options`.

    Returns:
        Option name to string value.

    Raises:
        HudiError: if several precombine fields are given (Hudi 0.14/0.15 takes one field).
    """
    if len(options.ordering_fields) > 1:
        raise HudiError(
            f"Failed to build official Hudi options for {options.table_name!r}: the official datasource "
            f"(Hudi 0.14/0.15) takes one precombine field, got {list(options.ordering_fields)}; "
            "combine them into one sortable column"
        )
    workbook_only = (*_WORKBOOK_KEYS, KEYGEN_TYPE, TABLE_NAME_ALIAS)
    out = {k: v for k, v in options.given if k not in workbook_only}
    out[TABLE_NAME] = options.table_name
    out[RECORD_KEY] = ",".join(options.record_key_fields)
    out[PARTITION_PATH] = ",".join(options.partition_fields)
    out[TABLE_TYPE] = options.table_type
    out[OPERATION] = options.operation
    out[HIVE_STYLE] = "true" if options.hive_style_partitioning else "false"
    out[KEYGEN_CLASS] = options.keygen_class
    if options.ordering_fields:
        out[PRECOMBINE] = options.ordering_fields[0]
        out.setdefault(PAYLOAD_CLASS, _DEFAULT_PAYLOAD)
    out.setdefault(METADATA_ENABLE, "false")
    return out


def choose_write_engine(spark: SparkSession) -> WriteEngine:
    """Pick the engine: the official datasource if its classes load, else the workbook writer.

    Args:
        spark: The active SparkSession.

    Returns:
        ``"official"`` or ``"workbook"``.
    """
    from helpers.spark import hudi_datasource_available

    return "official" if hudi_datasource_available(spark) else "workbook"


@dataclasses.dataclass(frozen=True)
class HudiWriteResult:
    """What :func:`write_hudi` did.

    Attributes:
        engine: ``official`` (``format("hudi")``) or ``workbook`` (the workbook's writer).
        path: Table base path.
        operation: The write operation.
        options: The options the engine received (official: the exact datasource options).
        commit: The workbook writer's commit result (None on the official branch).
        sync_skipped: Catalog sync options that were not acted on (workbook branch only).
    """

    engine: WriteEngine
    path: str
    operation: str
    options: Mapping[str, str]
    commit: CommitResult | None = None
    sync_skipped: tuple[str, ...] = ()


def write_hudi(
    df: DataFrame | pa.Table | pd.DataFrame,
    options: Mapping[str, Any],
    path: str,
    *,
    engine: WriteEngine | None = None,
) -> HudiWriteResult:
    """Write rows to a Hudi table with Hudi's Spark-datasource option names.

    Args:
        df: Rows to write (for ``delete``: at least the record key and partition fields): a Spark
            DataFrame, or - workbook writer only, no Spark needed - a ``pyarrow.Table`` or a
            pandas DataFrame, written in this process.
        options: Write options (module docstring). Validated before anything is written.
        path: Table base path.
        engine: Force ``"official"`` or ``"workbook"``; default: :func:`choose_write_engine`
            for a Spark DataFrame, ``"workbook"`` for Arrow and pandas input.

    Returns:
        What was done, with the commit result of the workbook writer.

    Raises:
        HudiError: for invalid or contradictory options, or when the write fails.
    """
    parsed = parse_write_options(options)
    local_input: pa.Table | None = None
    if isinstance(df, pa.Table):
        local_input = df
    elif type(df).__module__.startswith("pandas"):
        local_input = pa.Table.from_pandas(df, preserve_index=False)
    if local_input is not None:
        if engine == "official":
            raise HudiError(
                f"Failed to write Hudi table {parsed.table_name!r} at {path}: the official Hudi "
                "datasource writes Spark DataFrames; pass spark.createDataFrame(...) instead"
            )
        chosen: WriteEngine = "workbook"
    else:
        chosen = engine or choose_write_engine(df.sparkSession)
    if chosen == "official":
        official = official_write_options(parsed)
        try:
            df.write.format("hudi").options(**official).mode("append").save(str(path))
        except Exception as exc:  # noqa: BLE001 - Py4J / analysis errors
            raise HudiError(f"Failed to write Hudi table {parsed.table_name!r} at {path}: {exc}") from exc
        return HudiWriteResult(
            engine="official", path=str(path), operation=parsed.operation, options=official
        )
    config = to_table_config(parsed, str(path))
    skipped: tuple[str, ...] = ()
    if parsed.sync_enabled:
        skipped = tuple(k for k, _ in parsed.sync_options)
        _log.warning(
            "Hudi table %s at %s: catalog sync options are ignored by the workbook writer "
            "(no Hive metastore / Glue here): %s",
            parsed.table_name,
            path,
            ", ".join(skipped),
        )
    if local_input is not None:
        from helpers.hudi.writer import write_arrow

        commit = write_arrow(
            local_input, config, parsed.operation, extra_metadata=dict(parsed.commit_metadata)
        )
    else:
        from helpers.hudi.spark_writer import write_dataframe

        commit = write_dataframe(
            df,
            config,
            parsed.operation,
            driver_max_bytes=parsed.driver_max_bytes,
            extra_metadata=dict(parsed.commit_metadata),
        )
    return HudiWriteResult(
        engine="workbook",
        path=str(path),
        operation=parsed.operation,
        options=dict(parsed.given),
        commit=commit,
        sync_skipped=skipped,
    )
