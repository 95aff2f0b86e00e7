"""What HoodieStreamer is told for ``silver.engine: streamer``: the properties files the posts
wrote by hand, one base file and one file per table (``include=base.properties``), generated from
the same parameters and write options as the PySpark engine
(:func:`helpers.silver.tables.silver_write_options`), so both engines write the same tables:

* the source is the table's Bronze topic folder (``AvroDFSSource``, or ``JsonDFSSource`` for
  JSON-lines Bronze), its schema the newest Bronze file's (``FilebasedSchemaProvider``);
* one SQL transform (``SqlQueryBasedTransformer``) adds the log position ``_cdc_position``
  (:func:`helpers.silver.tables.position_sql`, the ordering field, compared with the stored row by
  ``DefaultHoodieRecordPayload``) and the delete marker: ``_hoodie_is_deleted`` in hard mode, so a
  delete really deletes, or a boolean ``__deleted`` in soft mode; it drops TRUNCATE and re-snapshot
  markers, which HoodieStreamer cannot apply (``docs/streamer.md``, "Limits");
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
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.engines import engine_kind, quote_spark, spark_string
from helpers.environments import implementations
from helpers.errors import HudiError
from helpers.hudi.api import write_options
from helpers.hudi.config import DELETE_MARKER_FIELD, SOFT_DELETE_FIELD
from helpers.lake_store import join, lake_uri
from helpers.local.kafka import bootstrap_servers
from helpers.naming import raw_topic, silver_topic
from helpers.params import WorkbookParams
from helpers.proc import replace_text
from helpers.silver.state import read_table_state
from helpers.silver.streamer_kafka import kafka_checkpoint, kafka_properties, moved_to_bronze, reads_kafka
from helpers.silver.streamer_resume import newest_bronze_schema, reread_checkpoint, resume_checkpoint
from helpers.silver.tables import (
    POSITION_COLUMN,
    position_fields,
    position_sql,
    silver_write_options,
    table_config,
)

__all__ = [
    "CHANGE_OPS",
    "reader_schema",
    "StreamerTable",
    "streamer_config",
    "transform_sql",
    "write_streamer_config",
]

#: The streamer's change operations; TRUNCATE (``t``) and re-snapshot markers are dropped.
CHANGE_OPS = ("c", "u", "d", "r")

_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

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

    def plan_entry(self) -> dict[str, Any]:
        """The table in a plan of :mod:`helpers.silver.streamer_driver` (locally and on EMR)."""
        return {
            "name": self.name,
            "source_schema": self.source_schema,
            "target_schema": self.target_schema,
            "transform_sql": self.transform_sql,
            "args": self.args(),
        } | self._kafka_entry()

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


def _avro_type(field_type: Any) -> Any:
    """The non-null branch of a field's type."""
    if isinstance(field_type, list):
        branches = [b for b in field_type if b != "null"]
        return branches[0] if len(branches) == 1 else field_type
    return field_type


def _is_decimal(field_type: Any) -> bool:
    inner = _avro_type(field_type)
    return isinstance(inner, dict) and inner.get("logicalType") == "decimal"


def _json_field(field: Mapping[str, Any]) -> tuple[Any, str]:
    """How a field of JSON-lines Bronze is read and turned into its Silver type: the type in the
    source schema and the SQL expression. With a transformer, HoodieStreamer 0.14.0 reads JSON
    through Spark's JSON reader with the source schema, which takes a number for a timestamp as
    epoch *seconds* (Debezium writes milli- or microseconds: measured, listing.listtime came out
    after year 9999) and cannot take a number for a date. So temporal values are read as the numbers
    (or, zoned, the text) they are and converted in SQL; decimals are read as their text and cast
    exactly (the JSON-to-Avro path without a transformer would keep a ``bytes`` decimal's text as
    its bytes instead)."""
    name = quote_spark(field["name"])
    inner = _avro_type(field["type"])
    optional = isinstance(field["type"], list)
    logical = inner.get("logicalType") if isinstance(inner, dict) else None
    zoned = isinstance(inner, dict) and inner.get("connect.name") == "zoned"
    if logical == "decimal":
        exact = f"DECIMAL({int(inner['precision'])}, {int(inner.get('scale', 0))})"
        return "string", f"CAST({name} AS {exact})"
    if zoned:
        return "string", f"to_timestamp({name})"
    conversions = {
        "date": ("int", f"date_from_unix_date({name})"),
        "timestamp-millis": ("long", f"timestamp_millis({name})"),
        "timestamp-micros": ("long", f"timestamp_micros({name})"),
    }
    if logical in conversions:
        plain, sql = conversions[logical]
        return (["null", plain] if optional else plain), sql
    return field["type"], name


