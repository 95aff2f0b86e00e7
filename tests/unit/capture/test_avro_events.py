"""Avro change events (Apicurio's converter, Confluent wire format) read into the same Bronze events
and files as the JSON converter's: schema rebuilt from the ``connect.*`` annotations, decimals
exact, dates and timestamps as the JSON converter's numbers; bad messages name the topic.
(The real converter in a real worker: tests/integration/test_kafka_bronze_sink.py.)"""

from __future__ import annotations

import decimal
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer

from helpers.bronze.read import bronze_files, read_bronze
from helpers.bronze.writer import BronzeWriter
from helpers.capture.avro_events import AvroEventDecoder, connect_schema_from_avro
from helpers.capture.kafka_sink import write_records
from helpers.capture.wire import frame_message

TOPIC = "tickit.ecomm.sale"

# What Kafka Connect's AvroData (kept by Apicurio's converter) writes for a flattened sale event
AVRO = {
    "type": "record",
    "name": "Value",
    "namespace": "tickit.ecomm.sale",
    "fields": [
        {"name": "salesid", "type": "int"},
        {"name": "qtysold", "type": {"type": "int", "connect.type": "int16"}},
        {
            "name": "pricepaid",
            "type": [
                "null",
                {
                    "type": "bytes",
                    "scale": 2,
                    "precision": 8,
                    "connect.version": 1,
                    "connect.parameters": {"scale": "2", "connect.decimal.precision": "8"},
                    "connect.name": "org.apache.kafka.connect.data.Decimal",
                    "logicalType": "decimal",
                },
            ],
            "default": None,
        },
        {
            "name": "saletime",
            "type": [
                "null",
                {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"},
            ],
            "default": None,
        },
        {
            "name": "day",
            "type": [
                "null",
                {
                    "type": "int",
                    "connect.version": 1,
                    "connect.name": "org.apache.kafka.connect.data.Date",
                    "logicalType": "date",
                },
            ],
            "default": None,
        },
        {"name": "__deleted", "type": ["null", "string"], "default": None},
        {"name": "__op", "type": ["null", "string"], "default": None},
        {"name": "__file", "type": ["null", "string"], "default": None},
        {"name": "__pos", "type": ["null", "long"], "default": None},
        {"name": "__row", "type": ["null", "int"], "default": None},
        {"name": "__source_ts_ms", "type": ["null", "long"], "default": None},
    ],
    "connect.name": "tickit.ecomm.sale.Value",
}

# The JSON converter's schema and payload of the same event
CONNECT_FIELDS = [
    {"type": "int32", "optional": False, "field": "salesid"},
    {"type": "int16", "optional": False, "field": "qtysold"},
    {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "8"},
        "field": "pricepaid",
    },
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "field": "saletime"},
    {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "field": "day"},
    {"type": "string", "optional": True, "field": "__deleted"},
    {"type": "string", "optional": True, "field": "__op"},
    {"type": "string", "optional": True, "field": "__file"},
    {"type": "int64", "optional": True, "field": "__pos"},
    {"type": "int32", "optional": True, "field": "__row"},
    {"type": "int64", "optional": True, "field": "__source_ts_ms"},
]


def _payload(salesid: int, pos: int) -> dict[str, Any]:
    return {
        "salesid": salesid,
        "qtysold": 2,
        "pricepaid": decimal.Decimal("1234.50"),
        "saletime": 1_700_000_000_123_456,
        "day": 19_675,
        "__deleted": "false",
        "__op": "c",
        "__file": "mariadb-bin.000001",
        "__pos": pos,
        "__row": 0,
        "__source_ts_ms": 1_700_000_000_000,
    }


class _Registry:
    def __init__(self) -> None:
        self.schemas = {7: json.dumps(AVRO)}

    def register(self, subject: str, schema: Any) -> int:
        raise AssertionError("the sink never registers")

    def schema_by_id(self, schema_id: int) -> Any:
        from helpers.errors import SchemaRegistryError

        if schema_id not in self.schemas:
            raise SchemaRegistryError(f"Failed to read schema {schema_id}: 40403 Schema not found")
        return self.schemas[schema_id]


def _message(record: dict[str, Any], schema_id: int = 7) -> bytes:
    buffer = io.BytesIO()
    schemaless_writer(buffer, parse_schema(AVRO), record)
    return frame_message(schema_id, buffer.getvalue())


def test_the_connect_schema_is_rebuilt_from_the_annotations() -> None:
    schema = connect_schema_from_avro(AVRO, TOPIC)
    assert schema["fields"] == CONNECT_FIELDS


def test_avro_and_json_messages_make_the_same_bronze_rows(tmp_path: Path) -> None:
    decode = AvroEventDecoder(_Registry())
    event = decode(TOPIC, _message(_payload(1, 100)))
    assert event is not None and dict(event.value) == _payload(1, 100)
    assert decode(TOPIC, None) is None  # a tombstone

    avro_dir, json_dir = tmp_path / "avro", tmp_path / "json"
    write_records(
        BronzeWriter(avro_dir), [(TOPIC, 0, i, _message(_payload(i, 100 + i))) for i in range(3)], decode
    )
    schema = {"type": "struct", "optional": False, "fields": CONNECT_FIELDS}
    json_values = [
        json.dumps({"schema": schema, "payload": _payload(i, 100 + i)}, default=str).encode()
        for i in range(3)
    ]
    write_records(BronzeWriter(json_dir), [(TOPIC, 0, i, v) for i, v in enumerate(json_values)])

    def rows(folder: Path) -> list[dict[str, Any]]:  # the file name's digest hashes the raw bytes
        return [{k: v for k, v in r.items() if k != "_bronze_file"} for r in read_bronze(folder, TOPIC)]

    from_avro = rows(avro_dir)
    assert from_avro == rows(json_dir)
    assert from_avro[0]["pricepaid"] == decimal.Decimal("1234.50")
    assert [p.name.split("+")[1:3] for p in bronze_files(avro_dir, TOPIC)] == [
        p.name.split("+")[1:3] for p in bronze_files(json_dir, TOPIC)
    ]  # same file boundaries and positions


@pytest.mark.parametrize(
    ("message", "says"),
    [
        (b"{}", "magic byte"),
        (b"\x00\x00", "fewer than the 5-byte header"),
        (frame_message(99, b"\x02"), "Schema not found"),
        (frame_message(7, b"\x02"), "schema id 7: the Avro body does not match"),
    ],
)
def test_a_bad_message_names_the_topic_and_the_cause(message: bytes, says: str) -> None:
    with pytest.raises(Exception, match=rf"topic {TOPIC}.*{says}") as caught:
        AvroEventDecoder(_Registry())(TOPIC, message)
    assert type(caught.value).__name__ == "BronzeError"
