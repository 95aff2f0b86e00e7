"""Bronze read by Spark's executors: both Bronze formats give the same typed rows (exact decimals,
UTC timestamps, dates), files of two writer schemas are joined by column name, and a damaged file
is found before any of its events is read. Expected values are stated per test."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers.bronze.events import event_from_json
from helpers.bronze.frames import inspect_files, read_events
from helpers.bronze.layout import BAD_REASON, FILE_COLUMN, ROW_COLUMN
from helpers.bronze.store import BronzeStore
from helpers.bronze.writer import BronzeWriter

pytestmark = pytest.mark.integration

TOPIC = "tickit.ems.t"
DAY = int(dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC).timestamp() * 1000)
BASE = [
    {"type": "int32", "optional": False, "field": "id"},
    {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "8"},
        "field": "price",
    },
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "field": "at"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "at_ms"},
    {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "field": "zoned"},
    {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "day"},
    {"type": "string", "optional": True, "field": "__op"},
    {"type": "int64", "optional": True, "field": "__lsn"},
    {"type": "int64", "optional": True, "field": "__source_ts_ms"},
]


def _raw(lsn: int, fields: list[dict[str, Any]] = BASE, **values: Any) -> str:
    payload = {"id": lsn, "__op": "c", "__lsn": lsn, "__source_ts_ms": DAY + lsn, **values}
    return json.dumps({"schema": {"type": "struct", "fields": fields, "optional": False}, "payload": payload})


def _write(root: Path, raws: list[str], fmt: str) -> None:
    events = [e for e in (event_from_json(TOPIC, r) for r in raws) if e is not None]
    BronzeWriter(root, fmt).write_batch(events)  # type: ignore[arg-type]


def _rows(spark: Any, root: Path) -> list[dict[str, Any]]:
    layouts = inspect_files(spark, BronzeStore(root).list(TOPIC))
    frame = read_events(spark, layouts)
    data = [c for c in frame.columns if not c.startswith(("_bronze", "_bad"))]
    return [r.asDict() for r in frame.orderBy("id").select(*data).collect()]


def test_avro_and_jsonl_bronze_read_to_the_same_typed_rows(spark: Any, tmp_path: Path) -> None:
    """The exact number text 123456.78, a microsecond timestamp, a millisecond one, an ISO
    timestamp with offset and a date: the same values through either format, as Spark types."""
    raws = [
        _raw(
            1,
            price="PRICE",
            at=1_700_000_000_123_456,
            at_ms=1_700_000_000_123,
            zoned="2024-01-15T13:17:47.5+01:00",
            day=14_000,
        ),
        _raw(2, price=None, at=None, at_ms=None, zoned=None, day=None),
    ]
    raws[0] = raws[0].replace('"price": "PRICE"', '"price": 123456.78')
    for fmt in ("avro", "jsonl"):
        _write(tmp_path / fmt, raws, fmt)
    avro, jsonl = _rows(spark, tmp_path / "avro"), _rows(spark, tmp_path / "jsonl")
    assert avro == jsonl
    first = avro[0]
    assert first["price"] == decimal.Decimal("123456.78")
    assert first["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456)  # session time zone UTC
    assert first["at_ms"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000)
    assert first["zoned"] == dt.datetime(2024, 1, 15, 12, 17, 47, 500000)
    assert first["day"] == dt.date(1970, 1, 1) + dt.timedelta(days=14_000)
    assert avro[1] == {
        **{k: None for k in first},
        "id": 2,
        "__op": "c",
        "__lsn": 2,
        "__source_ts_ms": DAY + 2,
    }


def test_files_of_two_writer_schemas_are_joined_by_column_name(spark: Any, tmp_path: Path) -> None:
    """A column added at the source between two files: older events read it as null."""
    wider = [*BASE, {"type": "string", "optional": True, "field": "note"}]
    _write(tmp_path, [_raw(1, price=1.5)], "avro")
    _write(tmp_path, [_raw(2, wider, price=2.5, note="new")], "avro")
    rows = _rows(spark, tmp_path)
    assert [(r["id"], r["price"], r["note"]) for r in rows] == [
        (1, decimal.Decimal("1.50"), None),
        (2, decimal.Decimal("2.50"), "new"),
    ]


def test_a_truncated_file_is_found_before_its_events_are_read(spark: Any, tmp_path: Path) -> None:
    """Spark's Avro source alone returns the blocks before a cut without an error; the layouts
    name the file unreadable and the read leaves it out. Records are numbered from 1 per file."""
    _write(tmp_path, [_raw(i) for i in range(1, 3000)], "avro")
    _write(tmp_path, [_raw(5000 + i) for i in range(3)], "avro")
    files = BronzeStore(tmp_path).list(TOPIC)
    big = max(files, key=lambda f: f.size)
    data = Path(big.uri).read_bytes()
    Path(big.uri).write_bytes(data[: len(data) * 2 // 3])
    assert spark.read.format("avro").load(big.uri).count() > 0  # the control: no error, fewer rows
    layouts = {lay.file.name: lay for lay in inspect_files(spark, files)}
    assert "truncated" in str(layouts[big.name].error) or "sync" in str(layouts[big.name].error)
    frame = read_events(spark, list(layouts.values()))
    rows = frame.select("id", FILE_COLUMN, ROW_COLUMN, BAD_REASON).orderBy("id").collect()
    assert [r["id"] for r in rows] == [5000, 5001, 5002]
    assert {r[FILE_COLUMN] for r in rows} != {big.name} and all(r[BAD_REASON] is None for r in rows)
    assert [r[ROW_COLUMN] - rows[0][ROW_COLUMN] for r in rows] == [0, 1, 2]


def test_two_threads_inspect_a_new_file_once(spark: Any, tmp_path: Path) -> None:
    """Two tables of one topic inspect the same new files side by side in a round: one Spark job
    between them, the other thread waits for its layouts."""
    for start in range(0, 40, 4):
        _write(tmp_path, [_raw(start + i) for i in range(1, 5)], "avro")
    files = BronzeStore(tmp_path).list(TOPIC)
    context = spark.sparkContext
    start = threading.Barrier(2)
    found: dict[str, list[Any]] = {}

    def inspect(group: str) -> None:
        context.setJobGroup(group, group)
        start.wait()
        found[group] = inspect_files(spark, files)

    threads = [threading.Thread(target=inspect, args=(f"twice-{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    jobs = [len(context.statusTracker().getJobIdsForGroup(g)) for g in sorted(found)]
    assert sorted(jobs) == [0, 1]
    assert found["twice-0"] == found["twice-1"] and len(found["twice-0"]) == len(files) == 10
    assert all(lay.error is None and lay.parts[0].records == 4 for lay in found["twice-0"])