def transform_sql(
    schema: Mapping[str, Any],
    engine: str,
    positions: tuple[str, ...],
    delete_mode: str,
    *,
    flavour: str = "avro",
    table: str = "",
    min_key: tuple[str, int] | None = None,
) -> str:
    """The table's SQL transform over the source rows (``<SRC>``): every data and Debezium column
    of the Bronze ``schema`` but ``__deleted``, ``_cdc_position`` and the delete marker; TRUNCATE and
    re-snapshot markers dropped. ``flavour`` is what the source rows are:

    * ``avro``: Avro Bronze rows, as they are;
    * ``jsonl``: JSON-lines Bronze, the converter's ``payload``, converted to their Silver types
      (:func:`_json_field`);
    * ``debezium``: the rows of Hudi's Debezium Kafka sources (``after.*`` or, for a delete,
      ``before.*``, beside Hudi's ``_change_operation_type``, ``_event_lsn``...): renamed to the
      Bronze names first (:func:`_debezium_rows`, ``table`` is the source table's name), then
      converted as JSON lines are (Debezium's own numbers for dates and timestamps).

    ``min_key`` (key column, lowest key) keeps a sliced table's rows only
    (:attr:`helpers.params.SilverTableParams.min_key`).

    Raises:
        HudiError: for an unknown source engine or flavour, or a field name outside Avro's rule.
    """
    if flavour not in ("avro", "jsonl", "debezium"):
        raise HudiError(f"Failed to build the streamer's SQL transform: unknown source flavour {flavour!r}")
    columns = []
    for field in schema["fields"]:
        name = field["name"]
        if not _AVRO_NAME.fullmatch(name):  # Avro's own rule, which the streamer's schemas need
            raise HudiError(f"Failed to build the streamer's SQL transform: {name!r} is no Avro field name")
        if name == "__deleted":
            continue
        quoted = quote_spark(name)
        sql = _json_field(field)[1] if flavour != "avro" else quoted
        columns.append(sql if sql == quoted else f"{sql} AS {quoted}")
    marker = SOFT_DELETE_FIELD if delete_mode == "soft" else DELETE_MARKER_FIELD
    ops = ", ".join(spark_string(o) for o in CHANGE_OPS)
    if flavour == "debezium":
        source = f"({_debezium_rows(schema, table)} FROM <SRC>) AS bronze"
    else:
        source = "(SELECT payload.* FROM <SRC>) AS bronze" if flavour == "jsonl" else "<SRC>"
    select = (
        f"SELECT {', '.join(columns)}, {position_sql(engine, positions)} AS {quote_spark(POSITION_COLUMN)}, "
    )
    deleted = f"coalesce(`__deleted` = 'true', false) AS {quote_spark(marker)}"
    where = f"`__op` IN ({ops})"
    if min_key is not None:
        column, lowest = min_key
        if not _AVRO_NAME.fullmatch(column):
            raise HudiError(f"Failed to build the streamer's SQL transform: {column!r} is no Avro field name")
        where += f" AND {quote_spark(column)} >= {int(lowest)}"
    return f"{select}{deleted} FROM {source} WHERE {where}"


