"""Read Apache Hudi tables through the official Rust reader (PyPI ``hudi``, the hudi-rs bindings).

:func:`read_hudi`, :func:`read_snapshot`, :func:`read_incremental` and :func:`read_hudi_pandas`
return Arrow (or pandas) and take the Spark datasource's option names, so one option dictionary also
works with :func:`helpers.hudi.api.read_hudi_df`; the option table is in ``docs/hudi.md``. One
cohesive module: option parsing, table opening and file-slice reads share one reader and one
meaning of every option.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pyarrow as pa
from hudi import HudiFileGroupReader, HudiQueryType, HudiReadOptions, HudiTableBuilder

from helpers.errors import HudiError, WorkbookError
from helpers.instants import InstantInput, to_instant
from helpers.lake_store import hudi_storage_options

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd
    from hudi import HudiReadOptions, HudiTable

__all__ = [
    "AS_OF_INSTANT",
    "BEGIN_INSTANT",
    "END_INSTANT",
    "EARLIEST_INSTANT",
    "IGNORED_READ_OPTIONS",
    "QUERY_TYPE",
    "READ_RETRIES",
    "READ_RETRY_PAUSE_S",
    "FileSliceRef",
    "HudiReadSpec",
    "QueryType",
    "ReadFilter",
    "open_table",
    "parse_read_options",
    "plan_file_slices",
    "read_file_slices",
    "read_hudi",
    "read_hudi_pandas",
    "read_incremental",
    "read_snapshot",
    "retry_transient",
    "table_arrow_schema",
    "transient_read_error",
]

#: Spark datasource option: time travel instant.
AS_OF_INSTANT = "as.of.instant"
#: Spark datasource option: ``snapshot`` | ``incremental`` | ``read_optimized``.
QUERY_TYPE = "hoodie.datasource.query.type"
#: Spark datasource option: incremental start (exclusive).
BEGIN_INSTANT = "hoodie.datasource.read.begin.instanttime"
#: Spark datasource option: incremental end (inclusive).
END_INSTANT = "hoodie.datasource.read.end.instanttime"
#: What ``"000"``/``"0"`` (the Hudi idiom for "from the beginning") maps to.
EARLIEST_INSTANT = "19700101000000000"

#: Options of the Java datasource that only tune the Java reader; accepted and ignored here.
IGNORED_READ_OPTIONS: frozenset[str] = frozenset(
    {
        "path",
        "hoodie.metadata.enable",
        "hoodie.enable.data.skipping",
        "hoodie.file.index.enable",
        "hoodie.datasource.read.incr.fallback.fulltablescan.enable",
        "hoodie.datasource.read.extract.partition.from.path",
        "hoodie.datasource.read.paths",
        "hoodie.schema.on.read.enable",
    }
)

QueryType = Literal["snapshot", "incremental", "read_optimized"]
_QUERY_TYPES: tuple[str, ...] = ("snapshot", "incremental", "read_optimized")
_NATIVE_PREFIX = "hoodie.read."
_READ_OPTIMIZED_KEY = "hoodie.read.use.read_optimized.mode"

#: A filter as the official reader takes it: ``(field, operator, value)``, e.g. ``("city", "=", "sf")``.
ReadFilter = tuple[str, str, str]


@dataclasses.dataclass(frozen=True)
class HudiReadSpec:
    """A validated read request, independent of the engine that executes it.

    Attributes:
        query_type: ``snapshot``, ``incremental`` or ``read_optimized``.
        as_of: Time-travel instant (17 digits) or None for the latest commit.
        begin: Incremental start instant, exclusive (incremental only).
        end: Incremental end instant, inclusive, or None for the latest commit.
        native_options: ``hoodie.read.*`` options passed unchanged to the official reader.
    """

    query_type: QueryType = "snapshot"
    as_of: str | None = None
    begin: str | None = None
    end: str | None = None
    native_options: tuple[tuple[str, str], ...] = ()

    def to_read_options(
        self,
        columns: Sequence[str] | None = None,
        filters: Sequence[ReadFilter] | None = None,
    ) -> HudiReadOptions:
        """Build the official reader's :class:`hudi.HudiReadOptions` for this request.

        Args:
            columns: Columns to read (projection), or None for all.
            filters: ``(field, op, value)`` filters applied by the official reader.

        Returns:
            The options object for ``HudiTable.read`` / ``get_file_slices``.
        """

        opts = HudiReadOptions(
            filters=list(filters) if filters else None,
            projection=list(columns) if columns is not None else None,
            hudi_options=dict(self.native_options),
        )
        if self.query_type == "incremental":
            opts = opts.with_query_type(HudiQueryType.Incremental)
            opts = opts.with_start_timestamp(self.begin or EARLIEST_INSTANT)
            if self.end is not None:
                opts = opts.with_end_timestamp(self.end)
        else:
            if self.as_of is not None:
                opts = opts.with_as_of_timestamp(self.as_of)
            if self.query_type == "read_optimized":
                opts = opts.with_hudi_option(_READ_OPTIMIZED_KEY, "true")
        return opts

    def to_datasource_options(self) -> dict[str, str]:
        """Return this request as options of the official Hudi Spark datasource.

        Returns:
            Option names of ``spark.read.format("hudi")`` with normalised 17-digit instants.
        """
        out: dict[str, str] = {QUERY_TYPE: self.query_type}
        if self.as_of is not None:
            out[AS_OF_INSTANT] = self.as_of
        if self.begin is not None:
            out[BEGIN_INSTANT] = self.begin
        if self.end is not None:
            out[END_INSTANT] = self.end
        out.update(dict(self.native_options))
        return out


def _instant_option(key: str, value: object) -> str:
    if isinstance(value, str) and value.strip() and set(value.strip()) == {"0"}:
        return EARLIEST_INSTANT
    try:
        return to_instant(value)
    except WorkbookError as exc:
        raise HudiError(f"Failed to parse Hudi read option {key}={value!r}: {exc}") from exc


def parse_read_options(options: Mapping[str, Any] | None) -> HudiReadSpec:
    """Validate Spark-datasource read options and turn them into a :class:`HudiReadSpec`.

    Args:
        options: Option names as in ``docs/hudi.md`` (values are strings or instants).

    Returns:
        The validated request with normalised 17-digit instants.

    Raises:
        HudiError: for an unknown key, an unknown query type, an unparsable instant, or a
            contradictory combination (e.g. ``as.of.instant`` with ``incremental``, begin without
            ``incremental``, incremental without begin, begin after end).
    """
    opts = {str(k): v for k, v in (options or {}).items()}
    unknown = sorted(
        k
        for k in opts
        if k not in (AS_OF_INSTANT, QUERY_TYPE, BEGIN_INSTANT, END_INSTANT)
        and k not in IGNORED_READ_OPTIONS
        and not k.startswith(_NATIVE_PREFIX)
    )
    if unknown:
        accepted = ", ".join((QUERY_TYPE, AS_OF_INSTANT, BEGIN_INSTANT, END_INSTANT, "hoodie.read.*"))
        raise HudiError(
            f"Failed to parse Hudi read options: unknown option(s) {unknown}; accepted: {accepted}"
        )
    query_type = str(opts.get(QUERY_TYPE, "snapshot")).strip().lower()
    if query_type not in _QUERY_TYPES:
        raise HudiError(
            f"Failed to parse Hudi read options: {QUERY_TYPE}={opts[QUERY_TYPE]!r} "
            f"is not one of {_QUERY_TYPES}"
        )
    as_of = _instant_option(AS_OF_INSTANT, opts[AS_OF_INSTANT]) if AS_OF_INSTANT in opts else None
    begin = _instant_option(BEGIN_INSTANT, opts[BEGIN_INSTANT]) if BEGIN_INSTANT in opts else None
    end = _instant_option(END_INSTANT, opts[END_INSTANT]) if END_INSTANT in opts else None
    if query_type == "incremental":
        if as_of is not None:
            raise HudiError(
                f"Failed to parse Hudi read options: {AS_OF_INSTANT} cannot be combined with an incremental "
                f"query; use {END_INSTANT} to bound the increment"
            )
        if begin is None:
            raise HudiError(
                f"Failed to parse Hudi read options: an incremental query needs {BEGIN_INSTANT} "
                '(use "000" to read from the beginning)'
            )
        if end is not None and end < begin:
            raise HudiError(
                f"Failed to parse Hudi read options: {END_INSTANT}={end} is before {BEGIN_INSTANT}={begin}"
            )
    elif begin is not None or end is not None:
        raise HudiError(
            f"Failed to parse Hudi read options: {BEGIN_INSTANT}/{END_INSTANT} need "
            f"{QUERY_TYPE}=incremental (got {query_type!r})"
        )
    native = tuple(sorted((k, str(v)) for k, v in opts.items() if k.startswith(_NATIVE_PREFIX)))
    return HudiReadSpec(query_type=query_type, as_of=as_of, begin=begin, end=end, native_options=native)  # type: ignore[arg-type]


def open_table(base_path: str, hudi_options: Mapping[str, str] | None = None) -> HudiTable:
    """Open a Hudi table with the official reader.

    Args:
        base_path: Table base path (local path or URI), the directory holding ``.hoodie/``.
        hudi_options: Extra ``hoodie.*`` or storage options for the reader (the lake's S3
            endpoint and keys, :func:`helpers.lake_store.hudi_storage_options`, are added).

    Returns:
        The official reader's table handle.

    Raises:
        HudiError: naming the path, if the table cannot be opened (no ``hoodie.properties``,
            unsupported table version, ...).
    """

    options = {**hudi_storage_options(str(base_path)), **(hudi_options or {})}
    try:
        return retry_transient(
            lambda: HudiTableBuilder.from_base_uri(str(base_path)).with_options(options).build(),
            str(base_path),
        )
    except Exception as exc:  # noqa: BLE001 - hudi raises HudiCoreError / ValueError / OSError
        raise HudiError(f"Failed to open Hudi table {base_path}: {exc}") from exc


_T = TypeVar("_T")

#: How often, and how far apart, a read that failed on a writer's half-written file is tried again
#: (:func:`transient_read_error`): 40 tries 50 ms apart outlast both windows below many times over.
READ_RETRIES = 40
READ_RETRY_PAUSE_S = 0.05

#: Failures a concurrent writer causes for a moment, by the text each reader gives:
#:
#: * the official writer creates a completed instant's file and then writes its JSON, so a reader
#:   listing the timeline at that moment can meet an empty commit file. hudi-rs gives ``EOF while
#:   parsing``. Hudi 1.0's Spark reader (the newest commit's schema, read at ``load``) takes a
#:   file it finds empty on a second look as a commit without metadata, but one filled between its
#:   read and that look fails with Jackson's ``No content to map due to end-of-input``. Hudi
#:   0.14's writer on a local disk leaves that moment on every commit (``createImmutableFileInPath``
#:   writes through a temporary file on HDFS only); an S3 object appears whole;
#: * Hudi 0.14's writer (the streamer, EMR 6.15's pair) with ``hoodie.metadata.enable=false``
#:   clears the table's metadata partitions in ``hoodie.properties`` on every commit, even when
#:   there are none (``HoodieTable.maybeDeleteMetadataTable``): it copies the file to
#:   ``hoodie.properties.backup``, deletes it and writes it again, so for a few milliseconds a
#:   round the file is absent or empty. Hudi 1.0's Spark reader falls back to the backup when the
#:   file is absent but takes an empty one as valid and fails with ``Table does not exist``, and
#:   so does Trino 476, which reads tables with the same library (its error names no exception
#:   class: ``GENERIC_INTERNAL_ERROR: Hoodie table not found in path Table does not exist``);
#:   hudi-rs reads no backup and fails on both.
_TRANSIENT_TEXTS = (
    "EOF while parsing",
    "No content to map due to end-of-input",
    "Failed to parse JSON commit metadata",
    "Hoodie table not found in path Table does not exist",
    "Config 'hoodie.table.name' not found",
)
#: hudi-rs on an absent ``hoodie.properties``: transient only where the table's ``.hoodie`` exists.
_ABSENT_PROPERTIES = "hoodie.properties not found"


def transient_read_error(exc: BaseException, base_path: str) -> bool:
    """Tell whether a read of ``base_path`` failed only because a writer was half-way through a
    file (see ``_TRANSIENT_TEXTS``), so the same read tried again a moment later succeeds.

    An absent ``hoodie.properties`` on a local path counts only when the table's ``.hoodie``
    folder exists, so a wrong path fails at once.
    """
    text = str(exc)
    if any(t in text for t in _TRANSIENT_TEXTS):
        return True
    if _ABSENT_PROPERTIES in text:
        return "://" in str(base_path) or os.path.isdir(os.path.join(str(base_path), ".hoodie"))
    return False


def retry_transient(call: Callable[[], _T], base_path: str) -> _T:
    """``call()``, tried again up to ``READ_RETRIES`` times ``READ_RETRY_PAUSE_S`` apart while it
    fails with :func:`transient_read_error` for ``base_path`` (a workbook error, already final, is
    raised at once); the last failure is raised as it came. Every reader of Silver uses it: both
    readers here, :func:`helpers.hudi.api.read_hudi_df` and the Trino engine."""
    for _ in range(READ_RETRIES):
        try:
            return call()
        except WorkbookError:
            raise
        except Exception as exc:  # noqa: BLE001 - each reader raises its own types
            if not transient_read_error(exc, base_path):
                raise
            time.sleep(READ_RETRY_PAUSE_S)
    return call()


def table_arrow_schema(table: HudiTable) -> pa.Schema:
    """Return the schema rows are returned with: meta columns (if the table has them) + data.

    Every top-level field is nullable, as in Spark's view of a Hudi table; nested types are kept.

    Args:
        table: An opened table.

    Returns:
        The Arrow schema of the result of a full-column read.
    """
    populated = table.hudi_options().get("hoodie.populate.meta.fields", "true").lower() != "false"
    schema = table.get_schema_with_meta_fields() if populated else table.get_schema()
    return pa.schema([f.with_nullable(True) for f in schema])


def _project(schema: pa.Schema, columns: Sequence[str] | None, base_path: str) -> pa.Schema:
    if columns is None:
        return schema
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise HudiError(
            f"Failed to read Hudi table {base_path}: unknown column(s) {missing}; table has {schema.names}"
        )
    return pa.schema([schema.field(c) for c in columns])


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Reorder and cast a reader batch to ``schema`` (batches differ in nullability/order)."""
    if batch.schema.equals(schema):
        return batch
    picked = batch.select(schema.names)
    if all(a.type.equals(b.type) for a, b in zip(picked.schema, schema, strict=True)):
        return pa.RecordBatch.from_arrays(picked.columns, schema=schema)  # zero-copy relabel
    return picked.cast(schema)


