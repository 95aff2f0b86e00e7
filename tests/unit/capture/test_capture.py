"""Connector configurations and the MSK Connect client.

MSK Connect runs through botocore's Stubber with the service's real request/response models. The
Kafka Connect REST client is tested against a real Connect worker in
``tests/integration/test_kafka_connect.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from support.imports import modules_imported_by

from helpers.capture.backends import MskConnectBackend, wait_until_running, worker_pids
from helpers.capture.connectors import (
    bronze_s3_sink_config,
    mysql_source_config,
    postgres_source_config,
    redacted,
    sqlserver_source_config,
)
from helpers.capture.owner import STATE_ID_FILE
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
    # truncates are emitted and kept as markers: the marker transform runs before unwrap, with its fields
    assert c["skipped.operations"] == "none"
    assert c["transforms"] == "truncate,position,unwrap"
    assert (c["transforms.position.type"], c["transforms.position.fields"]) == (
        "workbook.connect.SnapshotPosition",
        "lsn",
    )
    assert c["transforms.truncate.type"] == "workbook.connect.TruncateMarker"
    assert c["transforms.truncate.add.fields"] == c["transforms.unwrap.add.fields"]
    assert (c["decimal.handling.mode"], c["value.converter.decimal.format"]) == ("precise", "NUMERIC")
    assert spec.topics == {"ems.category": "tickit.ems.category", "ems.event": "tickit.ems.event"}
    assert redacted(c)["database.password"] == "********" and "s3cret" not in json.dumps(redacted(c))


def test_each_postgres_heartbeat_updates_the_heartbeat_table_in_the_captured_schema() -> None:
    """A change in the publication (``FOR TABLES IN SCHEMA``) but outside the include list: Debezium
    processes it and confirms the slot, so a quiet connector does not hold the server's WAL."""
    c = postgres_source_config(**PG, heartbeat_table="debezium_heartbeat").config
    assert c["heartbeat.action.query"] == (
        'INSERT INTO "ems"."debezium_heartbeat" (id, beat) VALUES (1, now()) '
        "ON CONFLICT (id) DO UPDATE SET beat = EXCLUDED.beat"
    )
    assert "debezium_heartbeat" not in c["table.include.list"]
    assert "heartbeat.action.query" not in postgres_source_config(**PG).config


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
    assert c["transforms"] == "truncate,unwrap,route"
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


def test_a_capture_worker_process_loads_neither_pandas_nor_pyarrow() -> None:
    """``python -m helpers.capture.worker`` imports the package first; its names load lazily, so
    each of the four worker processes stays about 100 MiB smaller (55 against 156 MiB after
    import). The package's names still resolve for notebooks."""
    loaded = modules_imported_by("helpers.capture.worker")
    heavy = sorted({m.split(".")[0] for m in loaded} & {"pandas", "pyarrow", "pyspark"})
    assert not heavy, heavy
    from helpers import capture

    assert capture.register_connectors.__module__ == "helpers.capture.register"
    assert "BronzeWriter" in dir(capture)


def test_worker_pids_names_the_running_workers_and_skips_the_files_beside_them(
    tmp_path: Path,
) -> None:
    """The state's id file sits in ``capture/`` beside the connectors' directories; reading it
    as a connector stopped ``bench_idle.py`` (``NotADirectoryError``) on a fresh clone."""
    capture = tmp_path / "capture"
    for name in ("tickit-ecomm", "tickit-ems", "tickit-orders"):
        (capture / name).mkdir(parents=True)
    (capture / STATE_ID_FILE).write_text("a1b2c3")
    (capture / "tickit-ecomm" / "worker.pid").write_text(str(os.getpid()))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])  # noqa: S603
    gone.wait()
    (capture / "tickit-ems" / "worker.pid").write_text(str(gone.pid))
    assert worker_pids(tmp_path) == {"tickit-ecomm": os.getpid()}
    assert worker_pids(tmp_path / "no-state") == {}
