"""The schema registry's pieces that need no server of their own: the Confluent wire format, the
ccompat client's error handling (against an in-process HTTP server answering like the registry's
Confluent-compatible API), Java discovery, the pinned archives and the registry's parameters.
The real registry is exercised in tests/integration/test_registry.py."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.java import fake_java
from support.project import project_copy

from helpers.capture.ccompat import SchemaRegistryClient
from helpers.capture.wire import HEADER_SIZE, WireCodec, frame_message, split_message
from helpers.errors import JarsMissingError, ParamsError, SchemaRegistryError, StackError, WireFormatError
from helpers.jars import ARCHIVE_STAMP, JARS_DIR, archives, project_archive
from helpers.local.java import find_java, java_major
from helpers.local.registry import MIN_JAVA
from helpers.params import load_params, project_root

ROOT = project_root()
SCHEMA = {
    "type": "record",
    "name": "Sale",
    "fields": [{"name": "salesid", "type": "long"}, {"name": "buyer", "type": "string"}],
}


# --- the frame ------------------------------------------------------------------------------


def test_frame_and_split_round_trip_the_header() -> None:
    """Magic byte 0, the id as 4 big-endian bytes, then the body unchanged."""
    message = frame_message(258, b"\x02\x04ab")
    assert message[:HEADER_SIZE] == b"\x00\x00\x00\x01\x02"
    assert split_message(message) == (258, b"\x02\x04ab")
    assert split_message(frame_message(0xFFFFFFFF, b""))[0] == 0xFFFFFFFF


def test_a_bad_magic_byte_is_refused_with_a_clear_error() -> None:
    with pytest.raises(
        WireFormatError, match=r"Failed to read a wire-format message: magic byte 0x01, expected 0x00"
    ):
        split_message(b"\x01\x00\x00\x00\x01\x02")


def test_a_message_shorter_than_the_header_is_refused() -> None:
    with pytest.raises(WireFormatError, match=r"it has 3 byte\(s\), fewer than the 5-byte header"):
        split_message(b"\x00\x00\x01")


def test_an_id_that_does_not_fit_four_bytes_is_refused() -> None:
    with pytest.raises(WireFormatError, match=r"schema id 4294967296 does not fit 4 bytes"):
        frame_message(2**32, b"")


# --- the codec against an HTTP server answering like the ccompat API ------------------------


class _Ccompat(http.server.BaseHTTPRequestHandler):
    """Registers schemas (one id per distinct text) and serves them by id, Confluent error bodies."""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        srv: Any = self.server
        srv.gets += 1
        parts = self.path.removeprefix("/apis/ccompat/v7").strip("/").split("/")
        if parts[:2] == ["schemas", "ids"] and int(parts[2]) in srv.schemas:
            self._send(200, {"schema": srv.schemas[int(parts[2])]})
        else:
            self._send(404, {"error_code": 40403, "message": "Schema not found"})

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        srv: Any = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["schema"]
        ids = {v: k for k, v in srv.schemas.items()}
        schema_id = ids.get(text) or len(srv.schemas) + 1
        srv.schemas[schema_id] = text
        self._send(200, {"id": schema_id})


@pytest.fixture()
def ccompat() -> Iterator[Any]:
    server: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ccompat)
    server.schemas, server.gets = {}, 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/apis/ccompat/v7"
    yield server
    server.shutdown()


def test_codec_round_trip_reads_each_schema_once(ccompat: Any) -> None:
    """Encode registers the schema and frames its id; a second codec decodes the same records,
    reading the writer schema from the registry once for many messages."""
    writer = WireCodec(SchemaRegistryClient(ccompat.url))
    records = [{"salesid": n, "buyer": f"b{n}"} for n in range(5)]
    messages = [writer.encode("sale-value", SCHEMA, r) for r in records]
    assert {split_message(m)[0] for m in messages} == {1}
    reader = WireCodec(SchemaRegistryClient(ccompat.url))
    before = ccompat.gets
    assert [reader.decode(m) for m in messages] == records
    assert ccompat.gets - before == 1


def test_an_unknown_schema_id_names_the_id_and_the_registry_error(ccompat: Any) -> None:
    codec = WireCodec(SchemaRegistryClient(ccompat.url))
    with pytest.raises(
        SchemaRegistryError,
        match=r"Failed to read schema id 42: .* answered HTTP 404, error 40403: Schema not found",
    ):
        codec.decode(frame_message(42, b"\x02"))


def test_a_body_that_does_not_match_its_schema_is_refused(ccompat: Any) -> None:
    """Cut short, or with bytes left over (written with another schema): WireFormatError."""
    codec = WireCodec(SchemaRegistryClient(ccompat.url))
    message = codec.encode("sale-value", SCHEMA, {"salesid": 1, "buyer": "someone"})
    with pytest.raises(
        WireFormatError, match=r"Failed to decode .* schema id 1: the Avro body does not match"
    ):
        codec.decode(message[:-3])
    with pytest.raises(WireFormatError, match=r"1 byte\(s\) left after the record"):
        codec.decode(message + b"\x00")


def test_a_record_that_does_not_fit_the_schema_is_refused(ccompat: Any) -> None:
    codec = WireCodec(SchemaRegistryClient(ccompat.url))
    with pytest.raises(WireFormatError, match=r"Failed to encode a record for subject 'sale-value'"):
        codec.encode("sale-value", SCHEMA, {"salesid": "not a number", "buyer": "x"})


def test_an_unreachable_registry_says_where_and_how_to_start_it() -> None:
    client = SchemaRegistryClient("http://127.0.0.1:9/apis/ccompat/v7", timeout_s=2)
    with pytest.raises(
        SchemaRegistryError, match=r"Failed to read schema id 1: .*127.0.0.1:9.* not reachable"
    ):
        client.schema_by_id(1)


def test_an_unknown_compatibility_level_is_refused_before_any_call() -> None:
    client = SchemaRegistryClient("http://127.0.0.1:9/apis/ccompat/v7")
    with pytest.raises(SchemaRegistryError, match=r"unknown level 'SIDEWAYS'; use one of NONE, BACKWARD"):
        client.set_compatibility("s", "SIDEWAYS")  # type: ignore[arg-type]


# --- Java 21+ -------------------------------------------------------------------------------


def test_a_configured_java_older_than_21_is_refused(tmp_path: Path) -> None:
    old = fake_java(tmp_path / "old", "17.0.15")
    assert java_major(old) == 17
    with pytest.raises(
        StackError, match=rf"Failed to use {old} .* not a java {MIN_JAVA} or newer \(found 17\)"
    ):
        find_java(MIN_JAVA, str(old), setting="local.registry.java", server="the registry")
    new = fake_java(tmp_path / "new", "25.0.3")
    assert find_java(MIN_JAVA, str(new), setting="local.registry.java", server="the registry") == new


def test_the_release_file_of_a_jdk_gives_its_version(tmp_path: Path) -> None:
    java = fake_java(tmp_path / "jdk", "11.0.1")  # the release file wins over `java -version`
    (tmp_path / "jdk" / "release").write_text('IMPLEMENTOR="x"\nJAVA_VERSION="21.0.4"\n')
    assert java_major(java) == 21


# --- pinned archives and parameters ---------------------------------------------------------


def test_the_registry_set_pins_the_server_and_the_converter_archives() -> None:
    entries = {coords: name for coords, name, _ in archives(("registry",))}
    assert entries == {
        "io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all": "apicurio-registry-app-3.3.3-all",
        "io.apicurio:apicurio-registry-distro-connect-converter:2.5.11.Final:tar.gz": (
            "apicurio-registry-distro-connect-converter-2.5.11.Final"
        ),
    }


def test_an_archive_without_its_stamp_counts_as_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder without the SHA-256 stamp (a half-done unpack) is not used: the error names the
    set-up command; with the stamp the folder is returned."""
    monkeypatch.setenv("WORKBOOK_ROOT", str(project_copy(tmp_path, params=False)))
    folder = tmp_path / JARS_DIR / "apicurio-registry-app-3.3.3-all"
    folder.mkdir(parents=True)
    with pytest.raises(
        JarsMissingError, match=r"apicurio-registry-app:3.3.3:tar.gz:all.*workbook setup registry"
    ):
        project_archive("registry", "apicurio-registry-app")
    sha = next(sha for coords, _, sha in archives(("registry",)) if "registry-app" in coords)
    (folder / ARCHIVE_STAMP).write_text(sha + "\n")
    assert project_archive("registry", "apicurio-registry-app") == folder


def test_registry_params_have_defaults_ci_ports_and_refuse_unknown_keys() -> None:
    local, ci = load_params("local").local.registry, load_params("ci").local.registry
    assert (local.storage, local.heap, local.database) == ("sql", "256m", "apicurio_registry")
    assert {local.port, local.management_port}.isdisjoint({ci.port, ci.management_port})
    with pytest.raises(ParamsError, match=r"unknown key 'local.registry.prot'.*accepted keys here: .*port"):
        load_params("ci", overrides={"local.registry.prot": 1})
    with pytest.raises(ParamsError, match=r"local.registry.storage"):
        load_params("ci", overrides={"local.registry.storage": "kafkasql"})
