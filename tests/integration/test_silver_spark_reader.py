"""Bronze read by Spark (``AvroFileFormat``) gives exactly what the in-process reader gives,
including a column added at the source between two files (null in the older events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.capture.bronze import BronzeWriter, event_from_json
from helpers.silver import read_bronze_arrow, read_bronze_spark

pytestmark = pytest.mark.integration


def _event(lsn: int, extra: bool, **row: Any) -> str:
    fields = [
        {"type": "int32", "optional": False, "field": "id"},
        {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "2", "connect.decimal.precision": "8"},
            "field": "price",
        },
        {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "at"},
        {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "day"},
        {"type": "string", "optional": True, "field": "__deleted"},
        {"type": "int64", "optional": True, "field": "__lsn"},
        {"type": "int64", "optional": True, "field": "__source_ts_ms"},
    ]
    if extra:
        fields.insert(4, {"type": "string", "optional": True, "field": "note"})
    schema = {"type": "struct", "fields": fields, "optional": False, "name": "t.Value"}
    payload = {"__lsn": lsn, "__source_ts_ms": 1_767_225_600_000, "__deleted": "false", **row}
    return json.dumps({"schema": schema, "payload": payload}).replace('"PRICE"', "12.50")


def test_spark_and_arrow_readers_agree(spark: Any, tmp_path: Path) -> None:  # noqa: ANN401
    old = [
        event_from_json("tickit.x.t", _event(i, False, id=i, price="PRICE", at=1_199_232_000_123, day=13880))
        for i in (1, 2)
    ]
    new = [event_from_json("tickit.x.t", _event(3, True, id=3, price=None, at=None, day=None, note="added"))]
    writer = BronzeWriter(tmp_path, "avro")
    paths = [f.path for f in writer.write_batch([e for e in old if e])] + [
        f.path for f in writer.write_batch([e for e in new if e])
    ]
    assert len(paths) == 2
    by_arrow = read_bronze_arrow(paths).sort_by("id")
    by_spark = read_bronze_spark(spark, paths).sort_by("id").select(by_arrow.column_names)
    assert by_spark.to_pylist() == by_arrow.to_pylist()
    assert [r["note"] for r in by_spark.to_pylist()] == [None, None, "added"]
