"""The local-kafka profile's Kafka broker and Kafka Connect worker (``capture.backend: kafka_connect``).

:class:`LocalKafka` runs, under ``<state_dir>/kafka/``, a single-node Kafka broker in KRaft mode
(broker and controller in one JVM, storage formatted once with a generated cluster id) and a Kafka
Connect distributed worker with the Debezium connector plugins on its ``plugin.path``. Both bind
127.0.0.1 only, have a bounded heap, and come from Maven Central through the set-up's jar set
``kafka`` (``scripts/jars.tsv``). Source passwords reach the worker through Kafka's
``FileConfigProvider`` from ``connect/secrets/sources.properties`` (mode 0600): a connector's
configuration holds only ``${file:...}`` references, so the REST API never echoes a password.
Each of the two processes is a :class:`~helpers.local.server.LocalServer` (the one start/stop/status
path); the module is cohesive: the two servers' settings, the worker's plugins and secrets.

Layout::

    <state_dir>/kafka/
      broker/    server.properties, log4j2.properties, cluster.id, data/, server.log, broker.pid
      connect/   connect-distributed.properties, log4j2.properties, connect.log, connect.pid,
                 secrets/sources.properties (0600)
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import requests
from kafka import KafkaConsumer
from kafka.errors import KafkaError

from helpers.errors import CaptureError, JarsMissingError, StackError
from helpers.jars import connect_plugin_dirs, connect_transforms_dir, jar_tree
from helpers.local.credentials import load_credentials, write_private
from helpers.local.registry import CONVERTER_CLASS, LocalRegistry, converter_plugin_dir
from helpers.local.server import LocalServer, ServerPort, java_properties
from helpers.params import WorkbookParams
from helpers.proc import (
    ServerStatus,
)

__all__ = [
    "CONNECTOR_CLASSES",
    "KAFKA_VERSION",
    "LocalKafka",
    "connect_url",
    "bootstrap_servers",
    "converter_settings",
    "local_worker",
    "secret_reference",
]

KAFKA_VERSION = "4.3.1"
_LOOPBACK = "127.0.0.1"
_JAR_SET = "kafka"

#: The Debezium connector classes the worker must list before it counts as ready.
CONNECTOR_CLASSES = (
    "io.debezium.connector.postgresql.PostgresConnector",
    "io.debezium.connector.mariadb.MariaDbConnector",
    "io.debezium.connector.mysql.MySqlConnector",
)

#: Keys of the secrets file (``${file:<path>:<key>}``) per engine kind.
_SECRET_KEYS = {"postgres": "postgres.password", "mysql": "mariadb.password"}


def local_worker(params: WorkbookParams) -> bool:
    """Whether capture runs on the project's own broker and Connect worker (the local-kafka
    profile: ``capture.backend: kafka_connect`` with an empty ``capture.kafka_connect.url``), and
    so also its registry and Bronze sink."""
    return params.capture.backend == "kafka_connect" and not params.capture.kafka_connect.url


def connect_url(params: WorkbookParams) -> str:
    """The Kafka Connect REST endpoint: ``capture.kafka_connect.url``, or the local worker's."""
    return params.capture.kafka_connect.url or f"http://{_LOOPBACK}:{params.local.kafka.connect_port}"


def bootstrap_servers(params: WorkbookParams) -> str:
    """The Kafka cluster: ``capture.kafka_connect.bootstrap_servers``, or the local broker's."""
    return params.capture.kafka_connect.bootstrap_servers or f"{_LOOPBACK}:{params.local.kafka.broker_port}"


def converter_settings(params: WorkbookParams) -> dict[str, str]:
    """The key and value converters' own settings: for Apicurio's Avro converter the local schema
    registry's (``key.converter.apicurio.registry.url`` ...), for the JSON converter none.

    Raises:
        CaptureError: for the Avro converter without the local registry (``local.registry.enabled``).
    """
    if params.capture.kafka_connect.converter != CONVERTER_CLASS:
        return {}
    if not params.local.registry.enabled:
        raise CaptureError(
            f"Failed to configure the converter {CONVERTER_CLASS}: it needs the schema registry; set "
            "local.registry.enabled: true (params/local-kafka.yaml does)"
        )
    registry = LocalRegistry(params)
    return {
        **registry.converter_settings("key.converter."),
        **registry.converter_settings("value.converter."),
    }


