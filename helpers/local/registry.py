"""The local schema registry of the ``local-kafka`` profile: Apicurio Registry 3.3.3 on 127.0.0.1.

:class:`LocalRegistry` starts, stops and describes the registry server that the set-up unpacked
from Maven Central (``scripts/jars.tsv``, set ``registry``). Kafka Connect's Avro converter
registers the Debezium schemas in it; Hudi's Kafka sources and the Python readers
(:mod:`helpers.capture.ccompat`, :mod:`helpers.capture.wire`) read them back through its
Confluent-compatible API, :attr:`LocalRegistry.ccompat_url`.

Storage (``local.registry.storage``):

* ``sql`` (the default): a database of its own (``local.registry.database``, owned by a role of
  the same name) in the local PostgreSQL of :class:`helpers.local.stack.LocalStack`. The
  schemas survive a restart of the registry, which Kafka data needs: a message carries only the
  schema's id. The role's password is generated into ``<state_dir>/registry/db-password``
  (0600) and reaches the server through its environment, never its command line or a file it
  logs.
* ``mem``: the registry's built-in in-memory database; every schema is lost when it stops.

KafkaSQL storage (the registry's journal in a Kafka topic) was not chosen: it would make the
registry wait for the broker and put schema durability in a topic's retention settings, while
the stack already runs, backs and restarts PostgreSQL.

Layout: ``<state_dir>/registry/`` holds ``config/application.properties`` (written on every
start; Quarkus reads it from the working directory), ``registry.pid``, ``registry.log`` and
``tmp/``. Apicurio Registry 3.x is built for Java 21: :func:`helpers.local.java.find_java` picks the ``java``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import psycopg
import requests
from psycopg import sql
from pydantic import SecretStr

from helpers.errors import JarsMissingError, StackError
from helpers.jars import project_archive
from helpers.local.credentials import load_secret
from helpers.local.java import find_java
from helpers.local.server import LocalServer, ServerPort
from helpers.local.stack import LOOPBACK, LocalStack
from helpers.params import WorkbookParams
from helpers.proc import (
    log_tail,
)

__all__ = [
    "CONVERTER_ARCHIVE",
    "CONVERTER_CLASS",
    "MIN_JAVA",
    "REGISTRY_ARCHIVE",
    "REGISTRY_VERSION",
    "LocalRegistry",
    "converter_plugin_dir",
]

REGISTRY_VERSION = "3.3.3"
#: The server archive's artifact in ``scripts/jars.tsv`` (set ``registry``).
REGISTRY_ARCHIVE = "apicurio-registry-app"
#: Kafka Connect's Avro converter plugin (a folder of jars for ``plugin.path``).
CONVERTER_ARCHIVE = "apicurio-registry-distro-connect-converter"
#: The converter class a Connect worker names in ``key.converter`` / ``value.converter``.
CONVERTER_CLASS = "io.apicurio.registry.utils.converter.AvroConverter"
#: The oldest Java the registry's classes run on (class file version 65).
MIN_JAVA = 21
_PASSWORD_ENV = "APICURIO_DATASOURCE_PASSWORD"  # Quarkus maps it to apicurio.datasource.password
_INHERITED_PREFIXES = ("QUARKUS_", "APICURIO_", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")


def _failure_excerpt(log: Path, lines: int = 12) -> str:
    """The log's last lines, preceded by its first error lines when the tail is a stack trace."""
    tail = log_tail(log, lines)
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return tail
    errors = [line for line in text if re.search(r"\bERROR\b|^Exception|^Caused by|^Error", line)]
    head = [line for line in errors[:4] if line not in tail]
    return "\n".join([*head, "...", tail]) if head else tail


def converter_plugin_dir() -> Path:
    """The folder of Apicurio's Kafka Connect converter jars, for a worker's ``plugin.path``.

    Raises:
        StackError: when the set-up has not fetched it (naming the command).
    """
    try:
        return project_archive("registry", CONVERTER_ARCHIVE)
    except JarsMissingError as exc:
        raise StackError(str(exc)) from None


