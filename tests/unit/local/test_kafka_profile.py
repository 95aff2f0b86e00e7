"""The local-kafka profile without its servers: parameters, connector configurations with secret
references, the jar set ``kafka`` (found, fetched offline from the project's Maven cache and
checked), and the REST client's scrubbing of worker messages. The real broker and Connect worker:
``tests/integration/test_kafka_connect.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.project import KAFKA_SCRIPTS, project_copy

from helpers.capture.backends import KafkaConnectRestBackend, scrub_secrets, trace_summary
from helpers.capture.kafka_sink import topic_pattern
from helpers.capture.raw_topics import raw_specs
from helpers.capture.register import connector_specs, open_backend
from helpers.errors import JarsMissingError, ParamsError, StackError
from helpers.jars import connect_plugin_dirs, jar_tree
from helpers.local.kafka import LocalKafka, bootstrap_servers, connect_url
from helpers.params import load_params, project_root
from helpers.proc import free_port
from helpers.sources.api import LocalSources

ROOT = project_root()


def _params(tmp_path: Path) -> object:
    return load_params("local-kafka", overrides={"state_dir": str(tmp_path / "st")})


def test_the_overlay_selects_the_local_worker_on_its_own_ports(tmp_path: Path) -> None:
    """``--env local-kafka``: capture through Kafka Connect at the local worker, its own state
    directory and ports (none shared with the local or ci overlays)."""
    params = load_params("local-kafka")
    assert params.capture.backend == "kafka_connect" and params.state_dir == ".state-kafka"
    assert connect_url(params) == "http://127.0.0.1:18083"
    assert bootstrap_servers(params) == "127.0.0.1:19092"
    backend = open_backend(params)
    assert isinstance(backend, KafkaConnectRestBackend) and backend.url == "http://127.0.0.1:18083"
    assert backend.start_worker is not None  # registering starts the local broker and worker
    ports = lambda p: {  # noqa: E731
        p.local.postgres.port,
        p.local.mariadb.port,
        p.local.metastore.port,
        p.local.kafka.broker_port,
        p.local.kafka.controller_port,
        p.local.kafka.connect_port,
    }
    mine = ports(params)
    assert len(mine) == 6
    for other in ("local", "ci"):
        assert not (ports(load_params(other)) - {19092, 19093, 18083}) & mine
    named = load_params("local-kafka", {"capture.kafka_connect.url": "http://connect:8083"})
    assert connect_url(named) == "http://connect:8083"
    remote = open_backend(named)
    assert isinstance(remote, KafkaConnectRestBackend) and remote.start_worker is None


def test_connector_configs_carry_secret_references_the_mariadb_connector_and_kafka_history(
    tmp_path: Path,
) -> None:
    """No password in any configuration: ``${file:<state>/kafka/connect/secrets/...:key}``; the
    MariaDB source uses Debezium's MySQL connector (or, when asked, its MariaDB connector) with its
    schema history in a Kafka topic; the converter is the parameter's. The default profile's
    configurations are unchanged."""
    params = load_params("local-kafka", overrides={"state_dir": str(tmp_path / "st")})
    secrets = LocalKafka(params).secrets_file
    specs = {s.source: s for s in connector_specs(params, LocalSources(params).endpoints())}
    assert specs["ems"].config["database.password"] == f"${{file:{secrets}:postgres.password}}"
    assert specs["ecomm"].config["database.password"] == f"${{file:{secrets}:mariadb.password}}"
    assert not secrets.exists()  # references only: nothing was read or written
    ecomm = specs["ecomm"].config
    assert ecomm["connector.class"] == "io.debezium.connector.mysql.MySqlConnector"
    assert ecomm["database.ssl.mode"] == "disabled"
    assert ecomm["schema.history.internal"] == "io.debezium.storage.kafka.history.KafkaSchemaHistory"
    assert ecomm["schema.history.internal.kafka.bootstrap.servers"] == "127.0.0.1:19092"
    assert ecomm["schema.history.internal.kafka.topic"] == "tickit-ecomm.schema-history"
    maria = load_params(
        "local-kafka",
        overrides={"state_dir": str(tmp_path / "st"), "capture.kafka_connect.mariadb_connector": "mariadb"},
    )
    specs_maria = {s.source: s for s in connector_specs(maria, LocalSources(maria).endpoints())}
    assert specs_maria["ecomm"].config["connector.class"] == "io.debezium.connector.mariadb.MariaDbConnector"
    assert specs_maria["ecomm"].config["database.ssl.mode"] == "disable"
    other = load_params(
        "local-kafka",
        overrides={"state_dir": str(tmp_path / "st"), "capture.kafka_connect.converter": "x.Conv"},
    )
    assert {s.config["value.converter"] for s in connector_specs(other, LocalSources(other).endpoints())} == {
        "x.Conv"
    }
    default = load_params("ci", overrides={"state_dir": str(tmp_path / "ci")})
    plain = {s.source: s for s in connector_specs(default, LocalSources(default).endpoints())}
    assert plain["ecomm"].config["connector.class"] == "io.debezium.connector.mysql.MySqlConnector"
    assert plain["ecomm"].config["schema.history.internal"].endswith("FileSchemaHistory")
    assert not plain["ems"].config["database.password"].startswith("${")


def test_worker_messages_are_scrubbed_and_traces_keep_their_root_cause() -> None:
    """Connect echoes a refused configuration with its references resolved: the client masks
    every password / secret value; a task's trace is summarised by its first line and root cause."""
    message = (
        "Connector config {slot.name=s, database.password=-Xy_z9, name=broken} contains no connector type"
    )
    assert scrub_secrets(message) == (
        "Connector config {slot.name=s, database.password=********, name=broken} contains no connector type"
    )
    trace = (
        "org.apache.kafka.connect.errors.ConnectException: An exception occurred\n\tat a.b(C.java:1)\n"
        "Caused by: java.sql.SQLException: outer\n\tat d\n"
        'Caused by: org.postgresql.util.PSQLException: FATAL: password authentication failed for user "w"\n'
    )
    assert trace_summary(trace) == (
        "org.apache.kafka.connect.errors.ConnectException: An exception occurred (caused by "
        'org.postgresql.util.PSQLException: FATAL: password authentication failed for user "w")'
    )
    assert trace_summary("java.lang.IllegalStateException: x\n\tat y") == "java.lang.IllegalStateException: x"