def _wrap_read_error(base_path: str, exc: Exception) -> HudiError:
    return HudiError(f"Failed to read Hudi table {base_path}: {exc}")


def read_hudi(
    base_path: str,
    options: Mapping[str, Any] | None = None,
    *,
    columns: Sequence[str] | None = None,
    filters: Sequence[ReadFilter] | None = None,
) -> pa.Table:
    """Read a Hudi table with Spark-datasource option names (see ``docs/hudi.md``).

    Args:
        base_path: Table base path.
        options: Read options, e.g. ``{"hoodie.datasource.query.type": "incremental",
            "hoodie.datasource.read.begin.instanttime": "20250331030642808"}``.
        columns: Columns to return, in this order (default: all, meta columns first).
        filters: Row filters applied by the official reader, ``(field, op, value)`` with op one
            of ``=, !=, <, <=, >, >=, IN, NOT IN``; they also prune partitions and files.

    Returns:
        The rows as one Arrow table (empty table with the schema when nothing matches).

    Raises:
        HudiError: naming the path, for invalid options or when the reader fails.
    """
    spec = parse_read_options(options)

    def attempt() -> tuple[pa.Schema, list[pa.RecordBatch]]:
        table = open_table(base_path)
        return _project(table_arrow_schema(table), columns, base_path), table.read(
            spec.to_read_options(columns, filters)
        )

    try:
        schema, batches = retry_transient(attempt, base_path)
    except HudiError:
        raise
    except Exception as exc:  # noqa: BLE001 - HudiCoreError is not importable by name
        raise _wrap_read_error(base_path, exc) from exc
    try:
        return pa.Table.from_batches([_conform(b, schema) for b in batches], schema=schema)
    except (pa.ArrowException, ValueError, KeyError) as exc:
        raise _wrap_read_error(base_path, exc) from exc


