"""The local-kafka profile on its real parts: a KRaft Kafka broker and a Kafka Connect distributed
worker (Maven Central jars, set ``kafka``) started by ``helpers.local.kafka`` on free ports in a
throw-away state directory, Debezium's connector plugins (PostgreSQL, MySQL, MariaDB), the local
PostgreSQL and MariaDB with the CI sample data. MariaDB is captured by Debezium's MySQL connector
(``capture.kafka_connect.mariadb_connector: mysql``): the MariaDB connector 3.5.0.Final fails
against MariaDB 10.11 when it starts streaming ("Connected to Mysql but given a MariaDB GTID set!").
Connectors are registered through ``KafkaConnectRestBackend``; change topics are read with
kafka-python.

Every test here shares the one broker and worker pair the module starts: a second pair per file
would cost more than a split gains on two shared cores.
Expected final state of each test is in its docstring. Start-up and restart times and resident
sizes are printed (``-s``) as figures; only the resident sizes have a (loose) bound. A ``kill -9``
of the worker and of the broker while rows flow is tested once, in ``test_kafka_bronze_sink.py``,
where the rows are checked further along: in Bronze, then in Silver.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
from support.kafka_profile import insert_dates, insert_venues, kafka_overrides
from support.sockets import listening
from support.timer_slack import timer_slack_ns

from helpers.capture.backends import KafkaConnectRestBackend, wait_until_running
from helpers.capture.connectors import ConnectorSpec, postgres_source_config
from helpers.capture.register import connector_specs, open_backend, register_connectors
from helpers.capture.topics import read_topic
from helpers.errors import CaptureError
from helpers.local.kafka import CONNECTOR_CLASSES, LocalKafka
from helpers.local.stack import LocalStack
from helpers.memory import process_rss
from helpers.naming import publication_name, slot_name, table_topic
from helpers.params import load_params
from helpers.pipeline import pipeline_status, start_servers, stop_all
from helpers.poll import wait_until
from helpers.proc import free_port, thread_timer_slack_ns
from helpers.sources.api import LocalSources

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module", autouse=True)
def _spark_first() -> None:
    """This module needs no Spark session: it overrides the integration tier's autouse fixture, so
    running it alone starts no Spark driver (2 cores, shared)."""
    return None


@dataclass
class KafkaWorld:
    stack: LocalStack
    kafka: LocalKafka
    backend: KafkaConnectRestBackend
    specs: dict[str, ConnectorSpec]
    figures: dict[str, float]

    @property
    def params(self) -> Any:
        return self.stack.params


@pytest.fixture(scope="module")
def world(stack_factory: Callable[..., Any]) -> Iterator[KafkaWorld]:
    overrides = {**kafka_overrides(avro=False), "capture.kafka_connect.mariadb_connector": "mysql"}
    with stack_factory("wb-kc-", overrides) as stack:
        params = stack.params
        sources = LocalSources(params)
        sources.load_sample_data()
        sources.enable_cdc()
        kafka = LocalKafka(params)
        figures: dict[str, float] = {}
        started = time.monotonic()
        kafka.start_broker()
        figures["broker_start_s"] = time.monotonic() - started
        started = time.monotonic()
        kafka.start_connect()
        figures["connect_start_s"] = time.monotonic() - started
        backend = open_backend(params)
        assert isinstance(backend, KafkaConnectRestBackend) and backend.url == kafka.url
        specs = {s.source: s for s in connector_specs(params, LocalSources(params).endpoints())}
        try:
            yield KafkaWorld(stack, kafka, backend, specs, figures)
        finally:
            for server in kafka.status():
                if server.pid:
                    figures[f"{server.server}_rss_at_end_mib"] = process_rss(server.pid) / 2**20
            for name, value in figures.items():
                print(f"[kafka figures] {name} = {value:.1f}")
            kafka.stop()
            keep = os.environ.get("WORKBOOK_KEEP_KAFKA_LOGS")
            if keep:  # a copy of the worker's and broker's logs for a failing run
                shutil.copy(kafka.connect_log, f"{keep}-connect.log")
                shutil.copy(kafka.broker_log, f"{keep}-broker.log")


def _rows(world: KafkaWorld, source: str, table: str) -> int:
    sp = world.params.source(source)
    if sp.engine == "postgres":
        with world.stack.connect_postgres(sp.database) as conn:
            return int(conn.execute(f'SELECT count(*) FROM {sp.namespace}."{table}"').fetchone()[0])  # noqa: S608
    conn = world.stack.connect_mariadb(sp.database)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM `{table}`")  # noqa: S608 - a configured table name
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def _events_by_key(world: KafkaWorld, topic: str, key_field: str) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = collections.defaultdict(list)
    for record in read_topic(world.kafka.bootstrap, topic):
        if record["value"] is None:
            continue
        out[record["key"][key_field]].append(record["value"]["payload"])
    return out


def _wait_for(world: KafkaWorld, topic: str, key_field: str, check: Callable[[dict[Any, Any]], bool]) -> dict:
    seen: list[dict[Any, Any]] = [{}]

    def arrived() -> bool:
        seen[0] = _events_by_key(world, topic, key_field)
        return check(seen[0])

    wait_until(arrived, timeout_s=120, what=f"events on {topic}", interval_s=0.5, max_interval_s=2)
    return seen[0]


# ------------------------------------------------------------------------------- the worker


def test_worker_lists_the_debezium_plugins_binds_loopback_and_keeps_secrets_private(
    world: KafkaWorld,
) -> None:
    """The worker lists the PostgreSQL, MariaDB and MySQL connector classes; broker and worker
    listen on 127.0.0.1 only; the secrets file is 0600 in a 0700 folder; both JVMs stay within a
    bound resident size (heaps 256m and 384m)."""
    assert set(CONNECTOR_CLASSES) <= set(world.kafka.connector_plugins())
    statuses = world.kafka.status()
    assert [s.state for s in statuses] == ["running", "running"]
    sockets = listening(*(s.pid for s in statuses if s.pid))
    assert sockets, "no listening socket found for the broker and worker"
    assert {address for address, _ in sockets} == {"127.0.0.1"}, sockets
    ports = {port for _, port in sockets}
    s = world.params.local.kafka
    assert {s.broker_port, s.controller_port, s.connect_port} <= ports
    assert stat.S_IMODE(os.stat(world.kafka.secrets_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(world.kafka.secrets_file.parent).st_mode) == 0o700
    broker_pid, connect_pid = (s.pid for s in statuses)
    assert broker_pid and connect_pid
    world.figures["broker_rss_mib"] = process_rss(broker_pid) / 2**20
    world.figures["connect_rss_mib"] = process_rss(connect_pid) / 2**20
    assert world.figures["broker_rss_mib"] < 768 and world.figures["connect_rss_mib"] < 1024


def test_the_worker_waits_with_the_capture_timer_slack_and_the_broker_with_the_kernels(
    world: KafkaWorld,
) -> None:
    """The Connect worker, which runs Debezium's poll loops, has
    ``capture.timer_slack_us`` (2 ms) as its timer slack, as the embedded capture workers do; the
    broker keeps the kernel's (50 µs), as the process that started them does."""
    broker_pid, connect_pid = (s.pid for s in world.kafka.status())
    assert broker_pid and connect_pid

    own = thread_timer_slack_ns()
    assert world.params.capture.timer_slack_us == 2000
    assert timer_slack_ns(connect_pid) == 2_000_000
    assert timer_slack_ns(broker_pid) == own != 2_000_000


