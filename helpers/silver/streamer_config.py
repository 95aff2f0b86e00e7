"""What HoodieStreamer is told for ``silver.engine: streamer``: the properties files the posts
wrote by hand, one base file and one file per table (``include=base.properties``), generated from
the same parameters and write options as the PySpark engine
(:func:`helpers.silver.tables.silver_write_options`), so both engines write the same tables:

* the source is the table's Bronze topic folder (``AvroDFSSource``, or ``JsonDFSSource`` for
  JSON-lines Bronze), its schema the newest Bronze file's (``FilebasedSchemaProvider``);
* one SQL transform (``SqlQueryBasedTransformer``, :mod:`helpers.silver.streamer_sql`) adds the
  log position and the delete marker; a second properties file per table
  (``<table>.truncate.properties``) holds the transform of a round with a TRUNCATE or re-snapshot
  marker, which the workbook's driver uses (:mod:`helpers.silver.streamer_driver`);
* JSON-lines Bronze carries decimals as JSON numbers: HoodieStreamer 0.14.0's JSON-to-Avro
  converter would store a ``bytes`` decimal's text as its bytes (10.5 becomes 8252411.41), so the
  source schema reads them as strings and the transform casts them to their exact decimal type;
* a table the PySpark engine wrote last resumes from its checkpoint, and a Bronze schema change
  makes the streamer read again from the first file with the new schema, so no column is dropped
  by an older reader schema (:mod:`helpers.silver.streamer_resume`);
* with ``silver.streamer.source: kafka`` (local-kafka), the PostgreSQL and MySQL/MariaDB tables are
  read by Hudi's Debezium Kafka sources from Debezium's unflattened topics instead: the same
  transform over their rows renamed to Bronze's columns (:func:`transform_sql`, flavour
  ``debezium``), so every mode writes the same Silver (:mod:`helpers.silver.streamer_kafka`).

How it runs: :mod:`helpers.silver.streamer`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.engines import engine_kind
from helpers.environments import implementations
from helpers.hudi.api import write_options
from helpers.hudi.config import SOFT_DELETE_FIELD
from helpers.lake_store import join, lake_uri
from helpers.local.kafka import bootstrap_servers
from helpers.naming import raw_topic, silver_topic
from helpers.params import WorkbookParams
from helpers.proc import replace_text
from helpers.silver.state import read_table_state
from helpers.silver.streamer_kafka import kafka_checkpoint, kafka_properties, moved_to_bronze, reads_kafka
from helpers.silver.streamer_resume import newest_bronze_schema, reread_checkpoint, resume_checkpoint
from helpers.silver.streamer_sql import (
    MARKER_ERROR,
    TransformShape,
    json_source_schema,
    reader_schema,
    transform_sql,
    truncate_sql,
    void_view,
)
from helpers.silver.tables import POSITION_COLUMN, position_fields, silver_write_options, table_config

__all__ = [
    "StreamerTable",
    "streamer_config",
    "write_streamer_config",
]


#: Options of the PySpark engine's writer that HoodieStreamer 0.14.0 does not take from a file:
#: the table version and upgrade (0.14.0 writes version 6, the only one it knows), Hive sync (the
#: workbook syncs after a run with Hudi's HiveSyncTool, as for the PySpark engine), the commit
#: metadata prefix of the workbook's own checkpoints, and the write operation (``--op``).
_NOT_STREAMER = (
    "hoodie.write.table.version",
    "hoodie.write.auto.upgrade",
    "hoodie.datasource.hive_sync.",
    "hoodie.datasource.meta.sync.",
    "hoodie.datasource.write.commitmeta.key.prefix",
    "hoodie.datasource.write.operation",
    "hoodie.write.set.null.for.missing.columns",
)


@dataclass(frozen=True)
class StreamerTable:
    """One Silver table's HoodieStreamer run.

    Attributes:
        name: the Silver table.
        properties: its properties file (``include=base.properties``).
        source_schema: the Bronze schema file (``.avsc``), strict: what the target schema is
            derived from; HoodieStreamer reads Bronze with ``<table>.reader.avsc``
            (:func:`reader_schema`).
        target_schema: the target schema file the driver writes (Hudi's conversion of the
            transform's output).
        transform_sql: the SQL transform (``<SRC>`` is the source rows).
        base_path: the Hudi table.
        table_type: ``COPY_ON_WRITE`` or ``MERGE_ON_READ``.
        source_class: ``AvroDFSSource`` or ``JsonDFSSource`` (Bronze), ``PostgresDebeziumSource``
            or ``MysqlDebeziumSource`` (``silver.streamer.source: kafka``).
        checkpoint: ``--checkpoint`` (None: resume from the table's last commit).
        kafka: a Debezium source's ``bootstrap`` servers and ``topic`` (None: Bronze).
        truncate_properties: the properties file of a round that holds a TRUNCATE or re-snapshot
            marker (:func:`truncate_sql`; None: markers are dropped).
        soft_field: the soft-delete flag (None: hard deletes).
    """

    name: str
    properties: str
    source_schema: str
    target_schema: str
    transform_sql: str
    base_path: str
    table_type: str
    source_class: str
    checkpoint: str | None = None
    kafka: Mapping[str, str] | None = None
    truncate_properties: str | None = None
    soft_field: str | None = None

    def plan_entry(self) -> dict[str, Any]:
        """The table in a plan of :mod:`helpers.silver.streamer_driver` (locally and on EMR)."""
        return (
            {
                "name": self.name,
                "source_schema": self.source_schema,
                "target_schema": self.target_schema,
                "transform_sql": self.transform_sql,
                "args": self.args(),
            }
            | self._kafka_entry()
            | self._markers_entry()
        )

    def _markers_entry(self) -> dict[str, Any]:
        """What the driver needs to run a round that holds a marker again with
        :func:`truncate_sql`: the error the first try fails with, the properties file, the view
        of the stored rows, the table and its soft-delete flag."""
        if self.truncate_properties is None:
            return {}
        return {
            "markers": {
                "error": MARKER_ERROR,
                "properties": self.truncate_properties,
                "view": void_view(self.name),
                "base_path": _uri(self.base_path),
                "soft_field": self.soft_field,
            }
        }

    def _kafka_entry(self) -> dict[str, Any]:
        """A table read from a Kafka topic: no target schema file (HoodieStreamer takes the transformed
        rows' own) and what the driver needs to see whether the topic has news."""
        if self.kafka is None:
            return {}
        return {"target_schema": "", "base_path": _uri(self.base_path), "kafka": dict(self.kafka)}

    @property
    def reads_bronze(self) -> bool:
        """Whether the table is read from Bronze files (else from a Debezium topic, :attr:`kafka`)."""
        return self.kafka is None

    def args(self) -> list[str]:
        """HoodieStreamer's arguments (what follows the jar in ``spark-submit``), run-once: the
        continuous job repeats the run (:mod:`helpers.silver.streamer_driver` says why)."""
        out = [
            "--props",
            _uri(self.properties),
            "--target-base-path",
            _uri(self.base_path),
            "--target-table",
            self.name,
            "--table-type",
            self.table_type,
            "--op",
            "UPSERT",
            "--source-class",
            self.source_class,
            "--source-ordering-field",
            POSITION_COLUMN,
            "--payload-class",
            "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
        ]
        if self.reads_bronze:
            # a Debezium source takes its envelope's schema from the registry itself; given a schema
            # provider, 0.14.0 converts the flattened rows with the envelope's schema and fails
            # ("null value for (non-nullable) Source at Envelope.source", measured)
            out += ["--schemaprovider-class", "org.apache.hudi.utilities.schema.FilebasedSchemaProvider"]
        out += ["--transformer-class", "org.apache.hudi.utilities.transform.SqlQueryBasedTransformer"]
        if self.checkpoint is not None:
            out += ["--checkpoint", self.checkpoint]
        return out


def _uri(path: str) -> str:
    return path if "://" in path else f"file://{path}"


def streamer_config(params: WorkbookParams) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The properties: the keys every table shares (``base.properties``) and each table's own.

    Raises:
        HudiError: from the write options (a bad table setting).
    """
    per_table: dict[str, dict[str, str]] = {}
    for table in params.silver.tables:
        options = write_options(silver_write_options(params, table))
        dropped = (
            _NOT_STREAMER
            if implementations(params).silver != "emr"
            else tuple(k for k in _NOT_STREAMER if not k.startswith("hoodie.datasource.hive_sync."))
        )  # on EMR the DeltaStreamer steps sync to Glue themselves (--enable-sync)
        options = {k: v for k, v in options.items() if not k.startswith(dropped)}
        options["hoodie.payload.ordering.field"] = options["hoodie.datasource.write.precombine.field"]
        # on by default in 0.14.0: it turns the reader schema's bytes decimals into fixed, which
        # then cannot read Bronze's bytes ("AvroTypeException: Found bytes, expecting union")
        options["hoodie.streamer.schemaprovider.spark_avro_post_processor.enable"] = "false"
        options["hoodie.streamer.source.dfs.root"] = join(
            lake_uri(params, params.lake.bronze), silver_topic(params, table)
        )
        per_table[table.name] = dict(sorted(options.items()))
    shared = set.intersection(*(set(o.items()) for o in per_table.values())) if per_table else set()
    base = dict(sorted(shared))
    tables = {name: {k: v for k, v in o.items() if base.get(k) != v} for name, o in per_table.items()}
    return base, tables


def _properties_text(values: Mapping[str, str], header: str, include: str = "") -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    if include:
        lines.append(f"include={include}")
    lines += [f"{key}={value}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def write_streamer_config(
    params: WorkbookParams, directory: Path | None = None, *, location: str | None = None
) -> list[StreamerTable]:
    """Write ``base.properties``, one ``<table>.properties`` and one ``<table>.source.avsc`` per table
    with Bronze files, into ``directory`` (default ``<state_dir>/streamer/conf``).

    Args:
        params: workbook parameters.
        directory: where the files are written.
        location: where they will be read from, as the files name each other (default:
            ``directory``; on EMR the S3 folder they are uploaded to).

    Returns:
        The tables with Bronze files (a table without any has nothing to ingest yet).

    Raises:
        HudiError: for a bad table setting.
    """
    conf = directory or params.state_path / "streamer" / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    where = location or str(conf)
    base, tables = streamer_config(params)
    header = (
        "Generated by the workbook from params (helpers.silver.streamer); edits are overwritten.\n"
        "HoodieStreamer 0.14.0 (DeltaStreamer): shared by every table's file."
    )
    replace_text(conf / "base.properties", _properties_text(base, header))
    jsonl = params.capture.bronze_format == "jsonl"
    local = implementations(params).silver != "emr"
    out = []
    for table in params.silver.tables:
        schema = newest_bronze_schema(params, table)
        if schema is None:
            continue
        config = table_config(params, table)
        engine = params.source(table.source).engine
        state = read_table_state(config.base_path)  # once per table and generation
        values = dict(tables[table.name])
        if reads_kafka(params, table) and not moved_to_bronze(params, table, conf):
            flavour = "debezium"
            kind = "Mysql" if engine_kind(engine) == "mysql" else "Postgres"
            source_class = f"org.apache.hudi.utilities.sources.debezium.{kind}DebeziumSource"
            checkpoint = kafka_checkpoint(params, table, state)
            values.pop("hoodie.streamer.source.dfs.root", None)
            values |= kafka_properties(params, table)
        else:
            flavour = "jsonl" if jsonl else "avro"
            source_class = "org.apache.hudi.utilities.sources." + (
                "JsonDFSSource" if jsonl else "AvroDFSSource"
            )
        shape = TransformShape(
            schema,
            engine,
            position_fields(params, table),
            config.delete_mode,
            flavour=flavour,
            table=table.table,
            min_key=None if table.min_key is None else (table.record_key[0], table.min_key),
        )
        # the workbook's driver applies markers (a round that holds one runs again with the
        # truncate file); EMR's DeltaStreamer steps and Hudi's Debezium sources drop them, and so
        # does a table ordered by a column of its own, whose markers have no position to cut at
        # (as in the PySpark engine: docs/streamer.md, "Limits")
        applies = local and flavour != "debezium" and not table.ordering
        sql = transform_sql(shape, markers="fail" if applies else "drop")
        source_schema = json_source_schema(schema) if jsonl else schema
        schema_text = json.dumps(source_schema, indent=2)
        if flavour != "debezium":
            checkpoint = reread_checkpoint(params, table, conf, schema_text, state) or resume_checkpoint(
                params, table, state
            )
        replace_text(conf / f"{table.name}.reader.avsc", json.dumps(reader_schema(source_schema), indent=2))
        replace_text(conf / f"{table.name}.source.avsc", schema_text)
        schema_file = _uri(join(where, f"{table.name}.source.avsc"))
        target_file = _uri(join(where, f"{table.name}.target.avsc"))
        if flavour != "debezium":
            values["hoodie.streamer.schemaprovider.source.schema.file"] = _uri(
                join(where, f"{table.name}.reader.avsc")
            )
            values["hoodie.streamer.schemaprovider.target.schema.file"] = target_file
        values["hoodie.streamer.transformer.sql"] = sql
        props = conf / f"{table.name}.properties"
        replace_text(
            props,
            _properties_text(values, f"Silver table {table.name}: HoodieStreamer 0.14.0", "base.properties"),
        )
        truncate = None
        if applies:
            replace_text(
                conf / f"{table.name}.truncate.properties",
                _properties_text(
                    {"hoodie.streamer.transformer.sql": truncate_sql(shape, view=void_view(table.name))},
                    f"Silver table {table.name}: a round that holds a TRUNCATE or re-snapshot marker",
                    props.name,
                ),
            )
            truncate = _uri(join(where, f"{table.name}.truncate.properties"))
        out.append(
            StreamerTable(
                name=table.name,
                properties=_uri(join(where, props.name)),
                source_schema=schema_file,
                target_schema=target_file,
                transform_sql=sql,
                base_path=config.base_path,
                table_type=table.table_type,
                source_class=source_class,
                checkpoint=checkpoint,
                kafka=(
                    {"bootstrap": bootstrap_servers(params), "topic": raw_topic(params, table)}
                    if flavour == "debezium"
                    else None
                ),
                truncate_properties=truncate,
                soft_field=SOFT_DELETE_FIELD if config.delete_mode == "soft" else None,
            )
        )
    return out