def secret_reference(params: WorkbookParams, kind: str) -> str:
    """The config-provider reference the worker resolves to the local password of ``kind``
    (``postgres`` or ``mysql``), e.g. ``${file:/.../sources.properties:postgres.password}``."""
    return f"${{file:{LocalKafka(params).secrets_file}:{_SECRET_KEYS[kind]}}}"


def _properties(values: Mapping[str, str]) -> str:
    return java_properties(values, __name__)


def _empty(folder: Path) -> None:
    """Remove what ``folder`` holds (a stopped JVM's temporary files), keeping the folder."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def _log4j2(log_file: Path) -> str:
    return _properties(
        {
            "status": "warn",
            "appender.file.type": "File",
            "appender.file.name": "FILE",
            "appender.file.fileName": str(log_file),
            "appender.file.layout.type": "PatternLayout",
            "appender.file.layout.pattern": "[%d] %p %m (%c)%n",
            "rootLogger.level": "INFO",
            "rootLogger.appenderRef.file.ref": "FILE",
            # the worker's per-request log and the clients' config dumps drown what matters
            "logger.clients.name": "org.apache.kafka.clients",
            "logger.clients.level": "WARN",
            "logger.common.name": "org.apache.kafka.common.config.AbstractConfig",
            "logger.common.level": "WARN",
        }
    )


class LocalKafka:
    """Start, stop and describe the local broker and Connect worker of a parameter set."""

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.settings = params.local.kafka
        self.home = params.state_path / "kafka"
        self.broker_dir = self.home / "broker"
        self.connect_dir = self.home / "connect"
        self.broker = _Broker(self)
        self.connect = _ConnectWorker(self)

    # ------------------------------------------------------------------ paths

    @property
    def secrets_file(self) -> Path:
        """The worker's secrets (mode 0600), read by its ``FileConfigProvider``."""
        return self.connect_dir / "secrets" / "sources.properties"

    @property
    def broker_log(self) -> Path:
        """The broker's log."""
        return self.broker_dir / "server.log"

    @property
    def connect_log(self) -> Path:
        """The worker's log."""
        return self.connect_dir / "connect.log"

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the broker's client listener."""
        return f"{_LOOPBACK}:{self.settings.broker_port}"

    @property
    def url(self) -> str:
        """The worker's REST endpoint."""
        return f"http://{_LOOPBACK}:{self.settings.connect_port}"

    def broker_pid(self) -> int | None:
        """The broker's pid while it runs."""
        return self.broker.pid()

    def connect_pid(self) -> int | None:
        """The worker's pid while it runs."""
        return self.connect.pid()

    # ------------------------------------------------------------------ start

    def _classpath(self) -> str:
        try:
            return os.pathsep.join(str(j) for j in jar_tree("kafka", _JAR_SET))
        except JarsMissingError as exc:
            raise StackError(str(exc)) from None

    def _java(self, heap: str, log4j: Path, main: Sequence[str], tmp_dir: Path) -> list[str]:
        """A Kafka JVM's command line; its temporary files go to ``tmp_dir`` (created), not ``/tmp``.

        Kafka's ``connect-plugin-path`` tool leaves a temporary copy of the shim archive it writes
        (one per state directory made), and the broker's compression libraries unpack their native
        code there: under the state directory they go with it, and the prepare steps empty them.
        """
        tmp_dir.mkdir(parents=True, exist_ok=True)
        return [
            "java",
            f"-Xmx{heap}",
            f"-Xms{min(64, int(heap[:-1]) * (1024 if heap.endswith('g') else 1))}m",
            "-XX:+UseSerialGC",
            *self.params.local.jit_options,
            "-XX:MaxMetaspaceSize=192m",
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Djava.io.tmpdir={tmp_dir}",
            "-cp",
            self._classpath(),
            *main,
        ]

    def _cluster_id(self) -> str:
        path = self.broker_dir / "cluster.id"
        if path.exists():
            return path.read_text(encoding="utf-8").strip()
        while True:  # Kafka's own ids: 16 random bytes, base64url without padding, not starting "-"
            cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            if not cid.startswith("-"):
                break
        path.write_text(cid + "\n", encoding="utf-8")
        return cid

    def _broker_properties(self) -> dict[str, str]:
        s = self.settings
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{_LOOPBACK}:{s.controller_port}",
            "listeners": f"PLAINTEXT://{_LOOPBACK}:{s.broker_port},CONTROLLER://{_LOOPBACK}:{s.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{_LOOPBACK}:{s.broker_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.broker_dir / "data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "log.retention.hours": "-1",  # change topics are the record of truth here: keep them
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
        }

    def _broker_answers(self) -> bool:
        try:
            consumer = KafkaConsumer(  # one short probe: kafka-python waits 30 s to bootstrap by default
                bootstrap_servers=self.bootstrap,
                bootstrap_timeout_ms=2000,
                request_timeout_ms=3000,
                reconnect_backoff_max_ms=500,
                connections_max_idle_ms=5000,
            )
        except KafkaError:
            return False
        try:
            consumer.topics()
            return True
        except KafkaError:
            return False
        finally:
            consumer.close()

    def _format_storage(self, props: Path, log4j: Path) -> None:
        """Format the broker's KRaft storage on first use."""
        if (self.broker_dir / "data" / "meta.properties").exists():
            return
        argv = self._java(
            "128m",
            log4j,
            ["kafka.tools.StorageTool", "format", "--cluster-id", self._cluster_id(), "--config", str(props)],
            self.broker.tmp_dir,
        )
        done = subprocess.run(argv, cwd=self.broker_dir, capture_output=True, text=True, check=False)  # noqa: S603
        if done.returncode != 0:
            raise StackError(
                f"Failed to format the Kafka broker's storage in {self.broker_dir / 'data'}:\n"
                f"{(done.stdout + done.stderr).strip()[-2000:]}"
            )

    def start_broker(self) -> ServerStatus:
        """Start the broker unless it runs (formatting its storage on first use); wait until it
        answers a metadata request.

        Raises:
            StackError: when the jars are missing, a port is taken, or the broker does not come up
                (with its log's last lines).
        """
        return self.broker.start()

    def _connect_properties(self) -> dict[str, str]:
        s = self.settings
        converter = self.params.capture.kafka_connect.converter
        try:
            plugins = [*connect_plugin_dirs(_JAR_SET).values(), connect_transforms_dir()]
            if converter == CONVERTER_CLASS:  # Apicurio's Avro converter: a plugin of its own
                plugins.append(self._converter_plugin().parent)  # a folder of plugin folders
        except JarsMissingError as exc:
            raise StackError(str(exc)) from None
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": f"{self.params.project}-connect",
            "key.converter": converter,
            "value.converter": converter,
            **converter_settings(self.params),
            "config.storage.topic": "connect-configs",
            "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "connect-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "5",
            "status.storage.partitions": "1",
            # offsets are committed every second: a crash redelivers at most about a second
            "offset.flush.interval.ms": "1000",
            "listeners": f"http://{_LOOPBACK}:{s.connect_port}",
            "rest.advertised.host.name": _LOOPBACK,
            "rest.advertised.port": str(s.connect_port),
            "plugin.path": ",".join(str(p) for p in plugins),
            # every Debezium plugin ships ServiceLoader manifests: no reflective scan (faster start)
            "plugin.discovery": "service_load",
            "config.providers": "file",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "config.providers.file.param.allowed.paths": str(self.secrets_file.parent),
            # a restarted worker takes its tasks back at once instead of after the default 5 min
            "scheduled.rebalance.max.delay.ms": "0",
        }

    def _converter_plugin(self) -> Path:
        """Apicurio's converter plugin as the worker can find it (made once per state directory).

        The worker finds plugins by their ServiceLoader manifests only (``plugin.discovery=
        service_load``: no reflective scan of every plugin jar at start), and the converter's
        archive has none. Kafka's own tool ``connect-plugin-path sync-manifests`` (the class
        ``org.apache.kafka.tools.ConnectPluginPath``) writes them, into a copy of the plugin, so
        the checked archive under ``.jars/`` stays as fetched. The archive's ``connect-json`` 2.4.0
        is left out: the worker's own JsonConverter stays the only one.

        Raises:
            StackError: when the tool fails (with its output).
        """
        source = converter_plugin_dir()
        target = self.connect_dir / "plugins" / source.name
        done = target / ".manifests-synced"
        if done.exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for jar in sorted(source.glob("*.jar")):
            if not jar.name.startswith("connect-json-"):
                shutil.copy2(jar, target / jar.name)
        log4j = self.connect_dir / "log4j2.properties"
        log4j.write_text(_log4j2(self.connect_log), encoding="utf-8")
        argv = self._java(
            "256m",
            log4j,
            ["org.apache.kafka.tools.ConnectPluginPath", "sync-manifests", "--plugin-location", str(target)],
            self.connect.tmp_dir,
        )
        ran = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603 - fixed argv
        if ran.returncode != 0 or not list(target.glob("connect-plugin-path-shim-*.jar")):
            raise StackError(
                f"Failed to write the ServiceLoader manifests of the converter plugin {target} "
                f"(exit {ran.returncode}):\n{(ran.stdout + ran.stderr).strip()[-2000:]}"
            )
        done.write_text(f"{source}\n", encoding="utf-8")
        return target

    def write_secrets(self) -> Path:
        """(Re)write the worker's secrets file (0600) from the local stack's credentials."""
        folder = self.secrets_file.parent
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        creds = load_credentials(self.params.state_path)
        write_private(
            self.secrets_file,
            _properties(
                {
                    _SECRET_KEYS["postgres"]: creds.postgres_password.get_secret_value(),
                    _SECRET_KEYS["mysql"]: creds.mariadb_password.get_secret_value(),
                }
            ),
        )
        return self.secrets_file

    def connector_plugins(self) -> list[str]:
        """Classes of the connector plugins the worker lists (``GET /connector-plugins``)."""
        response = requests.get(f"{self.url}/connector-plugins", timeout=5)
        response.raise_for_status()
        return [str(p["class"]) for p in response.json()]

    def _worker_ready(self) -> bool:
        try:
            listed = set(self.connector_plugins())
        except (requests.RequestException, ValueError):
            return False
        return all(c in listed for c in CONNECTOR_CLASSES)

    def start_connect(self) -> ServerStatus:
        """Start the Connect worker unless it runs; wait until its REST API lists the Debezium
        connector classes.

        Raises:
            StackError: as :meth:`start_broker`; the broker must run.
        """
        if self.connect.pid() is None and self.broker.pid() is None:
            raise StackError("Failed to start the Kafka Connect worker: the Kafka broker does not run")
        return self.connect.start()

    def start(self) -> list[ServerStatus]:
        """Start the broker, then the worker (each left alone if it runs)."""
        return [self.start_broker(), self.start_connect()]

    # ------------------------------------------------------------------ stop and status

    def stop(self, timeout_s: float = 30.0) -> list[ServerStatus]:
        """Stop the worker, then the broker (SIGTERM, SIGKILL after ``timeout_s``); data is kept."""
        connect = self.connect.stop(timeout_s)
        return [self.broker.stop(timeout_s), connect]

    def broker_status(self) -> ServerStatus:
        """The broker's row of ``./workbook stack status``."""
        return self.broker.status()

    def connect_status(self) -> ServerStatus:
        """The worker's row of ``./workbook stack status``."""
        return self.connect.status()

    def status(self) -> list[ServerStatus]:
        """Both rows."""
        return [self.broker_status(), self.connect_status()]


