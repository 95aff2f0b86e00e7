"""What HoodieStreamer is told for ``silver.streamer.source: kafka`` (local-kafka profile): which
tables Hudi's own Debezium Kafka sources read (``PostgresDebeziumSource``, ``MysqlDebeziumSource``)
from the unflattened topics of :mod:`helpers.capture.raw_topics`, their Kafka and registry
properties, their ``--checkpoint`` when the engine or source was switched, and when a table moves
to its Bronze files for good (a second schema version on its topic). The SQL transform that turns
their rows into Bronze's columns: :mod:`helpers.silver.streamer_config`."""

from __future__ import annotations

import logging
from pathlib import Path

from helpers.capture.ccompat import SchemaRegistryClient
from helpers.capture.topics import end_offsets
from helpers.engines import engine_kind
from helpers.local.kafka import bootstrap_servers
from helpers.local.registry import LocalRegistry
from helpers.naming import raw_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.proc import replace_text
from helpers.silver.state import TableState

log = logging.getLogger(__name__)

__all__ = [
    "DEBEZIUM_DESERIALIZER",
    "kafka_checkpoint",
    "kafka_properties",
    "moved_to_bronze",
    "reads_kafka",
]

#: Apicurio's Kafka deserializer (the registry's converter archive, jar set ``registry``): it reads
#: the Confluent wire format the workbook's converter writes, as Confluent's would.
DEBEZIUM_DESERIALIZER = "io.apicurio.registry.serde.avro.AvroKafkaDeserializer"


def reads_kafka(params: WorkbookParams, table: SilverTableParams) -> bool:
    """Whether HoodieStreamer reads the table from its Debezium topic (``silver.streamer.source:
    kafka`` and a source Hudi has a Debezium source for), not from Bronze."""
    return params.silver.streamer.source == "kafka" and engine_kind(params.source(table.source).engine) in (
        "postgres",
        "mysql",
    )


def _reads_topic(params: WorkbookParams, table: SilverTableParams, state: TableState) -> bool:
    """Whether the table's newest streamer commit read its Debezium topic."""
    return str(state.streamer_checkpoint or "").startswith(f"{raw_topic(params, table)},")


def _from_the_start(params: WorkbookParams, table: SilverTableParams) -> str:
    """A Kafka checkpoint at offset 0 of every partition of the table's topic (offsets below a
    partition's first are read from its first)."""
    topic = raw_topic(params, table)
    partitions = sorted(end_offsets(bootstrap_servers(params), topic)) or [0]
    return f"{topic}," + ",".join(f"{p}:0" for p in partitions)


def moved_to_bronze(params: WorkbookParams, table: SilverTableParams, conf: Path) -> bool:
    """Whether a table of ``silver.streamer.source: kafka`` is read from its Bronze files instead,
    for good: once its topic's subject has a second schema version. Hudi 0.14.0's Debezium sources
    convert every message of a batch with the subject's newest schema, so a batch that holds
    messages of an older one fails ("ArrayIndexOutOfBoundsException: Index 6", measured after a
    column was added); Bronze files carry their own schemas, which the Bronze source reads
    (:func:`helpers.silver.streamer_resume.reread_checkpoint`). The move is recorded in
    ``<table>.from-bronze`` and is for good: the subject keeps its older versions."""
    marker = conf / f"{table.name}.from-bronze"
    if marker.exists():
        return True
    subject = f"{raw_topic(params, table)}-value"
    registry = SchemaRegistryClient(LocalRegistry(params).ccompat_url)
    if subject not in registry.subjects():
        return False
    versions = registry.versions(subject)
    if len(versions) < 2:
        return False
    replace_text(
        marker,
        f"{subject} has schema versions {versions}: Hudi 0.14.0's Debezium source reads every message "
        "with the newest, so this table is read from its Bronze files (docs/streamer.md)\n",
    )
    log.warning("Silver table %s: its topic's schema changed, read from Bronze from now on", table.name)
    return True


def kafka_checkpoint(params: WorkbookParams, table: SilverTableParams, state: TableState) -> str | None:
    """``--checkpoint`` of a table read from its Debezium topic: None for a new table (the topic
    from its start, ``auto.offset.reset``) or one this source wrote last (its own checkpoint), else
    the whole topic (the engine or the source was switched). Reading the topic again applies
    nothing twice: an upsert by key ordered by log position leaves the newer row."""
    if state.is_new or _reads_topic(params, table, state):
        return None
    return _from_the_start(params, table)


def kafka_properties(params: WorkbookParams, table: SilverTableParams) -> dict[str, str]:
    """What Hudi's Debezium source of a table is told: the broker, its topic, the registry's
    Confluent-compatible subject for the envelope's schema, and Apicurio's deserializer in place of
    Confluent's (not on Maven Central) with the converter's own settings (Confluent wire format)."""
    topic = raw_topic(params, table)
    registry = LocalRegistry(params)
    return {
        "bootstrap.servers": bootstrap_servers(params),
        "auto.offset.reset": "earliest",
        "group.id": f"{params.project}-streamer",
        "hoodie.deltastreamer.source.kafka.topic": topic,
        "hoodie.deltastreamer.source.kafka.value.deserializer.class": DEBEZIUM_DESERIALIZER,
        "hoodie.deltastreamer.schemaprovider.registry.url": (
            f"{registry.ccompat_url}/subjects/{topic}-value/versions/latest"
        ),
        # 0.14.0 looks the converter up without a default ("Property ...schemaconverter not found",
        # measured): empty is none
        "hoodie.streamer.schemaprovider.registry.schemaconverter": "",
        **registry.converter_settings(),
    }
