"""Bronze files as Spark DataFrames, read by the executors: the Silver round's input.

Two steps, both Spark jobs, so no Bronze row passes through the driver's Python:

1. :func:`inspect_files` runs on the executors over the files' bytes (Spark's ``binaryFile``
   source) and returns one small :class:`FileLayout` per file: the Avro writer schema and the
   record count from the block headers (the blocks are walked, not decoded, so a truncated or
   re-synced file is found here), or, for JSON lines, the distinct schemas the lines carry.
   Spark's own Avro reader reads a file truncated after a block boundary without an error and
   returns the blocks before the cut, so this walk is what keeps a damaged file from being
   half-applied.
2. :func:`read_events` reads the events with Spark's official Avro source (``spark-avro``), one
   read per writer schema, joined by column name (a column added at the source later is null
   in older events). Exact decimals, UTC timestamps and dates are Spark's own Avro mapping. JSON
   lines (Connect envelopes, the ``jsonl`` Bronze format) are decoded by the workbook's own
   decoder inside ``mapInArrow`` on the executors, into the same Spark types.

Every row carries ``_bronze_file`` (the file's name) and ``_bronze_row`` (for JSON lines the line
number; for Avro a number that rises by one per record within a file read in one task, see
:func:`helpers.bronze.layout.record_numbers`), and the columns ``_bad_reason`` / ``_bad_event``
that the checks of a Silver round fill for bad input. Paths and ``s3://`` URIs go to Spark as they
are (locally ``s3://`` is s3a, :func:`helpers.spark.s3a_conf`; on EMR it is EMRFS).

Why Spark's Avro source and not the Python decoder on the executors: on 2 cores it read 265,000
events/s against 57,000 (``bench/README.md``, "Bronze read on Spark").
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from helpers.bronze.layout import (
    BAD_EVENT,
    BAD_REASON,
    FILE_COLUMN,
    HELPER_COLUMNS,
    ROW_COLUMN,
    FileLayout,
    SchemaPart,
    avro_layout,
    jsonl_batches,
    jsonl_layout,
)
from helpers.bronze.store import BronzeObject
from helpers.engines import quote_spark
from helpers.errors import BronzeError, UnreadableBronzeError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["inspect_files", "read_events", "spark_schema"]


class _LayoutCache:
    """Layouts already worked out, by file identity (location, size, modification time): Bronze
    files are written once and never changed, so checks that poll Bronze inspect only the files
    that are new since the last poll. Bounded (least recently used first); equal schema texts are
    stored once.

    A file is inspected by one thread at a time (:meth:`claim`): the continuous job's tables of a
    round run side by side, and two tables of one topic (``sale`` and ``sale_mor``) would
    otherwise both run the same Spark job over the same new file."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.layouts: OrderedDict[tuple[str, int, float], FileLayout] = OrderedDict()
        self.schemas: dict[str, str] = {}
        self.lock = threading.Condition()
        self.inspecting: set[tuple[str, int, float]] = set()

    @staticmethod
    def _key(obj: BronzeObject) -> tuple[str, int, float]:
        return (obj.uri, obj.size, obj.modified)

    def _get(self, obj: BronzeObject) -> FileLayout | None:
        hit = self.layouts.get(self._key(obj))
        if hit is not None:
            self.layouts.move_to_end(self._key(obj))
        return hit

    def claim(
        self, files: Sequence[BronzeObject]
    ) -> tuple[dict[str, FileLayout], list[BronzeObject], list[BronzeObject]]:
        """For ``files``: the layouts known, the files now marked as being inspected by the caller
        (who must :meth:`release` them) and the files another thread is inspecting."""
        known: dict[str, FileLayout] = {}
        mine: list[BronzeObject] = []
        theirs: list[BronzeObject] = []
        with self.lock:
            for obj in files:
                if (hit := self._get(obj)) is not None:
                    known[obj.uri] = hit
                elif self._key(obj) in self.inspecting:
                    theirs.append(obj)
                else:
                    self.inspecting.add(self._key(obj))
                    mine.append(obj)
        return known, mine, theirs

    def release(self, files: Sequence[BronzeObject]) -> None:
        with self.lock:
            self.inspecting.difference_update(self._key(f) for f in files)
            self.lock.notify_all()

    def wait(self, files: Sequence[BronzeObject]) -> None:
        """Until no thread is inspecting any of ``files`` (called holding no claim of one's own,
        so two threads never wait for each other)."""
        with self.lock:
            self.lock.wait_for(lambda: not any(self._key(f) in self.inspecting for f in files))

    def put(self, layout: FileLayout) -> FileLayout:
        with self.lock:
            parts = tuple(
                SchemaPart(self.schemas.setdefault(p.schema, p.schema), p.records) for p in layout.parts
            )
            kept = FileLayout(layout.file, parts, layout.error)
            if layout.file.size:  # a listing without sizes cannot tell a rewrite apart
                self.layouts[self._key(layout.file)] = kept
                while len(self.layouts) > self.capacity:
                    self.layouts.popitem(last=False)
            return kept


