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
* a table the PySpark engine wrote last resumes from its checkpoint (:func:`resume_checkpoint`);
* a Bronze schema change makes the streamer read again from the first file with the new schema
  (:func:`reread_checkpoint`), so no column is dropped by an older reader schema.

How it runs: :mod:`helpers.silver.streamer`.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro

from helpers.bronze.events import avro_schema_from_connect
from helpers.bronze.store import BronzeObject
from helpers.errors import HudiError
from helpers.hudi.api import write_options
from helpers.hudi.config import DELETE_MARKER_FIELD, SOFT_DELETE_FIELD
from helpers.lake_store import join, lake_uri
from helpers.naming import silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.state import TableState, read_table_state
from helpers.silver.tables import (
    POSITION_COLUMN,
    bronze_store,
    pending_bronze,
    position_fields,
    position_sql,
    silver_write_options,
    table_config,
)

__all__ = [
    "CHANGE_OPS",
    "replace_text",
    "reader_schema",
    "reread_checkpoint",
    "StreamerTable",
    "resume_checkpoint",
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
        source_class: ``AvroDFSSource`` or ``JsonDFSSource``.
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

    def plan_entry(self) -> dict[str, Any]:
        """The table in a plan of :mod:`helpers.silver.streamer_driver` (locally and on EMR)."""
        return {
            "name": self.name,
            "source_schema": self.source_schema,
            "target_schema": self.target_schema,
            "transform_sql": self.transform_sql,
            "args": self.args(),
        }

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
            "--schemaprovider-class",
            "org.apache.hudi.utilities.schema.FilebasedSchemaProvider",
            "--transformer-class",
            "org.apache.hudi.utilities.transform.SqlQueryBasedTransformer",
        ]
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
    name = f"`{field['name']}`"
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
    schema: Mapping[str, Any], engine: str, positions: tuple[str, ...], delete_mode: str, *, jsonl: bool
) -> str:
    """The table's SQL transform over the Bronze rows (``<SRC>``): every data and Debezium column
    but ``__deleted``, ``_cdc_position`` and the delete marker; TRUNCATE and re-snapshot markers
    dropped. For JSON-lines Bronze the rows are the converter's ``payload``, converted to their
    Silver types here (:func:`_json_field`).

    Raises:
        HudiError: for an unknown source engine.
    """
    columns = []
    for field in schema["fields"]:
        name = field["name"]
        if not _AVRO_NAME.fullmatch(name):  # Avro's own rule: the name is safe between backticks
            raise HudiError(f"Failed to build the streamer's SQL transform: {name!r} is no Avro field name")
        if name == "__deleted":
            continue
        sql = _json_field(field)[1] if jsonl else f"`{name}`"
        columns.append(sql if sql == f"`{name}`" else f"{sql} AS `{name}`")
    marker = SOFT_DELETE_FIELD if delete_mode == "soft" else DELETE_MARKER_FIELD
    ops = ", ".join(f"'{o}'" for o in CHANGE_OPS)
    source = "(SELECT payload.* FROM <SRC>) AS bronze" if jsonl else "<SRC>"
    # names checked against Avro's rule above, everything else is the workbook's own text
    select = f"SELECT {', '.join(columns)}, {position_sql(engine, positions)} AS `{POSITION_COLUMN}`, "
    deleted = f"coalesce(`__deleted` = 'true', false) AS `{marker}`"
    return f"{select}{deleted} FROM {source} WHERE `__op` IN ({ops})"


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


def resume_checkpoint(
    params: WorkbookParams, table: SilverTableParams, state: TableState | None = None
) -> str | None:
    """``--checkpoint`` for a table the PySpark engine wrote last (``silver.engine`` switched to
    streamer), else None: the newest millisecond up to which every Bronze file is taken, so the
    streamer goes on where the PySpark engine stopped. Re-reading a few files below it applies
    nothing twice: an upsert by key with the log position as ordering field leaves the same row.
    """
    state = state or read_table_state(table_config(params, table).base_path)
    if state.is_new or state.streamer_checkpoint:
        return None
    store = bronze_store(params)
    listing = store.list(silver_topic(params, table))
    pending, _ = pending_bronze(params, table, store, state)
    if not listing:
        return "0"
    if pending:
        return str(min(int(o.modified * 1000) for o in pending) - 1)
    return str(max(int(o.modified * 1000) for o in listing))


def _file_schema(store: Any, obj: BronzeObject, topic: str) -> dict[str, Any]:
    """A Bronze file's Avro schema (JSON lines: derived from its first line's Connect schema)."""
    data = store.lake.read(obj.uri)
    if obj.is_jsonl:
        first = json.loads(data.split(b"\n", 1)[0])
        return avro_schema_from_connect(first.get("schema") or {}, topic)
    schema: dict[str, Any] = fastavro.reader(io.BytesIO(data)).writer_schema  # type: ignore[assignment]
    return schema


