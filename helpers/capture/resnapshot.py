"""Re-snapshot one table without stopping the pipeline: Debezium's incremental snapshot, then a
marker in Bronze that voids what the table held before the snapshot began.

An incremental snapshot (``execute-snapshot`` through the source's signal table,
:mod:`helpers.sources.signals`) re-reads every row the table has now, in chunks, while the
connector keeps streaming every table's changes: nothing else stops or restarts. It emits only
reads, so a row that is gone from the source (deleted while Silver had diverged) would stay.
:func:`resnapshot` therefore

1. takes the source's log position ``S`` just before it sends the signal: every row the snapshot
   reads, and every change after it, comes with a later position;
2. waits for Debezium's notification that the snapshot of the table is ``COMPLETED``. The
   embedded worker records it after the batch that holds the last reads is durable in Bronze; on
   Kafka Connect it is read from the notification topic, and then the Bronze sink must have
   written every record the table's topic has at that moment;
3. writes one marker event at ``S`` into the table's Bronze topic (``__op = 'resnapshot'``,
   :func:`helpers.bronze.events.marker_event`).

Bronze replay and Silver apply the marker as a TRUNCATE at ``S`` (:mod:`helpers.silver.truncate`):
what came before ``S`` is void, the re-read rows and the later changes stay. So Silver ends equal
to the source, deleted rows included. ``docs/operations.md``, "Re-snapshot one table".
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from fastavro import parse_schema

from helpers.bronze.events import RESNAPSHOT_OP, marker_event
from helpers.bronze.writer import BronzeWriter
from helpers.capture.ccompat import SchemaRegistryClient
from helpers.capture.connectors import NOTIFICATION_TOPIC
from helpers.capture.kafka_sink import BronzeSink
from helpers.capture.register import open_backend
from helpers.capture.topics import end_offsets, read_topic
from helpers.capture.wire import read_body, split_message
from helpers.capture.worker import notification
from helpers.engines import engine_kind
from helpers.errors import CaptureError, WaitTimeoutError, WorkbookError
from helpers.lake_store import is_s3, lake_uri
from helpers.local.kafka import bootstrap_servers
from helpers.local.registry import CONVERTER_CLASS, LocalRegistry
from helpers.naming import connector_name, silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.poll import wait_until
from helpers.sources.connect import connect
from helpers.sources.signals import create_signal_table, current_position, request_snapshot

__all__ = ["ResnapshotResult", "find_table", "kafka_notifications", "resnapshot", "snapshot_completed"]


@dataclass(frozen=True)
class ResnapshotResult:
    """One re-snapshot: the table, the source position it starts from, the signal's id, the
    Bronze marker file and the seconds until the snapshot completed."""

    table: str
    position: dict[str, Any]
    signal_id: str
    marker_file: str
    seconds: float


def find_table(params: WorkbookParams, name: str) -> SilverTableParams:
    """The Silver table named ``name``, or fed by the source table ``name`` (``ems.category``).

    Raises:
        CaptureError: naming the known tables, when none matches.
    """
    for table in params.silver.tables:
        if name in (table.name, table.table, f"{table.source}.{table.table}"):
            return table
    known = ", ".join(t.name for t in params.silver.tables)
    raise CaptureError(f"Failed to re-snapshot {name!r}: no Silver table has that name (tables: {known})")


def snapshot_completed(notes: list[dict[str, Any]], collection: str, since: float) -> bool:
    """Whether Debezium reported the incremental snapshot of ``collection`` done after ``since``."""
    for note in notes:
        if (note.get("received_at") or 0) < since or note.get("type") != "COMPLETED":
            continue
        if str(note.get("aggregate_type", "")).lower().startswith("incremental"):
            collections = str((note.get("data") or {}).get("data_collections", ""))
            if not collections or collection in collections.split(","):
                return True
    return False


def kafka_notifications(params: WorkbookParams, after: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Debezium's notifications in the Kafka topic the connectors publish them to (from the
    offsets ``after``, per partition; default: all), as the embedded worker's status keeps them.
    The values are Avro in the wire format when the connectors use Apicurio's converter (their
    schemas from the local registry), else the JSON converter's.

    Raises:
        CaptureError: when the topic cannot be read, or a value not decoded (naming it).
    """
    avro = params.capture.kafka_connect.converter == CONVERTER_CLASS
    registry = SchemaRegistryClient(LocalRegistry(params).ccompat_url) if avro else None
    notes = []
    for record in read_topic(bootstrap_servers(params), NOTIFICATION_TOPIC, raw_values=True):
        value = record["value"]
        if value is None or record["offset"] < (after or {}).get(record["partition"], 0):
            continue
        if registry is None:
            notes.append(notification(value.decode("utf-8", "replace")))
            continue
        try:
            schema_id, body = split_message(value)
            writer = registry.schema_by_id(schema_id)
            parsed = parse_schema(json.loads(writer) if isinstance(writer, str) else writer)
            notes.append(notification(read_body(schema_id, body, parsed)))
        except WorkbookError as exc:
            raise CaptureError(
                f"Failed to read Debezium's notification at {NOTIFICATION_TOPIC}/{record['partition']}"
                f"@{record['offset']}: {exc}"
            ) from None
    return notes