def read_hudi_pandas(
    base_path: str,
    options: Mapping[str, Any] | None = None,
    *,
    columns: Sequence[str] | None = None,
    filters: Sequence[ReadFilter] | None = None,
) -> pd.DataFrame:
    """Like :func:`read_hudi`, returning a pandas DataFrame.

    Args:
        base_path: Table base path.
        options: Read options (``docs/hudi.md``).
        columns: Columns to return.
        filters: Row filters, as in :func:`read_hudi`.

    Returns:
        The rows as a pandas DataFrame.

    Raises:
        HudiError: naming the path, for invalid options or when the reader fails.
    """
    return read_hudi(base_path, options, columns=columns, filters=filters).to_pandas()


def read_snapshot(
    base_path: str,
    *,
    as_of: InstantInput | None = None,
    read_optimized: bool = False,
    columns: Sequence[str] | None = None,
    filters: Sequence[ReadFilter] | None = None,
) -> pa.Table:
    """Read the table as of its latest commit, or as of an instant (time travel).

    Args:
        base_path: Table base path.
        as_of: Instant or time (any :func:`helpers.instants.to_instant` input); None = latest.
        read_optimized: MoR only: read base files only (compacted data, no log files).
        columns: Columns to return.
        filters: Row filters, as in :func:`read_hudi`.

    Returns:
        The rows visible at that instant.

    Raises:
        HudiError: naming the path, if the instant is invalid or the reader fails.
    """
    options: dict[str, Any] = {QUERY_TYPE: "read_optimized" if read_optimized else "snapshot"}
    if as_of is not None:
        options[AS_OF_INSTANT] = as_of
    return read_hudi(base_path, options, columns=columns, filters=filters)


