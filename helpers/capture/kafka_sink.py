"""The local-kafka profile's Bronze sink: Spark Structured Streaming from Kafka into Bronze files.

:class:`BronzeSink` runs ``python -m helpers.capture.kafka_sink <directory>`` (``<state_dir>/kafka/
bronze-sink/``): one long-lived local Spark session whose streaming query reads every change topic
of the project (``<project>.<database>.<table>``; heartbeats, schema changes and schema history
are other topics) with Spark's official Kafka source (``spark-sql-kafka-0-10``, jar set
``kafka-spark``) and hands each micro-batch to :class:`helpers.bronze.writer.BronzeWriter`, the
writer the embedded engine uses, so both profiles' Bronze files have the same layout, names and
content (Avro or JSON lines, ``year=/month=/day=`` of the source commit time). Messages are read
by :func:`event_decoder`: the JSON converter's schema and payload, or Avro in the Confluent wire
format against the registry (Apicurio's converter, :mod:`helpers.capture.avro_events`).

Why this and not a Kafka Connect S3 sink: Aiven's S3 sink needs Confluent's Avro converter at run
time, which Central does not serve, and writes only to S3; Spark's Kafka source is the official,
well-kept consumer with offsets in a checkpoint. Delivery:

* Spark writes a micro-batch's offset range to the checkpoint's offset log *before* the batch
  runs, and marks it done in the commit log after :meth:`BronzeWriter.write_batch` returned (each
  file durable). A sink killed mid-batch runs the same batch again on restart: the same events in
  the same order, hence the same file names (topic, first and last log position, digest of the
  events) and bytes; a replayed file replaces its identical self. Nothing is lost, nothing doubled.
  ``replayed_batches`` in the status counts such batches.
* Events Debezium sends twice (a Connect worker or broker killed before its offsets were
  committed) land twice in Bronze, in another file; Silver orders by log position and takes each
  position once. :func:`helpers.checks.parity.bronze_vs_source` shows them as ``redelivered``.
* ``failOnDataLoss``: offsets that vanished from the broker stop the query with Spark's message,
  never a silent skip.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from helpers.bronze.events import BronzeEvent, event_from_json, position_of
from helpers.bronze.writer import BronzeWriter
from helpers.capture.avro_events import AvroEventDecoder
from helpers.capture.ccompat import SchemaRegistryClient
from helpers.capture.owner import claim_bronze
from helpers.capture.topics import end_offsets
from helpers.errors import CaptureError
from helpers.lake_store import is_s3, lake_uri
from helpers.local.kafka import bootstrap_servers
from helpers.local.registry import CONVERTER_CLASS, LocalRegistry
from helpers.local.s3 import local_s3_connection
from helpers.params import WorkbookParams
from helpers.proc import ModuleJob, read_status, stop_on_signal, write_status
from helpers.spark import build_spark_session

__all__ = [
    "HOLD_ENV",
    "BronzeSink",
    "Decoder",
    "SinkBatch",
    "event_decoder",
    "main",
    "merge_batch",
    "topic_pattern",
]

#: Turns a message value of a topic into its change event (``None`` for a tombstone).
Decoder = Callable[[str, bytes | None], BronzeEvent | None]

#: The jar set of Spark's Kafka source (``scripts/jars.tsv``).
JAR_SET = "kafka-spark"
#: Crash tests: seconds each micro-batch waits after writing its files, before Spark commits it.
HOLD_ENV = "WORKBOOK_FAULT_SINK_HOLD_S"


def event_decoder(params: WorkbookParams) -> Decoder:
    """How the sink reads a message: Avro in the wire format against the local schema registry
    when the connectors use Apicurio's converter, else the JSON converter's schema and payload."""
    if params.capture.kafka_connect.converter == CONVERTER_CLASS:
        return AvroEventDecoder(SchemaRegistryClient(LocalRegistry(params).ccompat_url))
    return event_from_json


def topic_pattern(project: str) -> str:
    """The change topics of a project, as a (Java and Python) regular expression matched against
    the whole topic name: ``<project>.<database or schema>.<table>``."""
    return rf"{re.escape(project)}\.[^.]+\.[^.]+"


@dataclass
class BronzeSink(ModuleJob):
    """Start, stop and watch the Bronze sink of a parameter set (:class:`helpers.proc.ModuleJob`).

    Attributes:
        params: the workbook parameters (``local.kafka`` for the sink's memory).
    """

    params: WorkbookParams
    module: ClassVar[str] = "helpers.capture.kafka_sink"
    pid_name: ClassVar[str] = "sink.pid"
    log_name: ClassVar[str] = "sink.log"

    @property
    def directory(self) -> Path:
        return self.params.state_path / "kafka" / "bronze-sink"

    def start(self) -> int:
        """Start the sink unless it runs; returns its pid (the query starts a few seconds later:
        ``status()["state"]`` turns ``RUNNING``). The counters go on from the last run's.

        Raises:
            CaptureError: when another state directory's capture wrote the Bronze zone
                (:func:`helpers.capture.owner.claim_bronze`: this state's broker holds other topics).
        """
        bronze = lake_uri(self.params, self.params.lake.bronze)
        claim_bronze(
            bronze, self.params.state_path, local_s3_connection(self.params) if is_s3(bronze) else None
        )
        previous = read_status(self.directory)
        return self.launch(
            self.params.model_dump(mode="json", by_alias=True),
            {**previous, "state": "STARTING", "error": None},
        )

    def wait_running(self, timeout_s: float = 120.0) -> dict[str, Any]:
        """Wait until the streaming query runs.

        Raises:
            CaptureError: when the sink fails or dies first (with its error or log's end), or
                does not run within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.status()
            if st.get("state") == "RUNNING":
                return st
            if st.get("state") in ("FAILED", "DEAD"):
                raise CaptureError(
                    f"Failed to start the Bronze sink ({self.directory}): "
                    f"{st.get('error') or self._log_tail()}"
                )
            if time.monotonic() > deadline:
                raise CaptureError(
                    f"Failed to start the Bronze sink in {timeout_s:.0f} s; its log {self.log_file} "
                    f"ends: {self._log_tail()}"
                )
            time.sleep(0.5)

    def written_to_end(self, topic: str) -> bool:
        """Whether the sink has written (durably, batch committed) every record the Kafka topic
        holds now, in every partition."""
        written = self.status().get("offsets") or {}
        ends = end_offsets(bootstrap_servers(self.params), topic)
        return all(int(written.get(f"{topic}/{p}", 0)) >= end for p, end in ends.items())

    def _log_tail(self) -> str:
        try:
            return " | ".join(self.log_file.read_text(errors="replace").strip().splitlines()[-5:])
        except FileNotFoundError:
            return "(no log)"


@dataclass
class SinkBatch:
    """What one micro-batch wrote (for the status)."""

    events: int
    tombstones: int
    files: int
    snapshot_rows: dict[str, int]
    streaming_topics: set[str]
    offsets: dict[str, int]  # "topic/partition" -> next offset
    last_position: list[Any] | None


def write_records(
    writer: BronzeWriter,
    records: list[tuple[str, int, int, bytes | None]],
    decode: Decoder = event_from_json,
) -> SinkBatch:
    """Write one micro-batch's records ``(topic, partition, offset, value)`` to Bronze, each value
    read by ``decode`` (:func:`event_decoder`).

    The records are put in log order (topic, partition, offset) first, so that a replayed batch
    gives the very same files.

    Raises:
        BronzeError: for a value that is not a JSON-converted change event (naming the topic), or
            when writing fails; the batch is then not committed and runs again.
    """
    records = sorted(records, key=lambda r: (r[0], r[1], r[2]))
    events: list[BronzeEvent] = []
    tombstones = 0
    offsets: dict[str, int] = {}
    for topic, partition, offset, value in records:
        offsets[f"{topic}/{partition}"] = offset + 1
        event = decode(topic, value)
        if event is None:
            tombstones += 1
            continue
        events.append(event)
    files = writer.write_batch(events) if events else []
    snapshot: dict[str, int] = {}
    for f in files:
        if f.snapshot_rows:
            snapshot[f.topic] = snapshot.get(f.topic, 0) + f.snapshot_rows
    streaming = {e.topic for e in events if e.value.get("__op") not in ("r", None)}
    return SinkBatch(
        events=len(events),
        tombstones=tombstones,
        files=len(files),
        snapshot_rows=snapshot,
        streaming_topics=streaming,
        offsets=offsets,
        last_position=list(position_of(events[-1].value)) if events else None,
    )


def merge_batch(status: dict[str, Any], batch_id: int, batch: SinkBatch) -> None:
    """Add a committed batch to the status counters (a replayed batch is counted once more in
    ``replayed_batches`` only)."""
    if batch_id <= int(status.get("last_batch_id", -1)):
        status["replayed_batches"] = int(status.get("replayed_batches", 0)) + 1
        return
    status["last_batch_id"] = batch_id
    status["batches"] = int(status.get("batches", 0)) + 1
    status["events"] = int(status.get("events", 0)) + batch.events
    status["tombstones"] = int(status.get("tombstones", 0)) + batch.tombstones
    status["files"] = int(status.get("files", 0)) + batch.files
    snap = dict(status.get("snapshot_rows") or {})
    for topic, n in batch.snapshot_rows.items():
        snap[topic] = snap.get(topic, 0) + n
    status["snapshot_rows"] = snap
    status["streaming_topics"] = sorted(set(status.get("streaming_topics") or []) | batch.streaming_topics)
    status["offsets"] = {**(status.get("offsets") or {}), **batch.offsets}
    if batch.last_position is not None:
        status["last_position"] = batch.last_position


_COUNTERS = ("batches", "events", "tombstones", "files", "replayed_batches")


def run(directory: Path) -> int:
    """The sink process: build the session, run the query until SIGTERM; 0 unless it failed."""
    params = WorkbookParams.model_validate(json.loads((directory / "config.json").read_text()))
    previous = read_status(directory)
    status: dict[str, Any] = {k: previous.get(k, 0) for k in _COUNTERS}
    for key in ("snapshot_rows", "streaming_topics", "offsets", "last_position", "last_batch_id"):
        if previous.get(key) is not None:
            status[key] = previous[key]
    status.update(state="STARTING", pid=os.getpid(), error=None, started_at=time.time())
    write_status(directory, status)
    stopping = stop_on_signal()
    kafka = params.local.kafka
    spark_params = params.spark.model_copy(
        update={"driver_memory": kafka.sink_driver_memory, "catalog": "none"}
    )
    try:
        spark = build_spark_session(
            params.model_copy(update={"spark": spark_params}),
            app_name="workbook-bronze-sink",
            conf={"spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"},
            extra_jar_sets=(JAR_SET,),
        )
    except Exception as exc:  # noqa: BLE001 - shown in the status, the process ends
        status.update(state="FAILED", error=f"{type(exc).__name__}: {exc}")
        write_status(directory, status)
        return 1
    writer = BronzeWriter(lake_uri(params, params.lake.bronze), params.capture.bronze_format)
    decode = event_decoder(params)
    # crash tests only: hold each batch this long after its files are written and before Spark
    # commits it, so that a kill lands in that window for certain
    hold_s = float(os.environ.get(HOLD_ENV, "0") or 0)

    def handle(frame: Any, batch_id: int) -> None:
        rows = frame.select("topic", "partition", "offset", "value").collect()
        records = [
            (r.topic, int(r.partition), int(r.offset), None if r.value is None else bytes(r.value))
            for r in rows
        ]
        batch = write_records(writer, records, decode)
        merge_batch(status, batch_id, batch)
        status["state"] = "RUNNING"
        write_status(directory, status)
        if hold_s and batch.events:  # fault injection: a crash here makes Spark run the batch again
            time.sleep(hold_s)

    query = start_query(spark, params, directory / "checkpoint", handle)
    status["state"] = "RUNNING"
    write_status(directory, status)
    error: str | None = None
    while not stopping.is_set():
        try:
            query.awaitTermination(0.5)  # raises the query's exception once it failed
        except Exception as exc:  # noqa: BLE001 - the failure goes to the status
            error = _query_error(exc)
            break
        if not query.isActive:
            failure = query.exception()
            error = _query_error(failure) if failure is not None else "the streaming query stopped"
            break
    if query.isActive:
        query.stop()
    status.update(state="FAILED" if error else "STOPPED", error=error)
    write_status(directory, status)
    spark.stop()
    return 1 if error else 0


def start_query(
    spark: Any, params: WorkbookParams, checkpoint: Path, handle: Callable[[Any, int], None]
) -> Any:
    """Start the streaming query: every change topic of ``params.project`` from the earliest
    offset (or the checkpoint's), micro-batches of at most ``local.kafka.sink_max_records``
    records every ``capture.flush_interval_ms``."""
    kafka = params.local.kafka
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers(params))
        .option("subscribePattern", topic_pattern(params.project))
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "true")
        .option("maxOffsetsPerTrigger", str(kafka.sink_max_records))
        # find the topics the connectors create as their snapshots start within seconds
        .option("kafka.metadata.max.age.ms", "2000")
        .load()
    )
    return (
        stream.writeStream.queryName("bronze-sink")
        .foreachBatch(handle)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{params.capture.flush_interval_ms} milliseconds")
        .start()
    )


_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?\w*(?:Error|Exception): .+$", re.M)


def _query_error(exc: Any) -> str:
    """The cause of a failed query in one line: the last ``...Error: message`` line of the
    exception's text (the Python handler's own error inside Spark's wrapper), else its start."""
    text = str(exc.desc) if hasattr(exc, "desc") else str(exc)
    causes = [m.group(0) for m in _ERROR_LINE.finditer(text)]
    return " ".join((causes[-1] if causes else text).split())[:2000]


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m helpers.capture.kafka_sink <directory>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m helpers.capture.kafka_sink <directory>", file=sys.stderr)
        return 2
    return run(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
