"""The pieces of a re-snapshot and of an added table that need no server: the connectors'
signalling settings, reading Debezium's notifications, the table lookup, the include list a
connector streamed with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.capture.backends import EmbeddedBackend
from helpers.capture.connectors import NOTIFICATION_TOPIC, signal_settings
from helpers.capture.resnapshot import find_table, snapshot_completed
from helpers.capture.worker import CONFIG_FILE, notification, resolve_reference
from helpers.errors import CaptureError
from helpers.params import load_params


def test_signal_settings_name_the_table_and_the_notification_topic() -> None:
    assert signal_settings(None) == {}
    got = signal_settings("ems.debezium_signal")
    assert got["signal.data.collection"] == "ems.debezium_signal"
    assert got["signal.enabled.channels"] == "source"
    assert got["notification.sink.topic.name"] == NOTIFICATION_TOPIC


def test_a_notification_as_the_worker_records_it_and_as_the_wait_reads_it() -> None:
    value = (
        '{"schema":{"type":"struct"},"payload":{"id":"1","aggregate_type":"Incremental Snapshot",'
        '"type":"COMPLETED","additional_data":{"connector_name":"tickit","data_collections":"ems.category"},'
        '"timestamp":1}}'
    )
    note = notification(value)
    assert (note["aggregate_type"], note["type"]) == ("Incremental Snapshot", "COMPLETED")
    started = note["received_at"] - 1
    assert snapshot_completed([note], "ems.category", started)
    assert not snapshot_completed([note], "ems.venue", started)  # another table's snapshot
    assert not snapshot_completed([note], "ems.category", note["received_at"] + 1)  # an older snapshot's
    assert not snapshot_completed([{**note, "type": "IN_PROGRESS"}], "ems.category", started)
    assert notification("not json")["type"] == "UNPARSED"


def test_the_table_is_found_by_silver_or_source_name_and_an_unknown_one_is_named() -> None:
    params = load_params("local")
    assert find_table(params, "category").table == "category"
    assert find_table(params, "ems.category").name == "category"
    with pytest.raises(CaptureError, match="no Silver table has that name.*category"):
        find_table(params, "nope")


def test_captured_tables_come_from_the_config_a_connector_streamed_with(tmp_path: Path) -> None:
    """A connector that never streamed (no offsets) takes its snapshot on its first start: no
    table counts as added; one that streamed reports its include list."""
    backend = EmbeddedBackend(state_dir=tmp_path, bronze_root=tmp_path / "bronze")
    assert backend.captured_tables("tickit-ems") is None
    d = backend.directory("tickit-ems")
    d.mkdir(parents=True)
    (d / CONFIG_FILE).write_text(json.dumps({"properties": {"table.include.list": "ems.category,ems.venue"}}))
    assert backend.captured_tables("tickit-ems") is None  # registered, never streamed
    (d / "offsets.dat").write_bytes(b"")
    assert backend.captured_tables("tickit-ems") == {"ems.category", "ems.venue"}


def test_a_decoded_notification_record_reads_as_the_json_one() -> None:
    """From Kafka with Apicurio's converter the notification arrives as an Avro record (a dict)."""
    record = {"id": "1", "aggregate_type": "Incremental Snapshot", "type": "COMPLETED",
              "additional_data": {"data_collections": "ecomm.date"}, "timestamp": 1}  # fmt: skip
    note = notification(record)
    assert note["type"] == "COMPLETED" and note["data"] == {"data_collections": "ecomm.date"}
    assert snapshot_completed([note], "ecomm.date", 0.0)


def test_a_password_reference_of_the_file_provider_is_read_and_others_are_refused(tmp_path: Path) -> None:
    """Kafka Connect connectors carry ``${file:PATH:KEY}`` instead of the password: the workbook
    logs in with the connector's login by reading that file (to send a signal)."""
    secrets = tmp_path / "sources.properties"
    secrets.write_text("# comment\npostgres.password=s3cr=t\nmysql.password=other\n")
    assert resolve_reference(f"${{file:{secrets}:postgres.password}}") == "s3cr=t"
    assert resolve_reference("plain") == "plain"
    with pytest.raises(CaptureError, match="no key nope") as missing:
        resolve_reference(f"${{file:{secrets}:nope}}")
    assert "s3cr" not in str(missing.value)
    with pytest.raises(CaptureError, match="not a file reference"):
        resolve_reference("${secretsmanager:wb/src:password}")
    with pytest.raises(CaptureError, match="No such file"):
        resolve_reference(f"${{file:{tmp_path / 'gone'}:k}}")