def test_the_broker_and_worker_keep_their_temporary_files_in_the_state_directory(world: KafkaWorld) -> None:
    """Each JVM's ``java.io.tmpdir`` is a folder of its own under the state directory, not ``/tmp``,
    which other processes share and where files of a killed JVM would stay."""
    state = world.params.state_path.resolve()
    for server, folder in ((world.kafka.broker, "broker"), (world.kafka.connect, "connect")):
        pid = server.pid()
        assert pid
        options = [a for a in psutil.Process(pid).cmdline() if a.startswith("-Djava.io.tmpdir=")]
        assert options == [f"-Djava.io.tmpdir={server.tmp_dir}"], options
        assert server.tmp_dir.resolve() == state / "kafka" / folder / "tmp" and server.tmp_dir.is_dir()


def test_the_converter_plugins_manifests_are_written_with_the_temporary_files_under_the_state(
    tmp_path: Path,
) -> None:
    """Kafka's ``connect-plugin-path sync-manifests``, which makes Apicurio's converter a plugin the
    worker finds by its manifests, writes its shim archive into the plugin's copy, and the
    temporary copy of it that the tool leaves behind lands in the worker's temporary folder under
    the state directory (before, one such file per state directory stayed in ``/tmp``)."""
    kafka = LocalKafka(load_params("local-kafka", {"state_dir": str(tmp_path / "state")}))
    kafka.connect_dir.mkdir(parents=True)
    plugin = kafka._converter_plugin()
    assert [p.name for p in plugin.glob("connect-plugin-path-shim-*.jar")] == [
        "connect-plugin-path-shim-1.0.0.jar"
    ]
    left = [p.name for p in kafka.connect.tmp_dir.iterdir()]
    assert len(left) == 1 and left[0].startswith("connect-plugin-path-temporary-"), left


