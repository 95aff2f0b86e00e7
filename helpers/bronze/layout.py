"""What a Bronze file holds, worked out from its bytes: the code the executors run on each file.

:func:`avro_layout` walks an Avro object container file's header and block headers (schema and
record count, no record decoded: a truncated or re-synced file is found here);
:func:`jsonl_layout` finds the distinct schemas of a JSON-lines file; :func:`jsonl_batches`
decodes a JSON-lines file into Arrow record batches of a given schema, bad lines kept with their
reason. :mod:`helpers.bronze.frames` runs them inside Spark jobs.
"""

from __future__ import annotations

import decimal
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import fastavro
import pyarrow as pa

from helpers.bronze.events import (
    avro_record,
    avro_schema_from_connect,
    converted_fields,
    event_from_json,
)
from helpers.errors import UnreadableBronzeError

if TYPE_CHECKING:  # pragma: no cover - typing only
    # not at run time: each executor's Python worker imports this module, and the store's imports
    # (the parameters' pydantic models, the lake's S3 client) cost it about 0.1 s and nothing else
    from helpers.bronze.store import BronzeObject

__all__ = [
    "BAD_EVENT",
    "BAD_REASON",
    "FILE_COLUMN",
    "HELPER_COLUMNS",
    "ROW_COLUMN",
    "FileLayout",
    "SchemaPart",
    "avro_layout",
    "jsonl_batches",
    "jsonl_layout",
    "record_numbers",
]

FILE_COLUMN = "_bronze_file"  # the Bronze file's name
ROW_COLUMN = "_bronze_row"  # line number (JSON lines) or a per-task rising number (Avro)
BAD_REASON = "_bad_reason"  # why an event is bad input (null: it is applied)
BAD_EVENT = "_bad_event"  # a bad event's values as JSON text (null for good events)
HELPER_COLUMNS = (FILE_COLUMN, ROW_COLUMN, BAD_REASON, BAD_EVENT)

_MAGIC = b"Obj\x01"
_HEADER_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.file.Header",
        "fields": [
            {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
            {"name": "meta", "type": {"type": "map", "values": "bytes"}},
            {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}},
        ],
    }
)


@dataclass(frozen=True)
class SchemaPart:
    """The events of one file that share one writer schema.

    Attributes:
        schema: the Avro record schema (JSON text, keys sorted: equal schemas, equal text).
        records: how many events.
    """

    schema: str
    records: int


@dataclass(frozen=True)
class FileLayout:
    """What :func:`inspect_files` learned of one Bronze file without decoding its events.

    Attributes:
        file: the file.
        parts: its events by writer schema (one part for Avro).
        error: why the whole file cannot be read (None: it can).
    """

    file: BronzeObject
    parts: tuple[SchemaPart, ...] = field(default_factory=tuple)
    error: str | None = None

    @property
    def records(self) -> int:
        """Events the file holds (lines that parse, for JSON lines)."""
        return sum(p.records for p in self.parts)


def _canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _read_long(data: bytes, at: int) -> tuple[int, int]:
    """An Avro long (zig-zag varint) at ``at``: its value and the next offset."""
    shift = result = 0
    while True:
        if at >= len(data):
            raise UnreadableBronzeError("file ends inside a block header")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise UnreadableBronzeError("block header holds no valid Avro long")


def avro_layout(data: bytes) -> tuple[str, int]:
    """The writer schema (canonical JSON text) and record count of an Avro object container
    file, from its header and block headers; no record is decoded.

    Raises:
        UnreadableBronzeError: for a damaged header, a block that runs past the end of the file,
            a sync marker that does not match, or bytes after the last block.
    """
    if not data.startswith(_MAGIC):
        raise UnreadableBronzeError("not an Avro object container file (no Obj\\x01 magic)")
    stream = io.BytesIO(data)
    try:
        header: Any = fastavro.schemaless_reader(stream, _HEADER_SCHEMA, None)
        schema = json.loads(header["meta"]["avro.schema"])
    except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds for damaged input
        raise UnreadableBronzeError(f"damaged header: {type(exc).__name__}: {exc}") from None
    sync = header["sync"]
    at, records, blocks = stream.tell(), 0, 0
    while at < len(data):
        count, at = _read_long(data, at)
        size, at = _read_long(data, at)
        if count < 0 or size < 0 or at + size + 16 > len(data):
            raise UnreadableBronzeError(
                f"block {blocks + 1} at byte {at} claims {size} bytes but the file ends at {len(data)} "
                "(truncated)"
            )
        at += size
        if data[at : at + 16] != sync:
            raise UnreadableBronzeError(
                f"block {blocks + 1} ends without the file's sync marker at byte {at}"
            )
        at += 16
        records += count
        blocks += 1
    return _canonical(schema), records


_SCHEMA_HEAD = b'{"schema":'
_PAYLOAD_SEP = b',"payload":'


def _schema_text(line: bytes) -> bytes | None:
    """The ``schema`` part of a Connect JSON envelope line, found without parsing the payload
    (None when the line does not have the converter's shape: it is parsed whole then)."""
    if not line.startswith(_SCHEMA_HEAD):
        return None
    cut = line.rfind(_PAYLOAD_SEP)
    return line[len(_SCHEMA_HEAD) : cut] if cut > 0 else None


