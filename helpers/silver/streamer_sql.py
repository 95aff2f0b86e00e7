"""The SQL transform HoodieStreamer runs over a Silver table's Bronze rows
(``SqlQueryBasedTransformer``), and the reader schemas it reads Bronze with; the properties that
carry them: :mod:`helpers.silver.streamer_config`.

The transform adds the log position ``_cdc_position`` (:func:`helpers.silver.tables.position_sql`,
the ordering field, compared with the stored row by ``DefaultHoodieRecordPayload``) and the delete
marker: ``_hoodie_is_deleted`` in hard mode, so a delete really deletes, or a boolean ``__deleted``
in soft mode. TRUNCATE and re-snapshot markers: HoodieStreamer has no operation for "delete every
row written before position T", so the workbook's driver runs a round that holds one again with
:func:`truncate_sql`, which unions the stored rows from before ``T`` as deletes at ``T`` into the
round's one commit, as the PySpark engine does (:mod:`helpers.silver.truncate`); EMR's
DeltaStreamer steps and Hudi's Debezium sources drop them (``docs/streamer.md``, "Limits").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helpers.bronze.events import MARKER_OPS
from helpers.engines import quote_spark, spark_string
from helpers.errors import HudiError
from helpers.hudi.config import delete_field
from helpers.silver.tables import POSITION_COLUMN, position_sql

__all__ = [
    "CHANGE_OPS",
    "MARKER_ERROR",
    "TransformShape",
    "json_source_schema",
    "reader_schema",
    "transform_sql",
    "truncate_sql",
    "void_view",
]

#: The streamer's change operations; TRUNCATE (``t``) and re-snapshot markers: :func:`truncate_sql`.
CHANGE_OPS = ("c", "u", "d", "r")
#: Whether a source row is a TRUNCATE or re-snapshot marker, as Spark SQL.
_IS_MARKER = f"coalesce(`__op` IN ({', '.join(spark_string(o) for o in MARKER_OPS)}), false)"
#: What a round that holds a marker fails with (``markers="fail"``), which the driver looks for.
MARKER_ERROR = "workbook-marker:"

_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


@dataclass(frozen=True)
class TransformShape:
    """What a Silver table's transforms are built from (:func:`transform_sql`, :func:`truncate_sql`).

    Attributes:
        schema: the table's Bronze Avro schema (its ``fields``).
        engine: the source's engine (``postgres``, ``mariadb``...), which sets the log position.
        positions: the Bronze fields the log position is built from
            (:func:`helpers.silver.tables.position_sql`).
        delete_mode: ``hard`` or ``soft`` (:func:`helpers.hudi.config.delete_field`).
        flavour: what the source rows are: ``avro``, ``jsonl`` or ``debezium`` (:func:`transform_sql`).
        table: the source table's name (the ``debezium`` flavour's renaming needs it).
        min_key: (key column, lowest key) of a sliced table
            (:attr:`helpers.params.SilverTableParams.min_key`), or None.
    """

    schema: Mapping[str, Any]
    engine: str
    positions: tuple[str, ...]
    delete_mode: str
    flavour: str = "avro"
    table: str = ""
    min_key: tuple[str, int] | None = None


def transform_sql(shape: TransformShape, *, markers: str = "drop") -> str:
    """The table's SQL transform over the source rows (``<SRC>``): every data and Debezium column
    of the Bronze schema but ``__deleted``, ``_cdc_position`` and the delete marker. The shape's
    ``flavour`` is what the source rows are:

    * ``avro``: Avro Bronze rows, as they are;
    * ``jsonl``: JSON-lines Bronze, the converter's ``payload``, converted to their Silver types
      (:func:`_json_field`);
    * ``debezium``: the rows of Hudi's Debezium Kafka sources (``after.*`` or, for a delete,
      ``before.*``, beside Hudi's ``_change_operation_type``, ``_event_lsn``...): renamed to the
      Bronze names first (:func:`_debezium_rows`), then converted as JSON lines are (Debezium's own
      numbers for dates and timestamps).

    TRUNCATE and re-snapshot markers (``markers``): ``drop`` (EMR's DeltaStreamer steps and the
    Debezium sources: ``docs/streamer.md``, "Limits"), or ``fail``: a round that holds one fails
    with :data:`MARKER_ERROR`, and the workbook's driver runs that round again with
    :func:`truncate_sql` (:mod:`helpers.silver.streamer_driver`).

    A sliced table (``min_key``) keeps its slice's rows only.

    Raises:
        HudiError: for an unknown source engine, flavour or marker handling, or a field name
            outside Avro's rule.
    """
    if markers not in ("drop", "fail"):
        raise HudiError(f"Failed to build the streamer's SQL transform: unknown marker handling {markers!r}")
    select, source, kept = _transform_parts(shape)
    if markers == "drop":
        return f"{select} FROM {source} WHERE {kept}"
    failed = f"raise_error({spark_string(MARKER_ERROR + ' a TRUNCATE or re-snapshot marker in this round')})"
    return f"{select} FROM {source} WHERE CASE WHEN {_IS_MARKER} THEN {failed} ELSE {kept} END"


def truncate_sql(shape: TransformShape, *, view: str) -> str:
    """The transform of a round that holds TRUNCATE or re-snapshot markers, as the PySpark engine
    applies them (:mod:`helpers.silver.truncate`), in the round's one commit: ``T`` is the newest
    marker's log position; the round's changes after ``T`` apply; every stored row from before
    ``T`` (the driver's global temporary ``view``, :func:`void_view`, shaped as the transform's
    output) comes back as a delete at ``T``, which ``DefaultHoodieRecordPayload`` orders after it. A
    key changed after ``T`` keeps that change. A marker without a log position fails the round,
    named, rather than cut nothing (a table ordered by a column of its own gets no truncate
    transform: :func:`helpers.silver.streamer_config.write_streamer_config`).

    Raises:
        HudiError: as :func:`transform_sql`.
    """
    select, source, kept = _transform_parts(shape)
    position = quote_spark(POSITION_COLUMN)
    deleted = quote_spark(delete_field(shape.delete_mode))
    names = [quote_spark(f["name"]) for f in shape.schema["fields"] if f["name"] != "__deleted"]
    unordered = spark_string("workbook: a TRUNCATE or re-snapshot marker has no log position")
    # every name below is quote_spark'ed and every literal spark_string'ed
    cut = f"SELECT max(coalesce({position}, raise_error({unordered}))) AS `workbook_cut` FROM events"  # noqa: S608
    cut += f" WHERE {_IS_MARKER}"
    stored = [("'d' AS `__op`" if n == "`__op`" else f"stored.{n}") for n in names]
    parts = [
        f"WITH events AS ({select} FROM {source} WHERE ({kept}) OR {_IS_MARKER}), cut AS ({cut})",
        f"SELECT events.* FROM events CROSS JOIN cut WHERE NOT {_IS_MARKER}",  # noqa: S608 - quoted
        f"AND (cut.`workbook_cut` IS NULL OR events.{position} > cut.`workbook_cut`)",
        f"UNION ALL SELECT {', '.join(stored)}, cut.`workbook_cut` AS {position}, true AS {deleted}",
        f"FROM global_temp.{quote_spark(view)} AS stored CROSS JOIN cut",
        f"WHERE cut.`workbook_cut` IS NOT NULL AND stored.{position} < cut.`workbook_cut`",
    ]
    return " ".join(parts)


def void_view(name: str) -> str:
    """The global temporary view through which the driver hands :func:`truncate_sql` the stored
    rows of Silver table ``name``."""
    if not _AVRO_NAME.fullmatch(name):
        raise HudiError(f"Failed to build the streamer's SQL transform: {name!r} is no Avro name")
    return f"workbook_void_{name}"


def _transform_parts(shape: TransformShape) -> tuple[str, str, str]:
    """The transform's ``SELECT`` list (through the delete marker), its ``FROM`` and the condition
    that keeps a change event (not a marker)."""
    flavour = shape.flavour
    if flavour not in ("avro", "jsonl", "debezium"):
        raise HudiError(f"Failed to build the streamer's SQL transform: unknown source flavour {flavour!r}")
    columns = []
    for field in shape.schema["fields"]:
        name = field["name"]
        if not _AVRO_NAME.fullmatch(name):  # Avro's own rule, which the streamer's schemas need
            raise HudiError(f"Failed to build the streamer's SQL transform: {name!r} is no Avro field name")
        if name == "__deleted":
            continue
        quoted = quote_spark(name)
        sql = _json_field(field)[1] if flavour != "avro" else quoted
        columns.append(sql if sql == quoted else f"{sql} AS {quoted}")
    marker = delete_field(shape.delete_mode)
    ops = ", ".join(spark_string(o) for o in CHANGE_OPS)
    if flavour == "debezium":
        source = f"({_debezium_rows(shape.schema, shape.table)} FROM <SRC>) AS bronze"
    else:
        source = "(SELECT payload.* FROM <SRC>) AS bronze" if flavour == "jsonl" else "<SRC>"
    position = position_sql(shape.engine, shape.positions)
    select = f"SELECT {', '.join(columns)}, {position} AS {quote_spark(POSITION_COLUMN)}, "
    select += f"coalesce(`__deleted` = 'true', false) AS {quote_spark(marker)}"
    kept = f"`__op` IN ({ops})"
    if shape.min_key is not None:
        column, lowest = shape.min_key
        if not _AVRO_NAME.fullmatch(column):
            raise HudiError(f"Failed to build the streamer's SQL transform: {column!r} is no Avro field name")
        kept += f" AND {quote_spark(column)} >= {int(lowest)}"
    return select, source, kept


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


def json_source_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
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
