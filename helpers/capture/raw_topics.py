"""Debezium's unflattened change topics, for Hudi's own Debezium Kafka sources
(``silver.engine: streamer`` with ``silver.streamer.source: kafka``, local-kafka profile only).

Hudi's ``PostgresDebeziumSource`` and ``MysqlDebeziumSource`` read Debezium's envelope (``before``,
``after``, ``source.lsn`` or ``source.file``/``pos``/``row``, ``op``), which the workbook's own
connectors flatten for Bronze (``ExtractNewRecordState``). So this mode runs one more connector per
PostgreSQL and MySQL/MariaDB source, ``<project>_raw-<source>``, with the same login, tables and
Avro converter but no transform, writing ``<project>_raw.<schema or database>.<table>`` (outside the
Bronze sink's topic pattern). It has its own replication slot (``<slot>_raw``) or binlog client id
and schema history topic. Without signalling, it cannot re-snapshot one table
(``docs/streamer.md``, "Limits").

:func:`ensure_raw_capture` registers them and waits until each has caught up with the workbook's
connector of its source: its snapshot done and its committed source offset at or after the other's.
:func:`retire_raw_capture` removes them, and their replication slots, once nothing reads them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from helpers.capture.backends import KafkaConnectRestBackend, wait_until_running
from helpers.capture.connectors import ConnectorSpec
from helpers.capture.offsets import offset_position
from helpers.capture.register import connector_specs, open_backend
from helpers.engines import engine_kind
from helpers.environments import implementations
from helpers.errors import CaptureError
from helpers.local.kafka import connect_url, local_worker
from helpers.local.stack import LocalStack
from helpers.naming import raw_connector_name, raw_slot_name, raw_topic_prefix
from helpers.params import WorkbookParams
from helpers.poll import wait_until
from helpers.sources.api import LocalSources
from helpers.sources.positions import SourcePosition

log = logging.getLogger(__name__)

__all__ = ["RAW_ENGINES", "ensure_raw_capture", "raw_spec", "raw_specs", "retire_raw_capture"]

#: The engines Hudi 0.14.0 has a Debezium source for (SQL Server has none).
RAW_ENGINES = ("postgres", "mysql")
#: Entries of the workbook's connector that do not carry over: its transforms (flattening, the
#: TRUNCATE marker, routing), signalling and notifications (one signal table, read by the workbook's
#: connector), and its metric tag.
_DROPPED = ("transforms", "signal.", "notification.", "custom.metric.tags")
#: Apart from the workbook's connector's binlog client id (``capture.mysql_server_id`` + n).
_SERVER_ID_OFFSET = 500


def raw_spec(params: WorkbookParams, spec: ConnectorSpec) -> ConnectorSpec:
    """The unflattened twin of one of the workbook's connectors (PostgreSQL or MySQL/MariaDB).

    Raises:
        CaptureError: for an engine without a Hudi Debezium source.
    """
    if spec.engine not in RAW_ENGINES:
        raise CaptureError(
            f"Failed to configure the raw change topics of {spec.name}: Hudi 0.14.0 has no Debezium "
            f"source for {spec.engine} (only {', '.join(RAW_ENGINES)})"
        )
    name = raw_connector_name(params, spec.source)
    config = {k: v for k, v in spec.config.items() if not k.startswith(_DROPPED)}
    config |= {
        "name": name,
        "topic.prefix": raw_topic_prefix(params),
        "custom.metric.tags": f"connector={name}",
    }
    if spec.engine == "postgres":
        config["slot.name"] = raw_slot_name(params, spec.source)
    else:
        config["database.server.id"] = str(int(spec.config["database.server.id"]) + _SERVER_ID_OFFSET)
        if "schema.history.internal.kafka.topic" in config:
            config["schema.history.internal.kafka.topic"] = f"{name}.schema-history"
    prefix = str(spec.config["topic.prefix"])
    topics = {table: raw_topic_prefix(params) + topic[len(prefix) :] for table, topic in spec.topics.items()}
    return ConnectorSpec(name, spec.engine, spec.source, config, topics)


def raw_specs(params: WorkbookParams) -> list[tuple[ConnectorSpec, ConnectorSpec]]:
    """Each workbook connector of a PostgreSQL or MySQL/MariaDB source with its unflattened twin."""
    specs = connector_specs(params, LocalSources(params).endpoints())
    return [(spec, raw_spec(params, spec)) for spec in specs if spec.engine in RAW_ENGINES]


def _snapshot_done(offset: Mapping[str, Any]) -> bool:
    """Whether a committed Debezium offset is past the initial snapshot (PostgreSQL and MySQL mark
    snapshot offsets with ``snapshot``; its last record with ``last_snapshot_record``)."""
    flag = offset.get("snapshot")
    return flag in (None, False, "false") or bool(offset.get("last_snapshot_record"))


def ensure_raw_capture(params: WorkbookParams, *, timeout_s: float = 300.0) -> list[str]:
    """Register (or update) the unflattened connectors and wait until each has caught up: its
    snapshot done and its committed offset at or after the one the workbook's connector of its
    source had when this was called.

    Returns:
        The unflattened connectors' names.

    Raises:
        CaptureError: when one fails to start (its error).
        WaitTimeoutError: naming the connectors not caught up within ``timeout_s``.
    """
    backend = open_backend(params)  # starts the local broker, worker and registry if they are down
    if not isinstance(backend, KafkaConnectRestBackend):
        raise CaptureError("Failed to register the raw change topics' connectors: they need Kafka Connect")
    pairs = raw_specs(params)
    targets: dict[str, SourcePosition | None] = {}
    for main, raw in pairs:
        backend.create_or_update(raw)
        targets[raw.name] = offset_position(backend.source_offset(main.name))
    for _, raw in pairs:
        wait_until_running(backend, raw.name, timeout_s=timeout_s)
    behind: dict[str, str] = {}

    def caught_up() -> bool:
        behind.clear()
        for _, raw in pairs:
            offset = backend.source_offset(raw.name)
            position = offset_position(offset)
            target = targets[raw.name]
            if offset is None or position is None or not _snapshot_done(offset):
                behind[raw.name] = "snapshot not done" if offset else "no offset committed yet"
            elif target is not None and not position.reaches(target):
                behind[raw.name] = f"at {position}, the workbook's connector at {target}"
        return not behind

    wait_until(
        caught_up,
        timeout_s=timeout_s,
        what="the unflattened change topics to catch up",
        interval_s=0.5,
        max_interval_s=2.0,
        detail=lambda: "; ".join(f"{n}: {why}" for n, why in behind.items()),
    )
    return [raw.name for _, raw in pairs]


def retire_raw_capture(params: WorkbookParams, *, timeout_s: float = 60.0) -> list[str]:
    """Delete the unflattened connectors and drop their PostgreSQL replication slots when nothing
    reads them any more (``silver.streamer.source`` is not ``kafka``, or the engine is ``pyspark``):
    a slot nobody reads holds the server's WAL for ever. Only on the project's own Connect worker,
    and only when it runs (a stopped worker has nothing to retire now; the next round will).

    Returns:
        The connectors deleted.

    Raises:
        WaitTimeoutError: when a slot stays active ``timeout_s`` after its connector was deleted.
    """
    wanted = params.silver.engine == "streamer" and params.silver.streamer.source == "kafka"
    if wanted or not implementations(params).local_servers or not local_worker(params):
        return []
    backend = KafkaConnectRestBackend(connect_url(params))
    try:
        names = backend.connector_names()
    except CaptureError:
        return []
    twins = [n for n in names if n.startswith(raw_connector_name(params, ""))]
    for name in twins:
        backend.delete(name)
        log.warning("Deleted connector %s: nothing reads the unflattened change topics now", name)
    slots = [
        raw_slot_name(params, s) for s, sp in params.sources.items() if engine_kind(sp.engine) == "postgres"
    ]
    if not twins or not slots:
        return twins
    stack = LocalStack(params)
    query = "SELECT slot_name, active FROM pg_replication_slots WHERE slot_name = ANY(%s)"

    def dropped() -> bool:
        with stack.connect_postgres_admin() as conn:
            rows = conn.execute(query, (slots,)).fetchall()
            for slot, active in rows:
                if not active:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            return all(not active for _, active in rows)

    wait_until(dropped, timeout_s=timeout_s, what=f"the replication slots {slots} to be released")
    return twins
