"""Notebook-facing capture functions: build, register, watch (see :mod:`helpers.capture`)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.bronze.read import bronze_files
from helpers.capture.backends import (
    ConnectorBackend,
    EmbeddedBackend,
    KafkaConnectRestBackend,
    MskConnectBackend,
    wait_until_running,
)
from helpers.capture.connectors import (
    UNAVAILABLE_VALUE,
    ConnectorSpec,
    mysql_source_config,
    postgres_source_config,
    sqlserver_source_config,
)
from helpers.errors import CaptureError
from helpers.naming import connector_name, publication_name, slot_name
from helpers.params import WorkbookParams

__all__ = [
    "SourceEndpoint",
    "aws_endpoints",
    "bronze_frame",
    "bronze_vs_source",
    "wait_for_snapshots",
    "capture_status_frame",
    "connector_specs",
    "local_endpoints",
    "open_backend",
    "register_connectors",
    "stop_connectors",
]

_ENGINE_KIND = {"postgres": "postgres", "mariadb": "mysql", "mysql": "mysql", "sqlserver": "sqlserver"}


@dataclass(frozen=True)
class SourceEndpoint:
    """Where and as whom a connector logs in (``password`` may be a config-provider reference)."""

    host: str
    port: int
    user: str
    password: str

    def __repr__(self) -> str:
        return (
            f"SourceEndpoint(host={self.host!r}, port={self.port}, user={self.user!r}, password='********')"
        )


def local_endpoints(params: WorkbookParams) -> dict[str, SourceEndpoint]:
    """Endpoints of the local stack, passwords from the state directory's credentials file."""
    from helpers.sources.local.stack import APP_USER, LOOPBACK, LocalStack

    creds = LocalStack(params).credentials
    return {
        "postgres": SourceEndpoint(
            LOOPBACK, params.local.postgres.port, APP_USER, creds.postgres_password.get_secret_value()
        ),
        "mysql": SourceEndpoint(
            LOOPBACK, params.local.mariadb.port, APP_USER, creds.mariadb_password.get_secret_value()
        ),
    }


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
    specs = []
    for source, sp in params.sources.items():
        kind = _ENGINE_KIND[sp.engine]
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
                    schema_history={
                        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory"
                    },
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
    return specs


