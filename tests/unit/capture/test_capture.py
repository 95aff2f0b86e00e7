"""Connector configurations, the Bronze writer, and the Kafka Connect / MSK Connect clients.

Kafka Connect is exercised over real HTTP against a small in-process server that answers like a
Connect worker (recorded request bodies, 404/409/500 error shapes of the Connect REST API); MSK
Connect through botocore's Stubber with the service's real request/response models.
"""

from __future__ import annotations

import datetime as dt
import decimal
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import fastavro
import pytest
from botocore.stub import Stubber

from helpers.bronze.events import avro_schema_from_connect, event_from_json
from helpers.bronze.read import bronze_files, read_bronze
from helpers.bronze.writer import BronzeWriter
from helpers.capture.backends import KafkaConnectRestBackend, MskConnectBackend, wait_until_running
from helpers.capture.connectors import (
    bronze_s3_sink_config,
    mysql_source_config,
    postgres_source_config,
    redacted,
    sqlserver_source_config,
)
from helpers.errors import BronzeError, CaptureError

PG = dict(
    name="tickit-ems",
    project="tickit",
    host="127.0.0.1",
    port=5432,
    user="workbook",
    password="s3cret",
    database="ems",
    schema="ems",
    tables=["category", "event"],
    publication="tickit_ems_pub",
    slot="tickit_ems_slot",
)


def test_postgres_config_uses_pgoutput_publication_slot_heartbeat_and_3_6_flattening() -> None:
    spec = postgres_source_config(**PG)
    c = spec.config
    assert c["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    assert (c["plugin.name"], c["publication.name"], c["publication.autocreate.mode"]) == (
        "pgoutput",
        "tickit_ems_pub",
        "disabled",
    )
    assert (c["slot.name"], c["heartbeat.interval.ms"]) == ("tickit_ems_slot", "10000")
    assert c["table.include.list"] == "ems.category,ems.event"
    assert c["transforms.unwrap.delete.tombstone.handling.mode"] == "rewrite"
    assert "transforms.unwrap.delete.handling.mode" not in c  # ignored by 3.6: never rely on it
    assert c["transforms.unwrap.add.fields"] == "op,table,lsn,source.ts_ms"
    assert (c["decimal.handling.mode"], c["value.converter.decimal.format"]) == ("precise", "NUMERIC")
    assert spec.topics == {"ems.category": "tickit.ems.category", "ems.event": "tickit.ems.event"}
    assert redacted(c)["database.password"] == "********" and "s3cret" not in json.dumps(redacted(c))


def test_mysql_and_sqlserver_configs() -> None:
    my = mysql_source_config(
        name="tickit-ecomm",
        project="tickit",
        host="db",
        port=3306,
        user="u",
        password="p",
        database="ecomm",
        tables=["sale"],
        server_id=184054,
        schema_history={"schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory"},
    )
    assert my.config["transforms.unwrap.add.fields"] == "op,table,file,pos,row,source.ts_ms"
    assert (my.config["database.server.id"], my.config["database.ssl.mode"]) == ("184054", "preferred")
    assert my.topics == {"ecomm.sale": "tickit.ecomm.sale"}
    ss = sqlserver_source_config(
        name="tickit-crm",
        project="tickit",
        host="crm.rds",
        port=1433,
        user="u",
        password="p",
        database="crm",
        schema="dbo",
        tables=["users"],
        schema_history={"schema.history.internal": "x"},
    )
    c = ss.config
    assert (c["database.names"], c["database.encrypt"], c["database.trustServerCertificate"]) == (
        "crm",
        "true",
        "false",
    )
    assert c["transforms"] == "unwrap,route"
    assert c["transforms.unwrap.add.fields"] == "op,table,change_lsn,commit_lsn,event_serial_no,source.ts_ms"
    import re

    routed = re.sub(
        c["transforms.route.regex"].replace("$1", r"\1"),
        c["transforms.route.replacement"].replace("$1", r"\1"),
        "tickit.crm.dbo.users",
    )
    assert routed == "tickit.crm.users" == ss.topics["dbo.users"]
    with pytest.raises(CaptureError, match="no tables"):
        postgres_source_config(**{**PG, "tables": []})
    with pytest.raises(CaptureError, match="host"):
        postgres_source_config(**{**PG, "host": "a\nb"})


def test_s3_sink_is_daily_partitioned_by_record_time_avro_and_deterministic() -> None:
    c = bronze_s3_sink_config(
        name="bronze", topics=["tickit.ems.event"], bucket="b", prefix="/bronze/", region="us-east-1"
    )
    assert c["path.format"] == "'year'=YYYY/'month'=MM/'day'=dd"
    assert (c["timestamp.extractor"], c["timezone"], c["topics.dir"]) == ("Record", "UTC", "bronze")
    assert c["format.class"].endswith("AvroFormat")