def read_incremental(
    base_path: str,
    begin: InstantInput,
    end: InstantInput | None = None,
    *,
    columns: Sequence[str] | None = None,
    filters: Sequence[ReadFilter] | None = None,
) -> pa.Table:
    """Read the records written by commits in ``(begin, end]``, latest version of each.

    Args:
        base_path: Table base path.
        begin: Exclusive start instant (``"000"`` = from the beginning).
        end: Inclusive end instant; None = latest commit.
        columns: Columns to return.
        filters: Row filters, as in :func:`read_hudi`.

    Returns:
        Inserted and updated rows of that range (deletes are not emitted).

    Raises:
        HudiError: naming the path, if an instant is invalid, ``end < begin``, or the reader fails.
    """
    options: dict[str, Any] = {QUERY_TYPE: "incremental", BEGIN_INSTANT: begin}
    if end is not None:
        options[END_INSTANT] = end
    return read_hudi(base_path, options, columns=columns, filters=filters)


# --------------------------------------------------------------------------------------------
# Split planning, used by the Spark data source: the driver plans file slices, tasks read them.


@dataclasses.dataclass(frozen=True)
class FileSliceRef:
    """A picklable reference to one file slice to read (base file + log files).

    Attributes:
        partition_path: Partition of the slice (``""`` for non-partitioned tables).
        file_id: File group id.
        base_file: Base file path relative to the table base path (``""`` for log-only slices).
        log_files: Log file paths relative to the table base path.
        size_bytes: On-disk size of the slice (for split packing).
    """

    partition_path: str
    file_id: str
    base_file: str
    log_files: tuple[str, ...]
    size_bytes: int