def open_backend(params: WorkbookParams, *, boto3_session: Any = None) -> ConnectorBackend:
    """The backend ``params.capture.backend`` names."""
    cap = params.capture
    if cap.backend == "embedded":
        return EmbeddedBackend(
            state_dir=params.state_path,
            bronze_root=params.path(params.lake.bronze),
            bronze_format=cap.bronze_format,
            flush_interval_ms=cap.flush_interval_ms,
            max_batch_size=cap.max_batch_size,
        )
    if cap.backend == "kafka_connect":
        return KafkaConnectRestBackend(cap.kafka_connect.url)
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

    Returns:
        :func:`capture_status_frame` of the connectors.

    Raises:
        CaptureError: naming the connector and its error, when one fails or does not start.
    """
    for spec in specs:
        backend.create_or_update(spec)
    for spec in specs:
        wait_until_running(backend, spec.name, timeout_s=timeout_s)
    return capture_status_frame(backend, specs)


def stop_connectors(backend: ConnectorBackend, specs: Sequence[ConnectorSpec]) -> None:
    """Pause every connector (offsets kept)."""
    for spec in specs:
        backend.pause(spec.name)


def capture_status_frame(backend: ConnectorBackend, specs: Sequence[ConnectorSpec]) -> pd.DataFrame:
    """One row per connector and table: state, snapshot rows so far, events, error."""
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
                    "snapshot_rows": snap.get(topic.split(".", 1)[-1], 0),
                    "events": st.details.get("events"),
                    "error": st.error,
                }
            )
    return pd.DataFrame(rows)


def bronze_frame(bronze_root: str | Path, topics: Sequence[str]) -> pd.DataFrame:
    """Bronze files per topic: count, bytes, newest file and its age."""
    rows = []
    now = time.time()
    for topic in topics:
        files = bronze_files(bronze_root, topic)
        newest = max(files, key=lambda p: p.stat().st_mtime) if files else None
        rows.append(
            {
                "topic": topic,
                "files": len(files),
                "bytes": sum(p.stat().st_size for p in files),
                "partitions": len({p.parent for p in files}),
                "newest": newest.relative_to(Path(bronze_root)).as_posix() if newest else None,
                "newest_age_s": round(now - newest.stat().st_mtime, 1) if newest else None,
            }
        )
    return pd.DataFrame(rows)


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def aws_endpoints(params: WorkbookParams, sources: Any) -> dict[str, SourceEndpoint]:
    """Endpoints of the RDS sources for Kafka/MSK Connect: host and user from the Secrets Manager
    secret, the password as a config-provider reference (``${secretsmanager:<id>:password}``) that
    the Connect workers resolve, so no password is ever in a connector configuration."""
    if params.aws is None:
        raise CaptureError("Failed to resolve RDS endpoints: the parameters have no 'aws' section")
    out = {}
    ids = {
        "postgres": params.aws.secrets.postgres,
        "mysql": params.aws.secrets.mysql,
        "sqlserver": params.aws.secrets.sqlserver,
    }
    for engine, secret_id in ids.items():
        secret = sources._secret(engine)  # noqa: SLF001 - same package family, read-only
        host, port = sources._address(engine, secret)  # noqa: SLF001
        out[engine] = SourceEndpoint(host, port, secret.username, f"${{secretsmanager:{secret_id}:password}}")
    return out


def _primary_key(stack: Any, engine: str, database: str, schema: str, table: str) -> list[str]:
    if engine == "postgres":
        with stack.connect_postgres(database) as conn:
            rows = conn.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisprimary "
                "ORDER BY array_position(i.indkey, a.attnum)",
                (f'"{schema}"."{table}"',),
            ).fetchall()
        return [r[0] for r in rows]
    conn = stack.connect_mariadb(database)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT column_name FROM information_schema.key_column_usage WHERE table_schema = %s "
                "AND table_name = %s AND constraint_name = 'PRIMARY' ORDER BY ordinal_position",
                (database, table),
            )
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def _source_table(stack: Any, engine: str, database: str, schema: str, table: str) -> list[dict[str, Any]]:
    if engine == "postgres":
        from psycopg import sql
        from psycopg.rows import dict_row

        with stack.connect_postgres(database) as conn:
            cur = conn.cursor(row_factory=dict_row)
            return list(cur.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, table))))
    import pymysql

    from helpers.sources.sql import quote_mariadb

    conn = stack.connect_mariadb(database)
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM {quote_mariadb(table)}")  # noqa: S608 - quoted identifier
            return list(cur.fetchall())
    finally:
        conn.close()


def _comparable(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def rows_equal_source(
    source: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]], key: Sequence[str]
) -> bool:
    """Whether ``rows`` (from Bronze or Silver) hold exactly the source rows: the same keys, every
    source column equal (aware timestamps as naive UTC, JSON text compared parsed).

    Args:
        source: the source table's rows (dicts from the database driver).
        rows: the rows to check (one per key).
        key: primary key columns.
    """
    import json

    columns = list(source[0]) if source else []
    parsed = {c for c in columns if any(isinstance(r[c], dict | list) for r in source)}

    def cell(row: dict[str, Any], c: str) -> Any:
        value = row.get(c)
        return json.loads(value) if c in parsed and isinstance(value, str) else _comparable(value)

    want = {tuple(r[k] for k in key): tuple(_comparable(r[c]) for c in columns) for r in source}
    have = {tuple(r[k] for k in key): tuple(cell(r, c) for c in columns) for r in rows}
    return len(have) == len(rows) and want == have


_UNAVAILABLE_BYTES = UNAVAILABLE_VALUE.encode()


def bronze_vs_source(
    params: WorkbookParams, specs: Sequence[ConnectorSpec], *, wait_s: float = 0.0
) -> pd.DataFrame:
    """Replay Bronze (latest event per primary key by log position, deletes dropped; a TOAST
    placeholder keeps the key's previous value, as Silver does) and compare it with each local
    source table, row by row.

    Capture is asynchronous: changes committed just before the call may still be on their way
    (a worker restarting after a crash first starts its JVM). ``wait_s`` re-checks the tables
    that differ, once a second, for up to that long before reporting them.

    Returns:
        One row per table: ``source_rows``, ``bronze_rows`` (replayed), ``events``, ``equal``
        (same keys and every column equal; JSON columns compared parsed).
    """
    deadline = time.monotonic() + wait_s
    while True:
        frame = _bronze_vs_source_once(params, specs)
        if frame["equal"].all() or time.monotonic() >= deadline:
            return frame
        time.sleep(1.0)


def _bronze_vs_source_once(params: WorkbookParams, specs: Sequence[ConnectorSpec]) -> pd.DataFrame:

    from helpers.bronze.events import position_of
    from helpers.bronze.read import read_bronze
    from helpers.sources.local.stack import LocalStack

    stack = LocalStack(params)
    bronze = params.path(params.lake.bronze)
    rows = []
    for spec in specs:
        sp = params.source(spec.name.split("-", 1)[1])
        engine = _ENGINE_KIND[sp.engine]
        for table_key, topic in spec.topics.items():
            table = table_key.split(".", 1)[1]
            source = _source_table(stack, engine, sp.database, sp.namespace, table)
            pk = _primary_key(stack, engine, sp.database, sp.namespace, table)
            events = read_bronze(bronze, topic)
            latest: dict[tuple[Any, ...], dict[str, Any]] = {}
            for event in sorted(events, key=position_of):
                key = tuple(event[c] for c in pk)
                before = latest.get(key)
                if before is not None:  # an unchanged TOASTed value keeps the one it had
                    event = {
                        c: before.get(c) if v == UNAVAILABLE_VALUE or v == _UNAVAILABLE_BYTES else v
                        for c, v in event.items()
                    }
                latest[key] = event
            replayed = [e for e in latest.values() if e.get("__deleted") != "true"]
            rows.append(
                {
                    "topic": topic,
                    "source_rows": len(source),
                    "bronze_rows": len(replayed),
                    "events": len(events),
                    "equal": rows_equal_source(source, replayed, pk),
                }
            )
    return pd.DataFrame(rows)


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
        backend: the backend (its status must report ``snapshot_rows``, as the embedded one does).
        specs: the connectors.
        expected_rows: per topic, the source's row count.
        timeout_s: give up after this long.

    Returns:
        :func:`capture_status_frame` at the end.

    Raises:
        CaptureError: when a connector fails or the timeout passes (naming the tables behind).
    """
    from tqdm.auto import tqdm

    total = sum(expected_rows.values())
    deadline = time.monotonic() + timeout_s
    with tqdm(total=total, desc="initial snapshot", unit="rows") as bar:
        while True:
            done = 0
            behind = []
            for spec in specs:
                st = backend.status(spec.name)
                if st.state == "FAILED":
                    raise CaptureError(f"Failed to snapshot with connector {spec.name}: {st.error}")
                snap = dict(st.details.get("snapshot_rows") or {})
                if st.details.get("streaming"):  # past its snapshot (the source may have grown since)
                    done += sum(expected_rows.get(t, 0) for t in spec.topics.values())
                    continue
                for topic in spec.topics.values():
                    got = snap.get(topic.split(".", 1)[-1], 0)
                    want = expected_rows.get(topic, 0)
                    done += min(got, want)
                    if got < want:
                        behind.append(f"{topic} {got}/{want}")
            bar.update(done - bar.n)
            if not behind:
                return capture_status_frame(backend, specs)
            if time.monotonic() > deadline:
                raise CaptureError(
                    f"Failed to finish the initial snapshot in {timeout_s:.0f} s: {', '.join(behind)}"
                )
            time.sleep(0.5)
