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
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from helpers.errors import HudiError
from helpers.hudi.read import (
    FileSliceRef,
    HudiReadSpec,
    parse_read_options,
    plan_file_slices,
    read_file_slices,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DATA_SOURCE_NAME",
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
_DEFAULT_SPLIT_MAX_BYTES = 128 * 1024 * 1024
_OWN_OPTIONS = frozenset({SPLIT_MAX_BYTES_OPTION})


class SlicePartition(InputPartition):
    """One Spark input partition: a group of file slices read by one task.

    Attributes:
        slices: The file slices of this partition.
    """

    def __init__(self, slices: Sequence[FileSliceRef]) -> None:
        super().__init__(len(slices))
        self.slices: tuple[FileSliceRef, ...] = tuple(slices)


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
            A :class:`_HudiRsReader`.
        """
        return _HudiRsReader(dict(self.options), schema)


class _HudiRsReader(DataSourceReader):
    """Plans file slices on the driver; reads them in tasks."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self._base_path = _base_path(options)
        self._spec: HudiReadSpec = parse_read_options(_reader_options(options))
        self._max_bytes = _split_max_bytes(options)
        table_schema, self._slices, self._reader_options = plan_file_slices(self._base_path, self._spec)
        requested: pa.Schema = to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)
        missing = [n for n in requested.names if n not in table_schema.names]
        if missing:
            raise HudiError(
                f"Failed to read Hudi table {self._base_path}: requested column(s) {missing} "
                f"are not in the table ({table_schema.names})"
            )
        self._schema = requested

    def partitions(self) -> Sequence[InputPartition]:
        """Return one input partition per group of file slices (at least one partition).

        Returns:
            The input partitions.
        """
        groups = pack_slices(self._slices, self._max_bytes)
        return [SlicePartition(g) for g in groups] or [SlicePartition(())]

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
        yield from read_file_slices(self._base_path, self._spec, slices, self._reader_options, self._schema)


def register_hudi_rs(spark: SparkSession) -> None:
    """Register :class:`HudiRsDataSource` with the session (idempotent).

    Args:
        spark: The active SparkSession.
    """
    spark.dataSource.register(HudiRsDataSource)


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
    register_hudi_rs(spark)
    return spark.read.format(DATA_SOURCE_NAME).options(**hudi_options, **own).load(str(path))