class LocalRegistry(LocalServer):
    """Start, stop and describe the local schema registry of a parameter set
    (:class:`~helpers.local.server.LocalServer`; ready when its health check answers UP).

    Example:
        >>> registry = LocalRegistry(params)          # doctest: +SKIP
        >>> registry.start().state                    # doctest: +SKIP
        'running'
        >>> registry.ccompat_url                      # doctest: +SKIP
        'http://127.0.0.1:18081/apis/ccompat/v7'
    """

    name = "registry"
    title = "the schema registry"

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.settings = params.local.registry
        home = params.state_path / "registry"
        super().__init__(
            home,
            pid_file=home / "registry.pid",
            log_file=home / "registry.log",
            start_timeout_s=self.settings.start_timeout_s,
        )

    @property
    def ports(self) -> list[ServerPort]:
        return [
            ServerPort(self.settings.port, "local.registry.port"),
            ServerPort(self.settings.management_port, "local.registry.management_port"),
        ]

    @property
    def version(self) -> str:
        return f"apicurio-registry {REGISTRY_VERSION}"

    @property
    def data_location(self) -> str:
        if self.settings.storage == "sql":
            return f"postgresql://{LOOPBACK}:{self.params.local.postgres.port}/{self.settings.database}"
        return "in memory (lost on stop)"

    @property
    def address(self) -> str:
        return f"{self.url} (health {self.health_url})"

    def failure_detail(self) -> str:
        return _failure_excerpt(self.log_file)

    @property
    def url(self) -> str:
        """The server's base URL (REST APIs)."""
        return f"http://{LOOPBACK}:{self.settings.port}"

    @property
    def ccompat_url(self) -> str:
        """The Confluent-compatible API (what a Confluent client calls ``schema.registry.url``)."""
        return f"{self.url}/apis/ccompat/v7"

    def converter_settings(self, prefix: str = "") -> dict[str, str]:
        """Settings of Apicurio's Connect converter (:data:`CONVERTER_CLASS`) for this registry,
        each key behind ``prefix`` (e.g. ``"value.converter."`` in a connector's configuration).

        The 2.5.11.Final plugin calls the v2 API; ``as-confluent`` with ``use-id=contentId``
        and headers off makes it write the Confluent wire format (magic byte, 4-byte id, body)
        with the ids the ccompat API serves, under the subject ``<topic>-value`` (``-key``).
        Nothing here is secret.
        """
        settings = {
            "apicurio.registry.url": f"{self.url}/apis/registry/v2",
            "apicurio.registry.auto-register": "true",
            "apicurio.registry.as-confluent": "true",
            "apicurio.registry.use-id": "contentId",
            # the id in the message, not in a Kafka header (the serde's default inside a worker,
            # which passes headers): Confluent-format readers, Hudi's included, read it there
            "apicurio.registry.headers.enabled": "false",
        }
        return {f"{prefix}{key}": value for key, value in settings.items()}

    @property
    def health_url(self) -> str:
        """Readiness (management interface): 200 with ``"status": "UP"`` once storage is usable."""
        return f"http://{LOOPBACK}:{self.settings.management_port}/health/ready"

    @property
    def _password_file(self) -> Path:
        return self.home / "db-password"

    def ready(self) -> bool:
        """Whether the readiness check answers UP."""
        try:
            answer = requests.get(self.health_url, timeout=2)
            return answer.status_code == 200 and answer.json().get("status") == "UP"
        except (requests.RequestException, ValueError):
            return False

    # ------------------------------------------------------------------ storage

    def _database_url(self) -> str:
        port = self.params.local.postgres.port
        return f"jdbc:postgresql://{LOOPBACK}:{port}/{self.settings.database}"

    def _ensure_database(self) -> SecretStr:
        """Create or update the registry's role and database in the local PostgreSQL."""
        password = load_secret(self._password_file)
        name = self.settings.database
        stack = LocalStack(self.params)
        try:
            with stack.connect_postgres_admin() as conn:
                # a SCRAM verifier, never the clear-text password, so it cannot reach a log
                verifier = conn.pgconn.encrypt_password(
                    password.get_secret_value().encode(), name.encode(), b"scram-sha-256"
                )
                role = sql.Identifier(name)
                exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
                verb = sql.SQL("ALTER ROLE" if exists else "CREATE ROLE")
                conn.execute(
                    sql.SQL("{} {} WITH LOGIN PASSWORD {}").format(verb, role, sql.Literal(verifier.decode()))
                )
                if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                    conn.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {} ENCODING 'UTF8' TEMPLATE template0").format(
                            role, role
                        )
                    )
                conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(role))
        except psycopg.Error as exc:
            raise StackError(
                f"Failed to set up the schema registry's database {name!r} in the local PostgreSQL "
                f"({LOOPBACK}:{self.params.local.postgres.port}): {str(exc).strip()}"
            ) from None
        return password

    def _write_config(self) -> None:
        """The server's settings (nothing secret): Quarkus reads ``config/application.properties``
        from its working directory."""
        tmp_dir = self.tmp_dir
        tmp_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            "# written by helpers.local.registry on every start; the password comes from the environment",
            f"quarkus.http.host={LOOPBACK}",
            f"quarkus.http.port={self.settings.port}",
            f"quarkus.management.host={LOOPBACK}",
            f"quarkus.management.port={self.settings.management_port}",
            "quarkus.http.cors.enabled=false",
            "quarkus.otel.sdk.disabled=true",
            f"apicurio.storage.snapshot.location={tmp_dir}",
            f"apicurio.import.work-dir={tmp_dir}",
            "apicurio.storage.kind=sql",
        ]
        if self.settings.storage == "sql":
            lines += [
                "apicurio.storage.sql.kind=postgresql",
                f"apicurio.datasource.url={self._database_url()}",
                f"apicurio.datasource.username={self.settings.database}",
                "apicurio.datasource.jdbc.initial-size=2",
                "apicurio.datasource.jdbc.min-size=2",
                "apicurio.datasource.jdbc.max-size=10",
            ]
        config = self.home / "config"
        config.mkdir(parents=True, exist_ok=True)
        target = config / "application.properties"
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, target)

    # ------------------------------------------------------------------ lifecycle

    def command(self) -> list[str]:
        app = project_archive("registry", REGISTRY_ARCHIVE)
        return [
            str(
                find_java(
                    MIN_JAVA,
                    self.settings.java,
                    setting="local.registry.java",
                    server=f"the schema registry (Apicurio Registry {REGISTRY_VERSION})",
                )
            ),
            f"-Xmx{self.settings.heap}",
            "-XX:+UseSerialGC",
            *self.params.local.jit_options,
            "-Djava.net.preferIPv4Stack=true",
            f"-Djava.io.tmpdir={self.tmp_dir}",
            "-jar",
            str(app / "quarkus-run.jar"),
        ]

    def prepare(self) -> Mapping[str, str] | None:
        """With ``sql`` storage (the local PostgreSQL must run: ``./workbook stack start``) its role
        and database are created or updated, and the password goes to the server through its
        environment; then its settings file."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_PREFIXES)}
        if self.settings.storage == "sql":
            env[_PASSWORD_ENV] = self._ensure_database().get_secret_value()
        self._write_config()
        return env
