"""The Bronze event model: one flattened change event, its log position, and Connect-schema
decoding (shared by the writer and the readers)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helpers.errors import BronzeError

#: What PostgreSQL's connector puts in a column whose value the change does not carry (an
#: unchanged TOASTed value under ``REPLICA IDENTITY DEFAULT``); bytes columns get its UTF-8.
UNAVAILABLE_VALUE = "__debezium_unavailable_value"

__all__ = [
    "EVENT_FIELDS",
    "event_fields",
    "MARKER_OPS",
    "RESNAPSHOT_OP",
    "TRUNCATE_OP",
    "marker_event",
    "UNAVAILABLE_VALUE",
    "BronzeEvent",
    "avro_record",
    "avro_schema_from_connect",
    "converted_fields",
    "decoded_event",
    "event_from_json",
    "position_of",
]


#: Debezium's op code of a TRUNCATE: capture keeps it as a marker event with its log position and
#: no key (the ``TruncateMarker`` transform, ``connect/src``); replay and Silver apply it.
TRUNCATE_OP = "t"
#: The workbook's marker of a finished re-snapshot (:mod:`helpers.capture.resnapshot`), at the
#: source position from which the snapshot re-read every row: what came before it is void, as
#: for a TRUNCATE at that position.
RESNAPSHOT_OP = "resnapshot"
#: The ops of marker events: no key, a log position, and "every row before me is gone".
MARKER_OPS = (TRUNCATE_OP, RESNAPSHOT_OP)


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


def converted_fields(schema: Mapping[str, Any]) -> dict[str, Any]:
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


def avro_record(value: Mapping[str, Any], converted: Mapping[str, Any]) -> dict[str, Any]:
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


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def decoded_event(event: BronzeEvent) -> dict[str, Any]:
    """A JSON-lines event with Debezium's encodings decoded as Avro readers decode them (dates,
    aware UTC datetimes, exact decimals), so both Bronze formats read back alike."""
    if event.schema is None:
        return dict(event.value)
    avro = avro_schema_from_connect(event.schema, event.topic)
    row = avro_record(event.value, converted_fields(avro))
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


_schema_cache: dict[bytes, Any] = {}


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


_AVRO_NAME = re.compile(r"[^A-Za-z0-9_]")


_CONNECT_TYPES = {str: "string", int: "int64"}


#: Marker fields typed as Debezium types them (MySQL's ``__row`` is an int32): the streamer engine
#: reads a topic's files, markers included, with the table's schema, and Avro cannot read a long
#: into an int ("AvroTypeException: Found long, expecting union", measured).
_MARKER_TYPES = {"__row": "int32"}


def marker_event(topic: str, op: str, table: str, position: Mapping[str, Any], ts_ms: int) -> BronzeEvent:
    """A marker event (:data:`MARKER_OPS`) for ``topic``, shaped as capture writes events: the
    flattened value (``__op``, ``__table``, the position fields, ``__source_ts_ms``) with its
    Connect schema, and the JSON converter's bytes.

    Args:
        topic: the table's topic.
        op: :data:`RESNAPSHOT_OP` (a TRUNCATE marker comes from capture itself).
        table: the source table's name.
        position: the position fields (``__lsn``, or ``__file``, ``__pos``, ``__row``).
        ts_ms: the source time, epoch milliseconds.
    """
    value: dict[str, Any] = {"__op": op, "__table": table, **position, "__source_ts_ms": ts_ms}
    fields = [
        {"field": name, "type": _MARKER_TYPES.get(name, _CONNECT_TYPES[type(v)]), "optional": name != "__op"}
        for name, v in value.items()
    ]
    schema = {"type": "struct", "optional": False, "name": f"{topic}.Marker", "fields": fields}
    raw = json.dumps({"schema": schema, "payload": value}, separators=(",", ":")).encode()
    return BronzeEvent(topic, value, schema, raw)


#: What each field Debezium adds to a Bronze event means. Debezium's own message is an envelope
#: (``before``, ``after``, ``source``, ``op``); its ``ExtractNewRecordState`` transform keeps one
#: row image and adds the envelope's fields with the ``__`` prefix (``helpers.capture.connectors``).
EVENT_FIELDS: Mapping[str, str] = {
    "__op": "the change: r = snapshot read, c = insert, u = update, d = delete, t = TRUNCATE",
    "__deleted": "'true' on a delete: the row then holds the image before the delete",
    "__table": "the source table",
    "__lsn": "PostgreSQL: the WAL position (LSN) of the change; Silver orders changes by it",
    "__file": "MariaDB/MySQL: the binlog file of the change",
    "__pos": "MariaDB/MySQL: the position of the change's event in that binlog file",
    "__row": "MariaDB/MySQL: the row within that binlog event (one event may change many rows)",
    "__source_ts_ms": "when the source committed the change (milliseconds since 1970, UTC)",
    "_bronze_file": "the Bronze file: topic, first and last log position of its batch, a digest",
}


def event_fields(event: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """One event field by field, as ``(field, value, meaning)``: Debezium's fields with their
    meaning (:data:`EVENT_FIELDS`), then the row's own columns (the row image after the change)."""
    added = [(k, repr(event[k]), meaning) for k, meaning in EVENT_FIELDS.items() if k in event]
    row = [
        (k, repr(v), "a column of the source row, as the change left it")
        for k, v in event.items()
        if k not in EVENT_FIELDS
    ]
    return added + row