class _Broker(LocalServer):
    """The KRaft broker (broker and controller in one process) of :class:`LocalKafka`."""

    name = "kafka"
    title = "the Kafka broker"
    first_interval_s = 0.5
    poll_interval_s = 2.0

    def __init__(self, kafka: LocalKafka) -> None:
        self.kafka = kafka
        home = kafka.broker_dir
        super().__init__(
            home,
            pid_file=home / "broker.pid",
            log_file=kafka.broker_log,
            console_file=home / "server.out",
            start_timeout_s=kafka.settings.start_timeout_s,
        )

    @property
    def ports(self) -> list[ServerPort]:
        s = self.kafka.settings
        return [
            ServerPort(s.broker_port, "local.kafka.broker_port"),
            ServerPort(s.controller_port, "local.kafka.controller_port"),
        ]

    @property
    def version(self) -> str:
        return f"kafka {KAFKA_VERSION} (KRaft)"

    @property
    def data_location(self) -> str:
        return str(self.home / "data")

    def command(self) -> list[str]:
        props = self.home / "server.properties"
        return self.kafka._java(
            self.kafka.settings.broker_heap,
            self.home / "log4j2.properties",
            ["kafka.Kafka", str(props)],
            self.tmp_dir,
        )

    def prepare(self) -> Mapping[str, str] | None:
        """``server.properties`` and the log settings, then the storage formatted on first use."""
        _empty(self.tmp_dir)
        props = self.home / "server.properties"
        props.write_text(_properties(self.kafka._broker_properties()), encoding="utf-8")
        log4j = self.home / "log4j2.properties"
        log4j.write_text(_log4j2(self.log_file), encoding="utf-8")
        self.kafka._format_storage(props, log4j)
        return None

    def ready(self) -> bool:
        return self.kafka._broker_answers()


