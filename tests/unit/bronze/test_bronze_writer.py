"""The Bronze writer and reader: daily files named by positions, idempotent redelivery, Connect
JSON decoding, and the same typed rows from Avro and JSON lines."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from helpers.bronze.events import avro_schema_from_connect, event_fields, event_from_json
from helpers.bronze.read import bronze_files, first_event, read_bronze, read_bronze_arrow
from helpers.bronze.writer import BronzeWriter
from helpers.errors import BronzeError


def _event(topic: str, lsn: int, ts_ms: int, **row: Any) -> str:
    schema = {
        "type": "struct",
        "fields": [
            {"type": "int32", "optional": False, "field": "id"},
            {
                "type": "bytes",
                "optional": True,
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2", "connect.decimal.precision": "8"},
                "field": "price",
            },
            {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "field": "at"},
            {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "field": "zoned"},
            {"type": "string", "optional": True, "field": "__deleted"},
            {"type": "string", "optional": True, "field": "__op"},
            {"type": "int64", "optional": True, "field": "__lsn"},
            {"type": "int64", "optional": True, "field": "__source_ts_ms"},
        ],
        "optional": False,
        "name": f"{topic}.Value",
    }
    payload = {"__lsn": lsn, "__source_ts_ms": ts_ms, "__deleted": "false", "__op": "c", **row}
    return json.dumps({"schema": schema, "payload": payload})


DAY1 = int(dt.datetime(2026, 3, 1, 23, 59, 59, tzinfo=dt.UTC).timestamp() * 1000)
DAY2 = DAY1 + 2000


@pytest.mark.parametrize("fmt", ["avro", "jsonl"])
def test_bronze_files_are_daily_by_source_time_named_by_positions_and_idempotent(
    tmp_path: Path, fmt: str
) -> None:
    """Events of one batch split by UTC day of their source commit; names carry first and last
    position; the same batch again rewrites the same files; values are exact."""
    raw = [
        _event(
            "tickit.ems.t",
            100,
            DAY1,
            id=1,
            price="PRICE",
            at=1_700_000_000_123_456,
            zoned="2024-01-15T12:17:47.5Z",
        ),
        _event("tickit.ems.t", 200, DAY2, id=2, price=None, at=None, zoned=None),
        _event("tickit.ems.t", 300, DAY2, id=3, price=None, at=None, zoned=None),
    ]
    raw[0] = raw[0].replace('"price": "PRICE"', '"price": 123456.78')  # the exact number text
    assert "123456.78" in raw[0]
    events = [e for e in (event_from_json("tickit.ems.t", r) for r in raw) if e is not None]
    writer = BronzeWriter(tmp_path, fmt)  # type: ignore[arg-type]
    files = writer.write_batch(events)
    names = sorted(p.relative_to(tmp_path).as_posix() for p in bronze_files(tmp_path, "tickit.ems.t"))
    assert [n.rsplit("+", 1)[0] for n in names] == [
        "tickit.ems.t/year=2026/month=03/day=01/tickit.ems.t+00000000000000000100+00000000000000000100",
        "tickit.ems.t/year=2026/month=03/day=02/tickit.ems.t+00000000000000000200+00000000000000000300",
    ]
    assert sum(f.events for f in files) == 3
    writer.write_batch(events)  # redelivery of the same batch
    assert len(bronze_files(tmp_path, "tickit.ems.t")) == 2
    rows = read_bronze(tmp_path, "tickit.ems.t")
    assert [r["id"] for r in rows] == [1, 2, 3]
    first = rows[0]  # both formats read back alike (JSON lines decoded with their schema)
    assert first["price"] == decimal.Decimal("123456.78")
    assert first["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)
    assert first["zoned"] == dt.datetime(2024, 1, 15, 12, 17, 47, 500000, tzinfo=dt.UTC)
    if fmt == "avro":
        with open(bronze_files(tmp_path, "tickit.ems.t")[0], "rb") as handle:
            schema = fastavro.reader(handle).writer_schema
        price = next(f for f in schema["fields"] if f["name"] == "price")["type"][1]
        assert (price["logicalType"], price["precision"], price["scale"]) == ("decimal", 8, 2)
    assert not list(tmp_path.rglob(".*tmp*"))


def test_bronze_rejects_bad_events_with_topic_and_cause(tmp_path: Path) -> None:
    assert event_from_json("t", None) is None
    assert event_from_json("t", '{"schema": null, "payload": null}') is None  # tombstone-like
    with pytest.raises(BronzeError, match="topic t: Expecting property name"):
        event_from_json("t", "{not json")
    with pytest.raises(BronzeError, match="schemas.enable=true"):
        event_from_json("t", '{"id": 1}')
    no_time = event_from_json("t", json.dumps({"schema": None, "payload": {"__lsn": 1}}))
    assert no_time is not None
    with pytest.raises(BronzeError, match="no __source_ts_ms"):
        BronzeWriter(tmp_path, "jsonl").write_batch([no_time])
    with pytest.raises(BronzeError, match="to Avro"):
        avro_schema_from_connect({"type": "struct", "fields": [{"type": "array", "field": "x"}]}, "t")
    with pytest.raises(BronzeError, match="format"):
        BronzeWriter(tmp_path, "csv")  # type: ignore[arg-type]


def test_jsonl_and_avro_bronze_read_to_the_same_typed_table(tmp_path: Path) -> None:
    """The same events through both Bronze formats: Silver's reader gives identical typed rows
    (Debezium's encodings in JSON lines converted with the schema each line carries)."""
    raw = [
        _event(
            "tickit.ems.t",
            100,
            DAY1,
            id=1,
            price="PRICE",
            at=1_700_000_000_123_456,
            zoned="2024-01-15T12:17:47.5Z",
        ),
        _event("tickit.ems.t", 200, DAY1, id=2, price=None, at=None, zoned=None),
    ]
    raw[0] = raw[0].replace('"price": "PRICE"', '"price": 0.10')
    events = [e for e in (event_from_json("tickit.ems.t", r) for r in raw) if e is not None]
    avro = BronzeWriter(tmp_path / "a", "avro").write_batch(events)
    jsonl = BronzeWriter(tmp_path / "j", "jsonl").write_batch(events)
    from_avro = read_bronze_arrow([f.path for f in avro])
    from_jsonl = read_bronze_arrow([f.path for f in jsonl])
    assert from_jsonl.schema == from_avro.schema
    assert from_jsonl.to_pylist() == from_avro.to_pylist()
    first = from_jsonl.to_pylist()[0]
    assert first["price"] == decimal.Decimal("0.10")
    assert first["zoned"] == dt.datetime(2024, 1, 15, 12, 17, 47, 500000, tzinfo=dt.UTC)
    bad = tmp_path / "j" / "bad+1+1+x.jsonl"
    bad.write_bytes(raw[1].encode() + b"\n{broken\n")
    with pytest.raises(Exception, match="line 2"):
        read_bronze_arrow([bad])


def test_an_uncached_read_decodes_every_file_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_bronze_arrow`` decodes a file once per process; ``cached=False`` (a benchmark's decode
    baseline) decodes it on every call and returns the same table. bench_silver's baseline once
    timed a cache hit: 0.0 s for 451,132 events."""
    from helpers.bronze import read as bronze_read

    events = [
        e
        for e in (
            event_from_json(
                "tickit.ems.t", _event("tickit.ems.t", 300, DAY1, id=3, price=None, at=None, zoned=None)
            ),
        )
        if e is not None
    ]
    paths = [f.path for f in BronzeWriter(tmp_path, "avro").write_batch(events)]
    decoded: list[Path] = []
    real = bronze_read._decode_file

    def counting(path: Path) -> list[Any]:
        decoded.append(path)
        return real(path)

    monkeypatch.setattr(bronze_read, "_decode_file", counting)
    monkeypatch.setattr(bronze_read, "_DECODED", bronze_read._DecodedFiles(1 << 20))
    first = read_bronze_arrow(paths)
    assert read_bronze_arrow(paths) == first and len(decoded) == len(paths)
    assert read_bronze_arrow(paths, cached=False) == first
    assert read_bronze_arrow(paths, cached=False) == first and len(decoded) == 3 * len(paths)


def test_first_event_reads_until_it_finds_the_operation_and_explains_each_field(tmp_path: Path) -> None:
    """Two files: a create at LSN 10, then an update at LSN 20.
    Expected: the first event is the create, the first update is the second file's, none for a
    delete; the field table gives Debezium's fields with their meaning, then the row's columns."""
    topic = "p.ems.venue"
    writer = BronzeWriter(tmp_path, "avro")
    for lsn, op in ((10, "c"), (20, "u")):
        row = {"id": 7, "price": None, "at": None, "zoned": None, "__op": op}
        event = event_from_json(topic, _event(topic, lsn, DAY1, **row))
        assert event is not None
        writer.write_batch([event])
    assert first_event(tmp_path, topic)["__lsn"] == 10  # type: ignore[index]
    update = first_event(tmp_path, topic, ("u", "d"))
    assert update is not None and update["__lsn"] == 20 and update["_bronze_file"].endswith(".avro")
    assert first_event(tmp_path, topic, ("d",)) is None
    fields = event_fields(update)
    assert [f for f, _, _ in fields[:5]] == ["__op", "__deleted", "__lsn", "__source_ts_ms", "_bronze_file"]
    assert fields[0][1] == "'u'" and "update" in fields[0][2]
    assert ("id", "7", "a column of the source row, as the change left it") in fields