# ------------------------------------------------------------------------------- capture


def test_postgres_and_mariadb_connectors_run_and_changes_reach_their_topics(world: KafkaWorld) -> None:
    """Registered through the REST API, both connectors run; each snapshot puts every source row
    on the topic; an insert, an update and a delete in each source follow as c/u/d events."""
    specs = [world.specs["ems"], world.specs["ecomm"]]
    frame = register_connectors(world.backend, specs, timeout_s=180)
    assert set(frame["state"]) == {"RUNNING"}
    cases = [("ems", "venue", "venueid"), ("ecomm", "date", "dateid")]
    for source, table, key in cases:
        topic = table_topic(world.params, source, table)
        want = _rows(world, source, table)
        seen = _wait_for(world, topic, key, lambda got, want=want: len(got) >= want)
        assert len(seen) == want
        assert {e[-1]["__op"] for e in seen.values()} == {"r"}
    insert_venues(world.stack, range(30_001, 30_002))
    insert_dates(world.stack, range(30_001, 30_002))
    with world.stack.connect_postgres(world.params.source("ems").database, autocommit=True) as conn:
        conn.execute("UPDATE ems.venue SET venueseats = 7 WHERE venueid = 30001")
        conn.execute("DELETE FROM ems.venue WHERE venueid = 30001")
    maria = world.stack.connect_mariadb(world.params.source("ecomm").database, autocommit=True)
    try:
        with maria.cursor() as cur:
            cur.execute("UPDATE `date` SET holiday = 1 WHERE dateid = 30001")
            cur.execute("DELETE FROM `date` WHERE dateid = 30001")
    finally:
        maria.close()
    for source, table, key in cases:
        topic = table_topic(world.params, source, table)
        seen = _wait_for(world, topic, key, lambda got: len(got.get(30001, [])) >= 3)
        assert [e["__op"] for e in seen[30001]] == ["c", "u", "d"], topic
        assert seen[30001][2]["__deleted"] == "true"


def test_echoed_configuration_and_status_hold_no_password(world: KafkaWorld) -> None:
    """``GET /connectors/{n}/config`` returns the ``${file:...}`` reference, never the password;
    neither does the status, and the worker's and broker's logs hold no password."""
    creds = world.stack.credentials
    secrets = {creds.postgres_password.get_secret_value(), creds.mariadb_password.get_secret_value()}
    for source in ("ems", "ecomm"):
        name = world.specs[source].name
        wait_until_running(world.backend, name, timeout_s=180)
        config = requests.get(f"{world.kafka.url}/connectors/{name}/config", timeout=10).json()
        status = requests.get(f"{world.kafka.url}/connectors/{name}/status", timeout=10).text
        assert config["database.password"].startswith("${file:")
        assert config["database.password"].endswith("password}")
        text = json.dumps(config) + status
        assert not any(secret in text for secret in secrets)
    logs = "".join(p.read_text(errors="replace") for p in (world.kafka.connect_log, world.kafka.broker_log))
    assert "database.password = ********" in logs  # the worker logs the configuration, masked
    assert not any(secret in logs for secret in secrets)


# ------------------------------------------------------------------------------- faults


def _variant(spec: ConnectorSpec, name: str, **changes: str) -> ConnectorSpec:
    return ConnectorSpec(name, spec.engine, spec.source, {**spec.config, **changes}, spec.topics)


_BAD_PASSWORD_MESSAGES = {
    "ems": "password authentication failed for user",
    "ecomm": "Access denied for user",
}


def _isolated(world: KafkaWorld, source: str, suffix: str, **changes: str) -> ConnectorSpec:
    """A copy of a source's connector with its own name, topics, slot / server id and history."""
    spec = world.specs[source]
    own = {"topic.prefix": f"{world.params.project}_{suffix}"}
    if spec.engine == "postgres":
        own["slot.name"] = f"{slot_name(world.params, source)}_{suffix}"
    else:
        own["database.server.id"] = str(185_000 + len(suffix))
        own["schema.history.internal.kafka.topic"] = f"{spec.name}-{suffix}.schema-history"
    return _variant(spec, f"{spec.name}-{suffix}", **own, **changes)


