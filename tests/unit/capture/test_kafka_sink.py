"""The Bronze sink's batch logic: which topics it takes, replayed batches give the same files and
are counted once, bad values fail the batch naming the topic, and redeliveries are counted.
(The sink itself runs on the real broker in tests/integration/test_kafka_bronze_sink.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from helpers.bronze.read import bronze_files, read_bronze_arrow
from helpers.bronze.replay import redelivered
from helpers.bronze.writer import BronzeWriter
from helpers.capture.kafka_sink import merge_batch, topic_pattern, write_records
from helpers.errors import BronzeError

_SCHEMA = {
    "type": "struct",
    "optional": False,
    "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
        {"type": "string", "optional": True, "field": "__deleted"},
        {"type": "string", "optional": True, "field": "__op"},
        {"type": "int64", "optional": True, "field": "__lsn"},
        {"type": "int64", "optional": True, "field": "__source_ts_ms"},
    ],
}


def _value(lsn: int, op: str = "r", **row: Any) -> bytes:
    payload = {"__lsn": lsn, "__source_ts_ms": 1_700_000_000_000, "__deleted": "false", "__op": op, **row}
    return json.dumps({"schema": _SCHEMA, "payload": payload}).encode()


def test_the_sink_takes_only_the_projects_change_topics() -> None:
    pattern = re.compile(topic_pattern("tickit"))
    taken = ["tickit.ems.category", "tickit.ecomm.sale", "tickit.crm.users"]
    left = [
        "tickit",  # MySQL schema-change events
        "__debezium-heartbeat.tickit",
        "tickit-ecomm.schema-history",
        "tickitx.ems.category",
        "tickit.ems.category.extra",
        "connect-offsets",
    ]
    assert [t for t in taken if pattern.fullmatch(t)] == taken
    assert [t for t in left if pattern.fullmatch(t)] == []


def test_a_replayed_batch_writes_the_same_files_and_counts_once(tmp_path: Path) -> None:
    records = [
        ("tickit.ems.category", 0, 1, _value(20, id=2, name="b")),
        ("tickit.ems.category", 0, 0, _value(10, id=1, name="a")),  # out of order: sorted first
        ("tickit.ems.category", 0, 2, None),  # tombstone
        ("tickit.ems.venue", 0, 0, _value(30, "u", id=7, name="v")),
    ]
    writer = BronzeWriter(tmp_path)
    first = write_records(writer, records)
    files = sorted(p.name for p in tmp_path.rglob("*.avro"))
    again = write_records(BronzeWriter(tmp_path), list(reversed(records)))  # the batch once more
    assert sorted(p.name for p in tmp_path.rglob("*.avro")) == files  # same names, no new file
    assert (first.events, first.tombstones, first.files) == (3, 1, 2)
    assert first.snapshot_rows == {"tickit.ems.category": 2}
    assert first.streaming_topics == {"tickit.ems.venue"}
    assert first.offsets == {"tickit.ems.category/0": 3, "tickit.ems.venue/0": 1}
    assert again == first

    status: dict[str, Any] = {}
    merge_batch(status, 0, first)
    merge_batch(status, 0, again)  # a batch the sink ran again after a crash
    assert status["events"] == 3 and status["batches"] == 1 and status["replayed_batches"] == 1
    assert status["snapshot_rows"] == {"tickit.ems.category": 2}


def test_a_value_that_is_no_change_event_fails_the_batch_naming_the_topic(tmp_path: Path) -> None:
    with pytest.raises(BronzeError, match=r"tickit\.ems\.event"):
        write_records(BronzeWriter(tmp_path), [("tickit.ems.event", 0, 5, b"not json")])
    assert not list(tmp_path.rglob("*.avro"))  # nothing of the batch was written


def test_events_delivered_twice_are_counted(tmp_path: Path) -> None:
    topic = "tickit.ems.category"
    writer = BronzeWriter(tmp_path)
    # a snapshot: every read at one position, told apart by key
    write_records(writer, [(topic, 0, 0, _value(10, id=1)), (topic, 0, 1, _value(10, id=2))])
    write_records(writer, [(topic, 0, 2, _value(20, "u", id=2))])
    # the connector restarted from an older offset: positions 10 (key 2) and 20 come once more
    write_records(writer, [(topic, 0, 3, _value(10, id=2)), (topic, 0, 4, _value(20, "u", id=2))])
    events = read_bronze_arrow(bronze_files(tmp_path, topic))
    assert events.num_rows == 5
    assert redelivered(events, ["id"]) == 2
    once = events.filter(pc.invert(pc.and_(pc.equal(events["id"], 2), pc.equal(events["__op"], "r"))))
    assert redelivered(once, ["id"]) == 1  # the update twice; without key 2's reads