def test_missing_kafka_jars_name_the_set_up_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the fetched set: finding the tree or a plugin, and so starting the broker, fails
    before any JVM starts, naming ``./workbook setup kafka``."""
    monkeypatch.setenv("WORKBOOK_ROOT", str(project_copy(tmp_path, KAFKA_SCRIPTS)))
    with pytest.raises(JarsMissingError, match=r"92 jar\(s\) of the kafka tree.*run ./workbook setup kafka"):
        jar_tree("kafka", "kafka")
    with pytest.raises(JarsMissingError, match=r"debezium-connector-postgres:3.6.3.Final.*setup kafka"):
        connect_plugin_dirs("kafka")
    ports = {f"local.kafka.{k}": free_port() for k in ("broker_port", "controller_port")}
    params = load_params("local-kafka", overrides={"state_dir": str(tmp_path / "st"), **ports})
    with pytest.raises(StackError, match="Failed to find 92 jar"):
        LocalKafka(params).start_broker()


def test_the_raw_twins_of_the_connectors_keep_debezium_s_envelope_on_their_own_slot_and_topics(
    tmp_path: Path,
) -> None:
    """``silver.streamer.source: kafka``: one more connector per PostgreSQL and MariaDB source, with
    the same login and tables but no transform (Hudi's Debezium sources read the envelope), no
    signalling, its own slot or binlog client id and schema history, topics outside the sink's
    pattern."""
    params = load_params(
        "local-kafka",
        {"state_dir": str(tmp_path / "st"), "silver.engine": "streamer", "silver.streamer.source": "kafka"},
    )
    pairs = raw_specs(params)
    assert {main.source for main, _ in pairs} >= {"ecomm", "ems"}
    pattern = re.compile(topic_pattern(params.project))
    for main, raw in pairs:
        assert raw.name == f"tickit_raw-{main.source}" and raw.config["name"] == raw.name
        assert not [k for k in raw.config if k.startswith(("transforms", "signal.", "notification."))]
        assert raw.config["database.password"] == main.config["database.password"]  # the reference
        assert raw.config["table.include.list"] == main.config["table.include.list"]
        assert all(t.startswith("tickit_raw.") and not pattern.fullmatch(t) for t in raw.topics.values())
        if main.engine == "postgres":
            assert raw.config["slot.name"] == main.config["slot.name"] + "_raw"
        else:
            assert int(raw.config["database.server.id"]) != int(main.config["database.server.id"])
            assert raw.config["schema.history.internal.kafka.topic"] == f"{raw.name}.schema-history"
    for profile in ("local", "ci"):
        with pytest.raises(ParamsError, match="needs the local-kafka profile"):
            load_params(profile, {"silver.engine": "streamer", "silver.streamer.source": "kafka"})