@pytest.mark.parametrize(
    ("source", "refusal"),
    [
        ("ems", r"\(400\): Connector configuration is invalid.*password authentication failed for user"),
        # Kafka Connect 4.3.1 answers the MySQL connector 3.6.1's failed validation with a 500 of
        # its own (a NullPointerException in the worker's REST layer), without the database's
        # words; the stale-password test below shows them through the status
        ("ecomm", r"\(500\): Cannot invoke .*ConfigValueInfo"),
    ],
)
def test_a_wrong_password_is_refused_at_registration(world: KafkaWorld, source: str, refusal: str) -> None:
    """Kafka Connect validates a configuration against the database before it accepts it: a wrong
    password is refused at ``PUT`` (PostgreSQL: 400 with the database's own words) and no
    connector is created."""
    bad = _isolated(world, source, "badpw", **{"database.password": "not-the-password"})
    with pytest.raises(CaptureError, match=f"(?s){refusal}"):
        world.backend.create_or_update(bad)
    assert world.backend.status(bad.name).state == "UNASSIGNED"


def _past_snapshot(offset: dict[str, Any] | None) -> bool:
    """A committed Debezium offset with a log position (MySQL ``file``, PostgreSQL ``lsn``) and
    past the initial snapshot (whose offsets carry ``snapshot``; its last one
    ``last_snapshot_record``)."""
    if not offset or not ({"file", "lsn"} & set(offset)):
        return False
    return offset.get("snapshot") in (None, False, "false") or bool(offset.get("last_snapshot_record"))


@pytest.mark.parametrize("source", ["ems", "ecomm"])
def test_a_password_gone_stale_fails_mariadb_but_postgres_retries_running(
    world: KafkaWorld, source: str
) -> None:
    """A running connector whose secret changes to a wrong password (a rotation the database did
    not get), then restarted:

    * MariaDB (MySQL connector 3.6.1): FAILED, and the REST status carries the database's message;
    * PostgreSQL (connector 3.6.3): Debezium treats the refused login at task start as retriable
      and tries again every 10 s for ever (``errors.max.retries`` does not bound it); the REST
      status stays RUNNING and the database's message is only in the worker's log.
    """
    secrets = world.kafka.secrets_file.parent / f"test-{source}.properties"
    key = "postgres.password" if source == "ems" else "mariadb.password"
    secrets.write_text(world.kafka.secrets_file.read_text(encoding="utf-8"), encoding="utf-8")
    secrets.chmod(0o600)
    spec = _isolated(world, source, "stale", **{"database.password": f"${{file:{secrets}:{key}}}"})
    message = _BAD_PASSWORD_MESSAGES[source]
    try:
        world.backend.create_or_update(spec)
        wait_until_running(world.backend, spec.name, timeout_s=120)
        # restarted before its snapshot committed a log position, the MySQL connector 3.6.1 fails
        # on its own offset ("Source offset 'file' parameter is missing"), not on the password
        wait_until(
            lambda: _past_snapshot(world.backend.source_offset(spec.name)),
            timeout_s=300,
            what=f"{spec.name} to commit an offset past its snapshot",
        )
        secrets.write_text(f"{key}=not-the-password\n", encoding="utf-8")

        def logged() -> int:
            return world.kafka.connect_log.read_text(errors="replace").count(message)

        logged_before = logged()
        requests.post(f"{world.kafka.url}/connectors/{spec.name}/restart?includeTasks=true", timeout=10)
        if source == "ecomm":
            wait_until(
                lambda: world.backend.status(spec.name).state == "FAILED",
                timeout_s=120,
                what=f"{spec.name} to fail on its stale password",
            )
            assert message in (world.backend.status(spec.name).error or "")
            with pytest.raises(CaptureError, match=message):
                wait_until_running(world.backend, spec.name, timeout_s=30)
        else:
            wait_until(
                lambda: (
                    world.kafka.connect_log.read_text(errors="replace").count(message) >= logged_before + 2
                ),
                timeout_s=120,
                what=f"{spec.name} to retry its login twice",
            )
            status = world.backend.status(spec.name)
            assert status.state == "RUNNING" and status.error is None
    finally:
        world.backend.delete(spec.name)
        secrets.unlink(missing_ok=True)


def test_a_missing_table_is_captured_as_nothing_while_the_connector_runs(world: KafkaWorld) -> None:
    """Debezium does not fail on a table of ``table.include.list`` that does not exist: the
    connector runs, snapshots the tables that exist, and no topic appears for the missing one."""
    spec = world.specs["ems"]
    params = world.params
    project = f"{params.project}_missing"
    missing = postgres_source_config(
        name=f"{spec.name}-missing",
        project=project,
        host="127.0.0.1",
        port=params.local.postgres.port,
        user=spec.config["database.user"],
        password=spec.config["database.password"],
        database=params.source("ems").database,
        schema="ems",
        tables=["category", "no_such_table"],
        publication=publication_name(params, "ems"),
        slot=f"{slot_name(params, 'ems')}_missing",
    )
    try:
        world.backend.create_or_update(missing)
        wait_until_running(world.backend, missing.name, timeout_s=120)
        want = _rows(world, "ems", "category")
        _wait_for(world, f"{project}.ems.category", "catid", lambda got: len(got) >= want)
        assert world.backend.status(missing.name).state == "RUNNING"
        assert read_topic(world.kafka.bootstrap, f"{project}.ems.no_such_table") == []
    finally:
        world.backend.delete(missing.name)


