"""The embedded capture worker's side of ``workbook.connect.EngineBatches``: a batch packed by the
Java class (``topic TAB value`` lines) unpacked into ``(topic, value)`` pairs. The Java side runs
in every integration test with embedded capture (``tests/integration/test_capture_local.py``)."""

from __future__ import annotations

import json

import pytest

from helpers.capture.worker import notification, unpack_batch
from helpers.errors import BronzeError


def test_a_packed_batch_unpacks_to_its_events_in_order_with_tombstones_as_none() -> None:
    value = json.dumps({"schema": None, "payload": {"id": 1, "note": "tab\there, line\nthere"}})
    assert "\n" not in value  # JSON escapes control characters: a value is one line
    data = (
        f"tickit.ems.venue\t{value}\n"
        "tickit.ems.venue\t\n"  # a tombstone
        "__debezium-heartbeat.tickit\t{}\n"
    ).encode()

    assert unpack_batch(data) == [
        ("tickit.ems.venue", value.encode()),
        ("tickit.ems.venue", None),
        ("__debezium-heartbeat.tickit", b"{}"),
    ]
    assert unpack_batch(b"") == []


def test_a_value_keeps_its_own_tabs_and_utf8() -> None:
    value = '{"payload":{"name":"Zürich\\tcafé"}}'
    assert unpack_batch(f"t.s.c\t{value}\n".encode()) == [("t.s.c", value.encode())]


def test_a_line_without_its_topic_is_refused_by_name() -> None:
    with pytest.raises(BronzeError, match="a line has no topic"):
        unpack_batch(b'{"payload":{}}\n')


def test_a_notification_reads_from_the_packed_bytes() -> None:
    value = json.dumps({"payload": {"aggregate_type": "Incremental Snapshot", "type": "COMPLETED"}})
    note = notification(value.encode())
    assert (note["aggregate_type"], note["type"]) == ("Incremental Snapshot", "COMPLETED")