def resnapshot(params: WorkbookParams, name: str, *, timeout_s: float = 900.0) -> ResnapshotResult:
    """Re-snapshot one captured table (module docstring) and mark its Bronze topic.

    Args:
        params: workbook parameters (the embedded or the Kafka Connect capture backend).
        name: the Silver table, or its source table (``category`` or ``ems.category``).
        timeout_s: how long to wait for the snapshot to complete.

    Raises:
        CaptureError: for an unknown table, a source without signalling (SQL Server), another
            capture backend, or a connector that is not running.
        WaitTimeoutError: when the snapshot did not complete in time (the signal stays sent:
            the snapshot goes on; run the command again once it is done).
        SourceError: when the source cannot be reached.
    """
    table = find_table(params, name)
    kind = engine_kind(params.source(table.source).engine)
    if kind not in ("postgres", "mysql"):
        raise CaptureError(f"Failed to re-snapshot {table.name}: {kind} sources have no signal table here")
    if params.capture.backend not in ("embedded", "kafka_connect"):
        raise CaptureError(
            f"Failed to re-snapshot {table.name}: the workbook waits for a snapshot's completion "
            f"with the embedded engine or a Kafka Connect worker it reaches (capture.backend is "
            f"{params.capture.backend}); send the execute-snapshot signal yourself"
        )
    backend = open_backend(params)
    connector = connector_name(params, table.source)
    status = backend.status(connector)
    if status.state != "RUNNING":
        raise CaptureError(
            f"Failed to re-snapshot {table.name}: connector {connector} is {status.state}"
            f"{': ' + status.error if status.error else ''}; start it with ./workbook run (notebook 02)"
        )
    source = params.source(table.source)
    namespace = source.namespace  # where the connector captures (and names its signal table)
    collection = f"{namespace}.{table.table}"
    started = time.time()
    kafka = params.capture.backend == "kafka_connect"
    topic = silver_topic(params, table)
    seen = end_offsets(bootstrap_servers(params), NOTIFICATION_TOPIC) if kafka else {}
    with connect(params, table.source, autocommit=True) as conn:
        create_signal_table(conn, source.engine, namespace)  # made by notebook 01; here for older set-ups
        position = current_position(conn, source.engine)
        signal_id = request_snapshot(conn, source.engine, namespace, table.table)

    def done() -> bool:
        if kafka:  # the notification in Kafka, then the sink's Bronze past the topic's end
            return snapshot_completed(kafka_notifications(params, seen), collection, 0.0) and (
                BronzeSink(params).written_to_end(topic)
            )
        notes = backend.status(connector).details.get("notifications") or []
        return snapshot_completed(list(notes), collection, started)

    try:
        wait_until(
            done,
            timeout_s=timeout_s,
            what=f"the incremental snapshot of {collection} (signal {signal_id})",
            interval_s=0.5,
            max_interval_s=2.0,
        )
    except WaitTimeoutError as exc:
        raise WaitTimeoutError(
            f"{exc}; the snapshot goes on: run ./workbook resnapshot {table.name} again once the "
            "connector's status shows it COMPLETED (no Bronze marker was written)"
        ) from None
    root = lake_uri(params, params.lake.bronze)
    writer = BronzeWriter(root if is_s3(root) else params.path(root), params.capture.bronze_format)
    files = writer.write_batch(
        [marker_event(topic, RESNAPSHOT_OP, table.table, position, int(time.time() * 1000))]
    )
    return ResnapshotResult(table.name, position, signal_id, str(files[0].path), time.time() - started)