_LAYOUTS = _LayoutCache(capacity=50_000)


def inspect_files(spark: SparkSession, files: Sequence[BronzeObject]) -> list[FileLayout]:
    """Each file's :class:`FileLayout`, worked out on the executors (a Spark job over the files'
    bytes; only the layouts come back to the driver). A file inspected before in this process
    is not read again, and a file another thread is inspecting is waited for, not read twice
    (:class:`_LayoutCache`).

    Raises:
        BronzeError: when a file cannot be opened at all (missing, permissions, S3 errors: not
            bad input), naming the first such file and Spark's cause.
    """
    known: dict[str, FileLayout] = {}
    pending: Sequence[BronzeObject] = files
    while pending:
        hits, mine, theirs = _LAYOUTS.claim(pending)
        known.update(hits)
        try:
            if mine:
                known.update({lay.file.uri: _LAYOUTS.put(lay) for lay in _inspect(spark, mine)})
        finally:
            _LAYOUTS.release(mine)
        _LAYOUTS.wait(theirs)
        pending = theirs  # now known, or left to this thread when the other's inspection failed
    return [known[f.uri] for f in files]


def _inspect(spark: SparkSession, files: Sequence[BronzeObject]) -> list[FileLayout]:
    from pyspark.sql.types import StringType, StructField, StructType

    by_path = {f.uri: f for f in files}
    out_schema = StructType(
        [
            StructField("path", StringType()),
            StructField("layout", StringType()),
            StructField("error", StringType()),
        ]
    )

    def inspect(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        for batch in batches:
            paths, layouts, errors = [], [], []
            for path, content in zip(
                batch.column("path").to_pylist(), batch.column("content").to_pylist(), strict=True
            ):
                name = path.rsplit("/", 1)[-1]
                error = None
                parts: list[list[Any]] = []
                try:
                    if name.endswith(".jsonl"):
                        parts = [[p.schema, p.records] for p in jsonl_layout(name, content)]
                    else:
                        schema, records = avro_layout(content)
                        parts = [[schema, records]]
                except UnreadableBronzeError as exc:
                    error = str(exc)
                paths.append(path)
                layouts.append(json.dumps(parts))
                errors.append(error)
            yield pa.RecordBatch.from_pydict(
                {"path": paths, "layout": layouts, "error": errors},
                schema=pa.schema([("path", pa.string()), ("layout", pa.string()), ("error", pa.string())]),
            )

    try:
        rows = (
            spark.read.format("binaryFile")
            .load(list(by_path))
            .select("path", "content")
            .mapInArrow(inspect, out_schema)
            .collect()
        )
    except Exception as exc:  # noqa: BLE001 - Py4J errors carry Spark's cause
        raise BronzeError(
            f"Failed to read Bronze files ({len(files)}, first {files[0].uri}): {_cause(exc)}"
        ) from exc
    layouts = {}
    for row in rows:
        obj = _match(by_path, row["path"])
        parts = tuple(SchemaPart(s, int(n)) for s, n in json.loads(row["layout"]))
        layouts[obj.uri] = FileLayout(obj, parts, row["error"])
    return [layouts[f.uri] for f in files]


def _match(by_path: Mapping[str, BronzeObject], path: str) -> BronzeObject:
    """The file Spark reports as ``path`` (Spark qualifies local paths as ``file:/...`` and may
    write ``s3a://`` for ``s3://``)."""
    if path in by_path:
        return by_path[path]
    name = path.rsplit("/", 1)[-1]
    tail = path.split(":", 1)[-1].lstrip("/")
    for key, obj in by_path.items():
        if obj.name == name and key.split(":", 1)[-1].lstrip("/").endswith(tail.split("/", 1)[-1]):
            return obj
    raise BronzeError(f"Failed to match the file Spark read, {path}, with the Bronze listing")


def _cause(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "Exception:" in line or "Error:" in line:
            return line[:1000]
    return lines[0][:1000] if lines else type(exc).__name__


def spark_schema(spark: SparkSession, avro_schema: str) -> StructType:
    """The Spark type Spark's Avro source gives records of ``avro_schema`` (its own
    ``SchemaConverters``, through the session's JVM)."""
    from pyspark.sql.types import StructType

    jvm: Any = spark.sparkContext._jvm
    parsed = jvm.org.apache.avro.Schema.Parser().parse(avro_schema)
    converted = jvm.org.apache.spark.sql.avro.SchemaConverters.toSqlType(parsed)
    result = StructType.fromJson(json.loads(converted.dataType().json()))
    return result


def _with_helpers(frame: DataFrame) -> DataFrame:
    return frame.selectExpr(
        "*",
        f"_metadata.file_name AS {quote_spark(FILE_COLUMN)}",
        f"monotonically_increasing_id() AS {quote_spark(ROW_COLUMN)}",
        f"CAST(NULL AS STRING) AS {quote_spark(BAD_REASON)}",
        f"CAST(NULL AS STRING) AS {quote_spark(BAD_EVENT)}",
    )


def read_events(
    spark: SparkSession,
    layouts: Sequence[FileLayout],
    rejected: Mapping[str, str] | None = None,
) -> DataFrame:
    """The events of readable Bronze files as one lazy DataFrame, read by the executors.

    Args:
        spark: the session.
        layouts: the files, as :func:`inspect_files` found them (files with an ``error`` are left
            out: they are unreadable as a whole).
        rejected: writer schemas (canonical text) whose events are bad input as a whole, with
            the reason; their events come back with ``_bad_reason`` and ``_bad_event`` set and
            their columns null.

    Returns:
        The union, by column name, of every accepted writer schema's columns (as Spark's Avro
        source types them), plus ``_bronze_file``, ``_bronze_row``, ``_bad_reason`` and
        ``_bad_event``. Empty (no columns but those) when no file is readable.
    """
    from pyspark.sql import functions as F

    rejected = dict(rejected or {})
    readable = [lay for lay in layouts if lay.error is None]
    avro_groups: dict[str, list[str]] = {}
    jsonl_files = []
    for lay in readable:
        if lay.file.is_jsonl:
            jsonl_files.append(lay)
            continue
        for part in lay.parts:
            avro_groups.setdefault(part.schema, []).append(lay.file.uri)
    frames: list[DataFrame] = []
    for schema, paths in avro_groups.items():
        frame = _with_helpers(spark.read.format("avro").option("avroSchema", schema).load(paths))
        if schema in rejected:
            data = [c for c in frame.columns if c not in HELPER_COLUMNS]
            frame = frame.select(
                F.col(FILE_COLUMN),
                F.col(ROW_COLUMN),
                F.lit(rejected[schema]).alias(BAD_REASON),
                F.to_json(F.struct(*data)).alias(BAD_EVENT),
            )
        frames.append(frame)
    if jsonl_files:
        frames.append(_jsonl_frame(spark, jsonl_files, rejected))
    if not frames:
        return _empty_frame(spark)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame, allowMissingColumns=True)
    return out


def _empty_frame(spark: SparkSession) -> DataFrame:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField(FILE_COLUMN, StringType()),
            StructField(ROW_COLUMN, LongType()),
            StructField(BAD_REASON, StringType()),
            StructField(BAD_EVENT, StringType()),
        ]
    )
    return spark.createDataFrame([], schema)