# ----------------------------------------------------------------------------------- Bronze


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


# ----------------------------------------------------------------------------------- Kafka Connect


class _Connect(http.server.BaseHTTPRequestHandler):
    """Answers like a Kafka Connect worker; state lives on the server object."""

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def do_PUT(self) -> None:  # noqa: N802 - http.server naming
        srv: Any = self.server
        srv.calls.append(("PUT", self.path, self._body()))
        parts = self.path.strip("/").split("/")
        if parts[-1] == "config":
            if "connector.class" not in srv.calls[-1][2]:
                return self._reply(
                    400, {"error_code": 400, "message": 'Missing required configuration "connector.class"'}
                )
            created = parts[1] not in srv.connectors
            srv.connectors[parts[1]] = srv.calls[-1][2]
            return self._reply(201 if created else 200, {"name": parts[1], "config": srv.calls[-1][2]})
        return self._reply(202)

    def do_POST(self) -> None:  # noqa: N802
        self.server.calls.append(("POST", self.path, self._body()))  # type: ignore[attr-defined]
        self._reply(202)

    def do_DELETE(self) -> None:  # noqa: N802
        srv: Any = self.server
        srv.calls.append(("DELETE", self.path, None))
        name = self.path.strip("/").split("/")[1]
        if srv.connectors.pop(name, None) is None:
            return self._reply(404, {"error_code": 404, "message": f"Connector {name} not found"})
        self._reply(204)

    def do_GET(self) -> None:  # noqa: N802
        srv: Any = self.server
        name = self.path.strip("/").split("/")[1]
        if name not in srv.connectors:
            return self._reply(404, {"error_code": 404, "message": f"No status found for connector {name}"})
        srv.polls += 1
        if srv.polls < 3:
            return self._reply(
                200, {"name": name, "connector": {"state": "RUNNING", "worker_id": "w:8083"}, "tasks": []}
            )
        task = {"id": 0, "state": srv.task_state, "worker_id": "w:8083"}
        if srv.task_state == "FAILED":
            task["trace"] = (
                "org.postgresql.util.PSQLException: FATAL: password authentication failed\n\tat ..."
            )
        self._reply(
            200, {"name": name, "connector": {"state": "RUNNING", "worker_id": "w:8083"}, "tasks": [task]}
        )


@pytest.fixture
def connect() -> Iterator[Any]:
    server: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Connect)
    server.calls, server.connectors, server.polls, server.task_state = [], {}, 0, "RUNNING"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def test_kafka_connect_rest_is_idempotent_polls_with_backoff_and_surfaces_worker_errors(connect: Any) -> None:
    backend = KafkaConnectRestBackend(f"http://127.0.0.1:{connect.server_port}")
    spec = postgres_source_config(**PG)
    backend.create_or_update(spec)
    backend.create_or_update(spec)  # same PUT again: update, not a duplicate
    puts = [c for c in connect.calls if c[0] == "PUT"]
    assert [c[1] for c in puts] == ["/connectors/tickit-ems/config"] * 2
    assert "name" not in puts[0][2] and puts[0][2]["slot.name"] == "tickit_ems_slot"
    sleeps: list[float] = []
    status = wait_until_running(backend, "tickit-ems", sleep=sleeps.append, first_delay_s=0.5)
    assert status.state == "RUNNING" and sleeps == [0.5, 1.0]  # no task yet: UNASSIGNED, backoff doubles
    connect.task_state = "FAILED"
    with pytest.raises(CaptureError, match="password authentication failed"):
        wait_until_running(backend, "tickit-ems", sleep=lambda s: None)
    backend.pause("tickit-ems")
    backend.resume("tickit-ems")
    backend.restart("tickit-ems")
    assert [c[1] for c in connect.calls[-3:]] == [
        "/connectors/tickit-ems/pause",
        "/connectors/tickit-ems/resume",
        "/connectors/tickit-ems/restart?includeTasks=true&onlyFailed=true",
    ]
    backend.delete("tickit-ems")
    assert backend.status("tickit-ems").state == "UNASSIGNED"
    bad = postgres_source_config(**PG)
    bad_config = {k: v for k, v in bad.config.items() if k != "connector.class"}
    with pytest.raises(CaptureError, match=r"\(400\): Missing required configuration"):
        backend.create_or_update(type(bad)(bad.name, bad.engine, bad.source, bad_config, bad.topics))