def jsonl_layout(name: str, data: bytes) -> list[SchemaPart]:
    """The distinct writer schemas (as Avro, canonical JSON text) of a JSON-lines Bronze file and
    how many lines carry each. A line that does not parse is left out: reading the file sets it
    aside (:func:`read_events`)."""
    topic = name.split("+", 1)[0]
    counts: dict[bytes, int] = {}
    avro_of: dict[bytes, str] = {}
    for line in data.splitlines():
        if not line.strip():
            continue
        text = _schema_text(line)
        try:
            if text is None or text not in avro_of:
                event = event_from_json(name, line)
                if event is None or event.schema is None:
                    continue
                text = text if text is not None else _canonical(event.schema).encode()
                if text not in avro_of:
                    avro_of[text] = _canonical(avro_schema_from_connect(event.schema, topic))
        except Exception:  # noqa: BLE001 - a bad line: read_events sets it aside with its reason
            continue
        counts[text] = counts.get(text, 0) + 1
    merged: dict[str, int] = {}
    for text, n in counts.items():
        merged[avro_of[text]] = merged.get(avro_of[text], 0) + n
    return [SchemaPart(schema, n) for schema, n in merged.items()]


def jsonl_batches(
    name: str, data: bytes, target: pa.Schema, rejected: Mapping[str, str]
) -> Iterator[pa.RecordBatch]:
    """One JSON-lines file as record batches of ``target``: good lines typed, bad lines (do not
    parse, values do not fit their schema, or a rejected schema) with reason and text."""
    topic = name.split("+", 1)[0]
    avro_of: dict[bytes, tuple[str, dict[str, Any], dict[str, Any]]] = {}
    good: dict[str, list[Any]] = {f.name: [] for f in target}
    bad: list[tuple[int, str, str | None]] = []

    def add_bad(number: int, reason: str, event: str | None) -> None:
        bad.append((number, reason, event))

    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = event_from_json(name, line)
        except Exception as exc:  # noqa: BLE001
            add_bad(number, f"line does not parse as a change event: {exc}", None)
            continue
        if event is None or event.schema is None:
            continue
        key = _schema_text(line) or _canonical(event.schema).encode()
        if key not in avro_of:
            try:
                avro = avro_schema_from_connect(event.schema, topic)
            except Exception as exc:  # noqa: BLE001
                add_bad(number, f"line does not parse as a change event: {exc}", None)
                continue
            avro_of[key] = (_canonical(avro), avro, converted_fields(avro))
        text, avro, converted = avro_of[key]
        if text in rejected:
            add_bad(number, rejected[text], json.dumps(_json_safe(dict(event.value))))
            continue
        try:
            row = avro_record(event.value, converted)
            values = _typed_values(row, avro)
        except Exception as exc:  # noqa: BLE001
            add_bad(
                number,
                f"values do not match the schema the line carries: {exc}",
                json.dumps(_json_safe(dict(event.value))),
            )
            continue
        for f in target:
            if f.name == FILE_COLUMN:
                good[f.name].append(name)
            elif f.name == ROW_COLUMN:
                good[f.name].append(number)
            elif f.name in (BAD_REASON, BAD_EVENT):
                good[f.name].append(None)
            else:
                good[f.name].append(values.get(f.name))
    rows = len(good[FILE_COLUMN])
    if rows:
        try:
            yield pa.RecordBatch.from_pydict(good, schema=target)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # find the lines (rare): one by one
            for i in range(rows):
                one = {k: [v[i]] for k, v in good.items()}
                try:
                    yield pa.RecordBatch.from_pydict(one, schema=target)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                    add_bad(
                        one[ROW_COLUMN][0],
                        f"values do not match the schema the line carries: {exc}",
                        json.dumps(_json_safe({k: v[0] for k, v in one.items() if k not in HELPER_COLUMNS})),
                    )
    if bad:
        columns: dict[str, list[Any]] = {f.name: [None] * len(bad) for f in target}
        columns[FILE_COLUMN] = [name] * len(bad)
        columns[ROW_COLUMN] = [b[0] for b in bad]
        columns[BAD_REASON] = [b[1] for b in bad]
        columns[BAD_EVENT] = [b[2] for b in bad]
        yield pa.RecordBatch.from_pydict(columns, schema=target)


def _typed_values(row: Mapping[str, Any], avro: Mapping[str, Any]) -> dict[str, Any]:
    """A line's values as Spark's Avro source types them: timestamps as UTC microseconds, dates
    as epoch days, times as their integer, decimals exact."""
    out: dict[str, Any] = {}
    for f in avro["fields"]:
        value = row.get(f["name"])
        kind = f["type"][1] if isinstance(f["type"], list) else f["type"]
        logical = kind.get("logicalType") if isinstance(kind, dict) else None
        if value is not None and logical == "timestamp-millis":
            value = int(value) * 1000
        elif value is not None and logical == "date":
            value = int(value)
        out[f["name"]] = value
    return out


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def record_numbers(min_row: int, max_row: int, rows: int, jsonl: bool) -> int | None:
    """What to subtract from ``_bronze_row`` to get a file's 1-based record numbers: 0 for JSON
    lines (the row is the line number); for Avro ``min_row - 1`` when the file was read by one
    task (its rows then rise by one: ``max - min + 1 == rows``), else None (no numbers)."""
    if jsonl:
        return 0
    return min_row - 1 if max_row - min_row + 1 == rows else None