# ------------------------------------------------------------------------------- the REST client


def test_rest_backend_is_idempotent_pauses_resumes_restarts_deletes_and_reports_worker_errors(
    world: KafkaWorld,
) -> None:
    """On the real worker: a second identical ``PUT`` updates (one connector), pause / resume /
    restart reach the states they name, a deleted connector reads UNASSIGNED, a configuration
    without ``connector.class`` is refused with the worker's 400 message, and an unreachable
    worker is a clear error."""
    spec = world.specs["ems"]
    wait_until_running(world.backend, spec.name, timeout_s=180)
    world.backend.create_or_update(spec)  # the same PUT again: an update, still one connector
    listed = requests.get(f"{world.kafka.url}/connectors", timeout=10).json()
    assert listed.count(spec.name) == 1
    wait_until_running(world.backend, spec.name, timeout_s=120)
    world.backend.pause(spec.name)
    wait_until(
        lambda: world.backend.status(spec.name).state == "PAUSED", timeout_s=60, what="connector paused"
    )
    world.backend.resume(spec.name)
    wait_until_running(world.backend, spec.name, timeout_s=120)
    world.backend.restart(spec.name)
    wait_until_running(world.backend, spec.name, timeout_s=120)

    scratch = _variant(spec, f"{spec.name}-scratch", **{"slot.name": f"{slot_name(world.params, 'ems')}_x"})
    world.backend.create_or_update(scratch)
    world.backend.delete(scratch.name)
    wait_until(
        lambda: world.backend.status(scratch.name).state == "UNASSIGNED",
        timeout_s=60,
        what="connector deleted",
    )
    no_class = ConnectorSpec(
        "broken",
        spec.engine,
        spec.source,
        {k: v for k, v in spec.config.items() if k != "connector.class"},
        spec.topics,
    )
    with pytest.raises(CaptureError, match=r"\(400\): .*contains no connector type") as refused:
        world.backend.create_or_update(no_class)
    # the worker's message lists the configuration with the password resolved: the client masks it
    assert world.stack.credentials.postgres_password.get_secret_value() not in str(refused.value)
    assert "database.password=********" in str(refused.value)
    unreachable = KafkaConnectRestBackend(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    with pytest.raises(CaptureError, match="Failed to reach Kafka Connect at http://127.0.0.1:"):
        unreachable.status("x")


# ------------------------------------------------------------------------------- broker and stack


def test_stack_stop_and_start_bring_the_broker_and_worker_down_and_back(world: KafkaWorld) -> None:
    """``./workbook stack stop`` (``pipeline.stop_all``) stops the worker and the broker with the
    servers, and ``stack status`` still answers (connectors UNKNOWN, naming the unreachable
    worker); ``stack start`` (``pipeline.start_servers``) brings all back, the connectors resume
    from their offsets and a row inserted afterwards arrives; ``stack status`` lists both."""
    params = world.params
    stopped = {s.server: s.state for s in stop_all(params)}
    assert stopped["kafka"] == stopped["kafka-connect"] == "stopped"
    assert stopped["postgres"] == stopped["mariadb"] == "stopped"
    down = pipeline_status(params)["connectors"]  # status still answers, naming the worker it cannot reach
    assert set(down["state"]) == {"UNKNOWN"}
    assert all("Failed to reach Kafka Connect" in e for e in down["error"])
    started = {s.server: s.state for s in start_servers(params)}
    assert started["kafka"] == started["kafka-connect"] == "running"
    rows = pipeline_status(params)["servers"]
    assert set(rows[rows["server"].isin(["kafka", "kafka-connect"])]["state"]) == {"running"}
    for spec in (world.specs["ems"], world.specs["ecomm"]):
        wait_until_running(world.backend, spec.name, timeout_s=180)
    insert_venues(world.stack, range(32_200, 32_201))
    insert_dates(world.stack, range(32_200, 32_201))
    for source, table, key in (("ems", "venue", "venueid"), ("ecomm", "date", "dateid")):
        topic = table_topic(params, source, table)
        seen = _wait_for(world, topic, key, lambda got: 32_200 in got)
        assert [e["__op"] for e in seen[32_200]] == ["c"]