def test_kafka_connect_unreachable_is_a_clear_error() -> None:
    backend = KafkaConnectRestBackend("http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(CaptureError, match="Failed to reach Kafka Connect at http://127.0.0.1:9"):
        backend.status("x")


def test_wait_until_running_times_out_with_the_last_state() -> None:
    class Stuck:
        def status(self, name: str) -> Any:
            from helpers.capture.backends import ConnectorStatus

            return ConnectorStatus(name, "UNASSIGNED")

    now = [0.0]
    with pytest.raises(CaptureError, match="still UNASSIGNED after 5 s"):
        wait_until_running(
            Stuck(), "c", timeout_s=5, sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0]
        )  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- MSK Connect


def test_msk_connect_create_then_update_and_status_via_botocore_stubs() -> None:
    client = boto3.client(
        "kafkaconnect", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    backend = MskConnectBackend(
        client=client,
        plugin_arn="arn:aws:kafkaconnect:us-east-1:1:custom-plugin/debezium/1",
        plugin_revision=1,
        worker_configuration_arn="arn:aws:kafkaconnect:us-east-1:1:worker-configuration/json/1",
        worker_configuration_revision=1,
        cluster={
            "bootstrapServers": "b-1:9098",
            "vpc": {"securityGroups": ["sg-1"], "subnets": ["subnet-1"]},
        },
        service_role_arn="arn:aws:iam::1:role/msk-connect",
        log_group="/msk/connect",
    )
    spec = postgres_source_config(**{**PG, "password": "${secretsmanager:tickit/ems:password}"})
    config = {k: v for k, v in spec.config.items() if k != "name"}
    arn = "arn:aws:kafkaconnect:us-east-1:1:connector/tickit-ems/x"
    with Stubber(client) as stub:
        stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": "tickit-ems"})
        stub.add_response(
            "create_connector",
            {"connectorArn": arn, "connectorName": "tickit-ems", "connectorState": "CREATING"},
            {
                "connectorName": "tickit-ems",
                "connectorConfiguration": config,
                "capacity": {"provisionedCapacity": {"mcuCount": 1, "workerCount": 1}},
                "kafkaCluster": {"apacheKafkaCluster": backend.cluster},
                "kafkaClusterClientAuthentication": {"authenticationType": "IAM"},
                "kafkaClusterEncryptionInTransit": {"encryptionType": "TLS"},
                "kafkaConnectVersion": "3.7.x",
                "plugins": [{"customPlugin": {"customPluginArn": backend.plugin_arn, "revision": 1}}],
                "serviceExecutionRoleArn": backend.service_role_arn,
                "workerConfiguration": {
                    "workerConfigurationArn": backend.worker_configuration_arn,
                    "revision": 1,
                },
                "logDelivery": {
                    "workerLogDelivery": {"cloudWatchLogs": {"enabled": True, "logGroup": "/msk/connect"}}
                },
            },
        )
        backend.create_or_update(spec)
        listed = {"connectors": [{"connectorArn": arn, "connectorName": "tickit-ems"}]}
        stub.add_response("list_connectors", listed, {"connectorNamePrefix": "tickit-ems"})
        stub.add_response(
            "describe_connector",
            {
                "connectorArn": arn,
                "connectorConfiguration": {**config, "heartbeat.interval.ms": "5000"},
                "currentVersion": "V1",
            },
            {"connectorArn": arn},
        )
        stub.add_response(
            "update_connector",
            {"connectorArn": arn, "connectorState": "UPDATING"},
            {"connectorArn": arn, "currentVersion": "V1", "connectorConfiguration": config},
        )
        backend.create_or_update(spec)
        stub.add_response("list_connectors", listed, {"connectorNamePrefix": "tickit-ems"})
        stub.add_response(
            "describe_connector",
            {
                "connectorArn": arn,
                "connectorState": "FAILED",
                "stateDescription": {"code": "x", "message": "Access denied to secret"},
            },
            {"connectorArn": arn},
        )
        status = backend.status("tickit-ems")
        stub.assert_no_pending_responses()
    assert (status.state, status.error) == ("FAILED", "Access denied to secret")
    with pytest.raises(CaptureError, match="no pause"):
        backend.pause("tickit-ems")


def test_jsonl_and_avro_bronze_read_to_the_same_typed_table(tmp_path: Path) -> None:
    """The same events through both Bronze formats: Silver's reader gives identical typed rows
    (Debezium's encodings in JSON lines converted with the schema each line carries)."""
    from helpers.bronze.read import read_bronze_arrow

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
