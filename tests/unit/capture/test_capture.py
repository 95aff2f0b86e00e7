"""Connector configurations and the Kafka Connect / MSK Connect clients.

Kafka Connect is exercised over real HTTP against a small in-process server that answers like a
Connect worker (recorded request bodies, 404/409/500 error shapes of the Connect REST API); MSK
Connect through botocore's Stubber with the service's real request/response models.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from helpers.capture.backends import KafkaConnectRestBackend, MskConnectBackend, wait_until_running
from helpers.capture.connectors import (
    bronze_s3_sink_config,
    mysql_source_config,
    postgres_source_config,
    redacted,
    sqlserver_source_config,
)
from helpers.errors import CaptureError

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
