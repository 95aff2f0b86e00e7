"""Change events from Avro messages in the Confluent wire format, for the Bronze writer.

With ``capture.kafka_connect.converter`` set to Apicurio's ``AvroConverter`` (as in the original
posts), each Kafka message is a schema id plus an Avro body, and the schema is in the registry.
:class:`AvroEventDecoder` turns such a message into the same :class:`BronzeEvent` the JSON
converter's message gives: the flattened row as the JSON converter writes it (exact decimals,
dates as days, timestamps as epoch numbers, zoned timestamps as ISO text) and its Connect schema,
rebuilt from the ``connect.*`` annotations the converter puts in the Avro schema. Bronze files
are then identical whichever converter the connectors used.

The annotations are those of Kafka Connect's ``AvroData`` (the Apicurio converter keeps them):
``connect.name`` (Debezium's and Kafka's logical names), ``connect.parameters`` (a decimal's scale
and precision), ``connect.type`` (``int8``/``int16``, which Avro writes as ``int``).
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Mapping
from typing import Any

from fastavro import parse_schema
from fastavro.types import Schema

from helpers.bronze.events import BronzeEvent
from helpers.capture.wire import SchemaSource, read_body, split_message
from helpers.errors import BronzeError, WorkbookError

__all__ = ["AvroEventDecoder", "connect_schema_from_avro"]

_PRIMITIVE = {
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}


def _field_schema(name: str, avro_type: Any, topic: str) -> dict[str, Any]:
    optional = False
    if isinstance(avro_type, list):
        others = [t for t in avro_type if t != "null"]
        if len(others) != 1:
            raise BronzeError(
                f"Failed to read the Avro schema of topic {topic}: field {name!r} is a union of "
                f"{avro_type}; only [null, T] unions are change-event fields"
            )
        optional = len(others) != len(avro_type)
        avro_type = others[0]
    spec = avro_type if isinstance(avro_type, dict) else {"type": avro_type}
    base = spec.get("type")
    if base not in _PRIMITIVE:
        raise BronzeError(
            f"Failed to read the Avro schema of topic {topic}: field {name!r} has type {base!r}, "
            "not a flattened column (the connectors must unwrap with ExtractNewRecordState)"
        )
    out: dict[str, Any] = {"type": spec.get("connect.type") or _PRIMITIVE[str(base)], "optional": optional}
    if spec.get("connect.name"):
        out["name"] = spec["connect.name"]
    params = spec.get("connect.parameters")
    if params:
        out["parameters"] = dict(params)
    elif spec.get("logicalType") == "decimal":  # a decimal written without Connect's annotations
        out["name"] = "org.apache.kafka.connect.data.Decimal"
        out["parameters"] = {
            "scale": str(spec.get("scale", 0)),
            "connect.decimal.precision": str(spec.get("precision", 38)),
        }
    out["field"] = name
    return out


def connect_schema_from_avro(avro: Mapping[str, Any], topic: str) -> dict[str, Any]:
    """The Connect (JSON converter) schema of a flattened change event from its Avro schema.

    Raises:
        BronzeError: for a schema that is not a record of flat columns.
    """
    if not isinstance(avro, Mapping) or avro.get("type") != "record":
        raise BronzeError(f"Failed to read the Avro schema of topic {topic}: not a record schema")
    return {
        "type": "struct",
        "optional": False,
        "name": avro.get("connect.name") or avro.get("name"),
        "fields": [_field_schema(f["name"], f["type"], topic) for f in avro["fields"]],
    }


def _raw_reader_schema(avro: Any) -> Any:
    """``avro`` without logical types other than decimal: the reader then returns dates and
    timestamps as the numbers the JSON converter writes (the binary encoding is the same)."""
    if isinstance(avro, list):
        return [_raw_reader_schema(t) for t in avro]
    if isinstance(avro, dict):
        out = {k: _raw_reader_schema(v) for k, v in avro.items()}
        if out.get("logicalType") not in (None, "decimal"):
            del out["logicalType"]
        return out
    return avro


class AvroEventDecoder:
    """Decode wire-format Avro messages of change topics into :class:`BronzeEvent`.

    Each schema id is read from the registry once; its Connect schema is built once, so every
    event of one schema shares one schema object (the Bronze writer groups files by it).

    Args:
        registry: the schema source (:class:`helpers.capture.ccompat.SchemaRegistryClient`).
    """

    def __init__(self, registry: SchemaSource) -> None:
        self.registry = registry
        self._schemas: dict[int, tuple[dict[str, Any], Schema]] = {}

    def _schemas_of(self, schema_id: int, topic: str) -> tuple[dict[str, Any], Schema]:
        if schema_id not in self._schemas:
            writer = self.registry.schema_by_id(schema_id)
            avro = json.loads(writer) if isinstance(writer, str) else writer
            if not isinstance(avro, dict):
                raise BronzeError(
                    f"Failed to read the Avro schema {schema_id} of topic {topic}: not a record"
                )
            raw = parse_schema(_raw_reader_schema(avro))  # same binary encoding as the writer's
            self._schemas[schema_id] = (connect_schema_from_avro(avro, topic), raw)
        return self._schemas[schema_id]

    def __call__(self, topic: str, value: bytes | None) -> BronzeEvent | None:
        """The event in ``value`` (``None`` for a tombstone).

        Raises:
            BronzeError: naming the topic, for a message that is not wire-format Avro of a
                flattened change event, or whose schema the registry does not have.
        """
        if value is None:
            return None
        try:
            schema_id, body = split_message(value)
            connect, reader = self._schemas_of(schema_id, topic)
            record = read_body(schema_id, body, reader)
        except BronzeError:
            raise
        except WorkbookError as exc:  # the wire format, the registry, or a body of another schema
            raise BronzeError(f"Failed to parse change event of topic {topic}: {exc}") from None
        if not isinstance(record, dict):
            raise BronzeError(
                f"Failed to parse change event of topic {topic}: the Avro value is not a record"
            )
        for fld in connect["fields"]:
            raw = record.get(fld["field"])
            if fld.get("name") == "org.apache.kafka.connect.data.Decimal" and isinstance(raw, bytes):
                scale = int(fld["parameters"].get("scale", 0))  # bytes left without a logical type
                record[fld["field"]] = decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)
        return BronzeEvent(topic, record, connect, bytes(value))