def _resolved_reader_options(table: HudiTable, spec: HudiReadSpec) -> dict[str, str]:
    """Options for a stand-alone file-group reader: table config + resolved read instants."""
    opts = dict(table.hudi_options())
    read_opts = spec.to_read_options()
    opts.update(read_opts.hudi_options)
    if spec.query_type != "incremental" and spec.as_of is not None:
        opts["hoodie.read.end.timestamp"] = spec.as_of
    return opts


def plan_file_slices(
    base_path: str, spec: HudiReadSpec, filters: Sequence[ReadFilter] | None = None
) -> tuple[pa.Schema, list[FileSliceRef], dict[str, str]]:
    """Plan a read: the result schema, the file slices to read, and the reader options.

    Args:
        base_path: Table base path.
        spec: The validated read request.
        filters: Filters used to prune partitions and files (not rows) while planning.

    Returns:
        ``(schema, slices, reader_options)``; pass the last two to :func:`read_file_slices`
        (possibly in another process).

    Raises:
        HudiError: naming the path, if the table cannot be opened or planned.
    """
    table = open_table(base_path)
    schema = table_arrow_schema(table)
    try:
        slices = table.get_file_slices(spec.to_read_options(filters=filters))
    except Exception as exc:  # noqa: BLE001
        raise HudiError(f"Failed to plan the read of Hudi table {base_path}: {exc}") from exc
    refs = [
        FileSliceRef(
            partition_path=s.partition_path,
            file_id=s.file_id,
            base_file=s.base_file_relative_path() if s.base_file_name else "",
            log_files=tuple(s.log_files_relative_paths()),
            size_bytes=int(s.total_size_bytes()),
        )
        for s in slices
    ]
    return schema, refs, _resolved_reader_options(table, spec)