class _ConnectWorker(LocalServer):
    """The distributed-mode Kafka Connect worker of :class:`LocalKafka`."""

    name = "kafka-connect"
    title = "the Kafka Connect worker"
    first_interval_s = 0.5
    poll_interval_s = 2.0

    def __init__(self, kafka: LocalKafka) -> None:
        self.kafka = kafka
        home = kafka.connect_dir
        super().__init__(
            home,
            pid_file=home / "connect.pid",
            log_file=kafka.connect_log,
            console_file=home / "connect.out",
            start_timeout_s=kafka.settings.start_timeout_s,
        )

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.kafka.settings.connect_port, "local.kafka.connect_port")]

    @property
    def version(self) -> str:
        return f"kafka connect {KAFKA_VERSION}"

    @property
    def data_location(self) -> str:
        return str(self.home)

    @property
    def address(self) -> str:
        return self.kafka.url

    @property
    def timer_slack_us(self) -> int:
        """``capture.timer_slack_us``: the worker runs the Debezium connectors, whose idle poll
        loops the slack quiets as in the embedded capture workers (``EmbeddedBackend``)."""
        return self.kafka.params.capture.timer_slack_us

    def command(self) -> list[str]:
        props = self.home / "connect-distributed.properties"
        main = ["org.apache.kafka.connect.cli.ConnectDistributed", str(props)]
        heap = self.kafka.settings.connect_heap
        return self.kafka._java(heap, self.home / "log4j2.properties", main, self.tmp_dir)

    def prepare(self) -> Mapping[str, str] | None:
        """The secrets file (0600), the worker's properties and its log settings."""
        _empty(self.tmp_dir)
        self.kafka.write_secrets()
        props = self.home / "connect-distributed.properties"
        props.write_text(_properties(self.kafka._connect_properties()), encoding="utf-8")
        (self.home / "log4j2.properties").write_text(_log4j2(self.log_file), encoding="utf-8")
        return None

    def ready(self) -> bool:
        return self.kafka._worker_ready()
