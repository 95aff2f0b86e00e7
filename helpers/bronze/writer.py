"""The Bronze zone of the embedded world: raw change events as immutable, self-describing files.

Layout: ``<bronze>/<topic>/year=YYYY/month=MM/day=DD/<topic>+<first>+<last>+<digest>.<ext>``

* the day is the event's source commit time (``__source_ts_ms``) in UTC;
* ``<first>`` / ``<last>`` are the first and last log positions in the file (PostgreSQL LSN;
  MySQL binlog file, position and row; SQL Server commit LSN), ``<digest>`` a hash of the events'
  bytes: a batch redelivered after a crash rewrites the same file instead of adding a copy (two
  snapshot batches share positions, the digest tells them apart);
* format ``avro`` (default; object container file with the writer schema inside, derived from the
  Connect schema the events carry: exact decimals, timestamps with logical types) or ``jsonl``
  (one event per line as Connect's JSON converter wrote it, schema included, as Kafka Connect's
  S3 sink writes JSON; values in Debezium's encodings, decimals as exact numbers);
* a file appears only when complete: written to a hidden temporary name in the same directory,
  fsynced, renamed, and the directory fsynced. :meth:`BronzeWriter.write_batch` returns only
  then, and only then may the capture engine commit its offsets.

This module is written here because Kafka Connect's S3 sink, which does the same in the Kafka
worlds (see :func:`helpers.capture.connectors.bronze_s3_sink_config`), needs a Kafka cluster.
"""

from __future__ import annotations

import datetime as dt
import decimal
import errno
import hashlib
import io
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import fastavro

from helpers.errors import BronzeError, BronzeNotWritableError

__all__ = [
    "BronzeEvent",
    "BronzeFile",
    "BronzeWriter",
    "BronzeFormat",
    "avro_schema_from_connect",
    "bronze_files",
    "event_from_json",
    "position_of",
    "read_bronze",
]

BronzeFormat = Literal["avro", "jsonl"]
_EXT = {"avro": "avro", "jsonl": "jsonl"}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
_AVRO_NAME = re.compile(r"[^A-Za-z0-9_]")
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


@dataclass(frozen=True)
class BronzeEvent:
    """One flattened change event as received from the capture engine.

    Attributes:
        topic: destination topic (``tickit.ems.category``).
        value: the flattened row (``__op``, ``__deleted``, position fields, ...).
        schema: the event's Connect schema (``value.converter.schemas.enable=true``).
        raw: the value bytes as received (hashed for the file digest).
    """

    topic: str
    value: Mapping[str, Any]
    schema: Mapping[str, Any] | None
    raw: bytes

    @property
    def source_ts_ms(self) -> int:
        """Source commit time in epoch milliseconds (``__source_ts_ms``)."""
        ts = self.value.get("__source_ts_ms")
        if not isinstance(ts, int):
            raise BronzeError(
                f"Failed to place event of topic {self.topic}: no __source_ts_ms in {dict(self.value)}"
            )
        return ts


_SCHEMA_HEAD = b'{"schema":'
_PAYLOAD_SEP = b',"payload":'
_schema_cache: dict[bytes, Any] = {}


def event_from_json(topic: str, value: str | bytes | None) -> BronzeEvent | None:
    """Parse a value serialized by Connect's JSON converter (with schema); ``None`` for a tombstone.

    The converter writes ``{"schema":...,"payload":...}``; the schema text repeats in every
    event, so it is parsed once per distinct text and only the payload per event (decimals as
    :class:`decimal.Decimal`, exactly as written).

    Args:
        topic: destination topic.
        value: the value JSON text.

    Returns:
        The event, or ``None`` for a tombstone (null value).

    Raises:
        BronzeError: naming the topic, when the value is not a schema-and-payload JSON object.
    """
    if value is None:
        return None
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    cut = raw.rfind(_PAYLOAD_SEP) if raw.startswith(_SCHEMA_HEAD) and raw.endswith(b"}") else -1
    try:
        if cut > 0:
            schema_text = raw[len(_SCHEMA_HEAD) : cut]
            schema = _schema_cache.get(schema_text)
            if schema is None:
                if len(_schema_cache) > 1024:
                    _schema_cache.clear()
                schema = _schema_cache[schema_text] = json.loads(schema_text)
            payload = json.loads(raw[cut + len(_PAYLOAD_SEP) : -1], parse_float=decimal.Decimal)
            doc: Any = {"schema": schema, "payload": payload}
        else:
            doc = json.loads(raw, parse_float=decimal.Decimal)
    except ValueError:
        try:  # the split guessed wrong (a payload string containing the separator): parse it all
            doc = json.loads(raw, parse_float=decimal.Decimal)
        except ValueError as exc:
            raise BronzeError(
                f"Failed to parse change event of topic {topic}: {exc}: {raw[:200]!r}"
            ) from None
    if doc is None:
        return None
    if not isinstance(doc, dict) or "payload" not in doc:
        raise BronzeError(
            f"Failed to parse change event of topic {topic}: expected {{schema, payload}} "
            f"(value.converter.schemas.enable=true), got {raw[:200]!r}"
        )
    payload = doc["payload"]
    if payload is None:
        return None
    if not isinstance(payload, dict):
        raise BronzeError(
            f"Failed to parse change event of topic {topic}: payload is not an object: {raw[:200]!r}"
        )
    return BronzeEvent(topic, payload, doc.get("schema"), raw)