def read_file_slices(
    base_path: str,
    spec: HudiReadSpec,
    slices: Sequence[FileSliceRef],
    reader_options: Mapping[str, str],
    schema: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """Read planned file slices with the official file-group reader, conformed to ``schema``.

    Args:
        base_path: Table base path.
        spec: The read request the slices were planned with.
        slices: Slices from :func:`plan_file_slices`.
        reader_options: Reader options from :func:`plan_file_slices`.
        schema: Target schema; batches are reordered and cast to it (names must exist).

    Yields:
        Non-empty record batches.

    Raises:
        HudiError: naming the path and the file group, if a slice cannot be read.
    """

    read_options = spec.to_read_options()
    # the lake's S3 endpoint and keys are added here, not planned: reader_options may travel
    reader = HudiFileGroupReader(str(base_path), {**hudi_storage_options(str(base_path)), **reader_options})
    for ref in slices:
        try:
            batch = reader.read_file_slice_from_paths(ref.base_file, list(ref.log_files), read_options)
            if batch.num_rows:
                yield _conform(batch, schema)
        except Exception as exc:  # noqa: BLE001
            raise HudiError(
                f"Failed to read Hudi table {base_path}: file group {ref.file_id} in partition "
                f"{ref.partition_path!r}: {exc}"
            ) from exc