def _bronze_files(params: WorkbookParams, table: SilverTableParams) -> tuple[Any, list[BronzeObject]]:
    """The Bronze store and the table's files, newest first (by modification time)."""
    store = bronze_store(params)
    files = sorted(store.list(silver_topic(params, table)), key=lambda f: (f.modified, f.uri), reverse=True)
    return store, files


def _is_marker(schema: Mapping[str, Any]) -> bool:
    """Whether a Bronze file's schema is a TRUNCATE / re-snapshot marker's: no column of the table,
    only Debezium's ``__`` fields."""
    return all(str(f["name"]).startswith("__") for f in schema.get("fields", []))


def _data_schemas(
    params: WorkbookParams, table: SilverTableParams
) -> Iterator[tuple[BronzeObject, dict[str, Any]]]:
    """The table's Bronze files with their schemas, newest first, marker files left out."""
    store, files = _bronze_files(params, table)
    topic = silver_topic(params, table)
    for obj in files:
        schema = _file_schema(store, obj, topic)
        if not _is_marker(schema):
            yield obj, schema


def _newest_bronze_schema(params: WorkbookParams, table: SilverTableParams) -> dict[str, Any] | None:
    """The Avro schema of the newest Bronze file of the table's topic that holds changes (a
    TRUNCATE or re-snapshot marker's file has none of the table's columns); None: no such file."""
    return next((schema for _, schema in _data_schemas(params, table)), None)


def reread_checkpoint(
    params: WorkbookParams,
    table: SilverTableParams,
    conf: Path,
    schema_text: str,
    state: TableState | None = None,
) -> str | None:
    """``--checkpoint`` that makes HoodieStreamer read Bronze again from the first file with a new
    schema, else None.

    The reader schema is the newest Bronze file's when the configuration is generated. A file with a
    new column that lands between two generations is read with the older reader schema, which
    drops the column without a word (measured: a venue inserted with a new ``venueurl`` reached
    Silver without it). So when the schema about to be written differs from the one the table was
    last read with (``<table>.source.avsc``), the files from just before the first one with the new
    schema are read again (from the streamer's own checkpoint if that is earlier). The value is kept in
    ``<table>.reread`` until a commit of the table records it as its ``--checkpoint``. Reading a
    suffix of Bronze again applies nothing twice (an upsert by key ordered by log position).
    """
    marker = conf / f"{table.name}.reread"
    state = state or read_table_state(table_config(params, table).base_path)
    if marker.exists():
        value = marker.read_text(encoding="utf-8").strip()
        if state.streamer_reset != value:
            return value
        marker.unlink()
    previous = conf / f"{table.name}.source.avsc"
    if state.is_new or not state.streamer_checkpoint or not previous.exists():
        return None
    if previous.read_text(encoding="utf-8") == schema_text:
        return None
    newest: dict[str, Any] | None = None
    first = None
    for obj, schema in _data_schemas(params, table):  # newest first: back to the first file with it
        newest = newest or schema
        if schema != newest:
            break
        first = obj
    if first is None:
        return None
    # never after the streamer's own checkpoint: files between would be skipped. A round in flight
    # may take the new file with the old reader schema even when the checkpoint is before it yet
    # (measured: the round that took venue's new file had started before the schema was written)
    value = str(min(int(first.modified * 1000) - 1, int(state.streamer_checkpoint)))
    replace_text(marker, value)
    return value


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
            if params.environment != "aws"
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


def replace_text(path: Path, text: str) -> None:
    """Write a file whole or not at all (a temporary file renamed over it): a streamer that reads
    it meanwhile sees the old text or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


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
        schema = _newest_bronze_schema(params, table)
        if schema is None:
            continue
        config = table_config(params, table)
        engine = params.source(table.source).engine
        sql = transform_sql(schema, engine, position_fields(params, table), config.delete_mode, jsonl=jsonl)
        source_schema = _json_source_schema(schema) if jsonl else schema
        schema_text = json.dumps(source_schema, indent=2)
        state = read_table_state(config.base_path)  # once per table and generation
        checkpoint = reread_checkpoint(params, table, conf, schema_text, state) or resume_checkpoint(
            params, table, state
        )
        replace_text(conf / f"{table.name}.reader.avsc", json.dumps(reader_schema(source_schema), indent=2))
        replace_text(conf / f"{table.name}.source.avsc", schema_text)
        schema_file = _uri(join(where, f"{table.name}.source.avsc"))
        target_file = _uri(join(where, f"{table.name}.target.avsc"))
        values = dict(tables[table.name])
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
                source_class="org.apache.hudi.utilities.sources."
                + ("JsonDFSSource" if jsonl else "AvroDFSSource"),
                checkpoint=checkpoint,
            )
        )
    return out
