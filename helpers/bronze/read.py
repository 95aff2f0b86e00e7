"""Reading Bronze: list a topic's files, decode them to event dicts, or to one typed Arrow table."""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import fastavro
import pyarrow as pa

from helpers.bronze.events import (
    avro_record,
    avro_schema_from_connect,
    converted_fields,
    decoded_event,
    event_from_json,
)
from helpers.errors import BronzeError, UnreadableBronzeError
from helpers.lake_store import LakeEntry, LakeStore, is_s3, open_store

__all__ = [
    "DEBEZIUM_FIELDS",
    "arrow_type",
    "avro_table",
    "bronze_entries",
    "bronze_files",
    "first_event",
    "jsonl_tables",
    "read_bronze",
    "read_bronze_arrow",
]


def bronze_files(root: str | Path, topic: str) -> list[Path]:
    """Visible Bronze files of a topic (hidden temporary files excluded), sorted by path."""
    base = Path(root) / topic
    if not base.exists():
        return []
    return sorted(
        p
        for p in base.rglob("*")
        if p.is_file() and not p.name.startswith(".") and p.suffix in (".avro", ".jsonl")
    )


def _read_file(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as handle:
        yield from _read_stream(str(path), path.suffix == ".jsonl", handle)


def _read_stream(where: str, jsonl: bool, handle: BinaryIO) -> Iterator[dict[str, Any]]:
    if jsonl:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                event = event_from_json(where.rsplit("/", 1)[-1], line.rstrip(b"\n"))
            except BronzeError as exc:
                raise BronzeError(f"Failed to read {where} line {number}: {exc}") from None
            if event is not None:
                yield decoded_event(event)
        return
    for record in fastavro.reader(handle):
        yield dict(record)  # type: ignore[arg-type]


def bronze_entries(store: LakeStore, topic: str) -> list[LakeEntry]:
    """The visible Bronze files of a topic in a lake store (a folder or ``s3://``), sorted by
    location: Avro and JSON lines, hidden temporary files left out (:func:`bronze_files` for
    local paths)."""
    return [
        e
        for e in store.list(topic, recursive=True)
        if not e.name.startswith(".") and e.name.endswith((".avro", ".jsonl"))
    ]


def _s3_events(root: str, topic: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file name, event)`` of a topic's visible Bronze objects under an ``s3://`` root."""
    store = open_store(root)
    for entry in bronze_entries(store, topic):
        data = io.BytesIO(store.read(entry.location))
        for row in _read_stream(entry.location, entry.name.endswith(".jsonl"), data):
            yield entry.name, row


def read_bronze(root: str | Path, topics: str | Iterable[str]) -> list[dict[str, Any]]:
    """All events of the given topics, with ``_bronze_file`` added, in file then event order.

    Redeliveries appear as often as they were written: deduplicate on the log position.

    Args:
        root: the Bronze zone directory, or an ``s3://`` URI (objects read through
            :func:`helpers.lake_store.open_store`).
        topics: one topic or several.

    Returns:
        The event rows (Avro types decoded: decimals as :class:`decimal.Decimal`, timestamps as
        aware datetimes, dates as dates).
    """
    names = [topics] if isinstance(topics, str) else list(topics)
    return [row for topic in names for row in _topic_events(root, topic)]


def _topic_events(root: str | Path, topic: str) -> Iterator[dict[str, Any]]:
    """The topic's events one file at a time, in file then event order, ``_bronze_file`` added."""
    if is_s3(str(root)):
        for name, row in _s3_events(str(root), topic):
            row["_bronze_file"] = name
            yield row
        return
    for path in bronze_files(root, topic):
        for row in _read_file(path):
            row["_bronze_file"] = path.name
            yield row


def first_event(root: str | Path, topic: str, ops: Iterable[str] = ()) -> dict[str, Any] | None:
    """The topic's first event (of one of ``ops``, e.g. ``("u", "d")``; any when empty) as Bronze
    keeps it, reading files only until it is found; None when there is none. For showing one
    event to a learner, never on the ingestion path."""
    wanted = set(ops)
    return next((row for row in _topic_events(root, topic) if not wanted or row.get("__op") in wanted), None)


def arrow_type(avro: Any) -> pa.DataType:
    if isinstance(avro, list):
        return arrow_type(next(t for t in avro if t != "null"))
    if isinstance(avro, dict):
        logical = avro.get("logicalType")
        if logical == "decimal":
            return pa.decimal128(int(avro["precision"]), int(avro.get("scale", 0)))
        if logical in ("timestamp-millis", "timestamp-micros"):
            return pa.timestamp("us", tz="UTC")
        if logical == "date":
            return pa.date32()
        if logical == "time-micros":
            return pa.time64("us")
        if logical == "time-millis":
            return pa.time32("ms")
        return arrow_type(avro["type"])
    return {
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
        "string": pa.string(),
        "bytes": pa.binary(),
    }[avro]


DEBEZIUM_FIELDS = ("__op", "__deleted")


def avro_table(data: bytes) -> pa.Table:
    """An Avro Bronze file as one typed table; a decoding failure is :class:`UnreadableBronzeError`."""
    try:
        reader = fastavro.reader(io.BytesIO(data))
        writer_schema: Any = reader.writer_schema
        schema = pa.schema([pa.field(f["name"], arrow_type(f["type"])) for f in writer_schema["fields"]])
        rows: list[Any] = list(reader)
        table = pa.Table.from_pylist(rows, schema=schema)
    except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds for damaged input
        raise UnreadableBronzeError(f"{type(exc).__name__}: {exc}") from None
    return table


def jsonl_tables(name: str, data: bytes) -> list[pa.Table]:
    """A JSON-lines Bronze file (Connect JSON envelopes) as typed tables, one per schema: Debezium's
    encodings (epoch days, milliseconds, microseconds, ISO offsets, decimal numbers) converted.

    Args:
        name: the file's name (its topic is the part before the first ``+``).
        data: its bytes.

    Raises:
        BronzeError: naming the file and line, for a line that does not parse.
    """

    topic = name.split("+", 1)[0]
    groups: dict[int, tuple[Any, list[dict[str, Any]], list[int]]] = {}
    for number, line in enumerate(io.BytesIO(data), 1):
        if not line.strip():
            continue
        try:
            event = event_from_json(name, line.rstrip(b"\n"))
            if event is not None and event.schema is not None and id(event.schema) not in groups:
                avro_schema_from_connect(event.schema, topic)
        except Exception as exc:  # noqa: BLE001 - re-raised with the place
            raise BronzeError(f"Failed to read Bronze file {name} line {number}: {exc}") from None
        if event is None or event.schema is None:
            continue
        group = groups.setdefault(id(event.schema), (event.schema, [], []))
        group[1].append(dict(event.value))
        group[2].append(number)
    tables = []
    for connect_schema, values, numbers in groups.values():
        avro = avro_schema_from_connect(connect_schema, topic)
        converted = converted_fields(avro)
        millis = [
            f["name"]
            for f in avro["fields"]
            if isinstance(t := (f["type"][1] if isinstance(f["type"], list) else f["type"]), dict)
            and t.get("logicalType") == "timestamp-millis"
        ]
        schema = pa.schema([pa.field(f["name"], arrow_type(f["type"])) for f in avro["fields"]])
        rows = []
        for value, number in zip(values, numbers, strict=True):
            try:
                row = avro_record(value, converted)
                for field_name in millis:
                    if row.get(field_name) is not None:
                        row[field_name] = int(row[field_name]) * 1000
            except Exception as exc:  # noqa: BLE001 - re-raised with the place
                raise BronzeError(f"Failed to read Bronze file {name} line {number}: {exc}") from None
            rows.append(row)
        try:
            tables.append(pa.Table.from_pylist(rows, schema=schema))
        except Exception as exc:  # noqa: BLE001 - re-raised with the place
            raise BronzeError(f"Failed to read Bronze file {name}: {exc}") from None
    return tables


class _DecodedFiles:
    """Bronze files already decoded, by identity (path, inode, size, modification time).

    Bronze files are written once, under a temporary name renamed into place, and never changed,
    so a file with the same identity decodes to the same table. Checks that poll Bronze (waiting
    for capture) decode only the files that are new since the last poll. Bounded by bytes; the
    least recently used tables go first.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self.tables: OrderedDict[tuple[str, int, int, int], list[pa.Table]] = OrderedDict()
        self.used = 0
        self.lock = threading.Lock()

    def get(self, path: Path) -> list[pa.Table]:
        st = path.stat()
        identity = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        with self.lock:
            hit = self.tables.get(identity)
            if hit is not None:
                self.tables.move_to_end(identity)
                return hit
        tables = _decode_file(path)
        size = sum(t.nbytes for t in tables)
        with self.lock:
            if identity not in self.tables and size <= self.budget:
                self.tables[identity] = tables
                self.used += size
                while self.used > self.budget:
                    _, dropped = self.tables.popitem(last=False)
                    self.used -= sum(t.nbytes for t in dropped)
        return tables


def _decode_file(path: Path) -> list[pa.Table]:
    return _decode(str(path), path.name, path.read_bytes())


def _decode(where: str, name: str, data: bytes) -> list[pa.Table]:
    if name.endswith(".jsonl"):
        return jsonl_tables(name, data)
    try:
        return [avro_table(data)]
    except UnreadableBronzeError as exc:
        raise BronzeError(f"Failed to read Bronze file {where}: {exc}") from None


_DECODED = _DecodedFiles(budget_bytes=512 * 1024 * 1024)


def read_bronze_arrow(paths: Sequence[Path], *, cached: bool = True) -> pa.Table:
    """Local Bronze files (Avro or JSON lines) as one Arrow table (columns unified across schema
    versions; a column added at the source later is null in older events). A file decoded before
    in this process is not decoded again (see :class:`_DecodedFiles`), unless ``cached`` is false:
    then every file is decoded now and nothing is kept (a benchmark's decode baseline).

    Raises:
        BronzeError: naming the file, when one cannot be decoded.
    """
    decode = _DECODED.get if cached else _decode_file
    tables = [t for path in paths for t in decode(Path(path))]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")