def position_of(value: Mapping[str, Any]) -> tuple[Any, ...]:
    """Log position of a flattened event, comparable within one source.

    PostgreSQL ``(lsn,)``; MySQL ``(file, pos, row)``; SQL Server ``(commit_lsn, change_lsn,
    event_serial_no)``.

    Raises:
        BronzeError: when the event has no position fields.
    """
    if "__lsn" in value:
        return (int(value["__lsn"] or 0),)
    if "__file" in value:
        return (str(value["__file"]), int(value["__pos"] or 0), int(value.get("__row") or 0))
    if "__commit_lsn" in value:
        return (
            str(value["__commit_lsn"]),
            str(value.get("__change_lsn") or ""),
            int(value.get("__event_serial_no") or 0),
        )
    raise BronzeError(
        f"Failed to find the log position of event {dict(value)}: no __lsn / __file / __commit_lsn"
    )


def _position_text(position: tuple[Any, ...]) -> str:
    if len(position) == 1:
        return f"{position[0]:020d}"
    if isinstance(position[1], int):
        return f"{_SAFE.sub('_', position[0])}-{position[1]:012d}-{position[2]:06d}"
    return "-".join(_SAFE.sub("_", str(p).replace(":", "")) for p in position)


# ------------------------------------------------------------------------------- Avro schema

_CONNECT_PRIMITIVES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "long",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_LOGICAL: dict[str, dict[str, Any]] = {
    "io.debezium.time.Date": {"type": "int", "logicalType": "date"},
    "org.apache.kafka.connect.data.Date": {"type": "int", "logicalType": "date"},
    "io.debezium.time.Timestamp": {"type": "long", "logicalType": "timestamp-millis"},
    "org.apache.kafka.connect.data.Timestamp": {"type": "long", "logicalType": "timestamp-millis"},
    "io.debezium.time.MicroTimestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "io.debezium.time.MicroTime": {"type": "long", "logicalType": "time-micros"},
    "io.debezium.time.Time": {"type": "int", "logicalType": "time-millis"},
    # ISO-8601 text with offset (timestamptz): stored as the instant, UTC microseconds
    "io.debezium.time.ZonedTimestamp": {
        "type": "long",
        "logicalType": "timestamp-micros",
        "connect.name": "zoned",
    },
}
_DECIMAL = "org.apache.kafka.connect.data.Decimal"


def _avro_type(fld: Mapping[str, Any]) -> Any:
    name = fld.get("name")
    if name == _DECIMAL:
        params = fld.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": max(precision, scale, 1),
            "scale": scale,
        }
    if name in _LOGICAL:
        return dict(_LOGICAL[name])
    base = _CONNECT_PRIMITIVES.get(str(fld.get("type")))
    if base is None:
        raise BronzeError(
            f"Failed to map Connect field {fld.get('field')!r} of type {fld.get('type')!r} to Avro"
        )
    return base


def avro_schema_from_connect(connect_schema: Mapping[str, Any], topic: str) -> dict[str, Any]:
    """Avro record schema for the flattened events of ``topic`` from their Connect schema.

    Args:
        connect_schema: the ``schema`` part of a JSON-converted value (a struct).
        topic: topic name (becomes the record namespace).

    Returns:
        An Avro record schema (optional fields are ``["null", T]`` with default null).

    Raises:
        BronzeError: for a non-struct schema or a type without an Avro mapping.
    """
    if connect_schema.get("type") != "struct":
        raise BronzeError(f"Failed to derive the Avro schema of topic {topic}: value schema is not a struct")
    fields = []
    for fld in connect_schema.get("fields", []):
        avro_type = _avro_type(fld)
        entry: dict[str, Any] = {"name": fld["field"]}
        if fld.get("optional", False):
            entry["type"] = ["null", avro_type]
            entry["default"] = None
        else:
            entry["type"] = avro_type
        fields.append(entry)
    return {
        "type": "record",
        "name": "Value",
        "namespace": ".".join(_AVRO_NAME.sub("_", part) or "_" for part in topic.split(".")),
        "fields": fields,
    }


