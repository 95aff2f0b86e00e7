"""Debezium 3.x connector configurations, as data.

One builder per source engine returns the flat ``dict[str, str]`` that Kafka Connect, MSK Connect
and the embedded engine all take, with the same event shape for every source; :func:`redacted`
masks the password wherever a configuration is shown. The event shape (fields, decimals, topic
names): ``docs/architecture.md``, "Capture and the Bronze zone".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from helpers.bronze.events import UNAVAILABLE_VALUE
from helpers.errors import CaptureError
from helpers.naming import topic_name
from helpers.sources.signals import heartbeat_query

__all__ = [
    "BINLOG_CONNECTORS",
    "ConnectorSpec",
    "NOTIFICATION_TOPIC",
    "SECRET_KEYS",
    "SNAPSHOT_POSITION",
    "TRUNCATE_MARKER",
    "flatten_transform",
    "postgres_source_config",
    "mysql_source_config",
    "sqlserver_source_config",
    "bronze_s3_sink_config",
    "redacted",
    "signal_settings",
    "UNAVAILABLE_VALUE",
]

#: Configuration keys whose values are secrets (masked by :func:`redacted`).
SECRET_KEYS = ("database.password", "aws.secret.access.key", "password")

#: Where the connectors publish Debezium's notifications (incremental snapshot progress): the
#: embedded worker records them in its status (:mod:`helpers.capture.worker`).
NOTIFICATION_TOPIC = "__debezium-notifications"

#: The workbook's transform that keeps a truncate event as a flat marker (``connect/src``).
TRUNCATE_MARKER = "workbook.connect.TruncateMarker"

#: The workbook's transform that gives an incremental snapshot's reads their log position (``connect/src``).
SNAPSHOT_POSITION = "workbook.connect.SnapshotPosition"

#: Fields ``ExtractNewRecordState`` adds per engine (source field names; the SMT prefixes ``__``).
POSITION_FIELDS: Mapping[str, tuple[str, ...]] = {
    "postgres": ("lsn",),
    "mysql": ("file", "pos", "row"),
    "sqlserver": ("change_lsn", "commit_lsn", "event_serial_no"),
}


@dataclass(frozen=True)
class ConnectorSpec:
    """A named connector configuration and the topics it produces.

    Attributes:
        name: connector name (``<project>-<source>``).
        engine: ``postgres``, ``mysql`` or ``sqlserver`` (``mysql`` also for MariaDB).
        source: source system name (``ecomm``, ``ems``, ``crm``, ``orders``).
        config: the connector configuration (strings).
        topics: topic per captured table (``schema.table`` -> topic).
    """

    name: str
    engine: str
    source: str
    config: Mapping[str, str]
    topics: Mapping[str, str]


def _require(value: str, what: str) -> str:
    if not value or any(c in value for c in "\n\r\0"):
        raise CaptureError(f"Failed to build connector configuration: {what} is empty or invalid ({value!r})")
    return value


def flatten_transform(engine: str, *, route_sqlserver: str | None = None) -> dict[str, str]:
    """The ``ExtractNewRecordState`` (and, for SQL Server, topic routing) settings.

    Args:
        engine: ``postgres``, ``mysql`` or ``sqlserver``.
        route_sqlserver: for SQL Server, ``<project>.<database>`` whose ``.<schema>.`` level is
            dropped from topic names.

    Returns:
        Connector configuration entries.
    """
    if engine not in POSITION_FIELDS:
        raise CaptureError(f"Failed to build connector configuration: unknown engine {engine!r}")
    fields = ",".join(("op", "table", *POSITION_FIELDS[engine], "source.ts_ms"))
    out = {
        # a TRUNCATE becomes a flat marker (__op = t, its log position) that unwrap passes on: unwrap
        # alone drops truncate events (the workbook's own transform, connect/src; docs/operations.md)
        "transforms": "truncate,unwrap",
        "transforms.truncate.type": TRUNCATE_MARKER,
        "transforms.truncate.add.fields": fields,
        "transforms.truncate.add.fields.prefix": "__",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
        "transforms.unwrap.add.fields": fields,
        "transforms.unwrap.add.fields.prefix": "__",
    }
    if engine == "postgres":
        # an incremental snapshot's reads come without source.lsn: the offset's LSN places them
        # (the workbook's own transform, connect/src; docs/operations.md, "Re-snapshot one table")
        out["transforms"] = "truncate,position,unwrap"
        out["transforms.position.type"] = SNAPSHOT_POSITION
        out["transforms.position.fields"] = "lsn"
    if engine == "sqlserver" and route_sqlserver:
        prefix = route_sqlserver.replace(".", r"\.")
        out["transforms"] = "truncate,unwrap,route"
        out["transforms.route.type"] = "org.apache.kafka.connect.transforms.RegexRouter"
        out["transforms.route.regex"] = rf"{prefix}\.[^.]+\.(.*)"
        out["transforms.route.replacement"] = f"{route_sqlserver}.$1"
    return out


def signal_settings(collection: str | None) -> dict[str, str]:
    """Debezium's source signalling channel on ``collection`` (``schema.table`` or
    ``database.table``; :mod:`helpers.sources.signals`) and notifications to
    :data:`NOTIFICATION_TOPIC`: how the workbook asks for an incremental snapshot of one table and
    learns it is done. None: no signalling."""
    if not collection:
        return {}
    return {
        "signal.enabled.channels": "source",
        "signal.data.collection": _require(collection, "signal data collection"),
        "notification.enabled.channels": "sink",
        "notification.sink.topic.name": NOTIFICATION_TOPIC,
    }


def _common(name: str, project: str) -> dict[str, str]:
    return {
        "name": name,
        "topic.prefix": _require(project, "topic prefix"),
        "decimal.handling.mode": "precise",
        "tombstones.on.delete": "false",
        "snapshot.mode": "initial",
        # Debezium skips truncate events by default ("t"); Silver applies them at their position
        "skipped.operations": "none",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "true",
        "value.converter.decimal.format": "NUMERIC",
        "key.converter.decimal.format": "NUMERIC",
    }


def postgres_source_config(
    *,
    name: str,
    project: str,
    host: str,
    port: int,
    user: str,
    password: str,
    database: str,
    schema: str,
    tables: Sequence[str],
    publication: str,
    slot: str,
    heartbeat_ms: int = 10_000,
    signal_table: str | None = None,
    heartbeat_table: str | None = None,
) -> ConnectorSpec:
    """PostgreSQL source through ``pgoutput`` on an existing publication.

    Debezium confirms the slot's position only as it processes a change of the publication;
    heartbeats alone do not move it. So each heartbeat updates ``heartbeat_table``
    (``heartbeat.action.query``, :func:`helpers.sources.signals.heartbeat_query`), a table of the
    publication outside ``table.include.list``: without it, while the captured tables are quiet
    the slot holds the WAL the rest of the server writes (``docs/architecture.md``, "Retention
    monitor": also why Debezium's ``lsn.flush.mode=connector_and_driver`` is not set).

    Args:
        name: connector name.
        project: topic prefix.
        host: server host.
        port: server port.
        user: replication-capable login.
        password: its password.
        database: database name.
        schema: schema of the captured tables.
        tables: table names.
        publication: publication created by notebook 01 (``publication.autocreate.mode=disabled``).
        slot: replication slot name (created by the connector, kept on stop).
        heartbeat_ms: heartbeat interval.
        signal_table: the signal table's name in ``schema`` (None: no signalling).
        heartbeat_table: the heartbeat table's name in ``schema`` (None: heartbeats write nothing).

    Returns:
        The connector spec.
    """
    if not tables:
        raise CaptureError(f"Failed to build connector {name}: no tables to capture")
    config = {
        **_common(name, project),
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": _require(host, "host"),
        "database.port": str(port),
        "database.user": _require(user, "user"),
        "database.password": password,
        "database.dbname": _require(database, "database"),
        "plugin.name": "pgoutput",
        "publication.name": _require(publication, "publication"),
        "publication.autocreate.mode": "disabled",
        "slot.name": _require(slot, "slot"),
        "slot.drop.on.stop": "false",
        "schema.include.list": _require(schema, "schema"),
        "table.include.list": ",".join(f"{schema}.{t}" for t in tables),
        "heartbeat.interval.ms": str(heartbeat_ms),
        **({"heartbeat.action.query": heartbeat_query(schema, heartbeat_table)} if heartbeat_table else {}),
        # stated, not left to the default: Silver replaces it with the stored value
        "unavailable.value.placeholder": UNAVAILABLE_VALUE,
    }
    config.update(signal_settings(signal_table and f"{schema}.{signal_table}"))
    config.update(flatten_transform("postgres"))
    topics = {f"{schema}.{t}": topic_name(project, schema, t) for t in tables}
    return ConnectorSpec(name, "postgres", name.split("-", 1)[-1], config, topics)


def mysql_source_config(
    *,
    name: str,
    project: str,
    host: str,
    port: int,
    user: str,
    password: str,
    database: str,
    tables: Sequence[str],
    server_id: int,
    schema_history: Mapping[str, str],
    connector: str = "mysql",
    signal_table: str | None = None,
) -> ConnectorSpec:
    """MySQL (or MariaDB, see the README) source reading the ROW/FULL binlog.

    Args:
        name: connector name.
        project: topic prefix.
        host: server host.
        port: server port.
        user: login with REPLICATION SLAVE / CLIENT.
        password: its password.
        database: database name (MySQL's schema level).
        tables: table names.
        server_id: binlog client id, unique among the server's replicas.
        schema_history: ``schema.history.internal*`` entries (a file locally, Kafka or S3 on AWS).
        connector: ``mysql`` (Debezium's MySQL connector, which the embedded engine also runs
            against MariaDB) or ``mariadb`` (Debezium's own MariaDB connector, same event shape).
        signal_table: the signal table's name in ``database`` (None: no signalling).

    Returns:
        The connector spec.
    """
    if not tables:
        raise CaptureError(f"Failed to build connector {name}: no tables to capture")
    if connector not in BINLOG_CONNECTORS:
        raise CaptureError(
            f"Failed to build connector {name}: unknown binlog connector {connector!r}; "
            f"use one of {sorted(BINLOG_CONNECTORS)}"
        )
    if not any(k == "schema.history.internal" for k in schema_history):
        raise CaptureError(
            f"Failed to build connector {name}: schema_history needs 'schema.history.internal'"
        )
    config = {
        **_common(name, project),
        "connector.class": BINLOG_CONNECTORS[connector],
        "database.hostname": _require(host, "host"),
        "database.port": str(port),
        "database.user": _require(user, "user"),
        "database.password": password,
        "database.server.id": str(server_id),
        "database.include.list": _require(database, "database"),
        "table.include.list": ",".join(f"{database}.{t}" for t in tables),
        "database.ssl.mode": _ssl_mode(connector, local=host in ("127.0.0.1", "localhost")),
        "include.schema.changes": "false",
        # the binlog client notices a lost server connection (a restart) and reconnects within
        # seconds instead of the default minute
        "connect.keep.alive": "true",
        "connect.keep.alive.interval.ms": "3000",
        **dict(schema_history),
        **signal_settings(signal_table and f"{database}.{signal_table}"),
    }
    config.update(flatten_transform("mysql"))
    topics = {f"{database}.{t}": topic_name(project, database, t) for t in tables}
    return ConnectorSpec(name, "mysql", name.split("-", 1)[-1], config, topics)


#: Debezium's binlog connectors by name (``capture.kafka_connect.mariadb_connector``).
BINLOG_CONNECTORS: Mapping[str, str] = {
    "mysql": "io.debezium.connector.mysql.MySqlConnector",
    "mariadb": "io.debezium.connector.mariadb.MariaDbConnector",
}


def _ssl_mode(connector: str, *, local: bool) -> str:
    # the two connectors spell the modes differently (MySQL's driver vs MariaDB's)
    if connector == "mariadb":
        return "disable" if local else "trust"
    return "disabled" if local else "preferred"


def sqlserver_source_config(
    *,
    name: str,
    project: str,
    host: str,
    port: int,
    user: str,
    password: str,
    database: str,
    schema: str,
    tables: Sequence[str],
    schema_history: Mapping[str, str],
    encrypt: bool = True,
    trust_server_certificate: bool = False,
) -> ConnectorSpec:
    """SQL Server source over the CDC tables (``sp_cdc_enable_table``, notebook 01).

    Args:
        name: connector name.
        project: topic prefix.
        host: server host.
        port: server port.
        user: login with access to the CDC tables.
        password: its password.
        database: database (``database.names``).
        schema: schema of the tables (``dbo``).
        tables: table names.
        schema_history: ``schema.history.internal*`` entries.
        encrypt: TLS to the server (RDS supports it; keep it on).
        trust_server_certificate: skip certificate validation (only for test servers).

    Returns:
        The connector spec; topics ``<project>.<database>.<table>``.
    """
    if not tables:
        raise CaptureError(f"Failed to build connector {name}: no tables to capture")
    config = {
        **_common(name, project),
        "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
        "database.hostname": _require(host, "host"),
        "database.port": str(port),
        "database.user": _require(user, "user"),
        "database.password": password,
        "database.names": _require(database, "database"),
        "table.include.list": ",".join(f"{schema}.{t}" for t in tables),
        "database.encrypt": str(encrypt).lower(),
        "database.trustServerCertificate": str(trust_server_certificate).lower(),
        "include.schema.changes": "false",
        **dict(schema_history),
    }
    config.update(flatten_transform("sqlserver", route_sqlserver=f"{project}.{database}"))
    topics = {f"{schema}.{t}": topic_name(project, database, t) for t in tables}
    return ConnectorSpec(name, "sqlserver", name.split("-", 1)[-1], config, topics)


def bronze_s3_sink_config(
    *,
    name: str,
    topics: Sequence[str],
    bucket: str,
    prefix: str,
    region: str,
    flush_size: int = 1000,
    rotate_interval_ms: int = 60_000,
) -> dict[str, str]:
    """Confluent S3 sink landing raw change events in Bronze (the Kafka worlds).

    Daily partitions by record time (``year=/month=/day=``, UTC), Avro with the schema in each
    file, and deterministic rotation: ``rotate.interval.ms`` uses record timestamps (not wall
    clock) and ``flush.size`` counts records, so a restarted task rewrites the same objects from
    the same offsets and Bronze stays exactly-once.

    Args:
        name: connector name.
        topics: topics to land.
        bucket: S3 bucket.
        prefix: key prefix of the Bronze zone (``topics.dir``).
        region: bucket region.
        flush_size: records per object at most.
        rotate_interval_ms: record-time span per object at most.

    Returns:
        The connector configuration.
    """
    if not topics:
        raise CaptureError(f"Failed to build sink {name}: no topics")
    return {
        "name": name,
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "tasks.max": "1",
        "topics": ",".join(topics),
        "s3.bucket.name": _require(bucket, "bucket"),
        "s3.region": _require(region, "region"),
        "topics.dir": prefix.strip("/"),
        "storage.class": "io.confluent.connect.s3.storage.S3Storage",
        "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
        "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        "path.format": "'year'=YYYY/'month'=MM/'day'=dd",
        "partition.duration.ms": "86400000",
        "locale": "en-US",
        "timezone": "UTC",
        "timestamp.extractor": "Record",
        "flush.size": str(flush_size),
        "rotate.interval.ms": str(rotate_interval_ms),
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "true",
        "value.converter.decimal.format": "NUMERIC",
    }


def redacted(config: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``config`` safe to show: secret values replaced by ``********``."""
    return {k: ("********" if any(k.endswith(s) for s in SECRET_KEYS) else v) for k, v in config.items()}
