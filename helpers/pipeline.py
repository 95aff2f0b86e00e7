"""The whole local pipeline as one thing: bring it up, stop it in order, and report its state.

This is the composition root: it may use every stage, and no stage imports it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from helpers.capture.backends import ConnectorStatus, stop_all_workers
from helpers.capture.kafka_sink import BronzeSink
from helpers.capture.offsets import stored_position
from helpers.capture.register import connector_specs, open_backend, register_connectors
from helpers.checks.divergence import DIFFERS, check_divergence, last_checks
from helpers.environments import implementations
from helpers.errors import CaptureError, ParamsError, WorkbookError
from helpers.hudi.timeline import completed_instants
from helpers.local.kafka import LocalKafka, local_worker
from helpers.local.registry import LocalRegistry
from helpers.local.s3 import LocalS3Server
from helpers.local.spark_cluster import LocalSparkCluster
from helpers.local.stack import LocalStack
from helpers.naming import connector_name
from helpers.params import SilverTableParams, WorkbookParams
from helpers.poll import wait_until
from helpers.proc import ServerStatus
from helpers.query.timetravel import as_of, is_soft_deleted, plain_value
from helpers.silver.ingest import ingest_all
from helpers.silver.job import SilverJob, pending_lag
from helpers.silver.tableref import RecordKey, key_values, silver_table, table_base_path
from helpers.sources.api import LocalSources
from helpers.sources.edits import source_rows

__all__ = [
    "PipelineStatus",
    "ensure_pipeline",
    "pipeline_status",
    "server_statuses",
    "start_servers",
    "stop_all",
    "wait_for_silver",
]


def start_servers(params: WorkbookParams) -> list[ServerStatus]:
    """Start the local servers (idempotent): PostgreSQL, MariaDB and the metastore (not Trino: the
    query engine starts it when it opens, :func:`helpers.query.engines.open_engine`); the Spark
    standalone cluster when ``spark.master`` names it (:mod:`helpers.local.spark_cluster`); the schema
    registry when ``local.registry.enabled`` (its storage is in that PostgreSQL); the local S3
    server of the lake when ``local.s3.enabled``; and, when the capture backend is
    ``kafka_connect`` with the local worker, the Kafka broker and Connect worker, and the Bronze
    sink that lands their topics in Bronze (:mod:`helpers.capture.kafka_sink`).

    Returns:
        The status of every server.
    """
    statuses = LocalStack(params).start()  # the cluster and the lake's S3 server too, when wanted
    cluster = LocalSparkCluster(params)
    if cluster.wanted:
        statuses += cluster.status()
    if params.local.registry.enabled:
        statuses.append(LocalRegistry(params).start())
    if params.local.s3.enabled:  # started above, before the sink, which may write Bronze to it
        statuses.append(LocalS3Server(params).status())
    if local_worker(params):
        statuses += LocalKafka(params).start()
        BronzeSink(params).start()
    return statuses


def server_statuses(params: WorkbookParams) -> list[ServerStatus]:
    """The status of every local server of the parameters (read only; the registry and the S3
    server also when they run although not enabled)."""
    statuses = LocalStack(params).status()
    cluster = LocalSparkCluster(params)
    if cluster.wanted or any(cluster.pids().values()):
        statuses += cluster.status()
    registry = LocalRegistry(params)
    if params.local.registry.enabled or registry.pid() is not None:
        statuses.append(registry.status())
    s3 = LocalS3Server(params)
    if params.local.s3.enabled or s3.pid() is not None:
        statuses.append(s3.status())
    if local_worker(params):
        statuses += LocalKafka(params).status()
    return statuses


def ensure_pipeline(params: WorkbookParams, *, timeout_s: float = 600.0) -> pd.DataFrame:
    """Start what the later stages need (idempotent): the local servers, the sample data, CDC and
    the capture workers (registered if not running).

    Returns:
        The capture status frame.

    Raises:
        ParamsError: outside the local environments (``local``, ``ci``).
    """
    if not implementations(params).local_servers:
        raise ParamsError(
            f"Failed to start the local pipeline: the {params.environment} environment has no local servers"
        )
    start_servers(params)
    sources = LocalSources(params)
    sources.load_sample_data()
    sources.enable_cdc()
    specs = connector_specs(params, LocalSources(params).endpoints())
    return register_connectors(open_backend(params), specs, timeout_s=timeout_s)


def stop_all(params: WorkbookParams) -> list[ServerStatus]:
    """Stop the Silver job, then the capture workers (the Kafka Connect worker and broker of the
    ``kafka_connect`` backend), then the schema registry (whatever ``local.registry.enabled`` says,
    if it runs), then Trino, the metastore and both servers, then the local S3 server (if it runs:
    nothing writes to the lake any more).

    Returns:
        The status of every server afterwards (the registry's and S3's when enabled).
    """
    SilverJob(params).stop()
    stop_all_workers(params.state_path)
    BronzeSink(params).stop()
    kafka = LocalKafka(params).stop() if local_worker(params) else []
    registry = LocalRegistry(params).stop()
    cluster = LocalSparkCluster(params)
    spark = cluster.stop() if cluster.wanted or any(cluster.pids().values()) else []
    statuses = kafka + spark + LocalStack(params).stop()
    s3 = LocalS3Server(params).stop()
    if params.local.registry.enabled:
        statuses.append(registry)
    if params.local.s3.enabled:
        statuses.append(s3)
    return statuses


class PipelineStatus(dict[str, pd.DataFrame]):
    """``servers``, ``connectors``, ``silver_job`` and ``lag`` tables; ``str()`` prints them all."""

    def __str__(self) -> str:
        parts = []
        for name, frame in self.items():
            body = frame.to_string(index=False) if len(frame) else "(none)"
            notes = "".join(f"\n{note}" for note in frame.attrs.get("notes", []))
            parts.append(f"== {name}\n{body}{notes}")
        return "\n\n".join(parts)


_DIVERGENCE_SHOWN = [
    "table", "result", "source_rows", "silver_rows", "source_position", "checked_s_ago", "checked_by", "fix",
]  # fmt: skip


def pipeline_status(params: WorkbookParams, *, check: bool = True) -> PipelineStatus:
    """The state of every part of the local pipeline, read without changing anything.

    * ``servers``: PostgreSQL, MariaDB, the metastore and, when enabled or running, the schema
      registry and the local S3 server (state, pid, port, version);
    * ``connectors``: per source, the connector's state, events and files written, the
      last position captured and the offset it resumes from;
    * ``silver_job``: the continuous Silver job's state, loops, last error;
    * ``lag``: per Silver table, Bronze files not yet in Silver and the age of the oldest;
    * ``divergence``: per Silver table, the newest check of Silver against its source (row counts
      at a known position, or notebook 07's digests) with its age, and for a table that differs
      the command that repairs it (:mod:`helpers.checks.divergence`). With ``check``, the count
      check runs first (waiting up to 15 s for Silver to reach the source's position while the
      Silver job runs); without, the newest recorded checks are shown.
    """
    servers = pd.DataFrame(
        [
            {"server": s.server, "state": s.state, "pid": s.pid, "port": s.port, "version": s.version}
            for s in server_statuses(params)
        ]
    )
    backend = open_backend(params)
    connectors = []
    for source in params.sources:
        name = connector_name(params, source)
        try:
            st = backend.status(name)
        except CaptureError as exc:  # a Kafka Connect worker that is down: say so, show the rest
            st = ConnectorStatus(name, "UNKNOWN", str(exc))
        resumes = stored_position(params, name)
        connectors.append(
            {
                "connector": name,
                "state": st.state,
                "events": st.details.get("events"),
                "files": st.details.get("files"),
                "last_position": st.details.get("last_position"),
                "resumes_from": None if resumes is None else str(resumes),
                "error": st.error,
            }
        )
    job = SilverJob(params).status()
    unchecked = ""
    if check:
        try:
            check_divergence(params, wait_s=15.0 if job.get("state") == "RUNNING" else 0.0)
        except WorkbookError as exc:  # a source that is down: say so, show the last checks
            unchecked = f"not checked now: {exc}"
    divergence = last_checks(params)
    silver_job = pd.DataFrame(
        [
            {
                "state": job.get("state", "NOT STARTED"),
                "pid": job.get("pid"),
                "loops": job.get("loops"),
                "held_by": "; ".join(job.get("held_by") or []) or None,
                "updated_s_ago": _age(job.get("updated_at")),
                "error": job.get("error"),
            }
        ]
    )
    lag = pd.DataFrame([{"table": table, **figures} for table, figures in pending_lag(params).items()])
    frames = {"servers": servers, "connectors": pd.DataFrame(connectors)}
    if local_worker(params):
        sink = BronzeSink(params).status()
        frames["bronze_sink"] = pd.DataFrame(
            [
                {
                    "state": sink.get("state", "NOT STARTED"),
                    "pid": sink.get("pid"),
                    "batches": sink.get("batches"),
                    "events": sink.get("events"),
                    "files": sink.get("files"),
                    "replayed_batches": sink.get("replayed_batches"),
                    "updated_s_ago": _age(sink.get("updated_at")),
                    "error": sink.get("error"),
                }
            ]
        )
    frames["silver_job"], frames["lag"] = silver_job, lag
    frames["divergence"] = divergence[
        [
            "table",
            "result",
            "source_rows",
            "silver_rows",
            "source_position",
            "checked_s_ago",
            "checked_by",
            "fix",
        ]
    ]
    differs = divergence[divergence["result"] == DIFFERS]
    notes = [f"{r.table}: {r.note}; repair: {r.fix}" for r in differs.itertuples()]
    frames["divergence"].attrs["notes"] = [unchecked, *notes] if unchecked else notes
    return PipelineStatus(**frames)


def _age(at: Any) -> float | None:
    return None if at is None else round(time.time() - float(at), 1)


def _naive_utc(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _matches(source: Sequence[Mapping[str, Any]], silver: pd.DataFrame) -> bool:
    rows = silver.to_dict("records")
    live = [r for r in rows if not is_soft_deleted(r)]
    if not source:
        return not live
    if len(live) != 1:
        return False
    have = live[0]
    return all(_naive_utc(plain_value(have.get(c))) == _naive_utc(v) for c, v in source[0].items())


def wait_for_silver(
    params: WorkbookParams,
    tables: Sequence[str | SilverTableParams],
    key: RecordKey,
    *,
    timeout_s: float = 60.0,
    ingest: bool = True,
) -> pd.DataFrame:
    """Wait until each Silver table shows the record as its source holds it now (or its absence).

    Composition, not a query: it may run ingestion and reads the source, so it lives here and
    ``helpers.query`` stays read-only (an import contract keeps it so).

    Capture brings the change to Bronze within about a second; Silver takes it in through the
    continuous job or, with ``ingest``, through :func:`helpers.silver.ingest.ingest_all` of these
    tables (safe beside the job: both take the table lock and each Bronze file once). With
    ``silver.engine: streamer`` the continuous streamer is the tables' one writer (it holds their
    locks), so this only waits.

    Args:
        params: Workbook parameters (local environment).
        tables: Silver table names (same source table, e.g. ``["sale", "sale_mor"]``).
        key: The record key.
        timeout_s: How long to wait.
        ingest: Run one-shot ingestion of the tables still waited for, between checks.

    Returns:
        One row per table: ``table`` and ``instant``, the latest completed commit once the table
        showed the change (reading as of it gives the changed record).

    Raises:
        WaitTimeoutError: naming the tables that did not show the change in time.
    """
    specs = [silver_table(params, t) for t in tables]
    ingest = ingest and params.silver.engine == "pyspark"
    want = source_rows(params, specs[0].source, specs[0].table, key_values(specs[0], key))
    found: dict[str, str] = {}

    def pending() -> list[SilverTableParams]:
        return [s for s in specs if s.name not in found]

    def caught_up() -> bool:
        if ingest:
            ingest_all(params, [s.name for s in pending()])
        for spec in pending():
            latest = completed_instants(table_base_path(params, spec))
            if latest and _matches(want, as_of(params, spec, latest[-1].timestamp, key)):
                found[spec.name] = latest[-1].timestamp
        return not pending()

    wait_until(
        caught_up,
        timeout_s=timeout_s,
        what=f"the change of key {key!r} in Silver",
        interval_s=0.3,
        max_interval_s=1.0,
        detail=lambda: (
            f"table(s) {[s.name for s in pending()]} do not show it; check capture (notebook 02) and "
            "the Silver job (notebook 03)"
        ),
    )
    return pd.DataFrame([{"table": s.name, "instant": found[s.name]} for s in specs])


# ------------------------------------------------------------------------------ several tables
