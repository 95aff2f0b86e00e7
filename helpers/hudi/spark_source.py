"""Hudi tables as Spark DataFrames, through the official reader (hudi-rs) where no Hudi jar exists.

:class:`HudiRsDataSource` is a PySpark Python Data Source (short name ``hudi_rs``) that takes the
read options of Hudi's own Spark datasource (see :mod:`helpers.hudi.read`)::

    spark.dataSource.register(HudiRsDataSource)
    df = (spark.read.format("hudi_rs")
          .option("hoodie.datasource.query.type", "incremental")
          .option("hoodie.datasource.read.begin.instanttime", "20250331030642808")
          .load("/data/hudi/sales"))

:func:`read_hudi_df` is what notebooks call: it uses ``format("hudi")`` when the official Hudi
Spark bundle is on the classpath (EMR) and ``hudi_rs`` otherwise, with the same options.

Partitioning: the driver plans the file slices of the query with the official reader
(``get_file_slices``); slices are packed into input partitions of about
``hudi_rs.split.max.bytes`` (default 128 MiB of files on disk) each, at least one slice per
partition, so a small table is one task and a large one spreads over the executors. Each task
reads its slices with the official file-group reader (base file + log files merged, same
as-of/incremental bounds as the driver) and yields Arrow record batches. Spark applies filters
and column pruning after the read (no pushdown), which is correct but reads whole slices.

This module is imported by Spark's Python workers, so it only imports cheap, installed modules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from helpers.errors import HudiError
from helpers.hudi.read import (
    FileSliceRef,
    HudiReadSpec,
    ReadFilter,
    parse_read_options,
    plan_file_slices,
    read_file_slices,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from hudi import HudiTable
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DATA_SOURCE_NAME",
    "FILTER_PUSHDOWN_CONF",
    "PARTITION_PRUNING_OPTION",
    "SPLIT_MAX_BYTES_OPTION",
    "HudiRsDataSource",
    "SlicePartition",
    "pack_slices",
    "read_hudi_df",
    "register_hudi_rs",
]

#: Short name of :class:`HudiRsDataSource` for ``spark.read.format``.
DATA_SOURCE_NAME = "hudi_rs"
#: Option: target on-disk bytes of file slices per Spark input partition.
SPLIT_MAX_BYTES_OPTION = "hudi_rs.split.max.bytes"
#: Option: ``false`` turns partition pruning off (needed where filter pushdown is disabled).
PARTITION_PRUNING_OPTION = "hudi_rs.partition.pruning"
#: Spark setting that Python data sources need for ``pushFilters`` (false by default in Spark).
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_DEFAULT_SPLIT_MAX_BYTES = 128 * 1024 * 1024
_OWN_OPTIONS = frozenset({SPLIT_MAX_BYTES_OPTION, PARTITION_PRUNING_OPTION})


class SlicePartition(InputPartition):
    """One Spark input partition: a group of file slices read by one task.

    Attributes:
        slices: The file slices of this partition.
        reader_options: Options of the official file-group reader (table config + resolved
            instants), planned on the driver.
    """

    def __init__(self, slices: Sequence[FileSliceRef], reader_options: Mapping[str, str]) -> None:
        super().__init__(len(slices))
        self.slices: tuple[FileSliceRef, ...] = tuple(slices)
        self.reader_options: dict[str, str] = dict(reader_options)


def pack_slices(slices: Sequence[FileSliceRef], max_bytes: int) -> list[tuple[FileSliceRef, ...]]:
    """Pack file slices into groups of about ``max_bytes`` (first-fit decreasing by size).

    Args:
        slices: Planned file slices.
        max_bytes: Target on-disk size per group; a larger slice gets a group of its own.

    Returns:
        Groups in a deterministic order; every slice appears exactly once; no empty group.
    """
    bins: list[list[FileSliceRef]] = []
    sizes: list[int] = []
    for ref in sorted(slices, key=lambda s: (-s.size_bytes, s.partition_path, s.file_id)):
        for i, used in enumerate(sizes):
            if used + ref.size_bytes <= max_bytes:
                bins[i].append(ref)
                sizes[i] += ref.size_bytes
                break
        else:
            bins.append([ref])
            sizes.append(ref.size_bytes)
    return [tuple(b) for b in bins]


def _split_max_bytes(options: Mapping[str, str]) -> int:
    raw = options.get(SPLIT_MAX_BYTES_OPTION)
    if raw is None:
        return _DEFAULT_SPLIT_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise HudiError(
            f"Failed to parse option {SPLIT_MAX_BYTES_OPTION}={raw!r}: expected a positive integer"
        )
    return value


def _reader_options(options: Mapping[str, str]) -> dict[str, str]:
    """Spark passes ``path`` and our own options along; keep the Hudi ones."""
    return {k: v for k, v in options.items() if k != "path" and k not in _OWN_OPTIONS}


def _base_path(options: Mapping[str, str]) -> str:
    path = options.get("path")
    if not path:
        raise HudiError("Failed to read Hudi table: no path given; use .load(<table base path>)")
    return str(path)


class HudiRsDataSource(DataSource):
    """PySpark data source ``hudi_rs``: Hudi tables read by the official reader (hudi-rs).

    Options: those of :mod:`helpers.hudi.read` (Spark datasource names) plus
    ``hudi_rs.split.max.bytes``.
    """

    @classmethod
    def name(cls) -> str:
        """Return the short name used with ``spark.read.format``.

        Returns:
            ``"hudi_rs"``.
        """
        return DATA_SOURCE_NAME

    def schema(self) -> StructType:
        """Return the table schema (meta columns first, all fields nullable, timestamps UTC).

        Returns:
            The Spark schema of the query result.

        Raises:
            HudiError: if the options are invalid or the table cannot be opened.
        """
        from pyspark.sql.pandas.types import from_arrow_schema

        from helpers.hudi.read import open_table, table_arrow_schema

        options = dict(self.options)
        parse_read_options(_reader_options(options))
        schema: StructType = from_arrow_schema(table_arrow_schema(open_table(_base_path(options))))
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        """Return the reader for ``schema`` (the table schema, or one the user imposed).

        Args:
            schema: Requested Spark schema; columns must exist in the table.

        Returns:
            A reader that prunes partitions with pushed filters, or - with
            ``hudi_rs.partition.pruning=false`` - one that does not ask for filters (Spark refuses
            readers with ``pushFilters`` when ``spark.sql.python.filterPushdown.enabled`` is false).
        """
        options = dict(self.options)
        if options.get(PARTITION_PRUNING_OPTION, "true").strip().lower() == "false":
            return _HudiRsReader(options, schema)
        return _PruningHudiRsReader(options, schema)


class _HudiRsReader(DataSourceReader):
    """Plans file slices on the driver (pruned by partition filters); reads them in tasks."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from helpers.hudi.read import open_table, table_arrow_schema

        self._base_path = _base_path(options)
        self._spec: HudiReadSpec = parse_read_options(_reader_options(options))
        self._max_bytes = _split_max_bytes(options)
        table = open_table(self._base_path)
        table_schema = table_arrow_schema(table)
        requested: pa.Schema = to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)
        missing = [n for n in requested.names if n not in table_schema.names]
        if missing:
            raise HudiError(
                f"Failed to read Hudi table {self._base_path}: requested column(s) {missing} "
                f"are not in the table ({table_schema.names})"
            )
        self._schema = requested
        self._prunable = _prunable_partition_columns(table)
        self._prune_filters: list[ReadFilter] = []

    def partitions(self) -> Sequence[InputPartition]:
        """Plan the file slices and return one input partition per group of slices.

        Returns:
            The input partitions (at least one).
        """
        _, slices, reader_options = plan_file_slices(self._base_path, self._spec, self._prune_filters)
        groups = pack_slices(slices, self._max_bytes)
        return [SlicePartition(g, reader_options) for g in groups] or [SlicePartition((), reader_options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read the slices of one partition (runs on a Spark worker).

        Args:
            partition: A :class:`SlicePartition`.

        Yields:
            Arrow record batches in the requested schema.
        """
        slices: tuple[FileSliceRef, ...] = getattr(partition, "slices", ())
        if not slices:
            return
        reader_options: dict[str, str] = getattr(partition, "reader_options", {})
        yield from read_file_slices(self._base_path, self._spec, slices, reader_options, self._schema)


class _PruningHudiRsReader(_HudiRsReader):
    """:class:`_HudiRsReader` that also prunes partitions with filters Spark pushes."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Use simple filters on partition columns to prune partitions while planning.

        Pruning only: every filter is handed back, so Spark still evaluates all of them on the
        rows read (results never depend on the official reader's filter semantics).

        Args:
            filters: Filters Spark offers (an AND of all of them).

        Yields:
            All filters (each still evaluated by Spark).
        """
        for item in filters:
            converted = _to_prune_filter(item, self._prunable)
            if converted is not None:
                self._prune_filters.append(converted)
            yield item


_PRUNABLE_KEYGENS = frozenset(
    {
        "org.apache.hudi.keygen.SimpleKeyGenerator",
        "org.apache.hudi.keygen.ComplexKeyGenerator",
    }
)
_FILTER_OPERATORS: Mapping[type[Filter], str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "IN",
}


def _prunable_partition_columns(table: HudiTable) -> dict[str, str]:
    """Partition columns whose directory values equal the column values: name -> int|str."""
    options = table.hudi_options()
    if options.get("hoodie.table.keygenerator.class", "") not in _PRUNABLE_KEYGENS:
        return {}
    out: dict[str, str] = {}
    for f in table.get_partition_schema():
        if pa.types.is_integer(f.type):
            out[f.name] = "int"
        elif pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            out[f.name] = "str"
    return out


def _literal(value: Any, kind: str) -> str | None:
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if kind == "str" and isinstance(value, str) and "," not in value:
        return value
    return None


def _to_prune_filter(item: Filter, prunable: Mapping[str, str]) -> ReadFilter | None:
    """Translate a Spark filter into an official-reader filter, if it is safe for pruning."""
    operator = _FILTER_OPERATORS.get(type(item))
    attribute: tuple[str, ...] = tuple(getattr(item, "attribute", ()))
    if operator is None or len(attribute) != 1 or attribute[0] not in prunable:
        return None
    kind = prunable[attribute[0]]
    raw = getattr(item, "value", None)
    values = list(raw) if operator == "IN" and isinstance(raw, tuple | list) else [raw]
    literals = [_literal(v, kind) for v in values]
    if not literals or any(lit is None for lit in literals):
        return None
    return (attribute[0], operator, ",".join(str(lit) for lit in literals))


def register_hudi_rs(spark: SparkSession) -> bool:
    """Register :class:`HudiRsDataSource` with the session and enable Python filter pushdown.

    Args:
        spark: The active SparkSession.

    Returns:
        True if filter pushdown is enabled (partition pruning can be used), else False.
    """
    spark.dataSource.register(HudiRsDataSource)
    if str(spark.conf.get(FILTER_PUSHDOWN_CONF, "false")).lower() == "true":
        return True
    try:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    except Exception:  # noqa: BLE001 - e.g. a locked-down shared session
        return False
    return True


def read_hudi_df(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None) -> DataFrame:
    """Read a Hudi table as a Spark DataFrame, with the official datasource when available.

    On EMR (official Hudi Spark bundle present) this is ``spark.read.format("hudi")``; here it is
    the ``hudi_rs`` data source. Both get the same validated options, instants normalised to
    17 digits.

    Args:
        spark: The active SparkSession.
        path: Table base path.
        options: Read options of Hudi's Spark datasource (see :mod:`helpers.hudi.read`), plus
            ``hudi_rs.split.max.bytes`` (ignored by the official datasource).

    Returns:
        The DataFrame of the query.

    Raises:
        HudiError: for invalid options (before any Spark job runs).
    """
    from helpers.spark import hudi_datasource_available

    raw = {str(k): v for k, v in (options or {}).items()}
    own = {k: str(v) for k, v in raw.items() if k in _OWN_OPTIONS}
    spec = parse_read_options({k: v for k, v in raw.items() if k not in _OWN_OPTIONS})
    hudi_options = spec.to_datasource_options()
    if hudi_datasource_available(spark):
        return spark.read.format("hudi").options(**hudi_options).load(str(path))
    if not register_hudi_rs(spark):
        own[PARTITION_PRUNING_OPTION] = "false"
    return spark.read.format(DATA_SOURCE_NAME).options(**hudi_options, **own).load(str(path))
