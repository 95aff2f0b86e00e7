"""Re-snapshot one table without stopping the pipeline: Debezium's incremental snapshot, then a
marker in Bronze that voids what the table held before the snapshot began.

An incremental snapshot (``execute-snapshot`` through the source's signal table,
:mod:`helpers.sources.signals`) re-reads every row the table has now, in chunks, while the
connector keeps streaming every table's changes: nothing else stops or restarts. It emits only
reads, so a row that is gone from the source (deleted while Silver had diverged) would stay.
:func:`resnapshot` therefore

1. takes the source's log position ``S`` just before it sends the signal: every row the snapshot
   reads, and every change after it, comes with a later position;
2. waits for Debezium's notification that the snapshot of the table is ``COMPLETED`` (the
   worker records it after the batch that holds the last reads is durable in Bronze);
3. writes one marker event at ``S`` into the table's Bronze topic (``__op = 'resnapshot'``,
   :func:`helpers.bronze.events.marker_event`).

Bronze replay and Silver apply the marker as a TRUNCATE at ``S`` (:mod:`helpers.silver.truncate`):
what came before ``S`` is void, the re-read rows and the later changes stay. So Silver ends equal
to the source, deleted rows included. ``docs/operations.md``, "Re-snapshot one table".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from helpers.bronze.events import RESNAPSHOT_OP, marker_event
from helpers.bronze.writer import BronzeWriter
from helpers.capture.register import open_backend
from helpers.errors import CaptureError, WaitTimeoutError
from helpers.lakefs import is_s3, lake_uri
from helpers.naming import connector_name, silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.poll import wait_until
from helpers.sources.connect import connect
from helpers.sources.signals import create_signal_table, current_position, request_snapshot
from helpers.sources.sql import engine_kind

__all__ = ["ResnapshotResult", "find_table", "resnapshot", "snapshot_completed"]


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


def resnapshot(params: WorkbookParams, name: str, *, timeout_s: float = 900.0) -> ResnapshotResult:
    """Re-snapshot one captured table (module docstring) and mark its Bronze topic.

    Args:
        params: workbook parameters (the embedded capture backend).
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
    if params.capture.backend != "embedded":
        raise CaptureError(
            f"Failed to re-snapshot {table.name}: only the embedded capture backend waits for the "
            f"snapshot's completion here (capture.backend is {params.capture.backend})"
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
    with connect(params, table.source, autocommit=True) as conn:
        create_signal_table(conn, source.engine, namespace)  # made by notebook 01; here for older set-ups
        position = current_position(conn, source.engine)
        signal_id = request_snapshot(conn, source.engine, namespace, table.table)

    def done() -> bool:
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
    topic = silver_topic(params, table)
    files = writer.write_batch(
        [marker_event(topic, RESNAPSHOT_OP, table.table, position, int(time.time() * 1000))]
    )
    return ResnapshotResult(table.name, position, signal_id, str(files[0].path), time.time() - started)