#: Bronze's Debezium fields (``ExtractNewRecordState``'s ``add.fields`` with the ``__`` prefix) as the
#: columns Hudi 0.14.0's Debezium sources give (``DebeziumConstants``): the operation, the source
#: timestamp, PostgreSQL's LSN, MySQL's binlog file, position and row.
_DEBEZIUM_COLUMNS = {
    "__op": "_change_operation_type",
    "__source_ts_ms": "_event_origin_ts_ms",
    "__lsn": "_event_lsn",
    "__file": "_event_bin_file",
    "__pos": "_event_pos",
    "__row": "_event_row",
}


def _debezium_rows(schema: Mapping[str, Any], table: str) -> str:
    """``SELECT`` of the Bronze-shaped rows from a Debezium source's rows: data columns as they are,
    the Debezium fields renamed (:data:`_DEBEZIUM_COLUMNS`), ``__table`` the source table's name and
    ``__deleted`` ``'true'`` for a delete (whose row is Debezium's ``before``).

    Raises:
        HudiError: for a Bronze field the Debezium sources do not give.
    """
    if not _AVRO_NAME.fullmatch(table):
        raise HudiError(f"Failed to build the streamer's SQL transform: {table!r} is no Avro name")
    columns = []
    for field in schema["fields"]:
        name = field["name"]
        if name == "__deleted":
            columns.append(
                "CASE WHEN `_change_operation_type` = 'd' THEN 'true' ELSE 'false' END AS `__deleted`"
            )
        elif name == "__table":
            columns.append(f"{spark_string(table)} AS `__table`")
        elif name in _DEBEZIUM_COLUMNS:
            columns.append(f"{quote_spark(_DEBEZIUM_COLUMNS[name])} AS {quote_spark(name)}")
        elif name.startswith("__"):
            raise HudiError(
                f"Failed to build the streamer's SQL transform: Hudi's Debezium sources give no column "
                f"for Bronze's {name!r}"
            )
        else:
            columns.append(quote_spark(name))
    return f"SELECT {', '.join(columns)}"


def reader_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The reader schema of Bronze: ``schema`` with every field optional (``["null", T]``, default
    null), also inside the JSON envelope's ``payload``. Bronze holds files this schema's writer
    did not write: TRUNCATE and re-snapshot markers (no data columns) and files from before a
    column was added. A required field missing in such a file fails the whole read
    ("AvroTypeException: Found tickit.ecomm.date.Value, expecting tickit.ecomm.date.Value,
    missing required field year":
    measured in CI, on a topic holding a TRUNCATE marker); optional, it reads as null and the
    transform drops the marker rows. The target schema stays the strict one
    (:mod:`helpers.silver.streamer_driver`)."""

    def optional(field: Mapping[str, Any]) -> dict[str, Any]:
        kind = field["type"]
        if isinstance(kind, dict) and kind.get("type") == "record" and field["name"] == "payload":
            return {**field, "type": reader_schema(kind)}
        if isinstance(kind, list):
            branches = kind if "null" in kind else ["null", *kind]
            return {**field, "type": ["null", *[b for b in branches if b != "null"]], "default": None}
        return {**field, "type": ["null", kind], "default": None}

    return {**schema, "fields": [optional(f) for f in schema["fields"]]}


def _json_source_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The reader schema of JSON-lines Bronze: the converter's envelope, ``payload`` holding the
    row with each field as :func:`_json_field` reads it."""
    fields = []
    for field in schema["fields"]:
        read_as = _json_field(field)[0]
        if read_as == "string":
            fields.append({"name": field["name"], "type": ["null", "string"], "default": None})
        else:
            fields.append({**field, "type": read_as})
    payload = {"type": "record", "name": "payload", "fields": fields}
    return {
        "type": "record",
        "name": schema.get("name", "envelope").replace(".", "_") + "_envelope",
        "fields": [{"name": "payload", "type": payload}],
    }


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
        sql = transform_sql(
            schema,
            engine,
            position_fields(params, table),
            config.delete_mode,
            flavour=flavour,
            table=table.table,
            min_key=None if table.min_key is None else (table.record_key[0], table.min_key),
        )
        source_schema = _json_source_schema(schema) if jsonl else schema
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
            )
        )
    return out