def _converted_fields(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Fields whose JSON value needs converting for Avro: decimal scale, or ``"zoned"`` text."""
    out: dict[str, Any] = {}
    for fld in schema["fields"]:
        t = fld["type"]
        t = t[1] if isinstance(t, list) else t
        if isinstance(t, dict) and t.get("logicalType") == "decimal":
            out[fld["name"]] = int(t["scale"])
        elif isinstance(t, dict) and t.get("connect.name") == "zoned":
            out[fld["name"]] = "zoned"
    return out


def _avro_record(value: Mapping[str, Any], converted: Mapping[str, Any]) -> dict[str, Any]:
    record = dict(value)
    for name, how in converted.items():
        raw = record.get(name)
        if raw is None:
            continue
        if how == "zoned":
            instant = dt.datetime.fromisoformat(str(raw))
            delta = instant - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
            record[name] = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        else:
            record[name] = decimal.Decimal(str(raw)).quantize(decimal.Decimal(1).scaleb(-how))
    return record


# ------------------------------------------------------------------------------- writer


@dataclass(frozen=True)
class BronzeFile:
    """A Bronze file made visible by :meth:`BronzeWriter.write_batch`."""

    topic: str
    path: Path
    events: int
    first: tuple[Any, ...]
    last: tuple[Any, ...]
    snapshot_rows: int


@dataclass
class BronzeWriter:
    """Writes batches of change events to Bronze files, durably and idempotently (module docs).

    Attributes:
        root: the Bronze zone directory.
        fmt: ``avro`` or ``jsonl``.
        codec: Avro block codec (``deflate`` is in every Avro reader, also EMR's).
    """

    root: Path
    fmt: BronzeFormat = "avro"
    codec: str = "deflate"
    _schemas: dict[Any, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.fmt not in _EXT:
            raise BronzeError(
                f"Failed to configure the Bronze writer: format {self.fmt!r} is not one of {sorted(_EXT)}"
            )
        self.root = Path(self.root)

    def write_batch(self, events: Sequence[BronzeEvent]) -> list[BronzeFile]:
        """Write one batch of events (in log order) as one file per topic, day and schema.

        Args:
            events: the batch (tombstones already removed).

        Returns:
            The files written; every one is durable when this returns.

        Raises:
            BronzeError: for an event without time or position, or when writing fails (nothing
                of the failed file is visible).
        """
        groups: dict[tuple[str, dt.date, Any], list[BronzeEvent]] = {}
        for event in events:
            day = dt.datetime.fromtimestamp(event.source_ts_ms / 1000, tz=dt.UTC).date()
            schema_key = self._schema_key(event.schema) if self.fmt == "avro" else ""
            groups.setdefault((event.topic, day, schema_key), []).append(event)
        written = []
        for (topic, day, _), group in groups.items():
            written.append(self._write_group(topic, day, group))
        return written

    def _schema_key(self, schema: Mapping[str, Any] | None) -> Any:
        """Events parsed from the same schema text share one schema object: key by identity
        (falling back to the canonical text for schemas built elsewhere)."""
        if schema is None:
            return None
        key = id(schema)
        known = self._schemas.get(("id", key))
        if known is not None and known[0] is schema:
            return known[1]
        text = json.dumps(schema, sort_keys=True)
        self._schemas[("id", key)] = (schema, text)
        return text

    def _write_group(self, topic: str, day: dt.date, events: list[BronzeEvent]) -> BronzeFile:
        positions = [position_of(e.value) for e in events]
        first, last = min(positions), max(positions)
        digest = hashlib.blake2b(b"\n".join(e.raw for e in events), digest_size=6).hexdigest()
        directory = (
            self.root / topic / f"year={day.year:04d}" / f"month={day.month:02d}" / f"day={day.day:02d}"
        )
        name = f"{topic}+{_position_text(first)}+{_position_text(last)}+{digest}.{_EXT[self.fmt]}"
        try:
            self._makedirs(directory)
            data = self._encode(topic, events)
            tmp = directory / f".{name}.tmp-{os.getpid()}"
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, directory / name)
            _fsync_dir(directory)
        except OSError as exc:
            if exc.errno in _NOT_WRITABLE:
                raise BronzeNotWritableError(
                    f"Failed to write Bronze file {directory / name}: Bronze folder {directory} is not "
                    f"writable: {exc.strerror}; make it writable and restart the connector (the batch "
                    "was not marked processed: it is delivered again)"
                ) from exc
            raise BronzeError(f"Failed to write Bronze file {directory / name}: {exc}") from exc
        snapshot = sum(1 for e in events if e.value.get("__op") == "r")
        return BronzeFile(topic, directory / name, len(events), first, last, snapshot)

    def _makedirs(self, directory: Path) -> None:
        missing = []
        probe = directory
        while not probe.exists():
            missing.append(probe)
            probe = probe.parent
        directory.mkdir(parents=True, exist_ok=True)
        for created in reversed(missing):
            _fsync_dir(created.parent)

    def _encode(self, topic: str, events: list[BronzeEvent]) -> bytes:
        if self.fmt == "jsonl":
            # each line as the JSON converter wrote it: {"schema":...,"payload":...} (what Kafka
            # Connect's S3 sink writes with JsonFormat), so the types stay recoverable
            return b"".join(e.raw.replace(b"\n", b" ") + b"\n" for e in events)
        if events[0].schema is None:
            raise BronzeError(
                f"Failed to write Avro for topic {topic}: events carry no schema "
                "(set value.converter.schemas.enable=true, or use the jsonl format)"
            )
        key = self._schema_key(events[0].schema)
        if key not in self._schemas:
            avro = avro_schema_from_connect(events[0].schema, topic)
            self._schemas[key] = (fastavro.parse_schema(avro), _converted_fields(avro))
        parsed, converted = self._schemas[key]
        buffer = io.BytesIO()
        try:
            fastavro.writer(
                buffer, parsed, (_avro_record(e.value, converted) for e in events), codec=self.codec
            )
        except (ValueError, TypeError, decimal.InvalidOperation) as exc:
            raise BronzeError(f"Failed to encode events of topic {topic} as Avro: {exc}") from exc
        return buffer.getvalue()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------- reading


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
    if path.suffix == ".jsonl":
        with open(path, "rb") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    event = event_from_json(path.name, line.rstrip(b"\n"))
                except BronzeError as exc:
                    raise BronzeError(f"Failed to read {path} line {number}: {exc}") from None
                if event is not None:
                    yield _decoded(event)
        return
    with open(path, "rb") as handle:
        for record in fastavro.reader(handle):
            yield dict(record)  # type: ignore[arg-type]


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _decoded(event: BronzeEvent) -> dict[str, Any]:
    """A JSON-lines event with Debezium's encodings decoded as Avro readers decode them (dates,
    aware UTC datetimes, exact decimals), so both Bronze formats read back alike."""
    if event.schema is None:
        return dict(event.value)
    avro = avro_schema_from_connect(event.schema, event.topic)
    row = _avro_record(event.value, _converted_fields(avro))
    for fld in avro["fields"]:
        t = fld["type"][1] if isinstance(fld["type"], list) else fld["type"]
        value = row.get(fld["name"])
        if value is None or not isinstance(t, dict):
            continue
        logical = t.get("logicalType")
        if logical == "date":
            row[fld["name"]] = dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
        elif logical == "timestamp-millis":
            row[fld["name"]] = _EPOCH + dt.timedelta(milliseconds=int(value))
        elif logical == "timestamp-micros":
            row[fld["name"]] = _EPOCH + dt.timedelta(microseconds=int(value))
    return row


def read_bronze(root: str | Path, topics: str | Iterable[str]) -> list[dict[str, Any]]:
    """All events of the given topics, with ``_bronze_file`` added, in file then event order.

    Redeliveries appear as often as they were written: deduplicate on the log position.

    Args:
        root: the Bronze zone directory.
        topics: one topic or several.

    Returns:
        The event rows (Avro types decoded: decimals as :class:`decimal.Decimal`, timestamps as
        aware datetimes, dates as dates).
    """
    names = [topics] if isinstance(topics, str) else list(topics)
    out = []
    for topic in names:
        for path in bronze_files(root, topic):
            for row in _read_file(path):
                row["_bronze_file"] = path.name
                out.append(row)
    return out