def _widest(a: Any, b: Any) -> Any:
    """The wider of two Spark types of one column in two accepted schemas (the checks let only
    types of one kind through)."""
    from pyspark.sql.types import DecimalType, DoubleType, FloatType, IntegerType, LongType

    if a == b:
        return a
    if isinstance(a, DecimalType) and isinstance(b, DecimalType):
        scale = max(a.scale, b.scale)
        return DecimalType(min(38, max(a.precision - a.scale, b.precision - b.scale) + scale), scale)
    order = [IntegerType, LongType, FloatType, DoubleType]
    ranks = [next((i for i, t in enumerate(order) if isinstance(x, t)), -1) for x in (a, b)]
    return a if ranks[0] >= ranks[1] else b


def _jsonl_frame(
    spark: SparkSession, layouts: Sequence[FileLayout], rejected: Mapping[str, str]
) -> DataFrame:
    """JSON-lines files decoded by the executors (``mapInArrow``), typed as Spark's Avro source
    would type the Avro form of each line's schema."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    fields: dict[str, StructField] = {}
    for lay in layouts:
        for part in lay.parts:
            if part.schema in rejected:
                continue
            for f in spark_schema(spark, part.schema).fields:
                known = fields.get(f.name)
                fields[f.name] = (
                    StructField(f.name, f.dataType, True)
                    if known is None
                    else StructField(f.name, _widest(known.dataType, f.dataType), True)
                )
    schema = StructType(
        [
            *fields.values(),
            StructField(FILE_COLUMN, StringType()),
            StructField(ROW_COLUMN, LongType()),
            StructField(BAD_REASON, StringType()),
            StructField(BAD_EVENT, StringType()),
        ]
    )
    target = to_arrow_schema(schema)
    reasons = dict(rejected)

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        for batch in batches:
            for path, content in zip(
                batch.column("path").to_pylist(), batch.column("content").to_pylist(), strict=True
            ):
                yield from jsonl_batches(path.rsplit("/", 1)[-1], content, target, reasons)

    paths = [lay.file.uri for lay in layouts]
    return spark.read.format("binaryFile").load(paths).select("path", "content").mapInArrow(decode, schema)
